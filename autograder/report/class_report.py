"""The class report a grading run writes: OUT/report.html and OUT/items.csv.

`report.html` is one self-contained page (figures inlined as PNG, styles inline, no script, a
Content-Security-Policy that lets it load nothing): it opens offline and from an email. It
shows the score distribution per lesson, each exercise's pass rates on its visible and hidden
checks, the most frequent named mistakes per exercise with their counts, the exercises most
students fail, the submissions that need an instructor (timeouts, errors, edited test cells),
a row per student (each lesson's score linked to its feedback page, and why the student needs
a look; those who do first), the files attributed to no student, and, with a roster, unknown
ids and roster students who submitted nothing. The page is templates/report.html.j2 (every
value escaped); its figures are drawn by figures.py.

The report takes `autograder.records.Result`s (a row of grades.csv read back as a dict, with
its `checks` beside it, is made one at the door: `Result.of_row`). Per-check results come
from each result's `checks` (`CheckRow`s: exercise, cell, scenario, visible, passed, mistake),
so rows built by hand and results of any engine work alike. A lesson none of whose results carry checks falls back
to its test cells' grades in the gradebook (one item per test cell, visible and hidden
together).

`items.csv` has a row per check (or test cell): lesson, exercise, cell, check, visibility
(visible, hidden, or cell), attempts, passed, pass_rate, mistakes (`name: count; ...`).

`checks.json` keeps the per-check records the page was made from (each graded result's student,
lesson and checks), so that a report over several runs (the class hub's feedback on submit
grades one submission a run) is made from the same records as one run's (read_checks).
"""

from __future__ import annotations

import csv
import datetime
import html
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from coursekit.notebook import exercise_of

from autograder.intake.jsonscan import scan
from autograder.records import CHECK_KEYS, STATUSES, CheckRow, Result, check_row
from autograder.text import one_line, spreadsheet_cell
from autograder.report.figures import pass_rate_bars, score_histograms
from autograder.report.tally import Exercise, Item

ITEMS_HEADER = ["lesson", "exercise", "cell", "check", "visibility", "attempts", "passed",
                "pass_rate", "mistakes"]
CHECKS_FILE = "checks.json"
MAX_CHECKS_BYTES = 16 << 20  # checks.json read back: a class's lesson is far below this
MAX_CHECKS_DEPTH = 6  # {"results": [{"checks": [{...}]}]}: four levels
_EDITED = re.compile(r"had been edited", re.IGNORECASE)


# --------------------------------------------------------------------------------------------
# Rows, whatever their source

def _results(results: Iterable[Result | dict]) -> list[Result]:
    """The results, each a Result (a grades.csv row read back as a dict is made one)."""
    return [Result.of_row(result) for result in results]


def _row(result: Result) -> dict:
    return {"student_id": str(result.student_id or ""), "lesson": str(result.lesson or ""),
            "score": float(result.score or 0.0), "max_score": float(result.max_score or 0.0),
            "status": str(result.status or ""), "reason": one_line(result.reason or "")}


def checks_of(result: Result) -> list[CheckRow]:
    """The per-check rows of a result (none before the engine records them)."""
    return [row for check in result.checks or [] for row in [check_row(check)] if row]


def needs_review(row: dict) -> str | None:
    """Why a submission needs an instructor: a timeout, an error, or edited test cells."""
    if row["status"] == "timeout":
        return "timeout"
    if row["status"] == "error":
        return "error"
    if row["status"] == "graded" and _EDITED.search(row["reason"]):
        return "edited cells"
    return None


