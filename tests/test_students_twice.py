"""Never a student twice: a class graded from a Canvas export, then again with
a roster whose ids differ for the same Canvas users, is refused with the pairs named; with
--replace-ids the gradebook's records take the roster's ids, manual grades included, and the
export has one row per Canvas user."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.demo import Lessons
from autograder.intake.roster import renamed_students

A = fixture_course.LESSON_A


def test_pairs_are_one_to_one_by_lms_id_then_email():
    records = {"s1": {"lms_user_id": "12345"}, "s2": {"email": "Jane@Example.org"},
               "s3": {"email": "shared@example.org"}, "s4": {"email": "shared@example.org"},
               "s5": {"lms_user_id": "777"}}
    held = [{"id": "smithjohn_12345", "lms_user_id": "12345", "email": ""},
            {"id": "doejane_222", "lms_user_id": "222", "email": "jane@example.org"},
            {"id": "old3", "lms_user_id": "", "email": "shared@example.org"},
            {"id": "s5", "lms_user_id": "777", "email": ""},  # the same id: not renamed
            {"id": "other", "lms_user_id": "999", "email": ""}]
    assert renamed_students(records, held) == {
        "smithjohn_12345": ("s1", "LMS user id 12345"),
        "doejane_222": ("s2", "email jane@example.org")}


def _grade(root: Path, source: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(source), "--out", str(out),
         "--course-root", str(root), "--jobs", "1", "--timeout", "20", "--no-progress",
         "--lessons", A, *extra],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, CI="true"))


def _students(root: Path) -> dict[str, list[str]]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "autograd-hooks") as gb:
        return {s.id: sorted(sub.assignment.name for sub in s.submissions) for s in gb.students}


@pytest.mark.slow
def test_a_class_graded_again_under_roster_ids(tmp_path):
    from nbgrader.api import Gradebook

    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    root = fixture_course.build_course(tmp_path / "course")
    lessons = Lessons(root)
    archive = tmp_path / "canvas.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(f"smithjohn_12345_900_{A}.ipynb", nbformat.writes(lessons.correct(A)))
        zf.writestr(f"doejane_222_901_{A}.ipynb", nbformat.writes(lessons.blank(A)))
    first = _grade(root, archive, tmp_path / "out1")
    assert first.returncode == 0, first.stdout + first.stderr
    assert _students(root) == {"smithjohn_12345": [A], "doejane_222": [A]}
    # An instructor gives Jane a point by hand in the formgrader.
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "autograd-hooks") as gb:
        grade = gb.find_submission_notebook(A, A, "doejane_222").grades[0]
        grade.manual_score = 1.0
        gb.db.commit()

    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email,lms_id\ns1,John Smith,john@example.org,12345\n"
                      "s2,Jane Doe,jane@example.org,222\n", encoding="utf-8")
    refused = _grade(root, archive, tmp_path / "out2", "--roster", str(roster))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "smithjohn_12345 is s1 in this run (the same LMS user id 12345)" in refused.stderr
    assert "doejane_222 is s2" in refused.stderr and "--replace-ids" in refused.stderr
    assert _students(root) == {"smithjohn_12345": [A], "doejane_222": [A]}  # nothing changed
    assert not (tmp_path / "out2" / "grades.csv").exists()

    done = _grade(root, archive, tmp_path / "out3", "--roster", str(roster), "--replace-ids")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Ids replaced in the gradebook: doejane_222 -> s2, smithjohn_12345 -> s1" in done.stdout
    assert _students(root) == {"s1": [A], "s2": [A]}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "autograd-hooks") as gb:
        assert gb.find_student("s1").lms_user_id == "12345"
        assert gb.find_submission_notebook(A, A, "s2").grades[0].manual_score == 1.0
    for step in ("submitted", "autograded"):
        assert (root / step / "s1" / A).is_dir() and not (root / step / "smithjohn_12345").exists()
    with open(tmp_path / "out3" / "grades.csv", newline="", encoding="utf-8") as handle:
        assert {r["student_id"] for r in csv.DictReader(handle)} == {"s1", "s2"}

    export = subprocess.run([sys.executable, "-m", "autograder", "export", "--to", "canvas",
                             "--course-root", str(root), "--out", str(tmp_path / "c.csv")],
                            capture_output=True, text=True, timeout=300)
    assert export.returncode == 0, export.stderr
    with open(tmp_path / "c.csv", newline="", encoding="utf-8") as handle:
        ids = [row[1] for row in list(csv.reader(handle))[2:]]
    assert sorted(ids) == ["12345", "222"]
