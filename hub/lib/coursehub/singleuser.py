"""A user's server on the class hub: JupyterLab with the student's or the instructor's setup.

The hub starts `python -m coursehub.singleuser` as the user (COURSE_ROLE says which role);
this picks the role's Jupyter configuration in hub/jupyter/, writes a student's start page
(coursehub.startpage) and runs jupyterhub-singleuser in
the same process, with jsonschema imported the quick way first
(autograder.nbgrader_glue.patches: nbgrader's server extensions import nbformat, whose
jsonschema would otherwise compile a grammar it never uses, seconds of CPU at every server's
start).
"""

from __future__ import annotations

import os
import runpy
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
    os.environ.clear()
    os.environ.update(env)  # before anything of Jupyter's reads it
    if env.get("COURSE_ROLE", "student") == "student":
        from coursehub.startpage import write_from_environment
        try:  # the page JupyterLab opens first
            write_from_environment(Path.home())
        except Exception as err:  # noqa: BLE001 (the server starts all the same)
            print(f"coursehub: the start page was not written: {err}", file=sys.stderr)
    try:
        from autograder.nbgrader_glue import patches  # noqa: F401
    except ImportError:  # a server without the course's grader: jsonschema as it comes
        pass
    sys.argv[0] = "jupyterhub-singleuser"
    runpy.run_module("jupyterhub.singleuser", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
