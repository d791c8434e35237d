"""Re-run instructor notebooks top to bottom and store their outputs (what nbval then checks)."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from autograder.release import COURSE_ROOT, lessons


def execute_notebook(path: Path, timeout: int = 300) -> float:
    """Execute `path` in a fresh kernel, in its own folder, and save it; return the seconds taken."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:  # timestamps from earlier runs would churn every diff
        cell.metadata.pop("execution", None)
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            record_timing=False)
    started = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - started
    nbformat.write(notebook, path)
    return elapsed


def execute_solutions(names: list[str] | None = None, root: Path = COURSE_ROOT) -> dict[str, float]:
    """Execute the given lessons' solution notebooks (all by default); return seconds per lesson."""
    return {name: execute_notebook(root / "solutions" / name / f"{name}.ipynb")
            for name in names or lessons(root)}
