"""Generate the student notebooks in notebooks/ from the instructor notebooks in solutions/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parent.parent


def lessons(root: Path = COURSE_ROOT) -> list[str]:
    """Names of the lessons: the folders of solutions/ that hold a notebook of the same name."""
    source = root / "solutions"
    return sorted(p.name for p in source.iterdir() if (p / f"{p.name}.ipynb").is_file())


def nbgrader_command(*args: str) -> list[str]:
    """The nbgrader command line from this Python environment."""
    return [sys.executable, "-m", "nbgrader", *args]


def nbgrader_env() -> dict[str, str]:
    """The environment for nbgrader: this Python's bin first on PATH (nbgrader runs alembic)."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def release(release_dir: Path | None = None, names: list[str] | None = None,
            root: Path = COURSE_ROOT) -> Path:
    """Run nbgrader generate_assignment for each lesson into `release_dir` (notebooks/ by default)."""
    release_dir = Path(release_dir) if release_dir else root / "notebooks"
    with tempfile.TemporaryDirectory(prefix="release-gradebook-") as scratch:
        for name in names or lessons(root):
            # A scratch gradebook: releasing does not touch the instructors' gradebook.db.
            subprocess.run(
                nbgrader_command(
                    "generate_assignment", name, "--force", "--log-level=WARN",
                    f"--CourseDirectory.root={root}",
                    f"--CourseDirectory.release_directory={release_dir}",
                    f"--CourseDirectory.db_url=sqlite:///{scratch}/gradebook.db",
                ),
                cwd=root, env=nbgrader_env(), check=True,
            )
    for leftover in release_dir.glob("*/.ipynb_checkpoints"):
        shutil.rmtree(leftover)
    return release_dir
