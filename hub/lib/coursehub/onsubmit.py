"""Feedback on submit: a service of the class hub that grades each submission as it comes in.

JupyterHub starts it with the hub and stops it with the hub when hub/class.toml says
`feedback_on_submit = true` ([feedback]). It watches the exchange's inbound folder; for each new
submission it collects it (nbgrader collect, the course's SafeCollect), grades it in the sandbox
(`python -m autograder grade`, with `--cluster` when the class names a Dask scheduler) and
releases its feedback to the student (the course's SafeReleaseFeedback). Feedback that held the
hidden checks back is made again with them and released once the lesson's deadline passes. Each
step runs as the account `nobody` with the instructors' group, as an instructor's would.

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
"""

from __future__ import annotations

import argparse
import csv
import datetime
import grp
import io
import json
import os
import pwd
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from autograder.intake.safe_copy import Refused, read_small
from autograder.text import one_line
from coursehub.settings import HUB_DIR, USERNAME_PATTERN, ClassSettings, OnSubmit
from coursehub.state import as_nobody
from coursehub.submitqueue import (DONE, FAILED, PENDING, SUPERSEDED, WAITING,  # noqa: F401
                                   WORKING, Entry, Queue, claimed_time, instructor_report,
                                   parse_name, student_status, utc)

QUEUE_FILE = "queue.json"
REPORT_FILE = "on-submit.md"  # in the course folder, for the instructors
TRIES = 2  # a failed step is tried once more, then reported
# Each step and the one after it. "feedback": the full feedback of a submission graded with
# the hidden checks held back, once its lesson's deadline has passed.
NEXT_STEP = {"collect": "grade", "grade": "release", "feedback": "release", "release": None}
STEP_TIMEOUT = 3600  # seconds; grading has its own per-notebook limit well below this
# Seconds one notebook may run when graded on submit (the instructors' own grading allows
# 600): a correct lesson runs in well under a minute, and a notebook that idles holds a slot.
SUBMIT_NOTEBOOK_TIMEOUT = 180
MAX_PAGE_BYTES = 64 << 20  # a feedback page copied beside the class report


