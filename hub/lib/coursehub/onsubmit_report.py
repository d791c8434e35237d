"""Feedback on submit's class report, <course>/on-submit/report.html, and a graded submission's
full feedback made again (hub/lib/coursehub/onsubmit.py runs both as `nobody`).

The report is the class report `python -m autograder grade` writes (autograder/report/), made
from the same records: each grading on submit leaves its grades.csv and checks.json (each
check's visibility, result and named mistake) in <course>/on-submit/<student>+<lesson>/, and
the report joins every student's latest of each lesson. Named mistakes and the visible and
hidden checks' pass rates are shown as a local grading shows them; a lesson graded before its
records were kept falls back to its test cells' grades in the gradebook.
"""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path

from autograder.intake.safe_copy import Refused, read_small
from coursehub.settings import USERNAME_PATTERN
from coursehub.submitsteps import replace_file

MAX_PAGE_BYTES = 64 << 20  # a feedback page copied beside the class report


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
    replace_file(target, text, 0o660, times_ns=(info.st_atime_ns, info.st_mtime_ns))


def _checks(folder: Path, student: str, lesson: str) -> list[dict]:
    """The checks its grading recorded for `student`'s `lesson` (none if it kept none)."""
    from autograder.report.class_report import CHECKS_FILE, MAX_CHECKS_BYTES, read_checks

    try:  # written by the grading step; read without following a link, bounded
        text = read_small(str(folder / CHECKS_FILE), MAX_CHECKS_BYTES)
        return read_checks(text).get((student, lesson), [])
    except (OSError, Refused, ValueError) as err:
        if not isinstance(err, FileNotFoundError):
            print(f"coursehub.onsubmit: {folder / CHECKS_FILE} left out: {err}", flush=True)
        return []


def class_report(course: Path) -> Path:
    """The class report of the submissions graded on submit, <course>/on-submit/report.html
    (and items.csv), as `python -m autograder grade` writes one: each student's latest result
    of each lesson (the grades.csv and checks.json of its latest grading), its feedback page
    as the student last got it (nbgrader's feedback/ folder) beside the report; returns the
    page's path."""
    from autograder.nbgrader_glue.inproc import course_config
    from autograder.records import Result
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
        mine = [Result.of_row(dict(row, checks=_checks(folder, student, lesson)))
                for row in csv.DictReader(io.StringIO(text))
                if row.get("student_id") == student and row.get("lesson") == lesson]
        rows += mine
        for page in (Path(course) / "feedback" / student / lesson / f"{lesson}.html",
                     folder / "feedback" / student / f"{lesson}.html"):
            if mine and page.is_file() and not page.is_symlink():
                _copy_page(page, out / "feedback" / student / f"{lesson}.html")
                break
    with_checks = {row.lesson for row in rows if row.checks}
    cells = gradebook_cell_grades(course_config(Path(course)),
                                  [row for row in rows if row.lesson not in with_checks])
    return write_report(out, rows, lessons=known, cell_grades=cells,
                        title="Class report: feedback on submit",
                        note="Each student's latest submission of each lesson, graded on "
                             "submit; rewritten after each grading.")
