"""Feedback on submit's steps (coursehub.onsubmit): collect, grade and release a submission,
each as the account `nobody` with the instructors' group, in the course folder; and what a
grading leaves, filed per student."""

from __future__ import annotations

import csv
import datetime
import io
import json
import os
import re
import select
import signal
import subprocess
import time
from pathlib import Path

from autograder.intake.safe_copy import Refused, read_small
from autograder.text import one_line
from coursehub.settings import HUB_DIR, USERNAME_PATTERN, ClassSettings
from coursehub.state import as_nobody
from coursehub.submitqueue import SUPERSEDED, Entry, claimed_time

MAX_PAGE_BYTES = 64 << 20  # a feedback page filed in a student's result folder
STEP_TIMEOUT = 3600  # seconds; grading has its own per-notebook limit well below this
# Seconds one notebook may run when graded on submit (the instructors' own grading allows
# 600): a correct lesson runs in well under a minute, and a notebook that idles holds a slot.
SUBMIT_NOTEBOOK_TIMEOUT = 180
# Notebooks of one batch graded at once (the grading command's workers): a notebook that idles
# holds one of them, not the service.
GRADING_SLOTS = max(2, min(8, (os.cpu_count() or 2) // 2))
# Characters of one student's collect or release log that the exchange step reports (its
# beginning and its end): the batch's report is one line of JSON the service reads whole, and
# a student's log grows with every folder of theirs (or named for them) that is refused.
MAX_EXCHANGE_LOG = 16 << 10
MAX_EXCHANGE_REPLY = 8 << 20  # that line, in characters; JSON escapes a character in 12 at most

class Steps:
    """Runs collect, grade and release for one submission, each as `nobody` with the
    instructors' group, in the course folder. Each method returns an error message, or ""."""

    def __init__(self, settings: ClassSettings, python: Path, tick=None, poll: float = 2.0):
        self.settings = settings
        self.python = python
        self.current: subprocess.Popen | None = None
        # The resident grader (autograder.dispatch.resident): started at the first grading,
        # kept with its workers warm, started again if it dies; it ends with the service.
        self.resident: subprocess.Popen | None = None
        self.stopping = False
        self.tick, self.poll = tick, poll  # called every `poll` seconds while a step runs
        # The last exchange step's seconds on each student (what a collect that comes to
        # nothing charges them: coursehub.onsubmit.work).
        self.exchange_seconds: dict[str, float] = {}

    def _env(self, env: dict[str, str] | None = None) -> dict[str, str]:
        return {"PATH": f"{self.python.parent}:/usr/bin:/bin", "HOME": "/nonexistent",
                "PYTHONSAFEPATH": "1", "LANG": "C.UTF-8", **(env or {})}

    def _run(self, args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
        if self.stopping:
            return 1, "the service is stopping"
        if args[:3] == ["-m", "autograder", "grade"] and env is None:
            return self._grade(args[2:])
        settings = self.settings
        self.current = subprocess.Popen([str(self.python), *args], cwd=settings.course_dir,
                                        env=self._env(env), preexec_fn=as_nobody(settings),
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True, start_new_session=True)
        ends = time.monotonic() + STEP_TIMEOUT
        try:
            while True:  # the service goes on noticing submissions while a step runs
                try:
                    output, _ = self.current.communicate(timeout=min(
                        self.poll, max(0.0, ends - time.monotonic())))
                    break
                except subprocess.TimeoutExpired:
                    if time.monotonic() >= ends:
                        os.killpg(self.current.pid, signal.SIGKILL)
                        output, _ = self.current.communicate()
                        output += f"\n(stopped after {STEP_TIMEOUT} s)"
                        break
                    if self.tick is not None:
                        self.tick()
        finally:
            code, self.current = self.current.returncode, None
        return code, output

    def _grade(self, argv: list[str]) -> tuple[int, str]:
        """The grading command `python -m autograder grade ...`, run by the resident grader
        (as the command would run it, as `nobody` with the instructors' group, in the course
        folder and the service's cgroup); asked once more when it died without an answer."""
        for _ in range(2):
            if self.stopping:
                return 1, "the service is stopping"
            if self.resident is None or self.resident.poll() is not None:
                self.resident = subprocess.Popen(
                    [str(self.python), "-m", "autograder.dispatch.resident",
                     "--jobs", str(GRADING_SLOTS)], cwd=self.settings.course_dir,
                    env=self._env(), preexec_fn=as_nobody(self.settings),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
            reply = self._ask(json.dumps(argv).encode() + b"\n")
            if reply is not None:
                return reply
        return 1, "the resident grader stopped while grading (see the hub's log)"

    def _ask(self, request: bytes) -> tuple[int, str] | None:
        """The resident grader's answer to `request` (noticing submissions meanwhile), or
        None when it ended without one."""
        resident, answer = self.resident, b""
        ends = time.monotonic() + STEP_TIMEOUT
        try:
            resident.stdin.write(request)
            resident.stdin.flush()
            while not answer.endswith(b"\n"):
                if time.monotonic() >= ends:
                    self._end_resident()
                    return 1, f"(stopped after {STEP_TIMEOUT} s)"
                if select.select([resident.stdout], [], [], self.poll)[0]:
                    chunk = os.read(resident.stdout.fileno(), 1 << 16)
                    if not chunk:
                        raise EOFError
                    answer += chunk
                elif self.tick is not None:
                    self.tick()
            reply = json.loads(answer)
            return int(reply["code"]), str(reply["output"])
        except (OSError, EOFError, ValueError, KeyError, TypeError):
            self._end_resident()
            return None

    def _end_resident(self) -> None:
        resident, self.resident = self.resident, None
        if resident is not None and resident.poll() is None:
            os.killpg(resident.pid, signal.SIGKILL)
        if resident is not None:
            resident.wait()

    def stop(self) -> None:
        """End the step that runs now, and start no other (the service is stopping)."""
        self.stopping = True
        if self.current is not None and self.current.poll() is None:
            os.killpg(self.current.pid, signal.SIGTERM)
        if self.resident is not None and self.resident.poll() is None:
            os.killpg(self.resident.pid, signal.SIGTERM)

    def out(self, entry: Entry) -> Path:
        return self.settings.course_dir / "on-submit" / f"{entry.student}+{entry.lesson}"

    def collect(self, entry: Entry, now: float) -> str:
        return self.collect_many([entry], now)[entry.name]

    def collect_many(self, entries: list[Entry], now: float) -> dict[str, str]:
        """Collect each student's newest submission of a lesson (one process for all: a
        process of nbgrader's own per submission cost seconds each, one after the other, at a
        deadline); each judged by whether it is THIS one (a classmate's folder refused beside
        it is none of this submission's business). When the exchange no longer holds this one
        (removed, or a newer one of theirs was taken), the entry is superseded: nothing is
        graded or counted for it. An error message for each entry, or ""."""
        said = self._exchange("collect", entries)
        errors = {}
        for entry in entries:
            code, output = said[entry.student]
            mine = [line for line in output.splitlines()
                    if "Not collected:" in line and entry.name in line]
            if code or mine:
                errors[entry.name] = one_line(" ".join(mine) or output[-600:], 600)
            elif not self.collected(entry):
                entry.status = SUPERSEDED
                entry.note = "not collected: it is no longer in the exchange, or a newer " \
                    "submission of yours was collected in its place"
                errors[entry.name] = ""
            else:
                errors[entry.name] = self.due_date(entry)
        return errors

    def _exchange(self, step: str, entries: list[Entry]) -> dict[str, tuple[int, str]]:
        """nbgrader's collect or release_feedback of each entry's student (one lesson), in one
        process as nobody (`coursehub.onsubmit exchange`): each student's (status, log)."""
        students = list(dict.fromkeys(entry.student for entry in entries))
        self.exchange_seconds = {}
        code, output = self._run(["-m", "coursehub.onsubmit", "exchange", step,
                                  entries[0].lesson, *students],
                                 env={"PYTHONPATH": str(HUB_DIR / "lib")})
        lines = output.rstrip("\n").rsplit("\n", 1)
        try:  # its last line, written by that process, which runs no student code
            replies = json.loads(lines[-1]) if len(lines[-1]) < MAX_EXCHANGE_REPLY else None
        except ValueError:
            replies = None
        said = {}
        for student in students:
            reply = replies.get(student) if isinstance(replies, dict) else None
            if not (isinstance(reply, dict) and isinstance(reply.get("log"), str)):
                said[student] = (code or 1, output[-600:])
            else:
                said[student] = (0 if reply.get("success") is True else 1, reply["log"])
                if isinstance(reply.get("seconds"), (int, float)):
                    self.exchange_seconds[student] = float(reply["seconds"])
        return said

    def collected(self, entry: Entry) -> bool:
        """Whether the submission collected for the student's lesson is `entry`'s (by the time
        its folder's name gives, which SafeCollect keeps in timestamp_claimed.txt)."""
        from autograder.nbgrader_glue.exchange import CLAIMED_FILE, nbgrader_time, utc_text

        path = self.settings.course_dir / "submitted" / entry.student / entry.lesson / \
            CLAIMED_FILE
        try:
            return read_small(str(path), 1024).strip() == \
                utc_text(nbgrader_time(claimed_time(entry.name)))
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
        return self.grade_many([entry], now)[entry.name]

    def grade_many(self, entries: list[Entry], now: float) -> dict[str, str]:
        """Grade the collected submissions of one lesson (one per student) with one grading
        command, run by the resident grader (its workers warm from earlier batches, reference
        outcomes computed once for the batch's students); then
        give each student's result its own folder, on-submit/<student>+<lesson>, as the class
        report reads it. Sets each entry's score and grading seconds (its own notebook's, and
        its share of the set-up); an error message for each entry, or ""."""
        limits, lesson = self.settings.on_submit, entries[0].lesson
        students = [entry.student for entry in entries]
        out = self.settings.course_dir / "on-submit" / f".batch+{lesson}"
        # nbgrader's submitted/<account>/<lesson>/: never read as an LMS export, whose folder
        # names a student could imitate with the account name they chose at sign-up.
        args = ["-m", "autograder", "grade", "submitted", "--students", *students,
                "--lessons", lesson, "--out", str(out), "--course-root", ".",
                "--layout", "nbgrader",
                "--jobs", str(min(len(entries), GRADING_SLOTS)), "--no-progress",
                "--notebook-timeout", str(SUBMIT_NOTEBOOK_TIMEOUT)]
        deadline = limits.deadline(lesson)
        withhold = not limits.hidden_before_deadline and \
            (deadline is None or now < deadline.timestamp())
        if withhold:
            args.append("--withhold-hidden-checks")
        if limits.cluster:
            args += ["--cluster", limits.cluster]
            if limits.cluster_tls:
                args += ["--cluster-tls", *limits.cluster_tls]
        code, output = self._run(args)
        rows: dict[str, dict] = {}
        try:  # written by the grading step; read without following a link, bounded
            text = read_small(str(out / "grades.csv"), 1 << 20)
            rows = {r.get("student_id"): r for r in csv.DictReader(io.StringIO(text))
                    if r.get("lesson") == lesson and r.get("student_id") in students}
        except (OSError, Refused):
            pass
        if rows:  # each graded student's own folder, written as nobody
            split, said = self._run(["-m", "coursehub.onsubmit", "split", ".", str(out), lesson,
                                     *rows], env={"PYTHONPATH": str(HUB_DIR / "lib")})
            if split:
                print(f"coursehub.onsubmit: results not filed: {one_line(said[-600:])}",
                      flush=True)
        self.class_report()
        seconds = grading_seconds(out / "grading.log", lesson)
        errors = {}
        for entry in entries:
            row = rows.get(entry.student)
            entry.seconds += seconds.get(entry.student, 0.0)
            if code or row is None:
                errors[entry.name] = f"grading ended with status {code}: " + \
                    one_line(output[-600:])
            elif row["status"] != "graded":
                errors[entry.name] = f"{row['status']}: " + \
                    one_line(row.get("reason", "") or output[-400:], 600)
            else:
                entry.score = f"{float(row['score']):g} / {float(row['max_score']):g}"
                entry.withheld = withhold
                errors[entry.name] = ""
        return errors

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
        return self.release_many([entry], now)[entry.name]

    def release_many(self, entries: list[Entry], now: float) -> dict[str, str]:
        """Release the feedback of each entry's student (one lesson), in one process."""
        said = self._exchange("release", entries)
        errors = {}
        for entry in entries:
            code, output = said[entry.student]
            failed = [line for line in output.splitlines() if "Feedback not released" in line]
            errors[entry.name] = one_line(" ".join(failed) or output[-600:], 600) \
                if code or failed else ""
        return errors


def exchange_steps(step: str, lesson: str, students: list[str]) -> dict[str, dict]:
    """In the course folder: nbgrader's `collect LESSON --student ID --update` (the course's
    SafeCollect) or `release_feedback LESSON --student ID` for each of `students`, in this one
    process; each student's {"success", "log", "seconds"}: what that command would have
    logged (bounded_log), and how long it took."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.apps.nbgraderapp import NbGraderApp
    from nbgrader.utils import capture_log, temp_attrs

    app = NbGraderApp()
    app.load_config_file()  # the course's nbgrader_config.py, as the command loads it
    api = NbGraderAPI(config=app.config)
    out = {}
    for student in students:
        began = time.monotonic()
        with temp_attrs(api.coursedir, assignment_id=lesson, student_id=student):
            if step == "collect":
                job = api.exchange.Collect(coursedir=api.coursedir,
                                           authenticator=api.authenticator, parent=api)
                job.update = True
            else:
                job = api.exchange.ReleaseFeedback(coursedir=api.coursedir,
                                                   authenticator=api.authenticator, parent=api)
            result = capture_log(job)
        log = str(result.get("log", "")) + str(result.get("error", ""))
        out[student] = {"success": bool(result.get("success")), "log": bounded_log(log),
                        "seconds": round(time.monotonic() - began, 3)}
    return out


def bounded_log(log: str, limit: int = MAX_EXCHANGE_LOG) -> str:
    """`log` whole when it is at most `limit` characters; else its beginning and its end (a
    quarter and three quarters of `limit`: what a step did last, and why it failed, is at the
    end), with how much was left out between them."""
    if len(log) <= limit:
        return log
    head, tail = limit // 4, limit - limit // 4
    return f"{log[:head]}\n[... {len(log) - head - tail} characters of the log left out ...]\n" \
        f"{log[-tail:]}"


def grading_seconds(log: Path, lesson: str) -> dict[str, float]:
    """Each student's grading seconds in a grading command's grading.log: their notebook's
    own, and an equal share of the set-up (what their hourly budget counts)."""
    try:
        text = read_small(str(log), 8 << 20)
    except (OSError, Refused):
        return {}
    own = {m[1]: float(m[2]) for m in re.finditer(
        rf"^== ({USERNAME_PATTERN.strip('^$')}) / {re.escape(lesson)}: [^\n]*?, "
        r"([\d.]+) s \(", text, re.M)}
    setup = re.search(r"^Set-up [^\n]* took ([\d.]+) s of", text, re.M)
    share = float(setup[1]) / len(own) if setup and own else 0.0
    return {student: seconds + share for student, seconds in own.items()}


def split_results(course: Path, out: Path, lesson: str, students: list[str]) -> None:
    """File each student's result of a grading command's `out` (grades.csv, checks.json,
    feedback page) in <course>/on-submit/<student>+<lesson>, as one grading of theirs alone
    leaves them; nothing is read through a link, and each file is bounded."""
    from autograder.report.class_report import CHECKS_FILE, MAX_CHECKS_BYTES

    text = read_small(str(out / "grades.csv"), 1 << 20)
    rows = list(csv.DictReader(io.StringIO(text)))
    try:  # each check's result and named mistake, which the class report counts
        checks = json.loads(read_small(str(out / CHECKS_FILE), MAX_CHECKS_BYTES))
        records = [r for r in checks.get("results", []) if isinstance(r, dict)] \
            if isinstance(checks, dict) else []
    except (OSError, Refused, ValueError, RecursionError):
        records = []
    for student in students:
        if not re.match(USERNAME_PATTERN, student):
            continue
        folder = course / "on-submit" / f"{student}+{lesson}"
        if folder.is_symlink():
            folder.unlink()
        (folder / "feedback" / student).mkdir(parents=True, exist_ok=True)
        mine = [r for r in rows if r.get("student_id") == student and r.get("lesson") == lesson]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(mine)
        replace_file(folder / "grades.csv", buffer.getvalue())
        replace_file(folder / CHECKS_FILE, json.dumps({"results": [
            r for r in records if r.get("student_id") == student and r.get("lesson") == lesson]}))
        page = out / "feedback" / student / f"{lesson}.html"
        try:
            replace_file(folder / "feedback" / student / f"{lesson}.html",
                     read_small(str(page), MAX_PAGE_BYTES))
        except FileNotFoundError:
            pass


def replace_file(path: Path, text: str, mode: int = 0o660, group: int | None = None,
                 times_ns: tuple[int, int] | None = None) -> None:
    """Write `path` whole, with `mode` (and `group`; and access and change times, as
    os.utime's ns), through a new file that no link can redirect (the course folder is the
    instructors' to change)."""
    temporary = path.with_name(f".{path.name}.tmp")
    if os.path.lexists(temporary):
        os.unlink(temporary)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        if group is not None:
            os.fchown(handle.fileno(), -1, group)
        os.fchmod(handle.fileno(), mode)
    if times_ns is not None:
        os.utime(temporary, ns=times_ns)
    os.replace(temporary, path)


def submitted_after(stamp: Path, deadline: datetime.datetime) -> bool:
    """Whether the collected submission's timestamp.txt (the exchange's clock, written by
    SafeCollect) is past `deadline`."""
    submitted = datetime.datetime.strptime(read_small(str(stamp), 1024).strip(),
                                           "%Y-%m-%d %H:%M:%S.%f %Z")
    return submitted.replace(tzinfo=datetime.timezone.utc) > deadline
