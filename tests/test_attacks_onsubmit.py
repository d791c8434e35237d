"""Feedback on submit attacked by a classmate with an ordinary account (red team): what the
fair queue and the batches do when Mallory floods inbound with her own folders that are never
graded (no submission_secret.txt, or removed before they are collected). The queue is driven
with a given clock and recorded steps (tests/test_onsubmit.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from conftest import COURSE_ROOT
from test_onsubmit import L1, L2, T0, Recorder, by_name, mine, name

sys.path.insert(0, str(COURSE_ROOT / "hub" / "lib"))
from coursehub.onsubmit import DONE, PENDING, Queue, instructor_report, work
from coursehub.settings import OnSubmit

COLLECT_SECONDS = 3.0  # what one `nbgrader collect` costs the service


def _flood(tmp_path, rounds: int):
    """Alice had a lesson graded this hour (60 s); Bob's submission is collected and waits for
    its grading; Alice submits again. Then, before each step the service runs, Mallory puts one
    more folder of hers in inbound, which collect refuses (it has no submission_secret.txt)."""
    clock = [T0]

    class Steps(Recorder):
        def collect(self, entry, now):
            clock[0] += COLLECT_SECONDS
            if entry.student == "mallory":
                self.calls.append((entry.name, "collect"))
                return f"Not collected: mallory's submission {entry.name}: it has no " \
                    "submission_secret.txt"
            return super().collect(entry, now)

    queue, limits, steps = Queue(tmp_path / "q.json"), OnSubmit(enabled=True), Steps()
    first = name("alice", L1, 1)
    queue.observe(mine(first), clock[0])
    while (entry := queue.next_ready(clock[0], limits)) is not None:
        work(queue, entry, steps, clock=lambda: clock[0])
    by_name(queue)[first].seconds = 60.0
    alices, bobs = name("alice", L2, 2), name("bob", L1, 3)
    queue.observe(mine(bobs), clock[0])
    work(queue, queue.next_ready(clock[0], limits), steps, clock=lambda: clock[0])
    assert by_name(queue)[bobs].step == "grade"  # collected, waiting for its grading
    queue.observe(mine(alices), clock[0])
    found = mine(first, alices, bobs)
    for n in range(rounds):
        found[f"mallory+{L1}+2027-01-15 08:{n // 60 % 60:02d}:{n % 60:02d}.000000 UTC+{n:08x}"] \
            = "mallory"
        queue.observe(found, clock[0])
        entry = queue.next_ready(clock[0], limits)
        if entry is None:
            break
        work(queue, entry, steps, clock=lambda: clock[0])
    return queue, steps, alices, bobs, clock[0] - T0


def test_a_flood_of_folders_never_graded_cannot_starve_a_classmates_collect(tmp_path):
    """Each of Mallory's folders costs the service a collect (twice: a failed step is tried
    again) yet, before the fix, charged her nothing: with no grading time used she always came
    first in the fair queue, and Alice, who had used one minute, was never collected."""
    queue, steps, alices, bobs, took = _flood(tmp_path, 200)
    assert took >= 200 * COLLECT_SECONDS  # ten minutes of the service's time
    assert (alices, "collect") in steps.calls
    # What the service spent on her folders counts as hers: she no longer goes first.
    assert queue.used("mallory", T0 + took) >= 60.0
    # A collect that succeeds costs its student nothing (classmates' folders can slow it).
    assert by_name(queue)[alices].spent == 0.0 and by_name(queue)[bobs].spent == 0.0


def test_a_flood_of_folders_never_graded_cannot_hold_back_a_collected_batch(tmp_path):
    """Collected submissions were graded only once nothing was left to collect: a stream of
    Mallory's folders held Bob's collected submission back for as long as it lasted."""
    queue, steps, alices, bobs, took = _flood(tmp_path, 200)
    assert (bobs, "grade") in steps.calls
    assert by_name(queue)[bobs].status in (DONE, PENDING)


def test_a_flood_of_forged_folders_costs_the_service_no_work_after_the_first_look(
        tmp_path, monkeypatch):
    """Inbound is writable by every student: Mallory makes thousands of folders named for
    classmates (cheap: an empty folder each). Before the fix every look of the service (every
    two seconds, and while each step runs) looked up each folder's owner in the account
    database again, and every save of the queue (several per submission) wrote each refused
    name into queue.json again: 200,000 folders made a 25 MB file and seconds of work per look,
    for every student's submission, charged to no one."""
    from coursehub import onsubmit
    from coursehub import settings as class_settings
    from coursehub.submitqueue import MAX_REFUSED_SHOWN

    config = tmp_path / "class.toml"
    config.write_text('[hub]\nstate_dir = "state"\n[accounts]\nadmins = ["a"]\n')
    settings = class_settings.load(config)
    inbound = settings.exchange_dir / settings.course_id / "inbound"
    inbound.mkdir(parents=True)
    forged = [name(f"s{n}", L1, n % 60) + f"{n}" for n in range(2000)]
    for folder in forged:
        (inbound / folder).mkdir()  # owned by root, named for a classmate: refused
    lookups = []
    real_getpwuid = onsubmit.pwd.getpwuid
    monkeypatch.setattr(onsubmit.pwd, "getpwuid",
                        lambda uid: (lookups.append(uid), real_getpwuid(uid))[1])
    queue = Queue(tmp_path / "q.json")
    for look in range(3):
        queue.observe(onsubmit.inbound_folders(settings, queue), T0 + look, {L1, L2})
        queue.save()
    assert len(queue.refused) == len(forged) and not queue.entries
    assert len(lookups) <= 2 * len(forged) / 10  # an account looked up once a look, at most
    # queue.json keeps what the report shows; the rest are found again after a restart.
    saved = Queue.load(tmp_path / "q.json")
    assert len(saved.refused) <= MAX_REFUSED_SHOWN
    assert (tmp_path / "q.json").stat().st_size < 100 * MAX_REFUSED_SHOWN * 4
    own = name("s1", L2, 1)
    (inbound / own).mkdir()
    found = onsubmit.inbound_folders(settings, saved)
    saved.observe(found, T0 + 9, {L1, L2})
    assert len(saved.refused) == len(forged) + 1  # its owner (root) is not s1
    assert f"- and {len(forged) + 1 - MAX_REFUSED_SHOWN} more" in instructor_report(saved)


