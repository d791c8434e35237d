"""A cell's nbgrader labels, read in one place (autograder.nbgrader_glue.cells)."""

from __future__ import annotations

from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from autograder.nbgrader_glue import cells
import pytest

pytestmark = pytest.mark.fast


def _cell(maker, source="x = 1", **labels):
    cell = maker(source)
    if labels:
        cell.metadata["nbgrader"] = labels
    return cell


def test_what_a_cell_is():
    answer = _cell(new_code_cell, solution=True, grade=False, grade_id="e1-answer")
    test = _cell(new_code_cell, grade=True, solution=False, grade_id="e1-test", points=2)
    manual = _cell(new_markdown_cell, grade=True, solution=True, grade_id="e2")
    plain = _cell(new_code_cell)
    assert [cells.is_answer(c) for c in (answer, test, manual, plain)] == [True, False, True, False]
    assert [cells.is_test(c) for c in (answer, test, manual, plain)] == [False, True, False, False]
    assert [cells.is_graded(c) for c in (answer, test, manual, plain)] == [False, True, True, False]
    assert [cells.is_exercise(c) for c in (answer, test, manual, plain)] == [True, True, True, False]
    assert cells.labels(test)["grade_id"] == "e1-test" and cells.labels(plain) == {}


def test_tests_passed_counts_full_marks_of_test_code_cells_only():
    passing = _cell(new_code_cell, grade=True, solution=False, grade_id="t1", points=1)
    failing = _cell(new_code_cell, grade=True, solution=False, grade_id="t2", points=1)
    failing.outputs = [new_output("error", ename="AssertionError", evalue="", traceback=[])]
    answer = _cell(new_code_cell, grade=True, solution=True, grade_id="a1", points=1)
    nb = new_notebook(cells=[passing, failing, answer, new_code_cell("y = 2")])
    assert cells.tests_passed(nb) == (1, 2)
