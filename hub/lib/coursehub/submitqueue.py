"""Feedback on submit's queue (coursehub.onsubmit): which inbound folders are queued, in what
order they are graded, what each student may use, and what students and instructors are told.

Inbound is writable by every student, so nothing in a folder's name is believed on its own: a
folder is queued only when its owner (lstat: no link followed) is the account its name gives,
and its lesson is one the instructor released. Any other folder is refused, listed once in the
instructors' report and never counted against anyone. Each student has at most
MAX_QUEUED_PER_STUDENT submissions waiting, a budget of grading time per hour
(GRADING_SECONDS_PER_HOUR) besides the class's per_hour and per_lesson limits, and the next
submission graded is the oldest of the student who used the least grading time in the last hour.
"""

from __future__ import annotations

import datetime
import heapq
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from coursehub.settings import USERNAME_PATTERN, OnSubmit

HOUR = 3600.0
PENDING, WORKING, WAITING = "pending", "working", "waiting"
DONE, FAILED, SUPERSEDED = "done", "failed", "superseded"
MAX_QUEUED_PER_STUDENT = 12  # a student's submissions not yet graded; more wait in inbound
GRADING_SECONDS_PER_HOUR = 900.0  # a student's grading time on submit in any 60 minutes
GRADE_BATCH = 16  # collected submissions of a lesson graded by one warm grading command
# Seconds a collected submission waits for others to join its batch: however many folders
# keep coming to be collected, it is graded then.
COLLECT_WINDOW = 60.0
MAX_REFUSED_SHOWN = 50  # refused folders named in the instructors' report (the rest counted)
_LESSON = re.compile(r"^[A-Za-z0-9_.-]+$")


def utc(moment: float) -> str:
    return datetime.datetime.fromtimestamp(moment, datetime.timezone.utc) \
        .strftime("%Y-%m-%d %H:%M:%S UTC")


def code(text: str) -> str:
    """`text` (a student's, or what a command printed about it) as inline Markdown code that
    nothing in it can end: on one line, in a run of backticks longer than any inside it, with
    the table's | escaped (GitHub's tables split cells on it even inside code)."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


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
    started: float | None = None  # when its grading began: what the hourly limits count
    until: float | None = None  # waiting: when it may be graded (None: the instructor grades)
    note: str = ""
    late: bool = False
    score: str = ""
    withheld: bool = False  # its released feedback left the hidden checks out
    seconds: float = 0.0  # how long its grading took: what the hourly budget counts
    spent: float = 0.0  # the service's seconds on collects of it that came to nothing
    spent_at: float | None = None  # when the last of them began (counted as grading time is)
    collected_at: float | None = None  # when it was collected: it waits COLLECT_WINDOW at most


def parse_name(name: str) -> tuple[str, str] | None:
    """(student, lesson) of an inbound folder's name, or None for a name submit never writes."""
    parts = name.split("+")
    if len(parts) != 4 or not re.match(USERNAME_PATTERN, parts[0]) or \
            not _LESSON.match(parts[1]):
        return None
    return parts[0], parts[1]


def claimed_time(name: str) -> str:
    """The time a submission's folder name gives (its third part), as written."""
    return name.split("+")[2]


