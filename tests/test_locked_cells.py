"""Read-only cells in autograding: no "Attribute 'checksum' ... has changed!"
for a test cell the student never touched; a real edit is still reported, and restored.

The cause: generate_assignment records a test cell's checksum in the gradebook before it cuts
the hidden tests out, and releases the cell without them; nbgrader's OverwriteCells compares
the submitted cell with the recorded checksum, so every test cell with hidden tests differed.
"""

from __future__ import annotations

import csv
import logging
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.demo import Lessons, _write

LESSON = fixture_course.LESSON_A
CHANGED = "has changed!"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The fixture course, its lesson A recorded in the course's gradebook."""
    from autograder.nbgrader_glue.inproc import course_config, generate_assignment

    root = fixture_course.build_course(tmp_path_factory.mktemp("locked") / "course")
    config = course_config(root)
    generate_assignment(config, LESSON, tmp_path_factory.mktemp("release"))
    return root, config


def _tests(nb) -> dict:
    return {cell.metadata.nbgrader.grade_id: cell for cell in nb.cells
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade")
            and not cell.metadata.nbgrader.get("solution")}


def _overwrite(course, preprocessor_class, nb, caplog) -> list[str]:
    """Run `preprocessor_class` (OverwriteCells or ours) over `nb`; the warnings it logged."""
    root, config = course
    log = logging.getLogger(f"test-locked-cells-{preprocessor_class.__name__}")
    preprocessor = preprocessor_class(config=config, log=log)
    resources = {"nbgrader": {"notebook": LESSON, "assignment": LESSON,
                              "db_url": config.CourseDirectory.db_url}}
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=log.name):
        preprocessor.preprocess(nb, resources)
    return [record.getMessage() for record in caplog.records]


def test_the_released_test_cells_differ_from_the_gradebooks(course):
    """The premise: each released test cell lost its hidden tests, so its checksum is not the
    one the gradebook holds (why nbgrader's stock OverwriteCells reported it)."""
    from nbgrader import utils
    from nbgrader.api import Gradebook

    root, config = course
    released = nbformat.read(root / "notebooks" / LESSON / f"{LESSON}.ipynb", as_version=4)
    with Gradebook(config.CourseDirectory.db_url) as gradebook:
        for grade_id, cell in _tests(released).items():
            recorded = gradebook.find_source_cell(grade_id, LESSON, LESSON)
            assert "BEGIN HIDDEN TESTS" in recorded.source
            assert "BEGIN HIDDEN TESTS" not in cell.source
            assert utils.compute_checksum(cell) != recorded.checksum


def test_stock_overwrite_cells_reports_every_untouched_test_cell(course, caplog):
    from nbgrader.preprocessors import OverwriteCells

    root, _ = course
    blank = Lessons(root, [LESSON]).blank(LESSON)
    warnings = _overwrite(course, OverwriteCells, blank, caplog)
    assert len([w for w in warnings if CHANGED in w]) == len(_tests(blank)) > 0


def test_untouched_test_cells_are_restored_without_a_warning(course, caplog):
    from nbgrader.api import Gradebook

    from autograder.nbgrader_glue.locked_cells import RestoreLockedCells

    root, config = course
    blank = Lessons(root, [LESSON]).blank(LESSON)
    warnings = _overwrite(course, RestoreLockedCells, blank, caplog)
    assert [w for w in warnings if CHANGED in w] == []
    # The hidden tests are back for grading, exactly as the instructor wrote them.
    with Gradebook(config.CourseDirectory.db_url) as gradebook:
        for grade_id, cell in _tests(blank).items():
            assert cell.source == gradebook.find_source_cell(grade_id, LESSON, LESSON).source


def test_an_edited_test_cell_is_still_reported_and_restored(course, caplog):
    from nbgrader.api import Gradebook

    from autograder.nbgrader_glue.locked_cells import RestoreLockedCells

    root, config = course
    edited = Lessons(root, [LESSON]).blank(LESSON)
    first, cell = next(iter(_tests(edited).items()))
    cell.source = "pass  # the student replaced the test"
    warnings = _overwrite(course, RestoreLockedCells, edited, caplog)
    changed = [w for w in warnings if CHANGED in w]
    assert len(changed) == 1 and f"cell {first} has changed" in changed[0]
    with Gradebook(config.CourseDirectory.db_url) as gradebook:
        assert cell.source == gradebook.find_source_cell(first, LESSON, LESSON).source


def test_the_course_configuration_uses_it(course):
    from nbgrader.preprocessors import OverwriteCells

    from autograder.nbgrader_glue.locked_cells import RestoreLockedCells

    _, config = course
    steps = list(config.Autograde.sanitize_preprocessors)
    assert RestoreLockedCells in steps
    assert OverwriteCells not in steps


@pytest.mark.slow
def test_grading_logs_only_the_real_edit(tmp_path, course):
    """Through `python -m autograder grade`: the untouched student's log has no checksum
    warning; the student who edited a test cell gets one warning and the `reason` says so."""
    root, _ = course
    lessons = Lessons(root, [LESSON])
    submissions = tmp_path / "class"
    _write(lessons.blank(LESSON), submissions / "untouched" / f"{LESSON}.ipynb")
    _write(lessons.with_edited_test(LESSON), submissions / "edited" / f"{LESSON}.ipynb")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
         "--course-root", str(root), "--jobs", "1", "--timeout", "20", "--no-progress"],
        capture_output=True, text=True, env=dict(os.environ, CI="true"), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    log = (out / "grading.log").read_text()
    changed = [line for line in log.splitlines() if CHANGED in line]
    assert len(changed) == 1, changed
    rows = {row["student_id"]: row for row in csv.DictReader(open(out / "grades.csv"))}
    assert "edited" in rows["edited"]["reason"] and "restored" in rows["edited"]["reason"]
    assert "edited" not in rows["untouched"]["reason"]
    assert rows["untouched"]["status"] == rows["edited"]["status"] == "graded"
