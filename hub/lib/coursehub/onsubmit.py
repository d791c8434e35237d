"""Feedback on submit: a service of the class hub that grades each submission as it comes in.

JupyterHub starts it with the hub and stops it with the hub when hub/class.toml says
`feedback_on_submit = true` ([feedback]). It watches the exchange's inbound folder, also while
a step runs, and queues a folder only when its owner is the student its name gives
(coursehub.submitqueue: the queue, its limits and fair order, what students and instructors are
told). It collects each queued submission (nbgrader collect, the course's SafeCollect), grades
the collected submissions of a lesson together in the sandbox (one `python -m autograder grade`
whose workers are warmed and whose reference outcomes are computed once for all of them, with
`--cluster` when the class names a Dask scheduler) and releases each one's feedback to its
student (the course's SafeReleaseFeedback). Feedback that held the hidden checks back is made
again with them and released once the lesson's deadline passes. Each step runs as the account
`nobody` with the instructors' group, as an instructor's would (coursehub.submitsteps).

The queue lives in <state>/on-submit/queue.json, written after every step, so a restart of the
hub or the service loses no submission and repeats no finished step. A step that fails is
tried once more, then the submission is reported to the instructors (<course>/on-submit.md and
the hub's log) and the queue goes on. After each grading the class report,
<course>/on-submit/report.html, is written again with every student's latest result. Each
student's own status (what waits, and until when) is in <state>/on-submit/students/<name>.json,
which only they and root may read; their start page shows it.

    python -m coursehub.onsubmit serve --python PYTHON [--config CLASS_TOML]
    python -m coursehub.onsubmit feedback COURSE_ROOT STUDENT LESSON   (one step, as nobody)
    python -m coursehub.onsubmit report COURSE_ROOT   (the class report again, as nobody)
    python -m coursehub.onsubmit split COURSE_ROOT OUT LESSON STUDENT...   (as nobody)
    python -m coursehub.onsubmit exchange collect|release LESSON STUDENT...   (as nobody, in
        the course folder: nbgrader's collect or release_feedback of each student, one process)
"""

from __future__ import annotations

import argparse
import grp
import json
import math
import os
import pwd
import signal
import stat
import sys
import time
from pathlib import Path

from coursehub.cgroups import require_for_grading
from coursehub.onsubmit_report import class_report, full_feedback
from coursehub.settings import ClassSettings
from coursehub.submitqueue import (DONE, FAILED, PENDING, SUPERSEDED, WAITING,  # noqa: F401
                                   WORKING, Entry, Queue, instructor_report, parse_name,
                                   student_status, utc)
from coursehub.submitsteps import (Steps, exchange_steps, replace_file,  # noqa: F401
                                   split_results, submitted_after)

QUEUE_FILE = "queue.json"
REPORT_FILE = "on-submit.md"  # in the course folder, for the instructors
TRIES = 2  # a failed step is tried once more, then reported
# Each step and the one after it. "feedback": the full feedback of a submission graded with
# the hidden checks held back, once its lesson's deadline has passed.
NEXT_STEP = {"collect": "grade", "grade": "release", "feedback": "release", "release": None}


def work(queue: Queue, entry: Entry, steps, clock=time.time, changed=None) -> None:
    """Run `entry`'s remaining steps, saving the queue after each; a step that fails is tried
    once more (at its next turn), then the submission is marked failed. Its collect, grading
    and release are each shared with the other submissions of its lesson at that step
    (Queue.batch_of; Steps.collect_many, grade_many, release_many: one process each, not one
    per submission) when `steps` can take several; each then goes on alone. A grading's start
    and length are kept:
    what the student's hourly limits count. `changed()` is called each time the queue is saved,
    as a step starts and as it ends, so that the students are told then (a grading that
    begins: "being graded now"), not only when `entry` is done."""
    saved = queue.save if changed is None else lambda: (queue.save(), changed())
    while entry.status in (PENDING, WAITING):
        many = getattr(steps, f"{entry.step}_many", None)  # collect, grade, release
        batch = queue.batch_of(entry) if many is not None else [entry]
        began = clock()
        if entry.step == "collect":
            queue.collect_began = began
        for one in batch:
            one.status = WORKING
            if one.step == "grade":
                one.started = began
        saved()
        before = {one.name: one.seconds for one in batch}
        if len(batch) > 1:
            errors = many(batch, began)
        else:
            errors = {entry.name: getattr(steps, entry.step)(entry, began)}
        elapsed = max(0.0, clock() - began)
        if entry.step == "grade":
            for one in batch:
                if one.seconds == before[one.name]:  # the steps did not say: an equal share
                    one.seconds += elapsed / len(batch)
        elif entry.step == "collect":
            # A folder that is never graded (no submission_secret.txt, removed at once) is not
            # free to its student: the service's time collecting it counts as grading time:
            # their own part of the collect (the exchange step times each student's, and a
            # flood of their own refused folders makes it long) and an equal share of the rest.
            # (A collect that succeeds is not charged: classmates' forged folders beside it
            # can slow it.)
            own = {one.name: _own_seconds(steps, one, elapsed) for one in batch}
            rest = max(0.0, elapsed - sum(own.values())) / len(batch)
            for one in batch:
                if errors[one.name] or one.status == SUPERSEDED:
                    one.spent, one.spent_at = one.spent + own[one.name] + rest, began
        for one in batch:
            collecting = one.step == "collect"
            _advance(one, errors[one.name])
            if collecting and one.step == "grade":
                one.collected_at = clock()
        saved()
        if errors[entry.name] or entry.status != PENDING or entry.step == "grade":
            return  # collected: the others ready are collected too, then graded with it