@dataclass
class Queue:
    """The service's queue, kept in a JSON file written whole (atomically) after each change.
    `refused`: inbound folders not queued, with why (those still in inbound)."""
    path: Path
    entries: list[Entry] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    # When the last collect began (not saved): what was ready then, it took, or took a
    # classmate's submission of the same lesson and the rest waits its turn.
    collect_began: float = float("-inf")

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
        return cls(path, entries, dict(data.get("refused", {})))

    def save(self) -> None:
        temporary = self.path.with_name(f".{self.path.name}.tmp")
        # Of the refused folders, those the instructors' report names: a flood of them is not
        # written again at every save (after a restart the rest are found, and refused, again).
        refused = {n: self.refused[n] for n in heapq.nsmallest(MAX_REFUSED_SHOWN, self.refused)}
        temporary.write_text(json.dumps({"entries": [asdict(e) for e in self.entries],
                                         "refused": refused}, indent=1))
        os.chmod(temporary, 0o600)
        os.replace(temporary, self.path)

    def observe(self, found: dict[str, str], now: float,
                lessons: set[str] | None = None) -> list[Entry]:
        """Queue the submissions not seen before; returns them. `found`: each inbound folder's
        name -> the account that owns it ("" when it is not a folder: a link, a file); `lessons`:
        the lessons released (None: any). A folder of a name submit never writes, owned by
        another account than its name's, or of a lesson not released is refused (self.refused,
        which forgets folders gone from inbound); a student with MAX_QUEUED_PER_STUDENT
        submissions waiting has the rest left in inbound until one is done."""
        known = {entry.name for entry in self.entries}
        self.refused = {n: why for n, why in self.refused.items() if n in found}
        waiting: dict[str, int] = {}
        for entry in self.entries:
            if entry.status in (PENDING, WORKING, WAITING):
                waiting[entry.student] = waiting.get(entry.student, 0) + 1
        added = []
        for name in sorted(set(found) - known - set(self.refused)):
            why = self.refusal(name, found[name], lessons)
            if why:
                self.refused[name] = why
                continue
            student, lesson = parse_name(name)
            if waiting.get(student, 0) >= MAX_QUEUED_PER_STUDENT:
                continue
            waiting[student] = waiting.get(student, 0) + 1
            added.append(Entry(name, student, lesson, seen=now))
        self.entries += added
        return added

    @staticmethod
    def refusal(name: str, owner: str, lessons: set[str] | None) -> str:
        """Why the inbound folder `name`, owned by `owner`, is not queued ("" when it is)."""
        parsed = parse_name(name)
        if parsed is None:
            return "its name is not one nbgrader's submit writes"
        if not owner:
            return "it is not a folder (a link or a file)"
        if owner != parsed[0]:
            return f"it is named for {parsed[0]} but belongs to {owner}"
        if lessons is not None and parsed[1] not in lessons:
            return "no lesson of that name is released"
        return ""

    def used(self, student: str, now: float, but: Entry | None = None) -> float:
        """Seconds of grading of `student`'s submissions begun in the hour before `now`, and
        of collecting those that came to nothing (refused, or gone)."""
        return sum(seconds for moment, seconds in self.spending(student, but)
                   if now - HOUR < moment <= now)

    def spending(self, student: str, but: Entry | None = None) -> list[tuple[float, float]]:
        """(when, seconds) of each grading of `student`'s submissions, and of each collect of
        theirs that came to nothing."""
        mine = [e for e in self.entries if e.student == student and e is not but]
        return [(e.started, e.seconds) for e in mine if e.started is not None] + \
            [(e.spent_at, e.spent) for e in mine if e.spent_at is not None]

    def next_ready(self, now: float, limits: OnSubmit) -> Entry | None:
        """Settle who waits and whose older submissions a newer one replaces; the submission
        to work on next, or None. A release runs first; then each ready submission is collected
        (of the students with one ready, the one who used the least grading time in the last
        hour first, their oldest), and the collected ones are graded together, GRADE_BATCH of
        a lesson at a time, once nothing else is ready to collect or a batch is full."""
        in_progress = [e for e in self.entries if e.status in (PENDING, WORKING)
                       and e.step != "collect"]
        finishing = [e for e in in_progress if e.step != "grade"]
        if finishing:
            return finishing[0]
        busy = {(e.student, e.lesson) for e in in_progress}  # its collected copy is in use
        newest: dict[tuple[str, str], Entry] = {}
        for entry in sorted(self.entries, key=lambda e: (e.seen, e.name)):
            if entry.status in (PENDING, WAITING) and entry.step == "collect":
                key = (entry.student, entry.lesson)
                if key in newest:
                    newest[key].status, newest[key].note = SUPERSEDED, \
                        "a newer submission of the same lesson replaced it"
                newest[key] = entry
        ready = []
        for key, entry in newest.items():
            until, why = self.wait(entry, now, limits)
            if why:
                entry.status, entry.until, entry.note = WAITING, until, why
            else:
                entry.status, entry.until, entry.note = PENDING, None, ""
                if key not in busy:
                    ready.append(entry)
        collected = [e for e in in_progress if e.status == PENDING]
        waited = [now - (e.collected_at if e.collected_at is not None else -HOUR)
                  for e in collected]
        # Only latecomers ready (they came while the last collect ran, which took all that
        # was ready when it began): grade what it collected first; they are collected with
        # the next batch (else a slow collect that finds new ones each time would hold the
        # grading back for COLLECT_WINDOW).
        latecomers = all(e.seen > self.collect_began for e in ready)
        if collected and (len(collected) >= GRADE_BATCH or not ready or latecomers or
                          max(waited) >= COLLECT_WINDOW):
            return collected[0]
        if not ready and not in_progress:
            ready = self.past_deadline(now, limits)
        return min(ready, key=lambda e: (self.used(e.student, now), e.seen, e.name),
                   default=None)

    def batch_of(self, entry: Entry) -> list[Entry]:
        """`entry` and the other submissions of its lesson that its step takes with it: the
        collected ones graded with it; the graded ones whose feedback is released with it;
        the ones ready to collect (as next_ready left them: not waiting, and no copy of that
        student's lesson in use), one per student, so that the per-hour limit, which counts a
        collected submission as graded, sees each student's one before their next."""
        if entry.step not in ("collect", "grade", "release"):
            return [entry]
        busy = {(e.student, e.lesson) for e in self.entries
                if e.status in (PENDING, WORKING) and e.step != "collect"}
        batch, students = [entry], {entry.student}
        for e in sorted(self.entries, key=lambda e: (e.seen, e.name)):
            if e is entry or e.step != entry.step or e.status != PENDING or \
                    e.lesson != entry.lesson or len(batch) >= GRADE_BATCH:
                continue
            if entry.step == "collect" and (e.student in students or
                                            (e.student, e.lesson) in busy):
                continue
            batch.append(e)
            students.add(e.student)
        return batch

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
        graded = [e for e in self.entries if e.student == entry.student and e is not entry and
                  e.started is not None]
        collected = [e for e in self.entries if e.student == entry.student and e.started is None
                     and e.step == "grade" and e.status in (PENDING, WORKING)]
        of_lesson = [e for e in graded + collected if e.lesson == entry.lesson]
        if len(of_lesson) >= limits.per_lesson:
            deadline = limits.deadline(entry.lesson)
            when = f"after the deadline ({utc(deadline.timestamp())})" if deadline else \
                "when they grade the class"
            return None, (f"{limits.per_lesson} submissions of this lesson were graded on "
                          "submit, the most the class allows; your instructor grades your last "
                          f"submission {when}")
        recent = sorted([e.started for e in graded if now - HOUR < e.started <= now] +
                        [now] * len(collected))  # collected ones are graded now
        if len(recent) >= limits.per_hour:
            until = recent[-limits.per_hour] + HOUR
            return until, (f"the class grades at most {limits.per_hour} submissions of yours "
                           f"an hour; this one joins the grading queue at {utc(until)}")
        window = sorted(item for item in self.spending(entry.student, entry)
                        if now - HOUR < item[0] <= now)
        used = sum(seconds for _, seconds in window)
        if used >= GRADING_SECONDS_PER_HOUR:
            for moment, seconds in window:  # the budget frees as each leaves the hour
                used -= seconds
                if used < GRADING_SECONDS_PER_HOUR:
                    until = moment + HOUR
                    break
            minutes = round(GRADING_SECONDS_PER_HOUR / 60)
            return until, (f"your submissions took {minutes} minutes of grading in the last "
                           "hour, the most the class gives one student; this one joins the "
                           f"grading queue at {utc(until)}")
        return None, ""

    def ahead_of(self, entry: Entry, now: float) -> int:
        """How many submissions are graded before `entry` as the queue stands (one being graded
        counts): those collected already, then those the fair order puts first."""
        if entry.status not in (PENDING, WORKING) or entry.step != "collect":
            return 0
        mine = (self.used(entry.student, now), entry.seen, entry.name)
        return sum(e.step != "collect" or e.status == WORKING or
                   (self.used(e.student, now), e.seen, e.name) < mine
                   for e in self.entries if e.status in (PENDING, WORKING) and e is not entry)


