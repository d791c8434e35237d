"""Manual grades belong to the submission they were given to.

Points an instructor gives by hand in the formgrader (nbgrader's Grade.manual_score and
Comment.manual_comment) stay while the same notebook is graded again, and are dropped, and
named in grading.log, the class report and the summary, when the student hands in another one.
Graded through `python -m autograder grade` on the two-lesson fixture course.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.demo import Lessons, _write
from autograder.nbgrader_glue.export import export

pytestmark = pytest.mark.slow

A = fixture_course.LESSON_A  # 3 points: 01-ex1-test (2) and 01-ex2-test (1)


def grade(submissions: Path, out: Path, root: Path, *extra: str) -> str:
    env = dict(os.environ, CI="true")
    command = [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
               "--course-root", str(root), "--jobs", "1", "--timeout", "4", *extra]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def row(out: Path, student: str) -> dict:
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        return next(r for r in csv.DictReader(handle)
                    if (r["student_id"], r["lesson"]) == (student, A))


def give_full_marks(root: Path, student: str) -> None:
    """What an instructor does in the formgrader: points and a comment by hand."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "autograd-hooks") as gb:
        notebook = gb.find_submission_notebook(A, A, student)
        for grade in notebook.grades:
            grade.manual_score = grade.max_score
            grade.needs_manual_grade = False
        for comment in notebook.comments:
            comment.manual_comment = "Graded by hand: the loop was a slip."
        gb.db.commit()


def manual_entries(root: Path, student: str) -> tuple[list, list]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "autograd-hooks") as gb:
        notebook = gb.find_submission_notebook(A, A, student)
        return ([g.manual_score for g in notebook.grades if g.manual_score is not None],
                [c.manual_comment for c in notebook.comments if c.manual_comment])


def exported(root: Path, tmp: Path, student: str) -> str:
    path = export("csv", tmp / "export.csv", root, lessons=[A]).path
    with open(path, newline="", encoding="utf-8") as handle:
        return next(r["score"] for r in csv.DictReader(handle) if r["student_id"] == student)


def test_manual_grades_stay_with_their_submission(tmp_path):
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    root = fixture_course.build_course(tmp_path / "course")
    course = Lessons(root)
    first, second = tmp_path / "first", tmp_path / "second"
    # The first submission times out; the instructor reviews it and gives full marks.
    _write(course.with_answer(A, "while True:\n    pass", base="blank"),
           first / "ann" / f"{A}.ipynb")
    _write(course.blank(A), second / "ann" / f"{A}.ipynb")
    grade(first, tmp_path / "out1", root)
    assert row(tmp_path / "out1", "ann")["status"] == "timeout"
    give_full_marks(root, "ann")

    # Graded again, unchanged: the instructor's grades stay.
    stdout = grade(first, tmp_path / "out2", root)
    assert row(tmp_path / "out2", "ann")["score"] == "3"
    assert manual_entries(root, "ann")[0] == [2.0, 1.0]
    assert "manual grade" not in stdout.lower()
    assert exported(root, tmp_path, "ann") == "3"

    # A new (blank) submission starts without them, and every output says so.
    stdout = grade(second, tmp_path / "out3", root)
    graded = row(tmp_path / "out3", "ann")
    assert graded["status"] == "graded" and graded["score"] == "0", graded
    assert "Manual grades given to an earlier submission were dropped" in graded["reason"]
    assert manual_entries(root, "ann") == ([], [])
    assert exported(root, tmp_path, "ann") == "0"
    assert "Manual grades dropped for 1 new submission" in stdout
    log = (tmp_path / "out3" / "grading.log").read_text(encoding="utf-8")
    assert "ann / 01_fixture_basics: manual grades dropped" in log
    assert "01-ex1-test 2 points" in log and "Graded by hand" in log
    report = (tmp_path / "out3" / "report.html").read_text(encoding="utf-8")
    assert 'id="manual-dropped"' in report and "01-ex1-test 2 points" in report

    # Points given to the new submission stay while it is graded again, also in place.
    give_full_marks(root, "ann")
    grade(second, tmp_path / "out4", root)
    assert row(tmp_path / "out4", "ann")["score"] == "3"
    grade(root / "submitted", tmp_path / "out5", root, "--all")
    assert row(tmp_path / "out5", "ann")["score"] == "3"
    assert exported(root, tmp_path, "ann") == "3"

    # In place too, a changed notebook in submitted/ (as `nbgrader collect` leaves it) loses them.
    shutil.copy(first / "ann" / f"{A}.ipynb", root / "submitted" / "ann" / A / f"{A}.ipynb")
    stdout = grade(root / "submitted", tmp_path / "out6", root)
    assert row(tmp_path / "out6", "ann")["status"] == "timeout"
    assert manual_entries(root, "ann") == ([], [])
    assert "Manual grades dropped for 1 new submission" in stdout
