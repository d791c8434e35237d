"""A grading run's outputs: the summary, the progress bar, grades.csv, grading.log and the
class report (OUT/report.html, OUT/items.csv)."""

from __future__ import annotations

import csv
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from autograder.text import one_line, spreadsheet_cell
from autograder.nbgrader_glue.inproc import course_config
from autograder.plan import Findings
from autograder.release import COURSE_ROOT
from autograder.records import STATUSES
from autograder.tasks import Result

CSV_HEADER = ["student_id", "lesson", "score", "max_score", "status", "reason"]


@dataclass
class Report:
    """What a run did: its rows, its time, and what it wrote where."""

    results: list[Result]
    seconds: float
    out: Path
    skipped: list[str] = field(default_factory=list)
    jobs: int = 1
    engine: str = "fork"
    setup_seconds: float = 0.0  # reading and checking the class, before the first notebook
    findings: Findings | None = None  # what came of reading SUBMISSIONS (layout, roster, ...)
    warnings: list[str] = field(default_factory=list)  # e.g. limits weaker than asked
    # (student, lesson, what): hand-given grades of an earlier notebook, dropped for a new one
    manual_dropped: list[tuple[str, str, str]] = field(default_factory=list)
    course_root: Path = COURSE_ROOT

    def counts(self) -> Counter:
        return Counter(r.status for r in self.results)

    def summary(self, selection: bool = True) -> str:
        """What the run did, in a few lines; `selection`: with what it chose in submitted/
        (said already on a terminal, when grading began)."""
        counts = self.counts()
        notebooks = sum(counts[s] for s in ("graded", "invalid", "timeout", "error"))
        students = len({r.student_id for r in self.results if r.student_id})
        failed = counts["invalid"] + counts["timeout"] + counts["error"]
        per = f", {self.seconds / notebooks:.2f} s a notebook" if notebooks else ""
        lines = [f"Graded {counts['graded']} of {notebooks} notebooks from {students} students "
                 f"in {self.seconds:.1f} s ({self.engine} engine, {self.jobs} "
                 f"worker{'s' if self.jobs != 1 else ''}{per}); {failed} could not be graded.",
                 "  " + ", ".join(f"{s} {counts[s]}" for s in STATUSES)]
        lines += self.warnings
        if self.skipped:
            lines.append(f"  {len(self.skipped)} files skipped (see grading.log)")
        if self.findings is not None:
            lines += self.findings.summary_lines(selection)
        if self.manual_dropped:
            count = len(self.manual_dropped)
            lines.append(f"  Manual grades dropped for {count} new submission"
                         f"{'s' if count != 1 else ''}: they were given to an earlier notebook "
                         "(see grading.log)")
        lines.append(f"Grades: {self.out / 'grades.csv'}   feedback: {self.out / 'feedback'}   "
                     f"log: {self.out / 'grading.log'}")
        if (self.out / "report.html").is_file():
            lines.append(f"Class report: {self.out / 'report.html'}   items: "
                         f"{self.out / 'items.csv'}")
        lines.append(f"Gradebook: {formgrader_hint(self.course_root)}")
        return "\n".join(lines)


def formgrader_hint(course_root: Path) -> str:
    """Where the formgrader shows the gradebook of `course_root`: on the class hub (a terminal
    of an instructor's server), its page; else the make target."""
    if os.environ.get("JUPYTERHUB_USER"):
        base = os.environ.get("JUPYTERHUB_BASE_URL", "/").rstrip("/")
        return f"the formgrader shows it at {base}/hub/user-redirect/formgrader."
    course = "" if course_root.resolve() == COURSE_ROOT.resolve() else f" COURSE={course_root}"
    return f"`make formgrader{course}` opens nbgrader's formgrader on it."


