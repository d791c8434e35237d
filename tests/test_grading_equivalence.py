"""The fast engine grades exactly as plain `nbgrader autograde` does.

The same small class is graded twice, each time in its own copy of the fixture course: with
the default engine (warm workers, a forked process per notebook, nbgrader's Autograde
converter in-process) and with `--engine nbgrader` (the `nbgrader autograde` command, a fresh
kernel per notebook). Every grade, comment and score in the two gradebooks must agree.
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

pytestmark = pytest.mark.slow

A, B = fixture_course.LESSONS


def build_class(dest: Path, course: Lessons) -> None:
    _write(course.correct(A), dest / "correct" / f"{A}.ipynb")
    _write(course.correct(B), dest / "correct" / f"{B}.ipynb")
    _write(course.partial(A, seed=1), dest / "partial" / f"{A}.ipynb")
    _write(course.blank(B), dest / "blank" / f"{B}.ipynb")
    _write(course.with_answer(A, "import sys\nsys.exit()", base="correct"),
           dest / "exits" / f"{A}.ipynb")


def gradebook_dump(root: Path) -> dict:
    from nbgrader.api import Gradebook

    dump = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "autograd-hooks") as gb:
        for assignment in gb.assignments:
            for submission in assignment.submissions:
                key = (submission.student.id, assignment.name)
                dump[key + ("score",)] = (submission.score, submission.max_score,
                                          submission.needs_manual_grade)
                for notebook in submission.notebooks:
                    for grade in notebook.grades:
                        dump[key + ("grade", grade.name)] = (
                            grade.auto_score, grade.manual_score, grade.needs_manual_grade,
                            grade.max_score)
                    for comment in notebook.comments:
                        dump[key + ("comment", comment.name)] = comment.auto_comment
    return dump


def grades_csv(out: Path) -> list[dict]:
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_fast_engine_matches_nbgrader_autograde(tmp_path):
    fast_root = fixture_course.build_course(tmp_path / "fast")
    slow_root = tmp_path / "slow"
    shutil.copytree(fast_root, slow_root)
    submissions = tmp_path / "class"
    build_class(submissions, Lessons(fast_root))
    env = dict(os.environ, CI="true")
    for engine, root in (("fork", fast_root), ("nbgrader", slow_root)):
        done = subprocess.run(
            [sys.executable, "-m", "autograder", "grade", str(submissions),
             "--out", str(tmp_path / f"out-{engine}"), "--course-root", str(root),
             "--engine", engine, "--jobs", "2"],
            capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    fast, slow = gradebook_dump(fast_root), gradebook_dump(slow_root)
    assert len(fast) > 20
    assert fast == slow
    assert grades_csv(tmp_path / "out-fork") == grades_csv(tmp_path / "out-nbgrader")
    scores = {(r["student_id"], r["lesson"]): r["score"]
              for r in grades_csv(tmp_path / "out-fork")}
    assert scores[("correct", A)] == "3" and scores[("blank", B)] == "0"
    assert scores[("exits", A)] == "1"
