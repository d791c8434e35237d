"""`WithholdHiddenChecks`, the course's last step of nbgrader's feedback pass before a
deadline (grade --withhold-hidden-checks): test cells' verdicts without the hidden checks'
results."""

from __future__ import annotations

from autograder.nbgrader_glue import patches  # noqa: F401 (first: a quicker jsonschema import)

from nbformat import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool

from autograder.grader_notes import withhold_hidden_checks


class WithholdHiddenChecks(NbGraderPreprocessor):
    """Before a deadline: test cells' verdicts without the hidden checks' results
    (executor.withhold_hidden_checks); on only when `enabled` (grade --withhold-hidden-checks)."""

    enabled = Bool(False).tag(config=True)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        if self.enabled and cell.cell_type == "code" and utils.is_grade(cell):
            withhold_hidden_checks(cell)
        return cell, resources