class Steps:
    """Runs collect, grade and release for one submission, each as `nobody` with the
    instructors' group, in the course folder. Each method returns an error message, or ""."""

    def __init__(self, settings: ClassSettings, python: Path):
        self.settings = settings
        self.python = python
        self.current: subprocess.Popen | None = None
        self.stopping = False

    def _run(self, args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
        if self.stopping:
            return 1, "the service is stopping"
        settings = self.settings
        drop = as_nobody(settings)
        env = {"PATH": f"{self.python.parent}:/usr/bin:/bin", "HOME": "/nonexistent",
               "PYTHONSAFEPATH": "1", "LANG": "C.UTF-8", **(env or {})}
        self.current = subprocess.Popen([str(self.python), *args], cwd=settings.course_dir,
                                        env=env, preexec_fn=drop, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True,
                                        start_new_session=True)
        try:
            output, _ = self.current.communicate(timeout=STEP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.current.pid, signal.SIGKILL)
            output, _ = self.current.communicate()
            output += f"\n(stopped after {STEP_TIMEOUT} s)"
        finally:
            code, self.current = self.current.returncode, None
        return code, output

    def stop(self) -> None:
        """End the step that runs now, and start no other (the service is stopping)."""
        self.stopping = True
        if self.current is not None and self.current.poll() is None:
            os.killpg(self.current.pid, signal.SIGTERM)

    def out(self, entry: Entry) -> Path:
        return self.settings.course_dir / "on-submit" / f"{entry.student}+{entry.lesson}"

    def collect(self, entry: Entry, now: float) -> str:
        """Collect the student's newest submission; judged by whether it is THIS one (a
        classmate's folder refused beside it is none of this submission's business). When the
        exchange no longer holds this one (removed, or a newer one of theirs was taken), the
        entry is superseded: nothing is graded or counted for it."""
        code, output = self._run(["-m", "nbgrader", "collect", entry.lesson,
                                  "--student", entry.student, "--update"])
        mine = [line for line in output.splitlines()
                if "Not collected:" in line and entry.name in line]
        if code or mine:
            return one_line(" ".join(mine) or output[-600:], 600)
        if not self.collected(entry):
            entry.status = SUPERSEDED
            entry.note = "not collected: it is no longer in the exchange, or a newer " \
                "submission of yours was collected in its place"
            return ""
        return self.due_date(entry)

    def collected(self, entry: Entry) -> bool:
        """Whether the submission collected for the student's lesson is `entry`'s (by the time
        its folder's name gives, which SafeCollect keeps in timestamp_claimed.txt)."""
        from nbgrader.utils import parse_utc

        from autograder.intake.exchange import CLAIMED_FILE, utc_text

        path = self.settings.course_dir / "submitted" / entry.student / entry.lesson / \
            CLAIMED_FILE
        try:
            return read_small(str(path), 1024).strip() == \
                utc_text(parse_utc(claimed_time(entry.name)))
        except (OSError, Refused, ValueError, OverflowError):
            return False

    def due_date(self, entry: Entry) -> str:
        """With a deadline for the lesson: make it the lesson's due date in the gradebook (from
        which nbgrader counts lateness) and mark the collected submission late when its
        timestamp.txt is past it. An error message, or ""."""
        stamp = self.settings.course_dir / "submitted" / entry.student / entry.lesson / \
            "timestamp.txt"
        deadline = self.settings.on_submit.deadline(entry.lesson)
        if deadline is None:
            return ""
        try:
            entry.late = submitted_after(stamp, deadline)
        except (OSError, ValueError, Refused):
            return f"the collected submission has no readable timestamp.txt ({stamp})"
        code, output = self._run(["-m", "nbgrader", "db", "assignment", "add", entry.lesson,
                                  f"--duedate={deadline:%Y-%m-%d %H:%M:%S} UTC"])
        if code:
            return "could not set the lesson's due date: " + one_line(output[-400:])
        return ""

    def grade(self, entry: Entry, now: float) -> str:
        limits = self.settings.on_submit
        out = self.out(entry)
        args = ["-m", "autograder", "grade", "submitted", "--students", entry.student,
                "--lessons", entry.lesson, "--out", str(out), "--course-root", ".",
                "--jobs", "1", "--no-progress",
                "--notebook-timeout", str(SUBMIT_NOTEBOOK_TIMEOUT)]
        deadline = limits.deadline(entry.lesson)
        withhold = not limits.hidden_before_deadline and \
            (deadline is None or now < deadline.timestamp())
        if withhold:
            args.append("--withhold-hidden-checks")
        if limits.cluster:
            args += ["--cluster", limits.cluster]
        code, output = self._run(args)
        self.class_report()
        row = None
        try:  # written by the grading step; read without following a link, bounded
            text = read_small(str(out / "grades.csv"), 1 << 20)
            row = next((r for r in csv.DictReader(io.StringIO(text)) if r.get("student_id") ==
                        entry.student and r.get("lesson") == entry.lesson), None)
        except (OSError, Refused):
            pass
        if code or row is None:
            return f"grading ended with status {code}: " + one_line(output[-600:])
        if row["status"] != "graded":
            return f"{row['status']}: " + one_line(row.get("reason", "") or output[-400:], 600)
        entry.score = f"{float(row['score']):g} / {float(row['max_score']):g}"
        entry.withheld = withhold
        return ""

    def feedback(self, entry: Entry, now: float) -> str:
        """The submission's feedback made again by the course's feedback steps (every check
        shown), from the autograded copy: nothing is graded again (full_feedback)."""
        code, output = self._run(["-m", "coursehub.onsubmit", "feedback", ".", entry.student,
                                  entry.lesson], env={"PYTHONPATH": str(HUB_DIR / "lib")})
        if code:
            return "generating the full feedback failed: " + one_line(output[-600:])
        entry.withheld = False
        self.class_report()
        return ""

    def class_report(self) -> None:
        """Write the class report again (class_report); a failure goes to the hub's log and
        stops nothing (the grades and feedback are written already)."""
        code, output = self._run(["-m", "coursehub.onsubmit", "report", "."],
                                 env={"PYTHONPATH": str(HUB_DIR / "lib")})
        if code:
            print(f"coursehub.onsubmit: the class report was not written: "
                  f"{one_line(output[-600:])}", flush=True)

    def release(self, entry: Entry, now: float) -> str:
        code, output = self._run(["-m", "nbgrader", "release_feedback", entry.lesson,
                                  "--student", entry.student])
        failed = [line for line in output.splitlines() if "Feedback not released" in line]
        return one_line(" ".join(failed) or output[-600:], 600) if code or failed else ""


def submitted_after(stamp: Path, deadline: datetime.datetime) -> bool:
    """Whether the collected submission's timestamp.txt (the exchange's clock, written by
    SafeCollect) is past `deadline`."""
    submitted = datetime.datetime.strptime(read_small(str(stamp), 1024).strip(),
                                           "%Y-%m-%d %H:%M:%S.%f %Z")
    return submitted.replace(tzinfo=datetime.timezone.utc) > deadline


def work(queue: Queue, entry: Entry, steps, clock=time.time) -> None:
    """Run `entry`'s remaining steps, saving the queue after each; a step that fails is tried
    once more (at its next turn), then the submission is marked failed. A grading's start and
    length are kept: what the student's hourly limits count."""
    while entry.status in (PENDING, WAITING):
        entry.status = WORKING
        began = clock()
        if entry.step == "grade":
            entry.started = began
        queue.save()
        error = getattr(steps, entry.step)(entry, began)
        if entry.step == "grade":
            entry.seconds += max(0.0, clock() - began)
        if entry.status == SUPERSEDED:  # the step found nothing of this submission to do
            queue.save()
            return
        if error:
            entry.failures += 1
            entry.status = FAILED if entry.failures >= TRIES else PENDING
            entry.note = f"{entry.step} failed: {error}"
            queue.save()
            return
        entry.failures, entry.note = 0, ""
        following = NEXT_STEP[entry.step]
        if following is None:
            entry.status = DONE
        else:
            entry.step, entry.status = following, PENDING
        queue.save()


# --------------------------------------------------------------------------------------------
# What students and instructors see

def _write(path: Path, text: str, gid: int, mode: int) -> None:
    """Write `path` whole, owned by root and group `gid`, through a new file that no link
    can redirect (the course folder is the instructors' to change)."""
    temporary = path.with_name(f".{path.name}.tmp")
    if os.path.lexists(temporary):
        os.unlink(temporary)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        os.fchown(handle.fileno(), 0, gid)
        os.fchmod(handle.fileno(), mode)
    os.replace(temporary, path)


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

def inbound_folders(settings: ClassSettings) -> dict[str, str]:
    """Each name in the exchange's inbound folder -> the account that owns it (lstat: a link
    is never followed), or "" when it is not a folder or its owner has no account."""
    inbound = settings.exchange_dir / settings.course_id / "inbound"
    try:
        names = os.listdir(inbound)
    except OSError:
        return {}
    found = {}
    for name in names:
        try:
            info = os.lstat(inbound / name)
            found[name] = pwd.getpwuid(info.st_uid).pw_name if stat.S_ISDIR(info.st_mode) \
                else ""
        except (OSError, KeyError):
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
    for folder, mode in ((settings.queue_dir, 0o711), (settings.queue_dir / "students", 0o711)):
        folder.mkdir(exist_ok=True)
        os.chmod(folder, mode)
    queue = Queue.load(settings.queue_dir / QUEUE_FILE)
    steps = Steps(settings, python)
    stopping = []

    def stop(signum, frame) -> None:
        stopping.append(signum)
        steps.stop()

    written: dict[Path, str] = {}
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"coursehub.onsubmit: watching {settings.exchange_dir / settings.course_id}/inbound; "
          f"{len(queue.entries)} submissions known", flush=True)
    while not stopping:
        refused = set(queue.refused)
        added = queue.observe(inbound_folders(settings), time.time(), released_lessons(settings))
        if set(queue.refused) - refused:  # each told once, by name in the instructors' report
            print(f"coursehub.onsubmit: {len(set(queue.refused) - refused)} folder(s) in inbound "
                  f"not queued, each named in {REPORT_FILE}", flush=True)
        entry = queue.next_ready(time.time(), settings.on_submit)
        if added or entry or set(queue.refused) != refused:
            queue.save()
        if entry is not None:
            work(queue, entry, steps)
            if stopping and entry.status not in (DONE, SUPERSEDED):  # stopped half-way: again
                entry.status, entry.failures = PENDING, max(0, entry.failures - 1)
                queue.save()
            if entry.status == FAILED:
                print(f"coursehub.onsubmit: {entry.student}'s {entry.lesson} could not be "
                      f"graded: {entry.note}", flush=True)
        publish(queue, settings, written)
        if entry is None:
            time.sleep(poll)


