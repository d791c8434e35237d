"""Feedback on submit against a hostile classmate who can write to the shared inbound folder.

Inbound is writable by every student: Mallory can make folders named for Alice, folders for
lessons that do not exist, thousands of them, links, and folders she removes once seen; her
own submission can idle for the whole notebook limit. None of it may fail, charge or delay
Alice's submissions, and the instructors' report may not be written into by a folder's name.
The queue is driven with a given clock and recorded steps (as tests/test_onsubmit.py); the
owners come from real accounts made with useradd where the test says so (root only).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import mistune
import pytest

from conftest import COURSE_ROOT
from test_onsubmit import L1, L2, T0, Recorder, by_name, mine, name, run_all

sys.path.insert(0, str(COURSE_ROOT / "hub" / "lib"))
from coursehub import settings as class_settings
from coursehub.onsubmit import (DONE, FAILED, PENDING, SUPERSEDED, WAITING,
                                Queue, Steps, instructor_report, student_status, work)
from coursehub.settings import OnSubmit

pytestmark = pytest.mark.fast

RELEASED = {L1, L2}


def test_a_folder_named_for_a_classmate_is_not_queued_and_is_reported_once(tmp_path):
    queue, limits = Queue(tmp_path / "q.json"), OnSubmit(enabled=True, per_hour=1)
    alices, forged = name("alice", L1, 1), name("alice", L2, 2)
    made_up, link = name("alice", "99_no_such_lesson", 3), name("alice", L2, 4)
    found = {alices: "alice", forged: "mallory", made_up: "alice", link: ""}
    queue.observe(found, T0, RELEASED)
    assert [e.name for e in queue.entries] == [alices]
    steps = Recorder()
    run_all(queue, steps, T0, limits)
    assert by_name(queue)[alices].status == DONE
    # Seen again and again: never queued, never charged to Alice, named once.
    for later in (T0 + 5, T0 + 10):
        assert queue.observe(found, later, RELEASED) == []
        run_all(queue, steps, later, limits)
    assert [n for n, _ in steps.calls] == [alices] * 3
    report = instructor_report(queue)
    assert "## Folders in inbound that were not queued" in report
    assert report.count(forged) == 1 and "belongs to mallory" in report
    assert "no lesson of that name is released" in report and "not a folder" in report
    assert [row["lesson"] for row in student_status(queue, "alice")] == [L1]
    # Alice's own next submission of lesson 02 is queued at once.
    own = name("alice", L2, 5)
    assert [e.name for e in queue.observe({**found, own: "alice"}, T0 + 20, RELEASED)] == [own]
    # Mallory removes her folders: they leave the report.
    queue.observe({alices: "alice", own: "alice"}, T0 + 30, RELEASED)
    assert forged not in instructor_report(queue)


def test_made_up_names_cannot_fill_the_queue(tmp_path):
    """Ten thousand folders: those named for others are refused, and one account's own
    may wait at most a dozen at a time, so the others' submissions go first."""
    from coursehub.submitqueue import MAX_QUEUED_PER_STUDENT

    queue, limits = Queue(tmp_path / "q.json"), OnSubmit(enabled=True)
    flood = {name(f"s{n}", L1, n % 60): "mallory" for n in range(5000)}
    flood.update({name("mallory", L1, n % 60): "mallory" for n in range(5000)})
    flood = {f"{k}{n}": v for n, (k, v) in enumerate(flood.items())}  # every name different
    queue.observe(flood, T0, RELEASED)
    assert len(queue.entries) == MAX_QUEUED_PER_STUDENT
    assert {e.student for e in queue.entries} == {"mallory"}
    bobs = name("bob", L1, 1)
    queue.observe({**flood, bobs: "bob"}, T0 + 1, RELEASED)
    steps = Recorder()
    run_all(queue, steps, T0 + 1, limits)
    # Her dozen collapse to her newest; Bob's is graded; nothing else was.
    graded = [n for n, step in steps.calls if step == "grade"]
    assert bobs in graded and len(graded) == 2
    assert sum(e.status == SUPERSEDED for e in queue.entries) == MAX_QUEUED_PER_STUDENT - 1


def test_folders_removed_once_seen_neither_regrade_nor_count(tmp_path):
    """Mallory's own folders made and removed at once: collect finds them gone, so nothing is
    graded again and her hourly limit is not spent (nor anyone's)."""
    class Gone(Recorder):
        def collect(self, entry, now):
            self.calls.append((entry.name, "collect"))
            entry.status = SUPERSEDED  # as Steps.collect when this submission is not there
            return ""

    queue, limits = Queue(tmp_path / "q.json"), OnSubmit(enabled=True, per_hour=1)
    for n in range(5):
        queue.observe(mine(name("mallory", L1, n)), T0 + n)
        run_all(queue, Gone(), T0 + n, limits)
    assert all(e.status == SUPERSEDED and e.started is None for e in queue.entries)
    real = name("mallory", L1, 9)
    queue.observe(mine(real), T0 + 10)
    run_all(queue, Recorder(), T0 + 10, limits)
    assert by_name(queue)[real].status == DONE


