"""The Python that users' servers run: the course's .venv, reachable by every account.

A virtual environment runs its base interpreter. When `.venv` was made from a Python that other
accounts cannot run (pyenv under /root, for example), the hub builds a small environment in the
state folder from the system's Python of the same version, whose only content is a path file
adding `.venv`'s packages, and links to `.venv`'s Jupyter data and configuration, and copies of
its commands (jupyter, nbgrader, ...) that run that Python. Same packages, same versions.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

from coursehub.settings import REPO_ROOT

VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
CANDIDATES = (f"/usr/bin/python{VERSION}", f"/usr/local/bin/python{VERSION}")


class PythonError(RuntimeError):
    """No Python that every account can run; the message says what to install."""


def _as_nobody():
    account = pwd.getpwnam("nobody")

    def drop() -> None:
        os.setgroups([])
        os.setgid(account.pw_gid)
        os.setuid(account.pw_uid)

    return drop


def runs_for_others(python: Path, code: str = "import json") -> bool:
    """Whether an account with no rights of its own (nobody) can run `python` with `code`."""
    try:
        done = subprocess.run([str(python), "-c", code], preexec_fn=_as_nobody(), cwd="/",
                              env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
                              capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def site_packages(prefix: Path) -> Path:
    return prefix / "lib" / f"python{VERSION}" / "site-packages"


def users_python(target: Path, repo: Path = REPO_ROOT) -> Path:
    """The interpreter for users' servers: `.venv`'s own if every account can run it, else one
    built at `target` (rebuilt at every start, so it follows `.venv`)."""
    venv = repo / ".venv"
    if runs_for_others(venv / "bin" / "python"):
        return venv / "bin" / "python"
    base = next((Path(p) for p in CANDIDATES if runs_for_others(Path(p))), None)
    if base is None:
        raise PythonError(
            f"other accounts cannot run the Python of {venv} "
            f"({os.path.realpath(venv / 'bin' / 'python')}) "
            f"and there is no system Python {VERSION} ({' or '.join(CANDIDATES)}): install one "
            f"(Debian: `apt-get install python{VERSION}`) or make .venv from a Python every "
            f"account can run (`make clean && make setup PYTHON=/usr/bin/python{VERSION}`)")
    if target.exists():
        shutil.rmtree(target)
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(target)], check=True,
                   capture_output=True, text=True)
    (site_packages(target) / "course-environment.pth").write_text(
        f"import site; site.addsitedir({str(site_packages(venv))!r})\n")
    for part in ("share", "etc"):
        (target / part).mkdir(exist_ok=True)
        if (venv / part / "jupyter").exists():
            (target / part / "jupyter").symlink_to(venv / part / "jupyter")
    python = target / "bin" / "python"
    shebang = f"#!{venv / 'bin' / 'python'}"
    for script in sorted((venv / "bin").iterdir()):
        if script.name.startswith(("python", "activate", "Activate")) or not script.is_file():
            continue
        with open(script, "rb") as handle:
            first = handle.readline().decode(errors="replace").rstrip("\n")
        if first.startswith(shebang):
            copy = target / "bin" / script.name
            copy.write_text(f"#!{python}\n" + script.read_text().split("\n", 1)[1])
            copy.chmod(0o755)
    for folder, dirs, files in os.walk(target):
        os.chmod(folder, 0o755)
    found = ("from importlib.util import find_spec as f; import sys; sys.exit(not all("
             "f(m) for m in ('jupyterhub.singleuser', 'nbgrader', 'coursekit')))")
    if not runs_for_others(python, found):
        raise PythonError(f"the environment built at {target} does not run for other "
                            f"accounts: check that they may read {venv}")
    return python