def full_feedback(course: Path, student: str, lesson: str) -> Path:
    """The feedback page of `student`'s graded `lesson` in the course root `course`, made again
    from its autograded copy by the course's feedback steps (as grading makes it, every check
    shown); returns its path."""
    from autograder.nbgrader_glue.inproc import course_config, generate_feedback

    return generate_feedback(course_config(course), student, lesson)


def _copy_page(source: Path, target: Path) -> None:
    """Copy a feedback page (a regular file, never through a link, bounded) to `target`,
    unless `target` is already that copy (same size and time)."""
    info = os.lstat(source)
    try:
        there = os.lstat(target)
        if (there.st_size, there.st_mtime_ns) == (info.st_size, info.st_mtime_ns):
            return
    except FileNotFoundError:
        pass
    text = read_small(str(source), MAX_PAGE_BYTES)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.tmp")
    if os.path.lexists(temporary):
        os.unlink(temporary)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o660)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.utime(temporary, ns=(info.st_atime_ns, info.st_mtime_ns))
    os.replace(temporary, target)


def class_report(course: Path) -> Path:
    """The class report of the submissions graded on submit, <course>/on-submit/report.html
    (and items.csv), as `python -m autograder grade` writes one: each student's latest result
    of each lesson (the grades.csv of its latest grading), its feedback page as the student
    last got it (nbgrader's feedback/ folder) beside the report; returns the page's path."""
    from autograder.nbgrader_glue.inproc import course_config
    from autograder.release import lessons
    from autograder.report.class_report import gradebook_cell_grades, write_report

    out = Path(course) / "on-submit"
    known = lessons(Path(course))
    rows = []
    for folder in sorted(out.iterdir()) if out.is_dir() else []:
        student, _, lesson = folder.name.partition("+")
        if lesson not in known or not re.match(USERNAME_PATTERN, student) or \
                folder.is_symlink() or not folder.is_dir():
            continue
        try:  # written by a grading step; read without following a link, bounded
            text = read_small(str(folder / "grades.csv"), 1 << 20)
        except (OSError, Refused):
            continue
        mine = [row for row in csv.DictReader(io.StringIO(text))
                if row.get("student_id") == student and row.get("lesson") == lesson]
        rows += mine
        for page in (Path(course) / "feedback" / student / lesson / f"{lesson}.html",
                     folder / "feedback" / student / f"{lesson}.html"):
            if mine and page.is_file() and not page.is_symlink():
                _copy_page(page, out / "feedback" / student / f"{lesson}.html")
                break
    return write_report(out, rows, lessons=known,
                        cell_grades=gradebook_cell_grades(course_config(Path(course)), rows),
                        title="Class report: feedback on submit",
                        note="Each student's latest submission of each lesson, graded on "
                             "submit; rewritten after each grading.")


def main(argv: list[str] | None = None) -> int:
    from coursehub import settings as class_settings

    parser = argparse.ArgumentParser(prog="python -m coursehub.onsubmit")
    commands = parser.add_subparsers(dest="command", required=True)
    serving = commands.add_parser("serve", help="watch the exchange (JupyterHub starts it)")
    serving.add_argument("--config", type=Path, default=None, help="the class file")
    serving.add_argument("--python", type=Path, required=True,
                         help="the Python of users' servers, which runs each step")
    making = commands.add_parser("feedback", help="a graded submission's full feedback again")
    for name in ("course", "student", "lesson"):
        making.add_argument(name)
    reporting = commands.add_parser("report", help="the class report of the submissions "
                                    "graded on submit, written again")
    reporting.add_argument("course")
    args = parser.parse_args(argv)
    if args.command == "report":
        print(f"Class report written: {class_report(Path(args.course))}")
    elif args.command == "feedback":
        print(f"Feedback written: {full_feedback(Path(args.course), args.student, args.lesson)}")
    else:
        serve(class_settings.load(args.config), args.python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
