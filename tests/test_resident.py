"""The resident grader of feedback on submit: started once, it grades batch
after batch with the same warm workers, as the one-shot grading command would (the same
grades), and a notebook that kills its worker costs that notebook only."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.demo import Lessons, _write

pytestmark = pytest.mark.slow

A = fixture_course.LESSON_A
# Not confined: the notebook can reach its worker (in the sandbox it cannot) and kill it.
KILLER = ("import os, signal\npid = os.getpid()\nwhile pid > 1:\n"
          "    pid = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])\n"
          "    if b'autograder.dispatch.pool' in open(f'/proc/{pid}/cmdline', 'rb').read():\n"
          "        os.kill(pid, signal.SIGKILL)\n        break")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    base = tmp_path_factory.mktemp("resident")
    root = fixture_course.build_course(base / "course")
    lessons = Lessons(root)
    _write(lessons.correct(A), base / "class" / "correct" / f"{A}.ipynb")
    _write(lessons.blank(A), base / "class" / "blank" / f"{A}.ipynb")
    _write(lessons.partial(A, seed=1), base / "class" / "partial" / f"{A}.ipynb")
    _write(lessons.with_answer(A, KILLER, base="correct"),
           base / "class" / "killer" / f"{A}.ipynb")
    return base, root


def grade_args(base: Path, root: Path, out: str, students: list[str], *extra: str) -> list[str]:
    return ["grade", str(base / "class"), "--out", str(base / out), "--course-root", str(root),
            "--lessons", A, "--students", *students, "--jobs", "2", "--timeout", "10",
            "--no-progress", *extra]


def rows(path: Path) -> dict[str, tuple]:
    with open(path / "grades.csv", newline="", encoding="utf-8") as handle:
        return {r["student_id"]: (r["score"], r["max_score"], r["status"])
                for r in csv.DictReader(handle)}


class ResidentGrader:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "autograder.dispatch.resident", "--jobs", "2"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def grade(self, args: list[str]) -> dict:
        self.process.stdin.write(json.dumps(args) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(60)


def test_two_batches_grade_as_the_command_does_and_the_second_starts_no_worker(course):
    base, root = course
    command = subprocess.run([sys.executable, "-m", "autograder",
                              *grade_args(base, root, "once", ["correct", "blank", "partial"])],
                             capture_output=True, text=True)
    assert command.returncode == 0, command.stdout + command.stderr
    resident = ResidentGrader()
    try:
        first = resident.grade(grade_args(base, root, "first", ["correct", "blank"]))
        assert first["code"] == 0, first["output"]
        second = resident.grade(grade_args(base, root, "second", ["partial"]))
        assert second["code"] == 0, second["output"]
        # The workers warmed for the first batch graded the second: none was started again.
        assert first["warmups"] >= 1 and second["warmups"] == first["warmups"]
        assert resident.process.poll() is None
    finally:
        resident.close()
    once = rows(base / "once")
    assert once["correct"][2] == "graded" and once["correct"][0] != once["blank"][0]
    assert {**rows(base / "first"), **rows(base / "second")} == once
    # Each batch's own feedback pages, written where the command writes them.
    assert (base / "first" / "feedback" / "blank" / f"{A}.html").is_file()
    assert (base / "second" / "feedback" / "partial" / f"{A}.html").is_file()
    assert "partial" in (base / "second" / "grading.log").read_text()


def test_a_notebook_that_kills_its_worker_does_not_stop_the_next_batch(course):
    base, root = course
    resident = ResidentGrader()
    try:
        first = resident.grade(grade_args(base, root, "killed", ["killer"], "--no-sandbox"))
        assert rows(base / "killed")["killer"][2] == "error", first["output"]
        second = resident.grade(grade_args(base, root, "after", ["correct", "partial"],
                                           "--no-sandbox"))
        assert second["code"] == 0, second["output"]
        after = rows(base / "after")
        assert after["correct"][2] == after["partial"][2] == "graded"
        assert resident.process.poll() is None
    finally:
        resident.close()
