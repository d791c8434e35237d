"""Feedback for students: nbgrader's HTML without hidden tests, and pages for what was not graded.

nbgrader's ClearHiddenTests removes the hidden tests from the cells' source, but the traceback
of a failing hidden test still shows the lines around the failure, hidden or not.
`HideTestTracebacks` (run before ClearHiddenTests) reduces every error in a test cell to its
last line, `ExceptionName: message`, which says what went wrong without the test's code.
"""

from __future__ import annotations

from autograder import _imports  # noqa: F401 (first: a quicker jsonschema import)

import html
from pathlib import Path

from nbformat import NotebookNode
from traitlets import Unicode

from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.executor import DEAD_ENAME, NOT_RUN_ENAME, TIMEOUT_ENAME

# Errors the grader writes itself: their one-line traceback is a message for the student.
_OWN_ERRORS = {TIMEOUT_ENAME, DEAD_ENAME, NOT_RUN_ENAME}


def _short_traceback(output: NotebookNode) -> list[str]:
    if output.get("ename") in _OWN_ERRORS and len(output.get("traceback", [])) == 1:
        return list(output.traceback)
    ename, evalue = output.get("ename", "Error"), output.get("evalue", "")
    return [f"\x1b[0;31m{ename}\x1b[0m: {evalue}" if evalue else f"\x1b[0;31m{ename}\x1b[0m"]


class HideTestTracebacks(NbGraderPreprocessor):
    """Reduce the tracebacks in test cells (and cells with hidden tests) to their last line."""

    begin_test_delimeter = Unicode("BEGIN HIDDEN TESTS").tag(config=True)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        if cell.cell_type != "code":
            return cell, resources
        if utils.is_grade(cell) or self.begin_test_delimeter in cell.source:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output.traceback = _short_traceback(output)
        return cell, resources


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:46em;margin:3em auto;line-height:1.5}}
.status{{font-weight:bold}}</style></head>
<body><h1>{title}</h1>
<p>Student: {student}</p>
<p class="status">Status: {status} &mdash; score {score:g} of {max_score:g}</p>
<p>{reason}</p>
</body></html>
"""


def write_notice(path: Path, *, student: str, lesson: str, status: str, reason: str,
                 score: float, max_score: float) -> Path:
    """A one-paragraph feedback page for a submission that has no graded notebook."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_PAGE.format(title=html.escape(f"Feedback: {lesson}"),
                                 student=html.escape(student), status=html.escape(status),
                                 reason=html.escape(reason), score=score,
                                 max_score=max_score), encoding="utf-8")
    return path
