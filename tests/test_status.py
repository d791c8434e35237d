"""A notebook's status from the grader's record of its run (autograder.trusted.status), never
from what its cells printed or raised."""

from __future__ import annotations

import pytest

from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.trusted.status import Stop, run_status

pytestmark = pytest.mark.fast

GiB = 1 << 30


def notebook():
    test = new_code_cell("assert cube_grad(1) == 3")
    test.metadata["nbgrader"] = {"grade": True, "grade_id": "01-ex1-test", "points": 1}
    return new_notebook(cells=[new_markdown_cell("# Lesson"), new_code_cell("import torch"),
                               new_code_cell("while True:\n    pass"), test,
                               new_code_cell("x = 1")])


def test_no_stop_leaves_the_notebook_graded():
    assert run_status(notebook(), [], "", 60, 4 * GiB) is None


def test_the_first_stop_in_the_notebooks_order_decides():
    status, reason = run_status(notebook(), [Stop(4, kind="exit"), Stop(2, kind="timeout")],
                                "", 60, 4 * GiB)
    assert status == "timeout"
    assert reason.startswith("Code cell 2 (`while True:`) ran past the time limit per cell "
                             "(60 s of computing)")


def test_checking_stopped_stands_before_the_other_notes_of_its_cell():
    stops = [Stop(3, kind="oom"), Stop(3, first_in_cell=True, kind="checks", why="budget")]
    status, reason = run_status(notebook(), stops, "", 60, 4 * GiB)
    assert status == "timeout" and reason.startswith("Every cell ran, then checking the answers "
                                                     "stopped: the notebook's time budget")


def test_each_kind_of_stop_names_its_cell_and_its_cause():
    nb = notebook()
    assert run_status(nb, [Stop(3, kind="oom")], "", 60, 2 * GiB) == (
        "error", "Code cell 3 (01-ex1-test) ran out of memory: a notebook may use 2 GiB. "
                 "The notebook scores 0; your instructor can review it.")
    status, reason = run_status(nb, [Stop(1, kind="died")], "it was ended by SIGKILL.", 60, GiB)
    assert (status, reason.split(". ")[0]) == (
        "error", "The Python process running the notebook ended in code cell 1 (`import "
                 "torch`): it was ended by SIGKILL")
    status, reason = run_status(nb, [Stop(4, kind="exit")], "", 60, GiB)
    assert status == "error" and reason.startswith("The notebook called exit() before code "
                                                   "cell 4 (`x = 1`)")
