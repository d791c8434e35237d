"""`HideTestTracebacks`, the course's step of nbgrader's feedback pass, run before
ClearHiddenTests: nbgrader's ClearHiddenTests removes the hidden tests from the cells' source,
but the traceback of a failing hidden test still shows the lines around the failure, hidden or
not. This step reduces every error in a test cell to its last line, `ExceptionName: message`,
which says what went wrong without the test's code."""

from __future__ import annotations

from autograder.nbgrader_glue import patches  # noqa: F401 (first: a quicker jsonschema import)

from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from autograder.grader_notes import DEAD_ENAME, NOT_RUN_ENAME, TIMEOUT_ENAME, ansi_red

# Errors the grader writes itself: their one-line traceback is a message for the student.
_OWN_ERRORS = {TIMEOUT_ENAME, DEAD_ENAME, NOT_RUN_ENAME}


def _short_traceback(output: NotebookNode) -> list[str]:
    if output.get("ename") in _OWN_ERRORS and len(output.get("traceback", [])) == 1:
        return list(output.traceback)
    ename, evalue = output.get("ename", "Error"), output.get("evalue", "")
    return [f"{ansi_red(ename)}: {evalue}" if evalue else ansi_red(ename)]


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
