"""Read-only cells in autograding: nbgrader's OverwriteCells, aware of hidden tests.

When nbgrader releases a lesson (generate_assignment), it records each read-only cell in the
gradebook with its checksum *before* the hidden tests are cut out, and then releases the cell
without them. Autograding (OverwriteCells) compares the student's cell with that recorded
checksum, so every test cell that holds hidden tests looks edited even when the student never
touched it, and nbgrader logs "Attribute 'checksum' for cell ... has changed!" for each.

`RestoreLockedCells` computes the checksum a cell had *as released* (the gradebook's source
with the hidden-test regions removed, as ClearHiddenTests removes them) and accepts that one
too. The cell's source is restored from the gradebook either way, hidden tests included; only
a cell that differs from both the instructor's and the released version is reported.
"""

from __future__ import annotations

from nbformat.notebooknode import from_dict
from nbgrader import utils
from nbgrader.api import MissingEntry
from nbgrader.preprocessors import ClearHiddenTests, OverwriteCells


class RestoreLockedCells(OverwriteCells):
    """OverwriteCells that does not report a read-only cell left as it was released."""

    def _released_checksum(self, name: str) -> str | None:
        """The checksum of the gradebook's cell `name` after its hidden tests are removed."""
        gradebook, notebook, assignment = self.gradebook, self.notebook_id, self.assignment_id
        try:
            source = gradebook.find_source_cell(name, notebook, assignment)
        except MissingEntry:
            return None
        meta = {"grade_id": name, "locked": bool(source.locked), "solution": False,
                "grade": False}
        try:
            meta["points"] = float(gradebook.find_graded_cell(name, notebook, assignment)
                                   .max_score)
            meta["grade"] = True
        except MissingEntry:
            pass
        try:
            gradebook.find_solution_cell(name, notebook, assignment)
            meta["solution"] = True
        except MissingEntry:
            pass
        cell = from_dict({"cell_type": source.cell_type, "source": source.source,
                          "metadata": {"nbgrader": meta}})
        clear = ClearHiddenTests(parent=self, config=self.config)
        try:
            clear._remove_hidden_test_region(cell)
        except RuntimeError:  # unbalanced markers in the instructor's cell: nothing to accept
            return None
        return utils.compute_checksum(cell)

    def report_change(self, name: str, attr: str, old, new) -> None:
        if attr == "checksum" and new == self._released_checksum(name):
            return
        super().report_change(name, attr, old, new)