def gradebook_cell_grades(config, results: Iterable[Result | dict]) -> list[dict]:
    """The test cells' grades of the graded results, from nbgrader's gradebook (manual
    scores included): {student, lesson, cell, score, max_score}."""
    from nbgrader.api import (Assignment, GradeCell, Grade, MissingEntry, SubmittedAssignment,
                              SubmittedNotebook)

    from autograder.nbgrader_glue.gradebook import gradebook

    wanted = {(r["student_id"], r["lesson"]) for r in map(_row, _results(results))
              if r["status"] == "graded" and r["student_id"] and r["lesson"]}
    if not wanted:
        return []
    rows = []
    with gradebook(config) as gb:
        answers = {}  # lesson -> its answer cells (graded by hand, no test)
        for lesson in {lesson for _, lesson in wanted}:
            try:
                notebook = gb.find_notebook(lesson, lesson)
            except MissingEntry:
                continue
            answers[lesson] = {cell.name for cell in notebook.solution_cells}
        query = (gb.db.query(SubmittedAssignment.student_id, Assignment.name, GradeCell.name,
                             Grade.auto_score, Grade.manual_score, GradeCell.max_score)
                 .select_from(Grade)
                 .join(GradeCell, Grade.cell_id == GradeCell.id)
                 .join(SubmittedNotebook, Grade.notebook_id == SubmittedNotebook.id)
                 .join(SubmittedAssignment,
                       SubmittedNotebook.assignment_id == SubmittedAssignment.id)
                 .join(Assignment, SubmittedAssignment.assignment_id == Assignment.id))
        for student, lesson, cell, auto, manual, points in query:
            if (student, lesson) not in wanted or cell in answers.get(lesson, ()) or not points:
                continue
            score = manual if manual is not None else auto  # nbgrader's rule
            rows.append({"student": student, "lesson": lesson, "cell": cell,
                         "score": float(score or 0.0), "max_score": float(points)})
    rows.sort(key=lambda row: (row["lesson"], row["student"], row["cell"]))
    return rows


def write_checks(path: Path, results: list[Result]) -> None:
    """`checks.json`: the per-check records of the graded results (what analyse() counts)."""
    records = [{"student_id": row["student_id"], "lesson": row["lesson"],
                "checks": checks_of(result)}
               for result in results for row in [_row(result)]
               if row["status"] == "graded" and row["student_id"] and checks_of(result)]
    path.write_text(json.dumps({"results": records}, indent=0), encoding="utf-8")


def read_checks(text: str) -> dict[tuple[str, str], list[dict]]:
    """The records of a `checks.json` (write_checks): (student, lesson) -> its checks. Its size
    and nesting are bounded before it is parsed; ValueError says what is wrong."""
    if len(text) > MAX_CHECKS_BYTES:
        raise ValueError(f"{CHECKS_FILE} is over {MAX_CHECKS_BYTES >> 20} MiB")
    if scan(text.encode(), MAX_CHECKS_BYTES, MAX_CHECKS_DEPTH).over == "depth":
        raise ValueError(f"{CHECKS_FILE} is nested deeper than its records are")
    data = json.loads(text)
    found = {}
    for record in data.get("results", []) if isinstance(data, dict) else []:
        if not isinstance(record, dict) or not isinstance(record.get("checks"), list):
            continue
        checks = [{key: check.get(key) for key in CHECK_KEYS}
                  for check in record["checks"] if isinstance(check, dict)]
        found[(str(record.get("student_id", "")), str(record.get("lesson", "")))] = checks
    return found


# --------------------------------------------------------------------------------------------
# Item analysis