def _own_seconds(steps, entry: Entry, elapsed: float) -> float:
    """The seconds the last exchange step spent on `entry`'s student (Steps.exchange_seconds),
    at most `elapsed`; 0 when the steps do not say."""
    seconds = (getattr(steps, "exchange_seconds", None) or {}).get(entry.student)
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds):
        return 0.0
    return min(max(0.0, float(seconds)), elapsed)


def _advance(entry: Entry, error: str) -> None:
    """After a step of `entry`: the next step, or a failure counted (tried again at its next
    turn, FAILED at the last try)."""
    if entry.status == SUPERSEDED:  # the step found nothing of this submission to do
        return
    if error:
        entry.failures += 1
        entry.status = FAILED if entry.failures >= TRIES else PENDING
        entry.note = f"{entry.step} failed: {error}"
        return
    entry.failures, entry.note = 0, ""
    following = NEXT_STEP[entry.step]
    if following is None:
        entry.status = DONE
    else:
        entry.step, entry.status = following, PENDING


# --------------------------------------------------------------------------------------------
# What students and instructors see

def _write(path: Path, text: str, gid: int, mode: int) -> None:
    """Write `path` whole, owned by root and group `gid`, through a new file that no link
    can redirect (the course folder is the instructors' to change)."""
    replace_file(path, text, mode, gid)


def publish(queue: Queue, settings: ClassSettings, written: dict[Path, str]) -> None:
    """Each student's status file and the instructors' report, from the queue; `written`
    remembers what each file says, so that only changes are written."""
    files = {}
    for student in sorted({e.student for e in queue.entries}):
        try:
            gid = pwd.getpwnam(student).pw_gid
        except KeyError:
            continue
        files[settings.queue_dir / "students" / f"{student}.json"] = \
            (json.dumps(student_status(queue, student, time.time())), gid)
    files[settings.course_dir / REPORT_FILE] = \
        (instructor_report(queue), grp.getgrnam(settings.instructors_group).gr_gid)
    for path, (text, gid) in files.items():
        if written.get(path) != text:
            _write(path, text, gid, 0o640)
            written[path] = text


# --------------------------------------------------------------------------------------------
# The service

def inbound_folders(settings: ClassSettings, queue: Queue | None = None) -> dict[str, str]:
    """Each name in the exchange's inbound folder -> the account that owns it (lstat: a link
    is never followed), or "" when it is not a folder or its owner has no account. A name
    `queue` knows already (queued, or refused) is given as "" unlooked at: whatever a student
    makes in inbound, each look costs the service one lstat of each new name and one account
    lookup of each owner."""
    inbound = settings.exchange_dir / settings.course_id / "inbound"
    try:
        names = os.listdir(inbound)
    except OSError:
        return {}
    seen = set(queue.refused) | {e.name for e in queue.entries} if queue is not None else set()
    accounts: dict[int, str] = {}
    found = {}
    for name in names:
        if name in seen:
            found[name] = ""
            continue
        try:
            info = os.lstat(inbound / name)
            if not stat.S_ISDIR(info.st_mode):
                found[name] = ""
                continue
            if info.st_uid not in accounts:
                try:
                    accounts[info.st_uid] = pwd.getpwuid(info.st_uid).pw_name
                except KeyError:
                    accounts[info.st_uid] = ""
            found[name] = accounts[info.st_uid]
        except OSError:
            found[name] = ""
    return found


