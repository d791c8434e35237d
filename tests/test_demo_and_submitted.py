"""The demo apart, and grading the course's own submitted/: `make demo`
grades its class in a course folder of its own (demo/course, its own gradebook), never the
course's gradebook; grading submitted/ grades what is new or changed since the last run and
says so (once), regrades what the gradebook lost, and does not list nbgrader's timestamp.txt
or submission_secret.txt as skipped. Links in submitted/ are not followed there either."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.demo import Lessons, _write

A, B = fixture_course.LESSONS
STAMP = "2024-01-02 03:04:05.000000 UTC"
# Answers the fixture's checks fail, as the course's tests/variants/ list them.
VARIANTS = [
    dict(exercise="01-ex1", name="no-factor", expect="fail", mistake="factor 3",
         source="def cube_grad(x):\n    return x.detach() ** 2\n"),
    dict(exercise="01-ex1", name="ok", expect="pass", mistake=None,
         source="def cube_grad(x):\n    return 3 * x.detach() ** 2\n"),
    dict(exercise="01-ex2", name="unnamed", expect="fail", mistake=None,
         source="def intermediate_grad():\n    return 1\n"),
]


def rows(out: Path) -> dict:
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        return {(r["student_id"], r["lesson"]): r for r in csv.DictReader(handle)}


def broken(path: Path, text: str = '{"cells": [') -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def course(tmp_path):
    root = fixture_course.build_course(tmp_path / "course")
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    return root, Lessons(root)


@pytest.mark.slow
def test_the_demo_has_a_course_and_a_gradebook_of_its_own(course):
    from nbgrader.api import Gradebook

    root, _ = course
    # The course's answers with named mistakes give the demo students who make them.
    (root / "tests" / "variants").mkdir(parents=True)
    (root / "tests" / "variants" / f"{A}.py").write_text(f"VARIANTS = {VARIANTS!r}\n")
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "demo", "--course-root", str(root),
         "--lessons", A, "--timeout", "3", "--jobs", "1", "--no-progress"],
        capture_output=True, text=True, timeout=900, env=dict(os.environ, CI="true"))
    assert done.returncode == 0, done.stdout + done.stderr
    demo = root / "demo"
    # The course itself: no gradebook, nothing submitted, autograded or fed back.
    for name in ("gradebook.db", "submitted", "autograded", "feedback"):
        assert not (root / name).exists(), name
    assert "course's gradebook was not touched" in done.stdout
    with Gradebook(f"sqlite:///{demo / 'course' / 'gradebook.db'}", "autograd-hooks") as gb:
        students = {s.id: s for s in gb.students}
        assert {"correct", "partial", "blank", "duplicate", "broken", "no-show",
                "mistaken", "mistaken-2"} <= set(students)
        assert (students["correct"].first_name, students["correct"].email) == \
            ("Ada", "correct@example.org")
        assert gb.find_submission(A, "correct").score == 3
    table = rows(demo / "out")
    assert table[("correct", A)]["score"] == "3"
    assert table[("no-show", A)]["status"] == "missing"
    # Both make 01-ex1's one named mistake (the unnamed failure is not used) and lose its 2
    # points.
    assert table[("mistaken", A)]["score"] == table[("mistaken-2", A)]["score"] == "1"
    page = (demo / "out" / "report.html").read_text(encoding="utf-8")
    assert "Katherine Johnson" in page and "Needs manual review" in page
    mistakes = page.split('id="mistakes"')[1].split("<h2")[0]
    assert ("<td>01-ex1</td><td>The derivative of x**3 is 3 * x**2: the factor 3 is missing."
            "</td><td class=\"num\">2</td>") in mistakes, mistakes
    assert (demo / "course" / "submitted" / "correct" / A / f"{A}.ipynb").is_file()


@pytest.mark.slow
def test_grading_submitted_grades_what_is_new(course, tmp_path):
    from nbgrader.api import Gradebook

    from autograder.grading import grade_class
    from autograder.plan import Intake
    from autograder.tasks import GradingOptions

    root, lessons = course
    submitted = root / "submitted"
    _write(lessons.correct(A), submitted / "alice" / A / f"{A}.ipynb")
    (submitted / "alice" / A / "timestamp.txt").write_text(STAMP)
    (submitted / "alice" / A / "submission_secret.txt").write_text("nbgrader's, for feedback")
    broken(submitted / "bob" / A / f"{A}.ipynb")
    broken(submitted / "carol" / B / f"{B}.ipynb")
    # Links inside submitted/: the notebook itself, and a file beside a real notebook.
    (submitted / "mal" / A).mkdir(parents=True)
    (submitted / "mal" / A / f"{A}.ipynb").symlink_to(root / "solutions" / A / f"{A}.ipynb")
    _write(lessons.correct(A), submitted / "mal2" / A / f"{A}.ipynb")
    (submitted / "mal2" / A / "data.csv").symlink_to("/etc/passwd")

    def grade(out: str, **options) -> tuple[dict, list[str]]:
        said: list[str] = []
        grade_class(submitted, GradingOptions(str(root), str(tmp_path / out), jobs=1, timeout=20),
                    echo=said.append, intake=Intake(**options))
        return rows(tmp_path / out), said

    first, said = grade("out1")
    assert "5 notebooks of 5 students new or changed" in said[0] and "--all" in said[0]
    assert "\n".join(said).count("new or changed") == 1, said  # said once, not again at the end
    assert first[("alice", A)]["status"] == "graded" and first[("alice", A)]["score"] == "3"
    assert first[("bob", A)]["status"] == "invalid"
    assert first[("carol", B)]["status"] == "invalid"
    assert first[("mal", A)]["status"] == "invalid" and "symbolic link" in first[("mal", A)]["reason"]
    assert first[("mal2", A)]["status"] == "invalid" and "data.csv" in first[("mal2", A)]["reason"]
    assert not [key for key, row in first.items() if row["status"] == "missing"]
    log = (tmp_path / "out1" / "grading.log").read_text()
    assert "timestamp.txt" not in log  # used (the submission's time), not skipped
    assert "submission_secret.txt" not in log  # nbgrader's own, not skipped
    assert "new or changed" in log  # the log has the whole summary
    autograded = root / "autograded" / "alice" / A / f"{A}.ipynb"
    graded_at = autograded.stat().st_mtime_ns

    again, said = grade("out2")
    assert again == {} and "nothing new since the last run" in said[0]
    assert autograded.stat().st_mtime_ns == graded_at

    broken(submitted / "bob" / A / f"{A}.ipynb", '{"cells": [1,')  # bob submits again
    third, said = grade("out3")
    assert set(third) == {("bob", A)} and "1 notebook of 1 student" in said[0]

    # The gradebook lost alice's grades: hers is graded again.
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "autograd-hooks") as gb:
        assert gb.find_submission(A, "alice").timestamp.year == 2024
        gb.remove_submission(A, "alice")
    fourth, _ = grade("out4")
    assert set(fourth) == {("alice", A)} and fourth[("alice", A)]["score"] == "3"

    # Named students are graded whether new or not, and named lessons too.
    chosen, said = grade("out5", students=["bob"])
    assert set(chosen) == {("bob", A)} and not any("new or changed" in s for s in said)
    chosen, said = grade("out6", students=["bob", "carol"])
    assert set(chosen) == {("bob", A), ("bob", B), ("carol", A), ("carol", B)}
    assert chosen[("carol", A)]["status"] == "missing"