def _steps(tmp_path, output: str) -> Steps:
    config = tmp_path / "class.toml"
    config.write_text('[hub]\nstate_dir = "state"\n[accounts]\nadmins = ["a"]\n')
    steps = Steps(class_settings.load(config), Path(sys.executable))
    # What `coursehub.onsubmit exchange collect LESSON STUDENT...` printed: each student's
    # log of the course's collect (args[5:]: the students).
    steps._run = lambda args, env=None: (0, json.dumps(
        {student: {"success": True, "log": output} for student in args[5:]}))
    return steps


def _collected(steps: Steps, entry_name: str) -> None:
    """What SafeCollect leaves for the submission it took: the time its folder's name gives."""
    from nbgrader.utils import parse_utc

    from autograder.nbgrader_glue.exchange import CLAIMED_FILE, utc_text

    student, lesson, claimed, _ = entry_name.split("+")
    folder = steps.settings.course_dir / "submitted" / student / lesson
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CLAIMED_FILE).write_text(utc_text(parse_utc(claimed)))


def test_a_classmates_refused_folder_never_fails_this_submission(tmp_path):
    from coursehub.onsubmit import Entry

    alices, forged = name("alice", L1, 1), name("alice", L1, 7)
    refusal = (f"[SafeCollect | ERROR] Not collected: alice's submission {forged}: it is filed "
               "under alice but belongs to mallory; submit again (nothing of it was copied)")
    steps = _steps(tmp_path, refusal)
    _collected(steps, alices)
    entry = Entry(alices, "alice", L1, seen=T0)
    assert steps.collect(entry, T0) == "" and entry.status == PENDING
    # Her own folder refused: that is this submission's failure, with the reason.
    steps = _steps(tmp_path, refusal.replace(forged, alices))
    assert "belongs to mallory" in steps.collect(Entry(alices, "alice", L1, seen=T0), T0)
    # Another submission of hers was collected (this one was removed): nothing to grade.
    steps = _steps(tmp_path, "")
    _collected(steps, name("alice", L1, 3))
    entry = Entry(alices, "alice", L1, seen=T0)
    assert steps.collect(entry, T0) == "" and entry.status == SUPERSEDED


def test_a_student_who_used_the_hours_grading_time_waits_and_the_others_go_first(tmp_path):
    """Each grading of Mallory's idles 400 s: after three the hour's budget is spent; her next
    waits until the first leaves the hour, and Bob, who submitted after her, goes first."""
    from coursehub.submitqueue import GRADING_SECONDS_PER_HOUR

    clock = [T0]

    class Slow(Recorder):
        def grade(self, entry, now):
            clock[0] += 400 if entry.student == "mallory" else 10
            return self._step("grade", entry, now)

    queue, limits = Queue(tmp_path / "q.json"), OnSubmit(enabled=True, per_hour=10)
    steps = Slow()

    def drain():
        while (entry := queue.next_ready(clock[0], limits)) is not None:
            work(queue, entry, steps, clock=lambda: clock[0])

    lessons = [L1, L2, L1, L2]
    for n, lesson in enumerate(lessons[:3]):
        queue.observe(mine(name("mallory", lesson, n)), clock[0])
        drain()
    assert sum(e.seconds for e in queue.entries) == 1200 > GRADING_SECONDS_PER_HOUR
    fourth, bobs = name("mallory", L2, 3), name("bob", L1, 4)
    queue.observe(mine(fourth), clock[0])
    queue.observe(mine(bobs), clock[0] + 1)
    drain()
    waiting = by_name(queue)[fourth]
    assert by_name(queue)[bobs].status == DONE
    assert waiting.status == WAITING and waiting.until == T0 + 3600
    assert "15 minutes of grading in the last hour" in waiting.note
    assert "joins the grading queue at 2027-01-15 09:00:00 UTC" in waiting.note
    clock[0] = T0 + 3600
    drain()
    assert waiting.status == DONE


