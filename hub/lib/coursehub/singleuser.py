"""A user's server on the class hub: JupyterLab with the student's or the instructor's setup.

The hub starts `python -m coursehub.singleuser` as the user (COURSE_ROLE says which role);
this picks the role's Jupyter configuration in hub/jupyter/ and becomes jupyterhub-singleuser.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

JUPYTER_CONFIG = Path(__file__).resolve().parent.parent.parent / "jupyter"


def environment(environ: dict[str, str]) -> dict[str, str]:
    role = environ.get("COURSE_ROLE", "student")
    if role not in ("student", "instructor"):
        raise SystemExit(f"COURSE_ROLE must be student or instructor, not {role!r}")
    env = dict(environ)
    paths = [str(JUPYTER_CONFIG / role), str(JUPYTER_CONFIG / "common")]
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
        paths + [p for p in environ.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p])
    return env


def main() -> None:
    env = environment(dict(os.environ))
    os.execve(sys.executable, [sys.executable, "-m", "jupyterhub.singleuser", *sys.argv[1:]], env)


if __name__ == "__main__":
    main()
