"""The class report a grading run writes: OUT/report.html and OUT/items.csv.

`report.html` is one self-contained page (figures inlined as PNG, styles inline, no script, a
Content-Security-Policy that lets it load nothing): it opens offline and from an email. It
shows the score distribution per lesson, each exercise's pass rates on its visible and hidden
checks, the most frequent named mistakes per exercise with their counts, the exercises most
students fail, the submissions that need an instructor (timeouts, errors, edited test cells),
a row per student (each lesson's score linked to its feedback page, and why the student needs
a look; those who do first), the files attributed to no student, and, with a roster, unknown ids and roster students who
submitted nothing.

Per-check results come from each result's `checks` (dicts with exercise, cell, scenario,
visible, passed, mistake), read with `getattr(result, "checks", [])`, so rows built by hand
and results of any engine work alike. A lesson none of whose results carry checks falls back
to its test cells' grades in the gradebook (one item per test cell, visible and hidden
together).

`items.csv` has a row per check (or test cell): lesson, exercise, cell, check, visibility
(visible, hidden, or cell), attempts, passed, pass_rate, mistakes (`name: count; ...`).
"""

from __future__ import annotations

import base64
import csv
import datetime
import html
import io
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from autograder.intake.submissions import spreadsheet_cell
from autograder.text import one_line

ITEMS_HEADER = ["lesson", "exercise", "cell", "check", "visibility", "attempts", "passed",
                "pass_rate", "mistakes"]
STATUSES = ("graded", "missing", "invalid", "timeout", "error")
_EDITED = re.compile(r"had been edited", re.IGNORECASE)


# --------------------------------------------------------------------------------------------
# Rows, whatever their source

def _field(row, name: str, default=None):
    if isinstance(row, dict):
        return row.get(name, default)
    return getattr(row, name, default)


def _row(result) -> dict:
    return {"student_id": str(_field(result, "student_id", "") or ""),
            "lesson": str(_field(result, "lesson", "") or ""),
            "score": float(_field(result, "score", 0.0) or 0.0),
            "max_score": float(_field(result, "max_score", 0.0) or 0.0),
            "status": str(_field(result, "status", "") or ""),
            "reason": one_line(_field(result, "reason", "") or "")}


def checks_of(result) -> list[dict]:
    """The per-check rows of a result (none before the engine records them)."""
    checks = _field(result, "checks", None) or []
    rows = []
    for check in checks:
        get = (lambda key, c=check: _field(c, key))
        exercise = get("exercise")
        if not exercise:
            continue
        rows.append({"exercise": str(exercise), "cell": str(get("cell") or ""),
                     "scenario": str(get("scenario") or ""), "visible": bool(get("visible")),
                     "passed": bool(get("passed")),
                     "mistake": one_line(get("mistake"), 200) if get("mistake") else None})
    return rows


def needs_review(row: dict) -> str | None:
    """Why a submission needs an instructor: a timeout, an error, or edited test cells."""
    if row["status"] == "timeout":
        return "timeout"
    if row["status"] == "error":
        return "error"
    if row["status"] == "graded" and _EDITED.search(row["reason"]):
        return "edited cells"
    return None