def test_a_classmate_named_like_a_moodle_folder_cannot_get_a_submission_refused(tmp_path):
    """Students choose their hub names at sign-up. Mallory signs up as
    `alice_1_assignsubmission_file_` (a valid account name): read with the grading command's
    default layout ("auto"), her folder in submitted/ is a Moodle export's folder of a student
    called Alice, so whenever her submission is graded in the same batch as Alice's, both are
    refused as two students who would get the id `alice`: Alice's grading on submit fails
    (twice, the retry batched with Mallory's again) and she is reported as failed. The service
    grades nbgrader's submitted/, whose folders are account names: it says so (--layout
    nbgrader)."""
    import json

    from autograder.intake.collect import collect
    from coursehub import settings as class_settings
    from coursehub.onsubmit import Entry, Steps

    mallory = "alice_1_assignsubmission_file_"
    config = tmp_path / "class.toml"
    config.write_text('[hub]\nstate_dir = "state"\n[accounts]\nadmins = ["a"]\n')
    steps = Steps(class_settings.load(config), Path(sys.executable))
    seen: list[list[str]] = []
    steps._run = lambda args, env=None: (seen.append(args), (1, "stopped here"))[1]
    steps.grade_many([Entry(name("alice", L1, 1), "alice", L1, T0),
                      Entry(name(mallory, L1, 2), mallory, L1, T0)], T0)
    grading = next(args for args in seen if "grade" in args)
    layout = grading[grading.index("--layout") + 1] if "--layout" in grading else "auto"
    submitted = tmp_path / "submitted"
    for student in ("alice", mallory):
        (submitted / student / L1).mkdir(parents=True)
        (submitted / student / L1 / f"{L1}.ipynb").write_text(json.dumps(
            {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    found, _ = collect(submitted, [L1], tmp_path / "work",
                       layout="folders" if layout == "nbgrader" else layout)
    assert sorted((s.student, s.refused) for s in found) == \
        [("alice", False), (mallory, False)]


def test_a_batchs_per_check_records_are_filed_per_student(tmp_path):
    """(Found beside the attacks.) The class report's named mistakes and pass rates come from
    on-submit/<student>+<lesson>/checks.json; the split step filed grades.csv and the feedback
    page but never checks.json, so a batch's records were lost. Each student gets their own
    records, and only theirs."""
    import json

    from autograder.report.class_report import CHECKS_FILE, read_checks
    from coursehub.submitsteps import split_results

    course, out = tmp_path / "course", tmp_path / "course" / "on-submit" / f".batch+{L1}"
    out.mkdir(parents=True)
    (out / "grades.csv").write_text(
        "student_id,lesson,score,max_score,status\nann,01_leaf_and_intermediate,9,9,graded\n"
        "bob,01_leaf_and_intermediate,4,9,graded\n")
    checks = {"results": [{"student_id": s, "lesson": L1, "checks": [
        {"scenario": f"{s}'s check", "passed": s == "ann"}]} for s in ("ann", "bob")]}
    (out / CHECKS_FILE).write_text(json.dumps(checks))
    split_results(course, out, L1, ["ann", "bob"])
    for student in ("ann", "bob"):
        text = (course / "on-submit" / f"{student}+{L1}" / CHECKS_FILE).read_text()
        records = read_checks(text)
        assert list(records) == [(student, L1)]
        assert records[(student, L1)][0]["scenario"] == f"{student}'s check"


def test_a_grading_of_some_students_reads_nothing_of_the_others(tmp_path, monkeypatch):
    """Every grading command on submit copied the course's whole submitted/ (every student,
    every lesson) before reading it, and that copy is the set-up time shared out among the
    students of the batch. Mallory submits the most SafeCollect takes (200 MB) to each lesson,
    once: from then on each classmate's grading copies her gigabytes and charges the minutes to
    the students graded, never to her. A grading of some students (--students, --lessons)
    copies and reads their folders only."""
    from autograder import grading
    from autograder.plan import Intake
    from autograder.tasks import GradingOptions

    root = tmp_path / "course"
    for lesson in (L1, L2):
        (root / "solutions" / lesson).mkdir(parents=True)
        (root / "solutions" / lesson / f"{lesson}.ipynb").write_text("{}")
        for student in ("alice", "bob", "mallory"):
            folder = root / "submitted" / student / lesson
            folder.mkdir(parents=True)
            (folder / f"{lesson}.ipynb").write_text("{}")
    (root / "submitted" / "mallory" / L1 / "bulk.bin").write_bytes(b"x" * 4096)
    copied = []

    class Stop(Exception):
        pass

    def read_only(source, *args, **kwargs):
        copied.extend(sorted(str(p.relative_to(source)) for p in Path(source).rglob("*")))
        raise Stop

    monkeypatch.setattr(grading, "collect", read_only)
    options = GradingOptions(course_root=str(root), out=str(tmp_path / "out"),
                             lessons=(L1,))
    try:
        grading._grade_locked(root / "submitted", options,
                              Intake(layout="folders", students=["alice", "bob"]), None,
                              False, None, 0.0)
    except Stop:
        pass
    assert copied and not [p for p in copied if "mallory" in p or L2 in p]
    assert f"alice/{L1}/{L1}.ipynb" in copied and f"bob/{L1}/{L1}.ipynb" in copied


_EXCHANGE_CONFIG = """c = get_config()
c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = "autograd-hooks"
c.CourseDirectory.db_url = "sqlite:///" + {root!r} + "/gradebook.db"
c.Exchange.root = {exchange!r}
c.ExchangeFactory.collect = "autograder.nbgrader_glue.exchange.SafeCollect"
c.SafeCollect.inbound_layout = "per-student"
"""


def test_a_flood_of_refused_folders_cannot_fail_a_classmates_collect_in_the_same_batch(
        tmp_path, monkeypatch, capfd):
    """The batch's collect reports every student's log on one line of JSON, which the service
    reads whole up to 8 MiB, and each folder of Mallory's that collect refuses adds a line to
    her log. With 25,000 of them (names whose time does not parse, 10 MB of log) the report was
    too long to read, and every student collected with her failed, Alice too: twice, and her
    submission was never graded. Each student's log in the report is now bounded. The real
    exchange step (SafeCollect, the per-student layout, so that no account is needed) writes
    the report; the service's own reading of it judges."""
    from coursehub.onsubmit import main
    from coursehub.submitqueue import Entry
    from coursehub.submitsteps import Steps

    root, exchange = tmp_path / "course", tmp_path / "exchange"
    root.mkdir()
    (root / "nbgrader_config.py").write_text(
        _EXCHANGE_CONFIG.format(root=str(root), exchange=str(exchange)))
    inbound = exchange / "autograd-hooks" / "inbound"
    alices, mallorys = name("alice", L1, 1), name("mallory", L1, 2)
    for folder in (inbound / "alice" / alices, inbound / "mallory" / mallorys):
        folder.mkdir(parents=True)
        (folder / "submission_secret.txt").write_text("secret")
        (folder / f"{L1}.ipynb").write_text("{}")
    for n in range(25_000):
        (inbound / "mallory" / f"mallory+{L1}+{'x' * 200}+{n:05d}").mkdir()
    monkeypatch.chdir(root)
    capfd.readouterr()
    assert main(["exchange", "collect", L1, "alice", "mallory"]) == 0
    printed = capfd.readouterr()
    steps = Steps(None, None)
    monkeypatch.setattr(steps, "_run", lambda args, env=None: (0, printed.err + printed.out))
    said = steps._exchange("collect", [Entry(alices, "alice", L1, T0),
                                       Entry(mallorys, "mallory", L1, T0)])
    assert said["alice"][0] == 0, said["alice"][1][-600:]
    assert "Collecting submission: alice" in said["alice"][1]
    assert (root / "submitted" / "alice" / L1 / f"{L1}.ipynb").read_text() == "{}"
    assert said["mallory"][0] == 0 and "characters of the log left out" in said["mallory"][1]
    assert "Collecting submission: mallory" in said["mallory"][1]  # the end is kept
    assert sorted(steps.exchange_seconds) == ["alice", "mallory"]  # each one's part, timed


def test_a_slow_collect_that_comes_to_nothing_is_charged_to_its_student_not_shared(tmp_path):
    """Mallory's refused folders make her part of the batch's collect long (each is looked at,
    120 s of them here), and her submission is never graded. She was charged that collect's
    time divided among the batch (16 of them: a sixteenth), so her hourly budget let her hold
    the service sixteen times as long as it gives one student. Each student's part is now
    timed by the exchange step: hers is hers, and only the rest (the process's start) is
    shared; Alice, collected, is charged nothing, as before."""
    clock = [T0]

    class Steps(Recorder):
        def collect_many(self, entries, now):
            self.exchange_seconds = {e.student: 120.0 if e.student == "mallory" else 1.0
                                     for e in entries}
            clock[0] += sum(self.exchange_seconds.values()) + 2.0  # 2 s: the process's start
            return {e.name: "Not collected: no submission_secret.txt"
                    if e.student == "mallory" else self._step("collect", e, now)
                    for e in entries}

    queue, limits, steps = Queue(tmp_path / "q.json"), OnSubmit(enabled=True), Steps()
    alices, mallorys = name("alice", L1, 1), name("mallory", L1, 2)
    queue.observe(mine(alices, mallorys), clock[0])
    work(queue, queue.next_ready(clock[0], limits), steps, clock=lambda: clock[0])
    entries = by_name(queue)
    assert entries[mallorys].spent == 120.0 + 1.0  # her own part, and half the start
    assert entries[alices].spent == 0.0 and entries[alices].step == "grade"
