"""What grading does to its inputs: SUBMISSIONS are never modified, a batch leaves earlier
grades of lessons it does not hold alone, a wrapper folder with a stray file is still a
class, and two runs on one course take turns. Quick: only one notebook is really graded."""

from __future__ import annotations

import csv
import fcntl
import hashlib
import os
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.demo import Lessons, _write
from autograder.grading import grade_class
from autograder.tasks import GradingOptions
from autograder.intake.collect import collect

A, B = fixture_course.LESSONS


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = fixture_course.build_course(tmp_path_factory.mktemp("inputs") / "course")
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    return root, Lessons(root)


def rows(out: Path) -> dict:
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        return {(r["student_id"], r["lesson"]): r for r in csv.DictReader(handle)}


def digest(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def broken(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"cells": [', encoding="utf-8")


# --------------------------------------------------------------------------------------------
# A wrapper folder with a stray file: still one student per folder (no grading needed)

def _wrapped_class(dest: Path, course) -> None:
    root, lessons = course
    for student in ("alice", "bob"):
        _write(lessons.correct(A), dest / "export" / student / f"{A}.ipynb")
    (dest / "index.html").write_text("<html></html>")  # beside the wrapper folder
    (dest / ".DS_Store").write_text("")


def test_a_wrapper_folder_with_a_stray_file_is_stepped_into(course, tmp_path):
    _wrapped_class(tmp_path / "class", course)
    found, _ = collect(tmp_path / "class", list(fixture_course.LESSONS), tmp_path / "work")
    assert sorted((s.student, s.lesson) for s in found) == [("alice", A), ("bob", A)]
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted((tmp_path / "class").rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(tmp_path / "class"))
    found, _ = collect(archive, list(fixture_course.LESSONS), tmp_path / "work")
    assert sorted((s.student, s.lesson) for s in found) == [("alice", A), ("bob", A)]


def test_notebooks_in_unexpected_places_are_reported_not_guessed(course, tmp_path):
    root, lessons = course
    _write(lessons.correct(A), tmp_path / "class" / "alice" / f"{A}.ipynb")
    _write(lessons.correct(B), tmp_path / "class" / "alice" / "old" / f"{B}.ipynb")
    _write(lessons.correct(B), tmp_path / "class" / "bob" / B / "x" / f"{B}.ipynb")
    found, _ = collect(tmp_path / "class", list(fixture_course.LESSONS), tmp_path / "work")
    by_path = {s.shown: s for s in found}
    assert not by_path[f"alice/{A}.ipynb"].problem
    assert "not where a submission goes" in by_path[f"alice/old/{B}.ipynb"].problem
    assert "not where a submission goes" in by_path[f"bob/{B}/x/{B}.ipynb"].problem

    out = tmp_path / "out"
    broken(tmp_path / "class" / "alice" / f"{A}.ipynb")  # nothing to grade: no workers
    grade_class(tmp_path / "class", GradingOptions(str(root), str(out), engine="nbgrader"),
                echo=None)
    table = rows(out)
    assert table[("alice", A)]["status"] == "invalid"
    assert table[("alice", B)]["status"] == "missing"  # old/ is not alice's submission of B
    assert ("bob", B) not in table
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        stray = [r for r in csv.DictReader(handle) if not r["student_id"]]
    assert len(stray) == 2 and all(r["status"] == "invalid" for r in stray)
    assert all("not where a submission goes" in r["reason"] for r in stray)


# --------------------------------------------------------------------------------------------
# A partial batch keeps the earlier grades of the lessons it does not hold

def test_a_batch_without_a_lesson_keeps_its_earlier_grades(course, tmp_path):
    from nbgrader.api import Gradebook

    root, lessons = course
    first = tmp_path / "first"
    broken(first / "carol" / f"{A}.ipynb")
    broken(first / "carol" / f"{B}.ipynb")
    grade_class(first, GradingOptions(str(root), str(tmp_path / "out1"), engine="nbgrader"),
                echo=None)
    # carol's A as an earlier run (or nbgrader itself) left it: files, a grade, a manual score
    earlier = root / "submitted" / "carol" / A
    _write(lessons.correct(A), earlier / f"{A}.ipynb")
    (earlier / "data.csv").write_text("1,2\n")
    db = f"sqlite:///{root / 'gradebook.db'}"
    # After a run, nbgrader's Gradebook opens as usual in the same process (the run's lock
    # file went with its scratch folder)
    with Gradebook(db, "autograd-hooks") as gb:
        submission = gb.update_or_create_submission(A, "carol")
        grade = submission.notebooks[0].grades[0]
        grade.manual_score = points = grade.max_score
        gb.db.commit()

    late = tmp_path / "late"  # carol's B and dan's A in this batch, broken again
    broken(late / "carol" / f"{B}.ipynb")
    broken(late / "dan" / f"{A}.ipynb")
    grade_class(late, GradingOptions(str(root), str(tmp_path / "out2"), engine="nbgrader"),
                echo=None)
    table = rows(tmp_path / "out2")
    assert table[("carol", A)]["status"] == "missing"
    assert "in this batch" in table[("carol", A)]["reason"]
    assert "stays in the gradebook" in table[("carol", A)]["reason"]
    assert table[("carol", B)]["status"] == "invalid"
    with Gradebook(db, "autograd-hooks") as gb:
        kept = gb.find_submission(A, "carol")
        assert kept.notebooks[0].grades[0].manual_score == points
    assert (earlier / "data.csv").is_file() and (earlier / f"{A}.ipynb").is_file()


# --------------------------------------------------------------------------------------------
# Grading the course's own submitted/ in place changes nothing there

def test_grading_submitted_in_place_modifies_nothing_there(course, tmp_path):
    root, lessons = course
    submitted = root / "submitted"
    _write(lessons.correct(B), submitted / "dan" / B / f"{B}.ipynb")
    (submitted / "dan" / B / "data.csv").write_text("3,4\n")
    (submitted / "dan" / B / "timestamp.txt").write_text("2024-01-02 03:04:05.000000 UTC")
    broken(submitted / "erin" / B / f"{B}.ipynb")
    (submitted / "erin" / B / "timestamp.txt").write_text("2024-01-02 03:04:05.000000 UTC")
    _write(lessons.correct(B), submitted / "fay" / B / "my work.ipynb")
    (submitted / "fay" / B / "data.csv").write_text("5,6\n")
    before = digest(submitted)

    out = tmp_path / "out"
    grade_class(submitted, GradingOptions(str(root), str(out), lessons=(B,), jobs=1, timeout=20),
                echo=None)
    assert digest(submitted) == before
    table = rows(out)
    assert table[("dan", B)]["status"] == "graded"
    assert table[("dan", B)]["score"] == table[("dan", B)]["max_score"] == "4"
    assert table[("erin", B)]["status"] == "invalid"
    assert table[("fay", B)]["status"] == "invalid"
    assert "left unchanged" in table[("fay", B)]["reason"]
    assert (root / "autograded" / "dan" / B / f"{B}.ipynb").is_file()


def test_the_courses_output_folders_cannot_be_graded(course, tmp_path):
    root, _ = course
    (root / "autograded").mkdir(exist_ok=True)
    for submissions in (root / "autograded", root):
        with pytest.raises(ValueError, match="SUBMISSIONS must not"):
            grade_class(submissions, GradingOptions(str(root), str(tmp_path / "out")), echo=None)


# --------------------------------------------------------------------------------------------
# Two runs on one course take turns

def test_a_second_run_on_the_course_waits_for_the_first(course):
    from autograder.grading import course_lock

    root, _ = course
    held = os.open(root, os.O_RDONLY)  # another run's lock on the course root
    fcntl.flock(held, fcntl.LOCK_EX)
    messages, entered = [], threading.Event()

    def second_run() -> None:
        with course_lock(root, echo=messages.append):
            entered.set()

    thread = threading.Thread(target=second_run)
    thread.start()
    try:
        time.sleep(0.3)
        assert not entered.is_set()
        assert messages and "waiting" in messages[0]
    finally:
        os.close(held)
    thread.join(10)
    assert entered.is_set()