def gradebook_cell_grades(config, results) -> list[dict]:
    """The test cells' grades of the graded results, from nbgrader's gradebook (manual
    scores included): {student, lesson, cell, score, max_score}."""
    from nbgrader.api import (Assignment, GradeCell, Grade, MissingEntry, SubmittedAssignment,
                              SubmittedNotebook)

    from autograder.nbgrader_glue.inproc import gradebook

    wanted = {(r["student_id"], r["lesson"]) for r in map(_row, results)
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


# --------------------------------------------------------------------------------------------
# Item analysis

@dataclass
class Item:
    lesson: str
    exercise: str
    cell: str
    check: str
    visibility: str  # visible | hidden | cell
    attempts: int = 0
    passed: int = 0
    mistakes: Counter = field(default_factory=Counter)

    @property
    def pass_rate(self) -> float:
        return self.passed / self.attempts if self.attempts else 0.0


@dataclass
class Exercise:
    lesson: str
    exercise: str
    students: set = field(default_factory=set)
    failing: set = field(default_factory=set)
    visible: list = field(default_factory=lambda: [0, 0])  # passed, attempts
    hidden: list = field(default_factory=lambda: [0, 0])
    cell: list = field(default_factory=lambda: [0, 0])  # whole test cells (no checks known)
    mistakes: Counter = field(default_factory=Counter)  # mistake -> students who made it

    def rate(self, kind: str) -> float | None:
        passed, attempts = getattr(self, kind)
        return passed / attempts if attempts else None

    @property
    def fail_share(self) -> float:
        return len(self.failing) / len(self.students) if self.students else 0.0


def _exercise_of(cell: str) -> str:
    return re.sub(r"[-_]test$", "", cell)


def analyse(results, cell_grades: list[dict] | None = None) -> tuple[list[Item], list[Exercise]]:
    """Per check and per exercise: attempts, passes, mistakes, over the graded results."""
    items: dict[tuple, Item] = {}
    exercises: dict[tuple, Exercise] = {}
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
        exercise_name = _exercise_of(grade["cell"])
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
# Figures (matplotlib, without pyplot's global state)

def _png(figure) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def score_histograms(scores: dict[str, list[float]], maxima: dict[str, float]) -> str | None:
    """One histogram per lesson of the graded notebooks' scores (base64 PNG)."""
    from matplotlib.figure import Figure

    lessons = [lesson for lesson in scores if scores[lesson]]
    if not lessons:
        return None
    columns = min(4, len(lessons))
    rows = math.ceil(len(lessons) / columns)
    figure = Figure(figsize=(3.3 * columns, 2.3 * rows), layout="constrained")
    for index, lesson in enumerate(lessons):
        axes = figure.add_subplot(rows, columns, index + 1)
        top = maxima.get(lesson) or max(scores[lesson]) or 1.0
        if top <= 20 and float(top).is_integer():
            bins = [edge - 0.5 for edge in range(int(top) + 2)]
            axes.set_xticks(range(int(top) + 1))
        else:
            bins = [top * step / 10 for step in range(11)]
        axes.hist(scores[lesson], bins=bins, color="#4c72b0", edgecolor="white")
        axes.set_title(lesson, fontsize=10)
        axes.set_xlabel(f"score (of {top:g})", fontsize=9)
        axes.set_ylabel("notebooks", fontsize=9)
        axes.yaxis.get_major_locator().set_params(integer=True)
        axes.tick_params(labelsize=8)
        axes.spines[["top", "right"]].set_visible(False)
    return _png(figure)


def pass_rate_bars(exercises: list[Exercise]) -> str | None:
    """Horizontal bars: each exercise's pass rate on visible and on hidden checks (or on its
    test cells when no checks are known)."""
    from matplotlib.figure import Figure

    if not exercises:
        return None
    labels = [f"{e.lesson} · {e.exercise}" for e in exercises]
    figure = Figure(figsize=(8.5, 0.9 + 0.42 * len(exercises)), layout="constrained")
    axes = figure.add_subplot(1, 1, 1)
    height = 0.38
    series = [("visible", "visible checks", "#55a868"), ("hidden", "hidden checks", "#c44e52"),
              ("cell", "test cell (no per-check results)", "#8172b2")]
    shown = [s for s in series if any(e.rate(s[0]) is not None for e in exercises)]
    for offset, (kind, label, colour) in enumerate(shown):
        values = [100 * (e.rate(kind) or 0.0) for e in exercises]
        positions = [i + (offset - (len(shown) - 1) / 2) * height for i in range(len(exercises))]
        axes.barh(positions, values, height=height, color=colour, label=label)
    axes.set_yticks(range(len(exercises)), labels, fontsize=8)
    axes.set_ylim(len(exercises) - 0.5, -0.5)  # the first exercise on top, no margins
    axes.set_xlim(0, 100)
    axes.set_xlabel("pass rate (%)", fontsize=9)
    axes.tick_params(axis="x", labelsize=8)
    axes.spines[["top", "right"]].set_visible(False)
    axes.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=len(shown),
                frameon=False)
    return _png(figure)


