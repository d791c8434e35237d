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
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from autograder.intake.safe_copy import Refused, read_small
from autograder.text import one_line
from coursehub.cgroups import require_for_grading
from coursehub.onsubmit_report import class_report, full_feedback
from coursehub.settings import HUB_DIR, USERNAME_PATTERN, ClassSettings, OnSubmit
from coursehub.state import as_nobody

QUEUE_FILE = "queue.json"
REPORT_FILE = "on-submit.md"  # in the course folder, for the instructors
HOUR = 3600.0
TRIES = 2  # a failed step is tried once more, then reported
# Each step and the one after it. "feedback": the full feedback of a submission graded with
# the hidden checks held back, once its lesson's deadline has passed.
NEXT_STEP = {"collect": "grade", "grade": "release", "feedback": "release", "release": None}
PENDING, WORKING, WAITING = "pending", "working", "waiting"
DONE, FAILED, SUPERSEDED = "done", "failed", "superseded"
STEP_TIMEOUT = 3600  # seconds; grading has its own per-notebook limit well below this


def utc(moment: float) -> str:
    return datetime.datetime.fromtimestamp(moment, datetime.timezone.utc) \
        .strftime("%Y-%m-%d %H:%M UTC")


@dataclass
class Entry:
    """One submission: the exchange folder's name, and how far the service got with it."""
    name: str  # student+lesson+time+random, as nbgrader's submit names it
    student: str
    lesson: str
    seen: float  # when the service first saw it, by its own clock
    status: str = PENDING
    step: str = "collect"  # the next step to run
    failures: int = 0  # failed tries of the current step
    started: float | None = None  # when its grading began: what the hourly limit counts
    until: float | None = None  # waiting: when it may be graded (None: the instructor grades)
    note: str = ""
    late: bool = False
    score: str = ""
    withheld: bool = False  # its released feedback left the hidden checks out


def parse_name(name: str) -> tuple[str, str] | None:
    """(student, lesson) of an inbound folder's name, or None for a name submit never writes."""
    parts = name.split("+")
    if len(parts) != 4 or not re.match(USERNAME_PATTERN, parts[0]) or \
            not re.match(r"^[A-Za-z0-9_.-]+$", parts[1]):
        return None
    return parts[0], parts[1]


class Queue:
    """The service's queue, kept in a JSON file written whole (atomically) after each change."""

    def __init__(self, path: Path, entries: list[Entry] | None = None):
        self.path = path
        self.entries = entries or []

    @classmethod
    def load(cls, path: Path) -> "Queue":
        """The queue as saved; a step that was running when the service stopped runs again."""
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return cls(path)
        entries = [Entry(**item) for item in data["entries"]]
        for entry in entries:
            if entry.status == WORKING:
                entry.status = PENDING
        return cls(path, entries)

    def save(self) -> None:
        temporary = self.path.with_name(f".{self.path.name}.tmp")
        temporary.write_text(json.dumps({"entries": [asdict(e) for e in self.entries]},
                                        indent=1))
        os.chmod(temporary, 0o600)
        os.replace(temporary, self.path)

    def observe(self, names: list[str], now: float) -> list[Entry]:
        """Add the submissions not seen before; returns them."""
        known = {entry.name for entry in self.entries}
        added = []
        for name in sorted(set(names) - known):
            parsed = parse_name(name)
            if parsed:
                added.append(Entry(name, *parsed, seen=now))
        self.entries += added
        return added

    def next_ready(self, now: float, limits: OnSubmit) -> Entry | None:
        """Settle who waits and whose older submissions a newer one replaces; the submission
        to work on next (the oldest ready), or None."""
        in_progress = [e for e in self.entries if e.status in (PENDING, WORKING)
                       and e.step != "collect"]  # collected: finished before anything else
        if in_progress:
            return in_progress[0]
        newest: dict[tuple[str, str], Entry] = {}
        for entry in sorted(self.entries, key=lambda e: (e.seen, e.name)):
            if entry.status in (PENDING, WAITING):
                key = (entry.student, entry.lesson)
                if key in newest:
                    newest[key].status, newest[key].note = SUPERSEDED, \
                        "a newer submission of the same lesson replaced it"
                newest[key] = entry
        ready = []
        for entry in newest.values():
            until, why = self.wait(entry, now, limits)
            if why:
                entry.status, entry.until, entry.note = WAITING, until, why
            else:
                entry.status, entry.until, entry.note = PENDING, None, ""
                ready.append(entry)
        if not ready:
            ready = self.past_deadline(now, limits)
        return min(ready, key=lambda e: (e.seen, e.name), default=None)

    def past_deadline(self, now: float, limits: OnSubmit) -> list[Entry]:
        """Graded submissions whose feedback held the hidden checks back and whose lesson's
        deadline has passed, each the newest graded of its student and lesson, set to have
        their full feedback made and released."""
        newest: dict[tuple[str, str], Entry] = {}
        for entry in sorted(self.entries, key=lambda e: (e.seen, e.name)):
            if entry.status == DONE:
                newest[(entry.student, entry.lesson)] = entry
        due = []
        for entry in newest.values():
            deadline = limits.deadline(entry.lesson)
            if entry.withheld and deadline is not None and now >= deadline.timestamp():
                entry.status, entry.step = PENDING, "feedback"
                due.append(entry)
        return due

    def wait(self, entry: Entry, now: float, limits: OnSubmit) -> tuple[float | None, str]:
        """Until when `entry` must wait, and why ("" when it need not)."""
        graded = [e for e in self.entries if e.student == entry.student and e.started is not None
                  and e is not entry]
        of_lesson = [e for e in graded if e.lesson == entry.lesson]
        if len(of_lesson) >= limits.per_lesson:
            deadline = limits.deadline(entry.lesson)
            when = f"after the deadline ({deadline:%Y-%m-%d %H:%M UTC})" if deadline else \
                "when they grade the class"
            return None, (f"{limits.per_lesson} submissions of this lesson were graded on "
                          "submit, the most the class allows; your instructor grades your last "
                          f"submission {when}")
        recent = sorted(e.started for e in graded if now - HOUR < e.started <= now)
        if len(recent) >= limits.per_hour:
            until = recent[-limits.per_hour] + HOUR
            return until, (f"the class grades at most {limits.per_hour} submissions of yours "
                           f"an hour; this one is graded at {utc(until)}")
        return None, ""


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
        code, output = self._run(["-m", "nbgrader", "collect", entry.lesson,
                                  "--student", entry.student, "--update"])
        refused = [line for line in output.splitlines() if "Not collected:" in line]
        if code or refused:
            return one_line(" ".join(refused) or output[-600:], 600)
        return self.due_date(entry)

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
                "--jobs", "1", "--no-progress"]
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
    once more (at its next turn), then the submission is marked failed."""
    while entry.status in (PENDING, WAITING):
        if entry.started is None:
            entry.started = clock()
        entry.status = WORKING
        queue.save()
        error = getattr(steps, entry.step)(entry, clock())
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

def student_status(queue: Queue, student: str) -> list[dict]:
    """For each lesson the student submitted, their newest submission's state, in words."""
    newest: dict[str, Entry] = {}
    for entry in sorted(queue.entries, key=lambda e: (e.seen, e.name)):
        if entry.student == student and entry.status != SUPERSEDED:
            newest[entry.lesson] = entry
    rows = []
    for lesson, entry in sorted(newest.items()):
        if entry.status == DONE:
            text = (f"graded{' (late)' if entry.late else ''}: {entry.score}; "
                    "click Fetch Feedback in the Assignments tab")
            if entry.withheld:
                text += " (the hidden checks' results come after the deadline)"
        elif entry.step == "feedback":
            text = "graded; the feedback with the hidden checks' results is on its way"
        elif entry.status == WAITING:
            text = f"waiting: {entry.note}"
        elif entry.status == FAILED:
            text = "could not be graded on submit; your instructor has been told"
        else:
            text = "being graded"
        rows.append({"lesson": lesson, "submitted": utc(entry.seen), "status": text})
    return rows


