"""The grading command's autograde pass (autograder/nbgrader_glue/inproc.py, steps.py): the
steps it leaves out or replaces give the gradebook what nbgrader's own steps give it; a
student's free metadata never reaches grading nor autograded/ (red team, round 5: a metadata
field of nested empty lists went into the autograded copy, 50 times larger by nbgrader's
indentation), and the copy nbgrader reads is counted before nbgrader parses it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from nbgrader.preprocessors import NbGraderPreprocessor
from nbformat.v4 import new_output

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.nbgrader_glue import patches  # noqa: F401

A = fixture_course.LESSON_A


class FirstTestFails(NbGraderPreprocessor):
    """Stands in for Execute: the first test cell ends in an error, the others pass."""

    def preprocess(self, nb, resources):
        tests = [cell for cell in nb.cells
                 if cell.get("metadata", {}).get("nbgrader", {}).get("grade")
                 and not cell.metadata.nbgrader.get("solution")]
        tests[0].outputs = [new_output("error", ename="AssertionError", evalue="wrong",
                                       traceback=["AssertionError: wrong"])]
        return nb, resources


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    from autograder.nbgrader_glue.inproc import course_config, register_lessons

    root = fixture_course.build_course(tmp_path_factory.mktemp("steps") / "course")
    config = course_config(root)
    register_lessons(config, [A])
    return root, config


def grades_after(config, root: Path, student: str, steps: list) -> list[tuple]:
    """Autograde lesson A for `student` with `steps` as the autograde pass; its grades."""
    from autograder.nbgrader_glue.gradebook import gradebook
    from autograder.nbgrader_glue.inproc import autograde

    folder = root / "submitted" / student / A
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(root / "notebooks" / A / f"{A}.ipynb", folder)
    config.Autograde.autograde_preprocessors = steps
    autograde(config, student, A)
    with gradebook(config) as gb:
        notebook = gb.find_submission_notebook(A, A, student)
        return sorted([(g.name, g.auto_score, g.needs_manual_grade) for g in notebook.grades]
                      + [(c.name, c.auto_comment) for c in notebook.comments])


def test_one_commit_writes_what_a_commit_per_cell_writes(course):
    from nbgrader.preprocessors import SaveAutoGrades
    from sqlalchemy import event
    from sqlalchemy.orm import Session

    from autograder.nbgrader_glue.save_auto_grades_once import SaveAutoGradesOnce

    root, config = course
    commits: list[str] = []

    def count(session) -> None:
        commits.append("commit")

    event.listen(Session, "after_commit", count)
    try:
        each = grades_after(config, root, "each", [FirstTestFails, SaveAutoGrades])
        before, commits[:] = len(commits), []
        once = grades_after(config, root, "once", [FirstTestFails, SaveAutoGradesOnce])
    finally:
        event.remove(Session, "after_commit", count)
    assert each == once
    assert any(score == 0 for _, score, *_ in each if isinstance(score, float))
    assert any(score and score > 0 for _, score, *_ in each if isinstance(score, float))
    assert len(commits) < before  # one for the grades, not one per cell


def test_the_metadata_check_is_left_out_only_when_the_sanitising_pass_made_it(course):
    from nbgrader.preprocessors import CheckCellMetadata, Execute, SaveAutoGrades
    from traitlets.config import Config

    from autograder.nbgrader_glue.inproc import autograde_preprocessors
    from autograder.nbgrader_glue.save_auto_grades_once import SaveAutoGradesOnce

    _, config = course
    names = [getattr(s, "__name__", s) for s in autograde_preprocessors(config, FirstTestFails)]
    assert names[0] == "FirstTestFails" and "SaveAutoGradesOnce" in names
    assert "CheckCellMetadata" not in names and "Execute" not in names
    unchecked = Config()
    unchecked.Autograde.sanitize_preprocessors = [SaveAutoGrades]
    unchecked.Autograde.autograde_preprocessors = [Execute, CheckCellMetadata]
    assert autograde_preprocessors(unchecked, FirstTestFails) == [FirstTestFails,
                                                                  CheckCellMetadata]
    cleared = Config()
    cleared.ClearMetadataPreprocessor.enabled = True
    cleared.Autograde.autograde_preprocessors = [
        Execute, "nbconvert.preprocessors.ClearMetadataPreprocessor", SaveAutoGrades,
        CheckCellMetadata]
    assert autograde_preprocessors(cleared, FirstTestFails)[-2:] == [SaveAutoGradesOnce,
                                                                     CheckCellMetadata]


# --------------------------------------------------------------------------------------------
# What the autograde pass keeps of a student's file

NEST = "[" * 60 + "]" * 60


def _submit(root: Path, student: str, change) -> Path:
    folder = root / "submitted" / student / A
    folder.mkdir(parents=True, exist_ok=True)
    nb = json.loads((root / "notebooks" / A / f"{A}.ipynb").read_text(encoding="utf-8"))
    change(nb)
    (folder / f"{A}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    return root / "autograded" / student / A / f"{A}.ipynb"


def test_free_metadata_is_not_written_into_autograded(course):
    from autograder.nbgrader_glue.inproc import autograde

    root, config = course

    def add_free_fields(nb):
        nb["metadata"]["bomb"] = json.loads("[" + ",".join([NEST] * 50) + "]")
        nb["metadata"]["language_info"]["secret_note"] = {"x": NEST}
        for cell in nb["cells"]:
            cell["metadata"]["mine"] = {"deep": json.loads(NEST)}
            cell["metadata"]["tags"] = [*cell["metadata"].get("tags", []), "kept-tag"]

    autograded = _submit(root, "meta", add_free_fields)
    autograde(config, "meta", A, [FirstTestFails])
    text = autograded.read_text(encoding="utf-8")
    written = json.loads(text)
    assert "bomb" not in written["metadata"] and "secret_note" not in text
    assert written["metadata"]["language_info"]["name"] == "python"
    assert not any("mine" in cell["metadata"] for cell in written["cells"])
    assert all("kept-tag" in cell["metadata"]["tags"] for cell in written["cells"])
    graded = [cell for cell in written["cells"] if "nbgrader" in cell["metadata"]]
    assert graded and all(cell["metadata"]["nbgrader"]["grade_id"] for cell in graded)
    assert "[[[[" not in text


def test_the_copy_nbgrader_reads_is_counted_before_it_is_parsed(course):
    from autograder.intake.validate import MAX_OTHER_VALUES
    from autograder.nbgrader_glue.inproc import autograde

    root, config = course

    def add_values(nb):
        nb["metadata"]["many"] = [0] * (MAX_OTHER_VALUES + 1)

    autograded = _submit(root, "counted", add_values)
    with pytest.raises(ValueError, match="values in its outputs and metadata"):
        autograde(config, "counted", A, [FirstTestFails])
    assert not autograded.exists()