class Progress:
    """A one-line progress bar on a terminal; elsewhere (CI, a log file, a pipe) a plain line
    at most once a minute, so that a long run is not mistaken for a hung one; nothing at all
    when `enabled` is False (--no-progress)."""

    PLAIN_EVERY = 60.0  # seconds between plain lines

    def __init__(self, total: int, enabled: bool | None = None, stream=None,
                 clock=time.monotonic) -> None:
        self.stream = stream or sys.stderr
        self.quiet = enabled is False
        if enabled is None:
            ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
            enabled = not ci and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.enabled, self.total, self.done = enabled, total, 0
        self.clock = clock
        self.started = self.said = clock()
        self.counts: Counter = Counter()

    def update(self, result: Result) -> None:
        self.done += 1
        self.counts[result.status] += 1
        if not self.total:
            return
        now = self.clock()
        elapsed = now - self.started
        bad = self.done - self.counts["graded"]
        if not self.enabled:
            if not self.quiet and now - self.said >= self.PLAIN_EVERY and self.done < self.total:
                self.said = now
                self.stream.write(f"{self.done}/{self.total} notebooks done, {bad} not graded, "
                                  f"{elapsed:.0f} s\n")
                self.stream.flush()
            return
        width = 30
        filled = int(width * self.done / self.total)
        eta = elapsed / self.done * (self.total - self.done)
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                          f"notebooks, {bad} not graded, {elapsed:.0f} s, ~{eta:.0f} s left ")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled and self.total:
            self.stream.write("\n")
            self.stream.flush()


def write_class_report(out: Path, results: list[Result], chosen: list[str], root: Path,
                        findings: Findings, skipped: list[str],
                        manual_dropped: list[tuple[str, str, str]] = ()) -> None:
    """OUT/report.html and OUT/items.csv (a failure there is logged, never fatal)."""
    from autograder.report.class_report import checks_of, gradebook_cell_grades, write_report

    try:
        with_checks = {r.lesson for r in results if checks_of(r)}
        cells = gradebook_cell_grades(course_config(root),
                                      [r for r in results if r.lesson not in with_checks])
        note = f"Read as: {findings.read_as}." if findings.read_as else ""
        write_report(out, results, lessons=chosen, cell_grades=cells,
                     roster=findings.roster_report, note=note,
                     manual_dropped=list(manual_dropped))
    except Exception as err:  # noqa: BLE001 (grades and feedback are written already)
        skipped.append(one_line(f"report.html: not written ({type(err).__name__}: {err})"))


def write_grades(path: Path, results: list[Result]) -> None:
    """OUT/grades.csv: one row per result, each cell one line that no spreadsheet evaluates."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_HEADER)
        writer.writeheader()
        for result in results:
            row = {key: spreadsheet_cell(one_line(value)) if isinstance(value, str) else value
                   for key, value in result.row().items()}
            row["score"] = f"{row['score']:g}"
            row["max_score"] = f"{row['max_score']:g}"
            writer.writerow(row)


def write_log(path: Path, report: Report) -> None:
    """OUT/grading.log: the summary, skipped files, and each row with what nbgrader said."""
    lines = [report.summary(),
             f"Set-up (reading, checking and importing the class) took "
             f"{report.setup_seconds:.1f} s of {report.seconds:.1f} s.", ""]
    if report.skipped:
        lines += ["Skipped files:", *[f"  {one_line(item)}" for item in report.skipped], ""]
    if report.manual_dropped:
        lines += ["Manual grades dropped (given to an earlier notebook than the one graded now):",
                  *[f"  {one_line(student)} / {lesson}: manual grades dropped: {one_line(what)}"
                    for student, lesson, what in report.manual_dropped], ""]
    for result in report.results:
        lines.append(f"== {one_line(result.student_id) or '?'} / {result.lesson or '?'}: "
                     f"{result.status}, "
                     f"{result.score:g}/{result.max_score:g}, {result.seconds:.2f} s "
                     f"(cells {result.run_seconds:.2f} s, scenarios {result.observe_seconds:.2f} s, "
                     f"shared {result.shared_seconds:.2f} s)")
        if result.reason:
            lines.append(f"   {one_line(result.reason)}")
        for line in result.log.splitlines():
            if "not recognized by" in line:  # traitlets noise about shared config sections
                continue
            if line.startswith(("WARNING", "ERROR")) or not line[:1].isupper():
                lines.append(f"   {one_line(line)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")