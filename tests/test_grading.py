"""Grading a class end to end through `python -m autograder grade`.

One class holds every case the grader must survive: correct, partly right and blank students,
and the broken submissions of real classes (invalid JSON, another lesson's notebook, deleted
or edited test cells, an endless loop, output without end, sys.exit, os._exit, a killed
process, memory far beyond the limit, a duplicate, a name that is no lesson). It is graded
once from a folder and once more, re-grading the same course, from a zip of the same class.
The course is a two-lesson fixture in a temporary course root (tests/fixtures/grading).
"""

from __future__ import annotations

import csv
import hashlib
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.demo import Lessons, _write

pytestmark = pytest.mark.slow

A, B = fixture_course.LESSONS
TIMEOUT = 4
# The memory hog must reach the limit well within a cell's CPU time: touching fresh memory
# costs CPU (on a 2-core VM about 0.4 s of it per 256 MiB, more on a busy host), and a hog that
# needed as much CPU time to reach 2 GiB as the cell may use was stopped by whichever came first.
MEMORY, MEMORY_TEXT = "1G", "1 GiB"


def build_class(dest: Path, course: Lessons) -> None:
    for lesson in (A, B):
        _write(course.correct(lesson), dest / "correct" / f"{lesson}.ipynb")
        _write(course.blank(lesson), dest / "blank" / f"{lesson}.ipynb")
        _write(course.partial(lesson, seed=1), dest / "partial" / f"{lesson}.ipynb")
    text = nbformat.writes(course.correct(A))
    (dest / "json").mkdir(parents=True)
    (dest / "json" / f"{A}.ipynb").write_text(text[: len(text) // 3], encoding="utf-8")
    _write(course.correct(B), dest / "other-lesson" / f"{A}.ipynb")
    _write(course.without_first_test(A), dest / "deleted-test" / f"{A}.ipynb")
    _write(course.with_edited_test(A), dest / "edited-test" / f"{A}.ipynb")

    def answer(student: str, source: str) -> None:
        _write(course.with_answer(A, source, base="correct"), dest / student / f"{A}.ipynb")

    answer("loop", "while True:\n    pass")
    answer("flood", "while True:\n    print('spam ' * 20)")
    answer("sys-exit", "import sys\nsys.exit()")
    answer("os-exit", "import os\nos._exit(3)")
    answer("killed", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
    answer("kills-parent", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")
    answer("hog", "import torch\nhog = [torch.ones(2 ** 26) for _ in range(64)]")
    # Right on the test cell's example, then endless (or a memory hog) once the grader's
    # scenarios call it: every cell ends, and the run stops while its answers are checked.
    late = ("import torch\ncalls = []\ndef cube_grad(x):\n    calls.append(1)\n"
            "    if len(calls) > 1:\n        {stop}\n"
            "    x = x.detach().clone().requires_grad_(True)\n"
            "    (x ** 3).sum().backward()\n    return x.grad")
    answer("loops-when-checked", late.format(stop="while True:\n            pass"))
    # ... and one right on the visible scenario too, endless on the hidden one (its third call,
    # in the second phase of the checks, once the visible outcomes are in).
    answer("loops-when-hidden", late.replace("len(calls) > 1", "len(calls) > 2").format(
        stop="while True:\n            pass"))
    # ... and one that catches the sandbox's own timer: stopped by the grader's clock.
    answer("stubborn-when-checked", late.format(
        stop="while True:\n            try:\n                while True:\n"
             "                    pass\n            except BaseException:\n                pass"))
    answer("hog-when-checked",
           late.format(stop="hog = [torch.ones(2 ** 26) for _ in range(64)]"))
    # Passes the visible check, fails the hidden test: its traceback must not reach feedback.
    answer("hardcoded", "import torch\ndef cube_grad(x):\n    return torch.tensor([3.0, 12.0])")
    now = time.time()
    _write(course.blank(A), dest / "duplicate" / f"{A}.ipynb", now - 3600)
    _write(course.correct(A), dest / "duplicate" / f"{A} (1).ipynb", now)
    _write(course.correct(A), dest / "lms" / f"lms_4242_{A}-2.ipynb")
    _write(course.correct(B), dest / "lms" / B / f"{B}.ipynb")  # nbgrader's layout
    _write(course.blank(B), dest / "lms" / "homework.ipynb")
    (dest / "lms" / "notes.txt").write_text("not a notebook")


def grade(submissions: Path, out: Path, course_root: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, CI="true")
    command = [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
               "--course-root", str(course_root), "--jobs", "2", "--timeout", str(TIMEOUT),
               "--memory-limit", MEMORY, *extra]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def read_rows(out: Path) -> dict[tuple[str, str], dict]:
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == ["student_id", "lesson", "score", "max_score", "status",
                                     "reason"]
        rows = list(reader)
    table = {}
    for row in rows:
        key = (row["student_id"], row["lesson"])
        assert key not in table, f"two rows for {key}"
        table[key] = row
    return table


def tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            + str(p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("grading")
    root = fixture_course.build_course(base / "course")
    submissions = base / "class"
    build_class(submissions, Lessons(root))
    before = tree_digest(submissions)
    first = grade(submissions, base / "out", root)
    return {"root": root, "submissions": submissions, "out": base / "out", "base": base,
            "rows": read_rows(base / "out"), "stdout": first.stdout, "stderr": first.stderr,
            "before": before}


def test_correct_blank_and_partial_students(graded):
    rows = graded["rows"]
    for lesson, points in ((A, "3"), (B, "4")):
        assert rows[("correct", lesson)]["status"] == "graded"
        assert rows[("correct", lesson)]["score"] == points == rows[("correct", lesson)]["max_score"]
        assert rows[("blank", lesson)]["status"] == "graded"
        assert rows[("blank", lesson)]["score"] == "0"
        assert rows[("partial", lesson)]["status"] == "graded"
        assert 0 < float(rows[("partial", lesson)]["score"]) < float(points)


def test_every_student_has_a_row_per_lesson(graded):
    rows = graded["rows"]
    students = {s for s, _ in rows if s}
    for student in students:
        assert (student, A) in rows and (student, B) in rows, student
    assert rows[("loop", B)]["status"] == "missing"
    assert rows[("loop", B)]["score"] == "0" and rows[("loop", B)]["max_score"] == "4"


def test_broken_files_are_invalid(graded):
    rows = graded["rows"]
    assert rows[("json", A)]["status"] == "invalid"
    assert rows[("json", A)]["score"] == "0"
    assert "JSON" in rows[("json", A)]["reason"]
    assert rows[("other-lesson", A)]["status"] == "invalid"
    assert B in rows[("other-lesson", A)]["reason"]
    assert rows[("deleted-test", A)]["status"] == "invalid"
    assert "01-ex1-test" in rows[("deleted-test", A)]["reason"]


def test_edited_test_cell_is_restored_and_flagged(graded):
    row = graded["rows"][("edited-test", A)]
    assert row["status"] == "graded" and row["score"] == "3"
    assert "edited" in row["reason"] and "01-ex1-test" in row["reason"]


def test_endless_loop_and_endless_output_time_out(graded):
    rows = graded["rows"]
    for student in ("loop", "flood"):
        assert rows[(student, A)]["status"] == "timeout", rows[(student, A)]
        assert rows[(student, A)]["score"] == "0"
        assert f"{TIMEOUT} s" in rows[(student, A)]["reason"]
    flood_feedback = graded["out"] / "feedback" / "flood" / f"{A}.html"
    assert flood_feedback.stat().st_size < 2_000_000  # output was capped


def test_answers_that_stop_while_checked(graded):
    """A run that ends while the scenarios call its answers (after its last cell) blames no
    cell: its status says that checking the answers stopped, and why."""
    rows = graded["rows"]
    hog = rows[("hog-when-checked", A)]
    for student in ("loops-when-checked", "stubborn-when-checked", "loops-when-hidden"):
        looping = rows[(student, A)]
        assert looping["status"] == "timeout" and looping["score"] == "0", looping
        assert "checking the answers stopped" in looping["reason"], looping
        assert "endless loop" in looping["reason"] and "Code cell" not in looping["reason"]
    assert hog["status"] == "error" and hog["score"] == "0", hog
    assert "checking the answers stopped" in hog["reason"], hog
    assert "ran out of memory on the grader's inputs" in hog["reason"]
    assert "Code cell" not in hog["reason"]
    feedback = (graded["out"] / "feedback" / "loops-when-checked" / f"{A}.html").read_text()
    assert "still running on the grader&#39;s inputs" in feedback or \
        "still running on the grader's inputs" in feedback
    assert "plain data" not in feedback  # not told that its observations were malformed


def test_exit_kill_and_memory(graded):
    rows = graded["rows"]
    # sys.exit() behaves as in Jupyter: the cell fails, the rest of the notebook runs.
    assert rows[("sys-exit", A)]["status"] == "graded"
    assert rows[("sys-exit", A)]["score"] == "1"
    for student in ("os-exit", "killed"):
        assert rows[(student, A)]["status"] == "error", rows[(student, A)]
        assert rows[(student, A)]["score"] == "0"
        assert "ended" in rows[(student, A)]["reason"]
    assert "SIGKILL" in rows[("killed", A)]["reason"]
    # Its parent is the sandbox's PID 1, which ignores it: the notebook runs on and is graded.
    assert rows[("kills-parent", A)]["status"] == "graded", rows[("kills-parent", A)]
    assert rows[("hog", A)]["status"] == "error"
    assert "memory" in rows[("hog", A)]["reason"] and MEMORY_TEXT in rows[("hog", A)]["reason"]


def test_duplicates_names_and_layouts(graded):
    rows = graded["rows"]
    assert rows[("duplicate", A)]["status"] == "graded"
    assert rows[("duplicate", A)]["score"] == "3"  # the newer, correct file
    assert "newest" in rows[("duplicate", A)]["reason"]
    assert rows[("lms", A)]["score"] == "3" and rows[("lms", B)]["score"] == "4"
    assert rows[("lms", "")]["status"] == "invalid"
    assert "homework.ipynb" in rows[("lms", "")]["reason"]
    assert "notes.txt" in (graded["out"] / "grading.log").read_text()


def test_feedback_without_hidden_tests(graded):
    out = graded["out"]
    for key, row in graded["rows"].items():
        if key[1]:
            assert (out / "feedback" / key[0] / f"{key[1]}.html").is_file(), key
    pages = list((out / "feedback").rglob("*.html"))
    assert len(pages) >= 30
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for marker in fixture_course.HIDDEN_MARKERS:
            assert marker not in text, (page, marker)
    # The hidden test did fail, and its traceback (with the hidden source) is in the
    # instructors' autograded notebook only.
    assert graded["rows"][("hardcoded", A)]["score"] == "1"
    autograded = graded["root"] / "autograded" / "hardcoded" / A / f"{A}.ipynb"
    assert "hidden_probe_value_4242" in autograded.read_text()
    hardcoded = (out / "feedback" / "hardcoded" / f"{A}.html").read_text()
    # The verdict is shown: which check failed, without the hidden inputs' expected values.
    assert "1 of 2 checks passed" in hardcoded and "hidden check" in hardcoded


def test_gradebook_matches_grades_csv(graded):
    from nbgrader.api import Gradebook, MissingEntry

    root = graded["root"]
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "autograd-hooks") as gb:
        assert {a.name for a in gb.assignments} == {A, B}
        for (student, lesson), row in graded["rows"].items():
            if not lesson:
                continue
            if row["status"] in ("missing", "invalid"):
                with pytest.raises(MissingEntry):
                    gb.find_submission(lesson, student)
                continue
            submission = gb.find_submission(lesson, student)
            assert float(row["score"]) == submission.score, (student, lesson)
            assert float(row["max_score"]) == submission.max_score
            if row["status"] in ("timeout", "error"):
                assert submission.needs_manual_grade
    assert (root / "submitted" / "correct" / A / f"{A}.ipynb").is_file()
    assert (root / "autograded" / "correct" / A / f"{A}.ipynb").is_file()


def test_summary_and_quiet_progress(graded):
    assert "Graded" in graded["stdout"] and "timeout 5" in graded["stdout"]
    assert "\r[" not in graded["stderr"]  # no progress bar under CI


def test_regrading_from_a_zip_gives_the_same_grades(graded):
    base, submissions = graded["base"], graded["submissions"]
    archive = base / "class.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(submissions.rglob("*")):
            if path.is_file():  # wrapped in one folder, as a zipped download usually is
                zf.write(path, Path("export") / path.relative_to(submissions))
    grade(archive, base / "out-zip", graded["root"])
    again = read_rows(base / "out-zip")
    assert {k: (r["score"], r["status"]) for k, r in again.items()} == \
        {k: (r["score"], r["status"]) for k, r in graded["rows"].items()}
    assert tree_digest(submissions) == graded["before"]  # submissions never modified


def test_demo_class_builds_from_the_course(tmp_path, graded):
    from autograder.demo import build_demo_class

    dest = build_demo_class(tmp_path / "demo", graded["root"])
    students = {p.name for p in dest.iterdir()}
    assert {"correct", "partial", "blank", "broken", "duplicate"} <= students
    shutil.rmtree(dest)


def test_regrading_nbgraders_own_submitted_folder(graded):
    """`grade submitted/` (after nbgrader collect): files kept, timestamps recorded."""
    from nbgrader.api import Gradebook

    root, base = graded["root"], graded["base"]
    stamp = root / "submitted" / "correct" / B / "timestamp.txt"
    stamp.write_text("2030-01-02 03:04:05.000000 UTC")
    before = tree_digest(root / "submitted")
    grade(root / "submitted", base / "out-submitted", root, "--lessons", B)
    rows = read_rows(base / "out-submitted")
    for student in ("correct", "blank", "partial", "lms"):
        assert rows[(student, B)]["score"] == graded["rows"][(student, B)]["score"], student
    after = tree_digest(root / "submitted")
    assert {k: v[:64] for k, v in after.items()} == {k: v[:64] for k, v in before.items()}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "autograd-hooks") as gb:
        assert gb.find_submission(B, "correct").timestamp.year == 2030


def test_a_notebook_that_kills_its_worker(graded, tmp_path):
    """Without a shared prologue the notebook's parent is the worker itself: the worker dies,
    the notebook is reported, a new worker grades the rest."""
    from autograder.demo import Lessons
    from autograder.nbgrader_glue.gradebook import gradebook
    from autograder.nbgrader_glue.inproc import course_config
    from autograder.trusted.seeds import submission_digest
    from autograder.dispatch.pool import WorkerPool
    from autograder.tasks import GradingOptions, Task

    root = graded["root"]
    course = Lessons(root)
    _write(course.with_answer(A, "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
                              base="correct"), root / "submitted" / "killer" / A / f"{A}.ipynb")
    with gradebook(course_config(root)) as gb:
        gb.update_or_create_student("killer")
    settings = GradingOptions(course_root=str(root), out=str(tmp_path), timeout=TIMEOUT, jobs=1,
                              lock_path=str(tmp_path / "lock"), threads=1, share_prologue=False)
    results = []
    with WorkerPool(settings, ["torch"]) as pool:
        pool.run([Task(student=who, lesson=A, digest=submission_digest(
                      (root / "submitted" / who / A / f"{A}.ipynb").read_bytes()))
                  for who in ("killer", "correct")], results.append)
    by_student = {r.student_id: r for r in results}
    # In the sandbox its parent is the namespace's PID 1, which ignores the signal: the
    # worker lives on and both notebooks are graded.
    assert by_student["killer"].status == "graded"
    assert by_student["correct"].status == "graded" and by_student["correct"].score == 3
