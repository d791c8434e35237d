"""Feedback on submit at a deadline rush: the submissions collected while
others wait are graded together, a lesson at a time, by one grading command (warm workers,
reference outcomes computed once); each student's result is then filed on its own, each is
charged its own grading time, and new submissions are noticed while a step runs. The clock is
given and the steps recorded (tests/test_onsubmit.py), except where real files are written."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import COURSE_ROOT
from test_onsubmit import L1, L2, T0, Recorder, by_name, mine, name, run_all

sys.path.insert(0, str(COURSE_ROOT / "hub" / "lib"))
from coursehub import settings as class_settings
from coursehub.onsubmit import DONE, Queue, student_status
from coursehub.settings import OnSubmit
from coursehub.submitqueue import GRADE_BATCH

pytestmark = pytest.mark.fast


class Batches(Recorder):
    """Records which submissions each grading command graded together."""

    def __init__(self):
        super().__init__()
        self.batches: list[list[str]] = []

    def grade_many(self, entries, now):
        self.batches.append([e.name for e in entries])
        return super().grade_many(entries, now)


def test_a_rush_is_collected_then_graded_together_a_lesson_at_a_time(tmp_path):
    queue, steps, limits = Queue(tmp_path / "q.json"), Batches(), OnSubmit(enabled=True)
    ones = [name(f"s{n:02d}", L1, n) for n in range(GRADE_BATCH + 3)]
    twos = [name(f"t{n:02d}", L2, n) for n in range(2)]
    queue.observe(mine(*ones, *twos), T0)
    # Students are told at once where their submission stands.
    assert student_status(queue, "t01", T0)[0]["status"] == \
        f"received at 2027-01-15 08:00:00 UTC, grading: {len(ones) + 1} ahead of you"
    run_all(queue, steps, T0, limits)
    assert {e.status for e in queue.entries} == {DONE}
    assert [len(b) for b in steps.batches] == [GRADE_BATCH, 3, 2]
    assert all(len({n.split("+")[1] for n in batch}) == 1 for batch in steps.batches)
    assert sorted(n for batch in steps.batches for n in batch) == sorted(ones + twos)


class Processes(Batches):
    """Steps that take several submissions at each step, as Steps does: records each step's
    process (the step and the submissions it took)."""

    def __init__(self):
        super().__init__()
        self.processes: list[tuple[str, list[str]]] = []

    def _many(self, step, entries, now):
        self.processes.append((step, [e.name for e in entries]))
        return {e.name: self._step(step, e, now) for e in entries}

    def collect_many(self, entries, now):
        return self._many("collect", entries, now)

    def grade_many(self, entries, now):
        self.processes.append(("grade", [e.name for e in entries]))
        return super().grade_many(entries, now)

    def release_many(self, entries, now):
        return self._many("release", entries, now)

    def collect(self, entry, now):  # a step of one submission: a process too
        return self._many("collect", [entry], now)[entry.name]

    def grade(self, entry, now):
        return self.grade_many([entry], now)[entry.name]

    def release(self, entry, now):
        return self._many("release", [entry], now)[entry.name]


def test_a_rush_is_collected_and_released_by_one_process_per_batch_not_one_per_submission(
        tmp_path):
    """A first-time instructor's deadline burst: each collect and each release was a process
    of its own, 5 to 13 s each on a busy machine, one after the other, so that they, not the
    grading, made the last of three students wait 74 s. Each step now takes what is ready of
    a lesson in one process; a student's second lesson waits for the next collect (the
    per-hour limit counts a collected submission as graded)."""
    queue, steps, limits = Queue(tmp_path / "q.json"), Processes(), OnSubmit(enabled=True)
    ones = [name(f"s{n:02d}", L1, n) for n in range(5)]
    also = name("s00", L2, 9)  # s00's other lesson
    queue.observe(mine(*ones, also), T0)
    run_all(queue, steps, T0, limits)
    assert {e.status for e in queue.entries} == {DONE}
    assert steps.processes == [("collect", ones), ("collect", [also]), ("grade", ones),
                               ("release", ones), ("grade", [also]), ("release", [also])]


def test_submissions_that_come_while_a_collect_runs_wait_for_the_next_batch(tmp_path):
    """A collect takes everything ready when it begins; what comes meanwhile is collected
    after the grading of what it took (else a slow collect at a rush, which finds new
    submissions each time, held the grading back for the whole collect window: the
    benchmark's first batch waited for 16)."""
    from coursehub.onsubmit import work

    queue, limits = Queue(tmp_path / "q.json"), OnSubmit(enabled=True)
    ann, bob, cat = name("ann", L1, 1), name("bob", L1, 2), name("cat", L1, 3)
    clock = [T0]

    class Slow(Processes):
        def _many(self, step, entries, now):
            if step == "collect":  # a collect that takes 10 s; bob and cat submit meanwhile
                clock[0] += 10
                queue.observe(mine(ann, bob, cat), clock[0])
            return super()._many(step, entries, now)

    steps = Slow()
    queue.observe(mine(ann), T0)
    while (entry := queue.next_ready(clock[0], limits)) is not None:
        work(queue, entry, steps, clock=lambda: clock[0])
    assert steps.processes[:4] == [("collect", [ann]), ("grade", [ann]), ("release", [ann]),
                                   ("collect", [bob, cat])], steps.processes
    assert {e.status for e in queue.entries} == {DONE}


def test_a_submission_that_comes_while_its_earlier_one_is_collected_waits_for_it(tmp_path):
    """Its collected copy is in use: the newer one is collected only after the earlier is
    graded and released (never graded under the earlier one's name)."""
    queue, steps, limits = Queue(tmp_path / "q.json"), Batches(), OnSubmit(enabled=True)
    first, second = name("ann", L1, 1), name("ann", L1, 2)
    queue.observe(mine(first), T0)
    assert queue.next_ready(T0, limits).name == first
    entry = queue.next_ready(T0, limits)
    from coursehub.onsubmit import work

    work(queue, entry, steps, clock=lambda: T0)  # collected, not yet graded
    queue.observe(mine(first, second), T0 + 1)
    assert queue.next_ready(T0 + 1, limits).name == first  # graded before the next collect
    run_all(queue, steps, T0 + 1, limits)
    assert [s for n, s in steps.calls if n == second] == ["collect", "grade", "release"]
    assert steps.calls.index((second, "collect")) > steps.calls.index((first, "release"))
    assert by_name(queue)[second].status == DONE


def test_each_student_is_charged_their_own_grading_time(tmp_path):
    from coursehub.submitsteps import grading_seconds

    log = tmp_path / "grading.log"
    log.write_text(f"Graded 2 notebooks.\nSet-up (reading, checking and importing the class) "
                   f"took 30.0 s of 220.0 s.\n\n"
                   f"== ann / {L1}: graded, 9/9, 10.00 s (cells 5.00 s, scenarios 1.00 s, "
                   f"shared 0.00 s)\n"
                   f"== mallory / {L1}: error, 0/9, 180.00 s (cells 180.00 s, scenarios 0.00 s,"
                   f" shared 0.00 s)\n   the notebook ran past 180 s\n"
                   f"== bob / {L2}: graded, 9/9, 7.00 s (cells 5.00 s, scenarios 1.00 s, "
                   f"shared 0.00 s)\n")
    assert grading_seconds(log, L1) == {"ann": 25.0, "mallory": 195.0}
    assert grading_seconds(tmp_path / "missing.log", L1) == {}


def test_a_batchs_results_are_filed_per_student_through_no_link(tmp_path):
    """What the class report reads for each student (on-submit/<student>+<lesson>/grades.csv
    and its feedback page) comes from the batch's output, one student's row each."""
    from autograder.outputs import write_grades
    from autograder.tasks import Result
    from coursehub.submitsteps import split_results

    course, out = tmp_path / "course", tmp_path / "course" / "on-submit" / f".batch+{L1}"
    out.mkdir(parents=True)
    write_grades(out / "grades.csv", [Result("ann", L1, 9.0, 9.0), Result("bob", L1, 4.0, 9.0)])
    for student in ("ann", "bob"):
        page = out / "feedback" / student / f"{L1}.html"
        page.parent.mkdir(parents=True)
        page.write_text(f"<title>{student}</title>")
    victim = tmp_path / "victim"
    victim.write_text("precious")
    planted = course / "on-submit" / f"bob+{L1}" / "grades.csv"
    planted.parent.mkdir(parents=True)
    planted.symlink_to(victim)
    split_results(course, out, L1, ["ann", "bob"])
    assert victim.read_text() == "precious"
    for student, score in (("ann", "9"), ("bob", "4")):
        folder = course / "on-submit" / f"{student}+{L1}"
        rows = (folder / "grades.csv").read_text().splitlines()
        assert len(rows) == 2 and rows[1].startswith(f"{student},{L1},{score},9,graded")
        assert (folder / "feedback" / student / f"{L1}.html").read_text() == \
            f"<title>{student}</title>"


@pytest.mark.skipif(os.geteuid() != 0, reason="steps run as nobody (root only)")
def test_submissions_are_noticed_while_a_step_runs(tmp_path):
    from coursehub.submitsteps import Steps

    base = Path(tempfile.mkdtemp(prefix="onsubmit-tick-"))
    config = base / "class.toml"
    config.write_text('[hub]\nstate_dir = "state"\n[accounts]\nadmins = ["a"]\n'
                      'instructors_group = "root"\n')
    settings = class_settings.load(config)
    settings.course_dir.mkdir(parents=True)
    looks = []
    steps = Steps(settings, Path("/bin/sleep"), tick=lambda: looks.append(1), poll=0.05)
    code, _ = steps._run(["1"])  # a step that takes a second
    assert code == 0 and looks


def test_a_graded_submission_waiting_for_its_release_says_its_score(tmp_path):
    from coursehub.onsubmit import Entry

    queue = Queue(tmp_path / "q.json")
    queue.entries.append(Entry(name("ann", L1, 1), "ann", L1, seen=T0, step="release",
                               score="7 / 9"))
    assert student_status(queue, "ann", T0)[0]["status"] == \
        "graded: 7 / 9; its feedback is on its way to the Assignments tab"


@pytest.mark.skipif(os.geteuid() != 0, reason="steps run as nobody (root only)")
def test_the_resident_grader_is_kept_and_started_again_when_it_dies():
    """Batches go to one resident grader, kept between them; one that dies without an answer
    is started again and asked once more."""
    from coursehub.submitsteps import Steps

    base = Path(tempfile.mkdtemp(prefix="onsubmit-resident-"))
    os.chmod(base, 0o777)
    # A stand-in for the resident grader: the first one dies at once; the next answers each
    # request (and counts its starts and requests in files).
    fake = base / "python"
    fake.write_text(f"#!/bin/sh\necho start >> {base}/starts\n"
                    f"if [ ! -e {base}/died ]; then touch {base}/died; exit 1; fi\n"
                    "while read line; do echo x >> " + str(base) + "/asked; "
                    "echo '{\"code\": 0, \"output\": \"graded\", \"warmups\": 1}'; done\n")
    fake.chmod(0o755)
    config = base / "class.toml"
    config.write_text('[hub]\nstate_dir = "state"\n[accounts]\nadmins = ["a"]\n'
                      'instructors_group = "root"\n')
    settings = class_settings.load(config)
    settings.course_dir.mkdir(parents=True)
    os.chmod(settings.course_dir, 0o777)
    steps = Steps(settings, fake, poll=0.05)
    try:
        assert steps._run(["-m", "autograder", "grade", "submitted"]) == (0, "graded")
        assert steps._run(["-m", "autograder", "grade", "submitted"]) == (0, "graded")
        assert (base / "starts").read_text().count("start") == 2  # the dead one, then one kept
        assert (base / "asked").read_text().count("x") == 2
    finally:
        steps.stop()
        steps.resident.wait(10)
        shutil.rmtree(base, ignore_errors=True)