def instructor_report(queue: Queue) -> str:
    """Markdown for the instructors: the submissions that failed first, then every one."""
    failed = [e for e in queue.entries if e.status == FAILED]
    lines = ["# Feedback on submit", "",
             "Written by the hub's feedback-on-submit service (docs/HUB.md) after each change.",
             "The class report, with every student's latest result and feedback page, is "
             "`on-submit/report.html`.", ""]
    if failed:
        lines += ["## Could not be graded on submit", "",
                  "Collect, grade and release these by hand (the formgrader, or "
                  "`python -m autograder grade submitted --students ID`); the reason is beside "
                  "each.", ""]
        lines += [f"- {e.student}, {e.lesson}, submitted {utc(e.seen)}: {e.note}"
                  for e in failed]
        lines.append("")
    lines += ["## Every submission", "", "| Student | Lesson | Seen | Status | Score | Note |",
              "|---|---|---|---|---|---|"]
    for e in sorted(queue.entries, key=lambda e: (e.seen, e.name), reverse=True):
        status = e.status + (" (late)" if e.late else "")
        note = e.note.replace("|", "/")
        lines.append(f"| {e.student} | {e.lesson} | {utc(e.seen)} | {status} | {e.score} | "
                     f"{note} |")
    return "\n".join(lines) + "\n"


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
            (json.dumps(student_status(queue, student)), gid)
    files[settings.course_dir / REPORT_FILE] = \
        (instructor_report(queue), grp.getgrnam(settings.instructors_group).gr_gid)
    for path, (text, gid) in files.items():
        if written.get(path) != text:
            _write(path, text, gid, 0o640)
            written[path] = text


# --------------------------------------------------------------------------------------------
# The service

def inbound_names(settings: ClassSettings) -> list[str]:
    try:
        return os.listdir(settings.exchange_dir / settings.course_id / "inbound")
    except OSError:
        return []


def serve(settings: ClassSettings, python: Path, poll: float = 2.0) -> None:
    """Watch, grade and release until SIGTERM (JupyterHub stopping its services)."""
    require_for_grading(settings, python)
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
        added = queue.observe(inbound_names(settings), time.time())
        entry = queue.next_ready(time.time(), settings.on_submit)
        if added or entry:
            queue.save()
        if entry is not None:
            work(queue, entry, steps)
            if stopping and entry.status != DONE:  # stopped half-way: that step runs again
                entry.status, entry.failures = PENDING, max(0, entry.failures - 1)
                queue.save()
            if entry.status == FAILED:
                print(f"coursehub.onsubmit: {entry.student}'s {entry.lesson} could not be "
                      f"graded: {entry.note}", flush=True)
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