# --------------------------------------------------------------------------------------------
# What students and instructors see

WITHHELD_SCORE = ("this score counts the hidden checks too, though the hidden checks' results "
                  "come after the deadline")


def student_status(queue: Queue, student: str, now: float | None = None) -> list[dict]:
    """For each lesson the student submitted, their newest submission's state, in words, with
    when it was received (`received`, seconds since 1970, for the page to show in the reader's
    own time)."""
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
                text += f" ({WITHHELD_SCORE})"
        elif entry.step == "feedback":
            text = "graded; the feedback with the hidden checks' results is on its way"
        elif entry.status == WAITING:
            text = f"waiting: {entry.note}"
        elif entry.status == FAILED:
            text = "could not be graded on submit; your instructor has been told"
        elif entry.step == "release" and entry.status in (PENDING, WORKING):
            text = f"graded: {entry.score}; its feedback is on its way to the Assignments tab"
        elif entry.status == WORKING and entry.step != "collect":
            text = f"received at {utc(entry.seen)}, being graded now"
        else:
            ahead = queue.ahead_of(entry, entry.seen if now is None else now)
            text = f"received at {utc(entry.seen)}, grading: {ahead} ahead of you"
        rows.append({"lesson": lesson, "submitted": utc(entry.seen), "received": entry.seen,
                     "status": text})
    return rows


def instructor_report(queue: Queue) -> str:
    """Markdown for the instructors: the submissions that failed first, then the folders
    refused, then every submission; whatever a student chose (names, what a command printed
    about their submission) is quoted as code."""
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
        lines += [f"- {code(e.student)}, {code(e.lesson)}, submitted {utc(e.seen)}: "
                  f"{code(e.note)}" for e in failed]
        lines.append("")
    if queue.refused:
        lines += ["## Folders in inbound that were not queued", "",
                  "Nobody's submission: no one was graded or charged for these. A folder named "
                  "for one student but made by another is a classmate's doing; remove it from "
                  "the exchange's inbound folder.", ""]
        shown = sorted(queue.refused)[:MAX_REFUSED_SHOWN]
        lines += [f"- {code(name)}: {code(queue.refused[name])}" for name in shown]
        if len(queue.refused) > len(shown):
            lines.append(f"- and {len(queue.refused) - len(shown)} more")
        lines.append("")
    lines += ["## Every submission", "", "| Student | Lesson | Seen | Status | Score | Note |",
              "|---|---|---|---|---|---|"]
    for e in sorted(queue.entries, key=lambda e: (e.seen, e.name), reverse=True):
        status = e.status + (" (late)" if e.late else "")
        note = code(e.note) if e.note else ""
        lines.append(f"| {code(e.student)} | {code(e.lesson)} | {utc(e.seen)} | {status} | "
                     f"{e.score} | {note} |")
    return "\n".join(lines) + "\n"