# --------------------------------------------------------------------------------------------
# The page

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;
max-width:70em;padding:0 1.5em;color:#222;line-height:1.45}
h1{margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.meta{color:#666;margin-top:0}
table{border-collapse:collapse;margin:.6em 0 1em;font-size:.92em}
th,td{border:1px solid #ddd;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.counts span{display:inline-block;margin:0 1.2em .4em 0}
.counts b{font-size:1.3em}
.status-timeout,.status-error{color:#a61b1b;font-weight:600}
.status-graded{color:#2b6a2b}
img{max-width:100%;height:auto}
.note{color:#555;font-size:.92em}
.empty{color:#666;font-style:italic}
table.students{font-size:.85em}
table.students thead th{position:sticky;top:0;z-index:1}
table.students td{white-space:nowrap}table.students th{font-weight:600}
table.students td.look{white-space:normal;color:#a61b1b}
.status-missing,.status-invalid{color:#6b4e00}
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f} %"


def _table(header: list[str], rows: list[list[str]], numeric: set[int] = frozenset()) -> str:
    """A table; cells are escaped here (pass plain text)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(
        f"<td class=\"num\">{_e(cell)}</td>" if i in numeric else f"<td>{_e(cell)}</td>"
        for i, cell in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(data: str | None, alt: str) -> str:
    if not data:
        return ""
    return f'<p><img src="data:image/png;base64,{data}" alt="{_e(alt)}"></p>'


def _feedback_link(student: str, lesson: str) -> str:
    return f"feedback/{quote(student)}/{quote(lesson)}.html"


def student_table(rows: list[dict], lessons: list[str]) -> str:
    """The per-student section: each lesson's score (or status) linked to its feedback page,
    the total, and why a student needs a look; those who do first, then by id."""
    by_student: dict[str, dict[str, dict]] = defaultdict(dict)
    for row in rows:
        if row["student_id"] and row["lesson"]:
            by_student[row["student_id"]][row["lesson"]] = row
    if not by_student:
        return "<p class=\"empty\">No student in this run.</p>"
    look = {student: "; ".join(f"{lesson}: {needs_review(mine[lesson]) or 'invalid'}"
                               for lesson in lessons if lesson in mine
                               and (needs_review(mine[lesson])
                                    or mine[lesson]["status"] == "invalid"))
            for student, mine in by_student.items()}
    order = sorted(by_student, key=lambda student: (not look[student], student))
    head = ("<tr><th>student</th><th>needs a look</th>"
            + "".join(f"<th title=\"{_e(lesson)}\">{_e(lesson.replace('_', ' '))}</th>"
                      for lesson in lessons) + "<th>total</th></tr>")
    body = []
    for student in order:
        mine = by_student[student]
        cells = []
        for lesson in lessons:
            row = mine.get(lesson)
            if row is None:
                cells.append("<td></td>")
                continue
            text = (f"{row['score']:g}/{row['max_score']:g}" if row["status"] == "graded"
                    else row["status"])
            title = f" title=\"{_e(row['reason'])}\"" if row["status"] != "graded" else ""
            cells.append(f"<td class=\"status-{_e(row['status'])}\"{title}><a href=\""
                         f"{_e(_feedback_link(student, lesson))}\">{_e(text)}</a></td>")
        score = sum(row["score"] for row in mine.values())
        points = sum(row["max_score"] for row in mine.values())
        body.append(f"<tr><td>{_e(student)}</td><td class=\"look\">{_e(look[student])}</td>"
                    + "".join(cells) + f"<td class=\"num\">{score:g}/{points:g}</td></tr>")
    flagged = sum(1 for student in order if look[student])
    return (f"<p>{len(order)} students; {flagged} need{'s' if flagged == 1 else ''} a look (a timeout, an error, edited "
            "test cells or a file that could not be graded), listed first. Each score links "
            "to the feedback page the student gets.</p>"
            f"<table class=\"students\"><thead>{head}</thead><tbody>{''.join(body)}"
            "</tbody></table>")


def write_report(out: Path, results, *, lessons: list[str] | None = None,
                 cell_grades: list[dict] | None = None, roster=None,
                 title: str = "Class report", note: str = "",
                 manual_dropped: list[tuple[str, str, str]] | None = None) -> Path:
    """Write OUT/report.html and OUT/items.csv for `results`; return the page's path.
    `roster`: an autograder.intake.submissions.RosterReport, or None; `manual_dropped`: (student,
    lesson, what) for hand-given grades dropped because another notebook was graded."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = list(results)
    rows = [_row(r) for r in results]
    order = {name: i for i, name in enumerate(lessons or [])}
    for row in rows:
        if row["lesson"]:
            order.setdefault(row["lesson"], len(order))
    lesson_names = sorted(order, key=order.get)
    items, exercises = analyse(results, cell_grades)
    exercises.sort(key=lambda e: (order.get(e.lesson, 1 << 20), e.exercise))
    write_items(out / "items.csv", items, order)

    counts = Counter(row["status"] for row in rows)
    students = {row["student_id"] for row in rows if row["student_id"]}
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
             "img-src data:; style-src 'unsafe-inline'\">",
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
             f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
             f"<h1>{_e(title)}</h1>",
             f"<p class=\"meta\">{_e(len(students))} students, {_e(len(lesson_names))} "
             f"lessons; written {_e(datetime.datetime.now().strftime('%Y-%m-%d %H:%M'))}."
             f"{(' ' + _e(note)) if note else ''}</p>",
             "<p class=\"counts\">" + "".join(
                 f"<span class=\"status-{s}\"><b>{counts[s]}</b> {s}</span>" for s in STATUSES)
             + "</p>"]

    # Scores per lesson
    scores: dict[str, list[float]] = {name: [] for name in lesson_names}
    maxima: dict[str, float] = {}
    table = []
    for lesson in lesson_names:
        mine = [r for r in rows if r["lesson"] == lesson and r["student_id"]]
        graded = [r["score"] for r in mine if r["status"] == "graded"]
        scores[lesson] = graded
        maxima[lesson] = max((r["max_score"] for r in mine), default=0.0)
        by_status = Counter(r["status"] for r in mine)
        mean = f"{sum(graded) / len(graded):.2f}" if graded else "–"
        median = f"{sorted(graded)[len(graded) // 2]:g}" if graded else "–"
        full = sum(1 for s in graded if maxima[lesson] and s >= maxima[lesson] - 1e-9)
        table.append([lesson, f"{maxima[lesson]:g}", len(graded), mean, median, full,
                      by_status["invalid"] + by_status["timeout"] + by_status["error"],
                      by_status["missing"]])
    parts.append("<h2 id=\"scores\">Scores per lesson</h2>")
    parts.append(_figure(score_histograms(scores, maxima),
                         "Histograms of the graded notebooks' scores, one per lesson"))
    parts.append(_table(["lesson", "points", "graded", "mean", "median", "full marks",
                         "not graded (invalid, timeout, error)", "missing"], table,
                        numeric={1, 2, 3, 4, 5, 6, 7}))
    parts.append("<p class=\"note\">The histograms count graded notebooks; those not graded "
                 "score 0 and are counted apart.</p>")

    # Exercises
    parts.append("<h2 id=\"exercises\">Pass rates per exercise</h2>")
    if exercises:
        parts.append(_figure(pass_rate_bars(exercises),
                             "Pass rates of each exercise on its visible and hidden checks"))
        parts.append(_table(
            ["lesson", "exercise", "students", "failing", "visible checks passed",
             "hidden checks passed", "test cells passed"],
            [[e.lesson, e.exercise, len(e.students), len(e.failing), _percent(e.rate("visible")),
              _percent(e.rate("hidden")), _percent(e.rate("cell"))] for e in exercises],
            numeric={2, 3, 4, 5, 6}))
        if any(e.cell[1] for e in exercises):
            parts.append("<p class=\"note\">Lessons without per-check results show each test "
                         "cell's pass rate (its visible and hidden checks together), from the "
                         "gradebook.</p>")
    else:
        parts.append("<p class=\"empty\">No graded notebook in this run.</p>")

    hardest = sorted((e for e in exercises if e.failing),
                     key=lambda e: (-e.fail_share, -len(e.failing), order.get(e.lesson, 0),
                                    e.exercise))[:5]
    parts.append("<h2 id=\"hardest\">Exercises most students fail</h2>")
    if hardest:
        parts.append(_table(["lesson", "exercise", "students failing", "share"],
                            [[e.lesson, e.exercise, f"{len(e.failing)} of {len(e.students)}",
                              _percent(e.fail_share)] for e in hardest], numeric={3}))
    else:
        parts.append("<p class=\"empty\">No exercise was failed.</p>")

    parts.append("<h2 id=\"mistakes\">Most frequent mistakes</h2>")
    mistake_rows = []
    for exercise in exercises:
        for name, count in exercise.mistakes.most_common(3):
            mistake_rows.append([exercise.lesson, exercise.exercise, name, count,
                                 _percent(count / len(exercise.students))])
    if mistake_rows:
        parts.append(_table(["lesson", "exercise", "mistake", "students", "share"], mistake_rows,
                            numeric={3, 4}))
    else:
        parts.append("<p class=\"empty\">No named mistake was recorded in this run (the "
                     "checks name a mistake when they recognise one).</p>")

    # Needs an instructor
    review = [(row, why) for row in rows if row["student_id"]
              for why in [needs_review(row)] if why]
    parts.append("<h2 id=\"review\">Needs manual review</h2>")
    if review:
        body = []
        for row, why in review:
            link = _feedback_link(row["student_id"], row["lesson"]) if row["lesson"] else ""
            body.append("<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in
                                         (row["student_id"], row["lesson"]))
                        + f"<td class=\"status-{_e(row['status'])}\">{_e(why)}</td>"
                        + f"<td>{_e(row['reason'])}</td>"
                        + (f"<td><a href=\"{_e(link)}\">feedback</a></td>" if link
                           else "<td></td>") + "</tr>")
        parts.append("<table><thead><tr><th>student</th><th>lesson</th><th>why</th>"
                     "<th>reason</th><th></th></tr></thead><tbody>" + "".join(body)
                     + "</tbody></table>")
        parts.append("<p class=\"note\">Timeouts and errors score 0 and are flagged in the "
                     "gradebook for manual grading; edited test cells were restored before "
                     "grading.</p>")
    else:
        parts.append("<p class=\"empty\">Nothing: no timeout, error or edited test cell.</p>")

    parts.append("<h2 id=\"students\">Students</h2>")
    parts.append(student_table(rows, lesson_names))
    if manual_dropped:
        parts.append("<h2 id=\"manual-dropped\">Manual grades dropped</h2>")
        parts.append("<p>These students handed in another notebook than the one graded by hand "
                     "before; the grades given to that one were dropped:</p>")
        parts.append(_table(["student", "lesson", "dropped"],
                            [list(entry) for entry in manual_dropped]))

    stray = [row for row in rows if not row["student_id"]]
    if stray:
        parts.append("<h2 id=\"unattributed\">Files not attributed to a student</h2>")
        parts.append(_table(["lesson", "status", "reason"],
                            [[r["lesson"] or "?", r["status"], r["reason"]] for r in stray]))

    if roster is not None:
        parts.append("<h2 id=\"roster\">Roster</h2>")
        unknown = getattr(roster, "unknown", {}) or {}
        absent = getattr(roster, "absent", []) or []
        if unknown:
            parts.append("<p>Submissions from ids that are not on the roster:</p>")
            parts.append(_table(["id", "files"],
                                [[student, ", ".join(files)] for student, files in
                                 sorted(unknown.items())]))
        else:
            parts.append("<p>Every submission is from a student on the roster.</p>")
        if absent:
            parts.append("<p>Roster students with nothing submitted in this batch:</p>")
            parts.append(_table(["id", "name", "email"],
                                [[e.id, e.full_name, e.email] for e in absent]))
        else:
            parts.append("<p>Every student on the roster submitted something.</p>")
    parts.append("</body></html>\n")
    page = out / "report.html"
    page.write_text("\n".join(parts), encoding="utf-8")
    return page
