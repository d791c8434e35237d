"""Shared fixtures: where the course lives and how to read its notebooks."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

COURSE_ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted(p.name for p in (COURSE_ROOT / "solutions").iterdir()
                 if (p / f"{p.name}.ipynb").is_file())
SPEC_EXAMPLES = json.loads((Path(__file__).parent / "fixtures" / "spec_examples.json").read_text())


def solution_path(lesson: str) -> Path:
    return COURSE_ROOT / "solutions" / lesson / f"{lesson}.ipynb"


def student_path(lesson: str) -> Path:
    return COURSE_ROOT / "notebooks" / lesson / f"{lesson}.ipynb"


def read_notebook(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


@pytest.fixture(params=LESSONS)
def lesson(request: pytest.FixtureRequest) -> str:
    return request.param