def analyse(results: Iterable[Result | dict], cell_grades: list[dict] | None = None
            ) -> tuple[list[Item], list[Exercise]]:
    """Per check and per exercise: attempts, passes, mistakes, over the graded results."""
    items: dict[tuple, Item] = {}
    exercises: dict[tuple, Exercise] = {}
    results = _results(results)
    with_checks = {(_row(r)["lesson"]) for r in results if checks_of(r)}
    for result in results:
        row = _row(result)
        if row["status"] != "graded" or not row["student_id"]:
            continue
        student_mistakes: dict[tuple, set] = defaultdict(set)
        for check in checks_of(result):
            visibility = "visible" if check["visible"] else "hidden"
            key = (row["lesson"], check["exercise"], check["cell"], check["scenario"], visibility)
            item = items.setdefault(key, Item(*key))
            item.attempts += 1
            item.passed += check["passed"]
            exercise = exercises.setdefault((row["lesson"], check["exercise"]),
                                            Exercise(row["lesson"], check["exercise"]))
            exercise.students.add(row["student_id"])
            tally = exercise.visible if check["visible"] else exercise.hidden
            tally[0] += check["passed"]
            tally[1] += 1
            if not check["passed"]:
                exercise.failing.add(row["student_id"])
                if check["mistake"]:
                    item.mistakes[check["mistake"]] += 1
                    student_mistakes[(row["lesson"], check["exercise"])].add(check["mistake"])
        for key, names in student_mistakes.items():
            exercises[key].mistakes.update(names)
    for grade in cell_grades or []:
        if grade["lesson"] in with_checks:
            continue
        exercise_name = exercise_of(grade["cell"]) or grade["cell"]
        key = (grade["lesson"], exercise_name, grade["cell"], grade["cell"], "cell")
        item = items.setdefault(key, Item(*key))
        passed = grade["score"] >= grade["max_score"] - 1e-9
        item.attempts += 1
        item.passed += passed
        exercise = exercises.setdefault((grade["lesson"], exercise_name),
                                        Exercise(grade["lesson"], exercise_name))
        exercise.students.add(grade["student"])
        exercise.cell[0] += passed
        exercise.cell[1] += 1
        if not passed:
            exercise.failing.add(grade["student"])
    return list(items.values()), list(exercises.values())


def write_items(path: Path, items: list[Item], order: dict[str, int]) -> None:
    items = sorted(items, key=lambda i: (order.get(i.lesson, 1 << 20), i.lesson, i.exercise,
                                         i.visibility != "visible", i.cell, i.check))
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(ITEMS_HEADER)
        for item in items:
            mistakes = "; ".join(f"{name}: {count}" for name, count in item.mistakes.most_common())
            writer.writerow([spreadsheet_cell(value) for value in (
                item.lesson, item.exercise, item.cell, item.check, item.visibility,
                item.attempts, item.passed, f"{item.pass_rate:.3f}", mistakes)])


# --------------------------------------------------------------------------------------------
# The page (templates/report.html.j2)

