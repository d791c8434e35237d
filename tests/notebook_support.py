"""Reading nbgrader's cell metadata and turning instructor cells into what a student sees."""

from __future__ import annotations

import re

import nbformat

HIDDEN_REGION = re.compile(r"\n?[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[^\n]*", re.S)


def grading(cell: nbformat.NotebookNode) -> dict:
    """nbgrader's metadata of a cell (empty for ordinary cells)."""
    return cell.get("metadata", {}).get("nbgrader", {})


def answer_cells(notebook: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in notebook.cells if c.cell_type == "code" and grading(c).get("solution")]


def graded_cells(notebook: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in notebook.cells if grading(c).get("grade") and c.cell_type == "code"]


def without_markers(source: str) -> str:
    """A solution cell as a student who wrote the solution would have it: no nbgrader markers."""
    return "\n".join(line for line in source.splitlines()
                     if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)


def without_hidden_tests(source: str) -> str:
    return HIDDEN_REGION.sub("", source).rstrip()