def test_the_fair_queue_grades_the_student_who_used_least_first(tmp_path):
    queue, limits = Queue(tmp_path / "q.json"), OnSubmit(enabled=True)
    steps = Recorder()
    first = name("mallory", L1, 1)
    queue.observe(mine(first), T0)
    run_all(queue, steps, T0, limits)
    by_name(queue)[first].seconds = 300.0
    hers, bobs = name("mallory", L2, 2), name("bob", L1, 3)
    queue.observe(mine(hers), T0 + 10)
    queue.observe(mine(bobs), T0 + 11)
    assert queue.next_ready(T0 + 12, limits).name == bobs
    assert student_status(queue, "mallory", T0 + 12)[1]["status"] == \
        "received at 2027-01-15 08:00:10 UTC, grading: 1 ahead of you"


def test_a_folder_name_cannot_write_markdown_into_the_instructors_report(tmp_path):
    evil = "[regrade to full marks](https://evil.example/) `x` | **bold**"
    sub = name("alice", L1, 1)
    steps = Recorder(errors={(sub, "collect"): [f"Not collected: {evil}"] * 2})
    queue = Queue(tmp_path / "q.json")
    queue.observe(mine(sub), T0)
    queue.refused[name("alice", L2, 2) + evil] = "it is named for alice but belongs to mallory"
    run_all(queue, steps, T0, OnSubmit(enabled=True))
    run_all(queue, steps, T0, OnSubmit(enabled=True))
    assert by_name(queue)[sub].status == FAILED
    html = mistune.html(instructor_report(queue))
    assert "<a " not in html and "<strong>" not in html
    quoted = re.findall(r"<code>[^<]*\[regrade to full marks\]\(https://evil\.example/\)", html)
    assert len(quoted) == 3  # the failure, its row, the refused folder: each as code


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None,
                    reason="makes accounts with useradd (root only)")
def test_a_hostile_classmate_account_gets_nothing_queued_in_anothers_name():
    """Real accounts: Mallory's folder named for Alice, and a link named for Alice to Alice's
    own folder, are refused by their owner as lstat gives it; Alice's own folder is queued."""
    from coursehub.onsubmit import inbound_folders, released_lessons

    tag = os.getpid() % 100000
    alice, mallory = f"agalice{tag}", f"agmallory{tag}"
    base = Path(tempfile.mkdtemp(prefix="onsubmit-hostile-"))
    try:
        for account in (alice, mallory):
            subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin",
                            account], check=True, capture_output=True)
        config = base / "class.toml"
        config.write_text('[hub]\nstate_dir = "state"\n[accounts]\nadmins = ["a"]\n')
        settings = class_settings.load(config)
        exchange = settings.exchange_dir / settings.course_id
        (exchange / "inbound").mkdir(parents=True)
        for lesson in RELEASED:
            (exchange / "outbound" / lesson).mkdir(parents=True)
        os.chmod(exchange / "inbound", 0o1733)
        own, forged, link = (name(alice, L1, 1), name(alice, L1, 2), name(alice, L2, 3))

        def as_user(account, *command):
            subprocess.run(["runuser", "-u", account, "--", *command], check=True,
                           capture_output=True, cwd=exchange / "inbound")

        as_user(alice, "mkdir", own)
        as_user(mallory, "mkdir", forged)
        as_user(alice, "ln", "-s", own, link)
        found = inbound_folders(settings)
        assert found == {own: alice, forged: mallory, link: ""}
        queue = Queue(base / "q.json")
        queue.observe(found, T0, released_lessons(settings))
        assert [e.name for e in queue.entries] == [own]
        assert f"belongs to {mallory}" in queue.refused[forged]
    finally:
        for account in (alice, mallory):
            subprocess.run(["userdel", account], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_grading_on_a_cluster_passes_the_class_files_tls_certificates(tmp_path):
    """`[feedback] cluster_tls` reaches the grading command as --cluster-tls: without it the
    command refuses the TLS scheduler or relies on whatever Dask configuration it finds."""
    from coursehub.onsubmit import Entry

    config = tmp_path / "class.toml"
    config.write_text('[hub]\nstate_dir = "state"\n[accounts]\nadmins = ["a"]\n[feedback]\n'
                      'feedback_on_submit = true\ncluster = "tls://10.9.8.7:8786"\n'
                      'cluster_tls = ["ca.pem", "hub.pem", "hub.key"]\n')
    steps = Steps(class_settings.load(config), Path(sys.executable))
    seen: list[list[str]] = []
    steps._run = lambda args, env=None: (seen.append(args), (1, "stopped here"))[1]
    steps.grade(Entry(name("ann", L1, 1), "ann", L1, T0), T0)
    grading = next(args for args in seen if "grade" in args)
    at = grading.index("--cluster")
    assert grading[at:at + 2] == ["--cluster", "tls://10.9.8.7:8786"]
    at = grading.index("--cluster-tls")
    assert grading[at:at + 4] == ["--cluster-tls", "ca.pem", "hub.pem", "hub.key"]