def _escaped(value) -> Markup:
    """Every value the template writes, escaped as html.escape does (Markup as it is)."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


_ENVIRONMENT = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"), autoescape=True,
    finalize=_escaped, keep_trailing_newline=True)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f} %"


def _feedback_link(student: str, lesson: str) -> str:
    return f"feedback/{quote(student)}/{quote(lesson)}.html"


def student_rows(rows: list[dict], lessons: list[str]) -> list[dict]:
    """The per-student table's rows: each lesson's score (or status) with its feedback page,
    the total, and why a student needs a look; those who do first, then by id."""
    by_student: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in rows:
        if row["student_id"] and row["lesson"]:
            by_student[row["student_id"]][row["lesson"]] = row
    look = {student: "; ".join(f"{lesson}: {needs_review(mine[lesson]) or 'invalid'}"
                               for lesson in lessons if lesson in mine
                               and (needs_review(mine[lesson])
                                    or mine[lesson]["status"] == "invalid"))
            for student, mine in by_student.items()}
    table = []
    for student in sorted(by_student, key=lambda student: (not look[student], student)):
        mine = by_student[student]
        cells = [None if (row := mine.get(lesson)) is None else {
            "status": row["status"], "link": _feedback_link(student, lesson),
            "text": (f"{row['score']:g}/{row['max_score']:g}" if row["status"] == "graded"
                     else row["status"]),
            "title": row["reason"] if row["status"] != "graded" else None}
            for lesson in lessons]
        score = sum(row["score"] for row in mine.values())
        points = sum(row["max_score"] for row in mine.values())
        table.append({"student": student, "look": look[student], "cells": cells,
                      "total": f"{score:g}/{points:g}"})
    return table


def write_report(out: Path, results: Iterable[Result | dict], *, lessons: list[str] | None = None,
                 cell_grades: list[dict] | None = None, roster=None,
                 title: str = "Class report", note: str = "",
                 manual_dropped: list[tuple[str, str, str]] | None = None) -> Path:
    """Write OUT/report.html and OUT/items.csv for `results`; return the page's path.
    `roster`: an autograder.intake.roster.RosterReport, or None; `manual_dropped`: (student,
    lesson, what) for hand-given grades dropped because another notebook was graded."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = _results(results)
    rows = [_row(r) for r in results]
    order = {name: i for i, name in enumerate(lessons or [])}
    for row in rows:
        if row["lesson"]:
            order.setdefault(row["lesson"], len(order))
    lesson_names = sorted(order, key=order.get)
    items, exercises = analyse(results, cell_grades)
    exercises.sort(key=lambda e: (order.get(e.lesson, 1 << 20), e.exercise))
    write_items(out / "items.csv", items, order)
    write_checks(out / CHECKS_FILE, results)

    counts = Counter(row["status"] for row in rows)
    scores: dict[str, list[float]] = {name: [] for name in lesson_names}
    maxima: dict[str, float] = {}
    score_rows = []
    for lesson in lesson_names:
        mine = [r for r in rows if r["lesson"] == lesson and r["student_id"]]
        graded = [r["score"] for r in mine if r["status"] == "graded"]
        scores[lesson] = graded
        maxima[lesson] = max((r["max_score"] for r in mine), default=0.0)
        by_status = Counter(r["status"] for r in mine)
        mean = f"{sum(graded) / len(graded):.2f}" if graded else "–"
        median = f"{sorted(graded)[len(graded) // 2]:g}" if graded else "–"
        full = sum(1 for s in graded if maxima[lesson] and s >= maxima[lesson] - 1e-9)
        score_rows.append([lesson, f"{maxima[lesson]:g}", len(graded), mean, median, full,
                           by_status["invalid"] + by_status["timeout"] + by_status["error"],
                           by_status["missing"]])
    hardest = sorted((e for e in exercises if e.failing),
                     key=lambda e: (-e.fail_share, -len(e.failing), order.get(e.lesson, 0),
                                    e.exercise))[:5]
    student_table = student_rows(rows, lesson_names)
    page = _ENVIRONMENT.get_template("report.html.j2").render(
        title=title, note=note, lessons=lesson_names,
        students=len({row["student_id"] for row in rows if row["student_id"]}),
        written=datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        counts=[(status, counts[status]) for status in STATUSES],
        score_figure=score_histograms(scores, maxima), score_rows=score_rows,
        pass_figure=pass_rate_bars(exercises),
        exercise_rows=[[e.lesson, e.exercise, len(e.students), len(e.failing),
                        _percent(e.rate("visible")), _percent(e.rate("hidden")),
                        _percent(e.rate("cell"))] for e in exercises],
        from_cells=any(e.cell[1] for e in exercises),
        hardest_rows=[[e.lesson, e.exercise, f"{len(e.failing)} of {len(e.students)}",
                       _percent(e.fail_share)] for e in hardest],
        mistake_rows=[[e.lesson, e.exercise, name, count, _percent(count / len(e.students))]
                      for e in exercises for name, count in e.mistakes.most_common(3)],
        review=[{"student": row["student_id"], "lesson": row["lesson"], "status": row["status"],
                 "why": why, "reason": row["reason"],
                 "link": _feedback_link(row["student_id"], row["lesson"])
                 if row["lesson"] else ""}
                for row in rows if row["student_id"] for why in [needs_review(row)] if why],
        student_rows=student_table, flagged=sum(1 for row in student_table if row["look"]),
        manual_dropped=[list(entry) for entry in manual_dropped or []],
        stray_rows=[[r["lesson"] or "?", r["status"], r["reason"]]
                    for r in rows if not r["student_id"]],
        roster=None if roster is None else {
            "unknown": [[student, ", ".join(files)] for student, files
                        in sorted((getattr(roster, "unknown", {}) or {}).items())],
            "absent": [[e.id, e.full_name, e.email]
                       for e in getattr(roster, "absent", []) or []]})
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    return path
