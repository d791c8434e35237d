"""Shared fixtures: where the course lives and how to read its notebooks."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from autograder.release import COURSE_ROOT, lessons

LESSONS = lessons(COURSE_ROOT)
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
