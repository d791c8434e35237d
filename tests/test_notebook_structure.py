"""Every instructor notebook is a valid nbgrader assignment; every student notebook hides its answers."""

from __future__ import annotations

import re
from collections import Counter

import nbformat
import pytest

from autograder.release import NAV_TAG
from conftest import LESSONS, SPEC_EXAMPLES, read_notebook, solution_path, student_path
from notebook_support import answer_cells, graded_cells, grading, without_hidden_tests

pytestmark = pytest.mark.fast

POINTS_ADDED = re.compile(r"(?m)(?<=\S) \(\d+ points?\)$")
MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION", "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


def test_the_lessons_are_numbered_in_order_from_01():
    assert [name[:3] for name in LESSONS] == [f"{n:02d}_" for n in range(1, len(LESSONS) + 1)]
    assert len(LESSONS) >= 8, LESSONS
    assert set(LESSONS) == set(SPEC_EXAMPLES) - {"_comment"}


def test_solution_notebook_is_valid_and_runs_on_python3(lesson):
    notebook = read_notebook(solution_path(lesson))
    nbformat.validate(notebook)
    assert notebook.metadata.kernelspec.name == "python3"


def test_grade_ids_are_unique_and_graded_cells_have_points(lesson):
    notebook = read_notebook(solution_path(lesson))
    ids = [grading(c)["grade_id"] for c in notebook.cells if grading(c)]
    duplicates = [grade_id for grade_id, count in Counter(ids).items() if count > 1]
    assert not duplicates, f"duplicate grade ids in {lesson}: {duplicates}"
    for cell in graded_cells(notebook):
        meta = grading(cell)
        assert meta.get("points", 0) > 0, f"{meta['grade_id']} has no points"
        assert meta.get("locked"), f"{meta['grade_id']} must be locked"
        assert meta.get("schema_version") == 3


def test_at_least_three_exercises_each_with_answer_and_hidden_checks(lesson):
    """Hidden checks are scenarios (scenarios/<lesson>.py, never released): each exercise has a
    visible one and a hidden one (tests/test_scenarios.py checks them)."""
    from coursekit.scenarios import collect
    from autograder.sandbox.observe import load_module
    from autograder.release import COURSE_ROOT
    notebook = read_notebook(solution_path(lesson))
    answers, tests = answer_cells(notebook), graded_cells(notebook)
    assert len(answers) >= 3 and len(tests) >= 3, f"{lesson}: {len(answers)} answers, {len(tests)} tests"
    for cell in answers:
        assert "### BEGIN SOLUTION" in cell.source and "### END SOLUTION" in cell.source, \
            f"{grading(cell)['grade_id']} lacks solution markers"
    path = COURSE_ROOT / "scenarios" / f"{lesson}.py"
    scenarios, _ = collect(load_module(path.read_text(), str(path)))
    for cell in tests:
        exercise = grading(cell)["grade_id"].rsplit("-test", 1)[0]
        mine = [s for s in scenarios if s.exercise == exercise]
        assert any(not s.visible for s in mine), f"{exercise} has no hidden scenario"
        assert without_hidden_tests(cell.source).strip(), f"{grading(cell)['grade_id']} has no visible test"


def test_markers_appear_only_in_their_own_cells(lesson):
    for cell in read_notebook(solution_path(lesson)).cells:
        meta = grading(cell)
        if "### BEGIN SOLUTION" in cell.source:
            assert meta.get("solution"), f"solution region outside a solution cell: {cell.source[:80]}"
        if "### BEGIN HIDDEN TESTS" in cell.source:
            assert meta.get("grade"), f"hidden tests outside a graded cell: {cell.source[:80]}"


def test_every_spec_example_is_tagged(lesson):
    tags = {tag for cell in read_notebook(solution_path(lesson)).cells
            for tag in cell.metadata.get("tags", [])}
    missing = [i for i in SPEC_EXAMPLES[lesson] if f"example-{i}" not in tags]
    assert not missing, f"{lesson} lacks cells tagged for examples {missing}"


def test_solution_outputs_are_stored(lesson):
    cells = [c for c in read_notebook(solution_path(lesson)).cells if c.cell_type == "code"]
    assert all(c.execution_count for c in cells), "run `make outputs` to store every cell's output"


def test_a_stored_warning_is_announced_as_one_before_its_cell(lesson):
    """Torch's warnings show as pink boxes that beginners take for errors. A
    lesson hides the ones it expects (warnings.catch_warnings in the cell) or, where a warning
    is the point, says just before the cell that its pink box is a warning, not an error."""
    notebook = read_notebook(solution_path(lesson))
    for index, cell in enumerate(notebook.cells):
        stderr = [o for o in cell.get("outputs", [])
                  if o.output_type == "stream" and o.name == "stderr"]
        if not stderr:
            continue
        before = notebook.cells[index - 1]
        words = " ".join(before.source.split())
        announced = (before.cell_type == "markdown" and "pink box" in words
                     and "not an error" in words)
        assert announced, (f"{lesson}, cell {index} writes to stderr without the cell before "
                           f"saying it is a warning:\n{''.join(o.text for o in stderr)[:300]}")


def test_student_notebook_has_no_solution_no_hidden_test_no_output(lesson):
    student = read_notebook(student_path(lesson))
    for cell in student.cells:
        for marker in MARKERS:
            assert marker not in cell.source, f"{lesson}: student notebook contains {marker!r}"
        if cell.cell_type == "code":
            assert not cell.outputs, f"{lesson}: student notebook keeps outputs"
    for cell in answer_cells(student):
        assert "raise NotImplementedError()" in cell.source


def test_student_notebook_keeps_every_visible_test(lesson):
    solution, student = read_notebook(solution_path(lesson)), read_notebook(student_path(lesson))
    # The release adds a navigation cell at the top and the bottom (tests/test_release.py).
    released = [c for c in student.cells if NAV_TAG not in c.metadata.get("tags", [])]
    assert len(solution.cells) == len(released)
    for theirs, ours in zip(released, solution.cells):
        if grading(ours).get("grade"):
            assert theirs.source.rstrip() == without_hidden_tests(ours.source)
        elif not grading(ours).get("solution"):
            # ... and the points to exercise headings that do not name them.
            assert POINTS_ADDED.sub("", theirs.source) == POINTS_ADDED.sub("", ours.source)