def released_lessons(settings: ClassSettings) -> set[str]:
    """The lessons the instructors released (folders in the exchange's outbound)."""
    outbound = settings.exchange_dir / settings.course_id / "outbound"
    try:
        return {p.name for p in outbound.iterdir() if p.is_dir() and not p.is_symlink()}
    except OSError:
        return set()


def serve(settings: ClassSettings, python: Path, poll: float = 2.0) -> None:
    """Watch, grade and release until SIGTERM (JupyterHub stopping its services)."""
    require_for_grading(settings, python)
    for folder, mode in ((settings.queue_dir, 0o711), (settings.queue_dir / "students", 0o711)):
        folder.mkdir(exist_ok=True)
        os.chmod(folder, mode)
    queue = Queue.load(settings.queue_dir / QUEUE_FILE)
    written: dict[Path, str] = {}

    def look() -> bool:
        """Queue what is new in inbound; whether anything changed."""
        refused = set(queue.refused)
        added = queue.observe(inbound_folders(settings, queue), time.time(),
                              released_lessons(settings))
        if set(queue.refused) - refused:  # each told once, by name in the instructors' report
            print(f"coursehub.onsubmit: {len(set(queue.refused) - refused)} folder(s) in inbound "
                  f"not queued, each named in {REPORT_FILE}", flush=True)
        return bool(added) or set(queue.refused) != refused

    def meanwhile() -> None:
        """While a step runs: new submissions are queued, and their students told at once."""
        if look():
            queue.save()
            publish(queue, settings, written)

    steps = Steps(settings, python, tick=meanwhile, poll=poll)
    stopping = []

    def stop(signum, frame) -> None:
        stopping.append(signum)
        steps.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"coursehub.onsubmit: watching {settings.exchange_dir / settings.course_id}/inbound; "
          f"{len(queue.entries)} submissions known", flush=True)
    while not stopping:
        changed = look()
        entry = queue.next_ready(time.time(), settings.on_submit)
        if changed or entry:
            queue.save()
        if entry is not None:
            tries = {e.name: e.failures for e in queue.entries if e.status in (PENDING, WORKING)}
            work(queue, entry, steps, changed=lambda: publish(queue, settings, written))
            if stopping:  # stopped half-way: those steps run again, and no try is spent
                for one in queue.entries:
                    if one.name in tries and one.status not in (DONE, SUPERSEDED):
                        one.status, one.failures = PENDING, tries[one.name]
                queue.save()
            for one in queue.entries:
                if one.name in tries and one.status == FAILED:
                    print(f"coursehub.onsubmit: {one.student}'s {one.lesson} could not be "
                          f"graded: {one.note}", flush=True)
        publish(queue, settings, written)
        if entry is None:
            time.sleep(poll)


def main(argv: list[str] | None = None) -> int:
    from coursehub import settings as class_settings

    parser = argparse.ArgumentParser(prog="python -m coursehub.onsubmit")
    commands = parser.add_subparsers(dest="command", required=True)
    serving = commands.add_parser("serve", help="watch the exchange (JupyterHub starts it)")
    serving.add_argument("--config", type=Path, default=None, help="the class file")
    serving.add_argument("--python", type=Path, required=True,
                         help="the Python of users' servers, which runs each step")
    filing = commands.add_parser("split", help="file each student's result of a grading")
    filing.add_argument("course")
    filing.add_argument("out")
    filing.add_argument("lesson")
    filing.add_argument("students", nargs="+")
    making = commands.add_parser("feedback", help="a graded submission's full feedback again")
    for name in ("course", "student", "lesson"):
        making.add_argument(name)
    reporting = commands.add_parser("report", help="the class report of the submissions "
                                    "graded on submit, written again")
    reporting.add_argument("course")
    moving = commands.add_parser("exchange", help="collect, or release the feedback of, "
                                 "several students' submissions of a lesson in one process")
    moving.add_argument("step", choices=("collect", "release"))
    moving.add_argument("lesson")
    moving.add_argument("students", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "exchange":  # in the course folder, as nobody (Steps.collect_many)
        print(json.dumps(exchange_steps(args.step, args.lesson, args.students)))
    elif args.command == "split":
        split_results(Path(args.course), Path(args.out), args.lesson, args.students)
    elif args.command == "report":
        print(f"Class report written: {class_report(Path(args.course))}")
    elif args.command == "feedback":
        print(f"Feedback written: {full_feedback(Path(args.course), args.student, args.lesson)}")
    else:
        serve(class_settings.load(args.config), args.python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
