"""Grades out of nbgrader's gradebook, in a learning system's own import format.

`python -m autograder export --to canvas|moodle|csv` reads the course's gradebook.db with
nbgrader's API, so grades given by hand in the formgrader (a manual score overrides the
autograder's) and late penalties (nbgrader's, from timestamp.txt and the lesson's due date)
are in it. A lesson's score is nbgrader's own: `max(0, score - late penalty)`.

- canvas: Canvas's gradebook import CSV. Columns `Student, ID, SIS User ID, SIS Login ID,
  Section`, then one per lesson; the second row is `    Points Possible` with each lesson's
  points, as Canvas writes it in its own export (its importer skips that row). `Student` is
  `Last, First`; `ID` is the Canvas user id (from a Canvas export that was graded, or the
  roster's `lms_id`); `SIS User ID`, `SIS Login ID` and `Section` come from the roster's
  columns of those names, and `SIS Login ID` is the student id when nothing else identifies
  the student.
- moodle: Moodle's grade import CSV (Grades > Import > CSV file). Columns `First name,
  Last name, ID number, Email address`, then one per lesson; map `Email address` (or
  `ID number`, the roster's `idnumber` or else the student id) to the user at import.
- csv: one row per student and lesson: `student_id, first_name, last_name, email,
  lms_user_id, lesson, raw_score, late_penalty, score, max_score, needs_manual_grade,
  timestamp`.

A lesson a student has no submission of is left empty (an LMS then leaves its grade as it is),
or 0 with `--missing zero`. `--column LESSON=HEADER` names a lesson's column (for Canvas, the
title of an existing assignment with its id, e.g. `Lesson 1 (12345)`).

Two gradebook students who are one LMS user (the same Canvas user id, or for Moodle the same
email), as when a class was graded twice under different ids, would be two rows for one
person: the export refuses and names them, or with `merge=True` writes one row for them.

Each format is an nbgrader `ExportPlugin` (`CanvasExport`, `MoodleExport`, `CsvExport`), so
`nbgrader export --exporter autograder.nbgrader_glue.export.CanvasExport --to FILE` writes the
same file as `python -m autograder export --to canvas --out FILE`.
"""

from __future__ import annotations

from autograder.nbgrader_glue import patches  # noqa: F401 (first: a quicker jsonschema import)

import csv
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from traitlets import Any, Bool, Dict, Enum, Unicode

from autograder.nbgrader_glue.gradebook import gradebook
from autograder.release import COURSE_ROOT, lessons as course_lessons
from autograder.intake.roster import Roster
from autograder.text import one_line, spreadsheet_cell

FORMATS = ("canvas", "moodle", "csv")
EXPORT_FOLDER = "grading"  # in the course root, git-ignored, beside the grading runs' outputs
CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_POINTS = "    Points Possible"
MOODLE_HEADER = ["First name", "Last name", "ID number", "Email address"]
CSV_HEADER = ["student_id", "first_name", "last_name", "email", "lms_user_id", "lesson",
              "raw_score", "late_penalty", "score", "max_score", "needs_manual_grade",
              "timestamp"]


@dataclass
class Score:
    raw: float
    penalty: float
    max_score: float
    needs_manual_grade: bool = False
    timestamp: str = ""

    @property
    def score(self) -> float:
        return max(0.0, self.raw - self.penalty)


@dataclass
class Student:
    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_user_id: str = ""
    scores: dict[str, Score] = field(default_factory=dict)  # lesson -> its submission's


@dataclass
class Grades:
    lessons: list[tuple[str, float]]  # (lesson, points) in the course's order
    students: list[Student]


def number(value: float) -> str:
    """A score as the LMSs read it: `3`, `2.5`, `0.33` (two decimals at most, a dot)."""
    return f"{value:.2f}".rstrip("0").rstrip(".") if value == value else ""


def read_grades(gb: Gradebook, order: list[str], lessons: list[str] | None = None,
                roster: Roster | None = None) -> Grades:
    """Every student and lesson of the gradebook `gb` (and the roster's students), the lessons
    in the course's `order` (others after them, by name)."""
    position = {name: i for i, name in enumerate(order)}
    assignments = sorted(gb.assignments, key=lambda a: (position.get(a.name, 1 << 20), a.name))
    known = [a.name for a in assignments]
    unknown = [name for name in lessons or [] if name not in known]
    if unknown:
        raise ValueError(f"the gradebook has no lesson {', '.join(unknown)} (it has "
                         f"{', '.join(known) or 'none'})")
    chosen = [a for a in assignments if not lessons or a.name in lessons]
    students = {}
    for record in gb.students:
        student = Student(id=record.id, first_name=record.first_name or "",
                          last_name=record.last_name or "", email=record.email or "",
                          lms_user_id=record.lms_user_id or "")
        for assignment in chosen:
            try:
                submission = gb.find_submission(assignment.name, record.id)
            except MissingEntry:
                continue
            student.scores[assignment.name] = Score(
                raw=float(submission.score or 0.0),
                penalty=float(submission.late_submission_penalty or 0.0),
                max_score=float(submission.max_score or assignment.max_score or 0.0),
                needs_manual_grade=bool(submission.needs_manual_grade),
                timestamp=str(submission.timestamp or ""))
        students[record.id] = student
    points = [(a.name, float(a.max_score or 0.0)) for a in chosen]
    for entry in (roster.entries.values() if roster else ()):
        student = students.setdefault(entry.id, Student(id=entry.id))
        student.first_name = entry.first_name or student.first_name
        student.last_name = entry.last_name or student.last_name
        student.email = entry.email or student.email
        student.lms_user_id = entry.lms_id or student.lms_user_id
    return Grades(lessons=points, students=[students[key] for key in sorted(students)])


def _cell(student: Student, lesson: str, missing: str) -> str:
    score = student.scores.get(lesson)
    if score is None:
        return "0" if missing == "zero" else ""
    return number(score.score)


def canvas_rows(grades: Grades, headers: dict[str, str], roster: Roster | None,
                missing: str) -> list[list[str]]:
    rows = [CANVAS_HEADER + [headers.get(name, name) for name, _ in grades.lessons],
            [CANVAS_POINTS, "", "", "", ""] + [number(points) for _, points in grades.lessons]]
    for student in grades.students:
        extra = roster.entries[student.id].extra if roster and student.id in roster.entries \
            else {}
        if student.last_name and student.first_name:
            name = f"{student.last_name}, {student.first_name}"
        else:
            name = student.last_name or student.first_name or student.id
        canvas_id = student.lms_user_id if student.lms_user_id.isdigit() else ""
        sis_user = extra.get("sis_user_id", "")
        login = extra.get("sis_login_id", "") or ("" if canvas_id or sis_user else student.id)
        rows.append([name, canvas_id, sis_user, login, extra.get("section", "")]
                    + [_cell(student, lesson, missing) for lesson, _ in grades.lessons])
    return rows


def moodle_rows(grades: Grades, headers: dict[str, str], roster: Roster | None,
                missing: str) -> list[list[str]]:
    rows = [MOODLE_HEADER + [headers.get(name, name) for name, _ in grades.lessons]]
    for student in grades.students:
        extra = roster.entries[student.id].extra if roster and student.id in roster.entries \
            else {}
        idnumber = extra.get("idnumber") or extra.get("id_number") or student.id
        rows.append([student.first_name, student.last_name, idnumber, student.email]
                    + [_cell(student, lesson, missing) for lesson, _ in grades.lessons])
    return rows


def csv_rows(grades: Grades, headers: dict[str, str], roster: Roster | None,
             missing: str) -> list[list[str]]:
    rows = [list(CSV_HEADER)]
    for student in grades.students:
        for lesson, points in grades.lessons:
            score = student.scores.get(lesson)
            person = [student.id, student.first_name, student.last_name, student.email,
                      student.lms_user_id, headers.get(lesson, lesson)]
            if score is None:
                empty = "0" if missing == "zero" else ""
                rows.append(person + [empty, empty, empty, number(points), "", ""])
            else:
                rows.append(person + [number(score.raw), number(score.penalty),
                                      number(score.score), number(score.max_score),
                                      "yes" if score.needs_manual_grade else "no",
                                      score.timestamp])
    return rows


def lms_key(student: Student, to: str) -> str:
    """What the LMS `to` matches a row by, when it names one person: the Canvas user id, or
    the email for Moodle ('' when there is none)."""
    if to == "canvas":
        return student.lms_user_id if student.lms_user_id.isdigit() else ""
    if to == "moodle":
        return student.email.strip().casefold()
    return ""


def shared_rows(grades: Grades, to: str) -> dict[str, list[Student]]:
    """{Canvas user id or email: the students of that key}, for keys two students share."""
    groups: dict[str, list[Student]] = defaultdict(list)
    for student in grades.students:
        key = lms_key(student, to)
        if key:
            groups[key].append(student)
    return {key: group for key, group in groups.items() if len(group) > 1}


def merge_students(group: list[Student]) -> Student:
    """One student of several gradebook ids: the first id's details (the others fill what it
    lacks), and per lesson the latest submission (the higher score when none is later)."""
    merged = Student(id=group[0].id)
    for student in group:
        for name in ("first_name", "last_name", "email", "lms_user_id"):
            if not getattr(merged, name):
                setattr(merged, name, getattr(student, name))
        for lesson, score in student.scores.items():
            kept = merged.scores.get(lesson)
            if kept is None or (score.timestamp, score.score) > (kept.timestamp, kept.score):
                merged.scores[lesson] = score
    return merged


def _settle_shared(grades: Grades, to: str, merge: bool, roster: Roster | None) -> list[str]:
    """Refuse rows that share an LMS user (ValueError naming them), or merge them under the
    roster's id of them if it has one; the warnings to print about what was merged."""
    on_roster = set(roster.entries) if roster else set()
    shared = {key: sorted(group, key=lambda s: (s.id not in on_roster, s.id))
              for key, group in shared_rows(grades, to).items()}
    if not shared:
        return []
    what = "Canvas user id" if to == "canvas" else "email"
    pairs = [f"{what} {key}: {' and '.join(s.id for s in group)}"
             for key, group in sorted(shared.items())]
    if not merge:
        raise ValueError(
            f"{len(shared)} {what}s belong to more than one student of the gradebook, so "
            f"{'Canvas' if to == 'canvas' else 'Moodle'} would get those people twice ("
            + "; ".join(pairs) + "). The class was probably graded twice under different "
            "ids: grade it again with --replace-ids to give the gradebook's records the new "
            "ids, or export with --merge to write one row for each (per lesson, the latest "
            "submission).")
    gone = {s.id for group in shared.values() for s in group[1:]}
    kept = {group[0].id: merge_students(group) for group in shared.values()}
    grades.students = [kept.get(s.id, s) for s in grades.students if s.id not in gone]
    return [f"merged into one row each ({what}; per lesson the latest submission): "
            + "; ".join(pairs)]


def parse_columns(items: list[str] | None) -> dict[str, str]:
    """`LESSON=HEADER` items as {lesson: header}."""
    headers = {}
    for item in items or []:
        lesson, sep, header = item.partition("=")
        if not sep or not lesson.strip() or not header.strip():
            raise ValueError(f"--column {item!r}: write it as LESSON=HEADER, e.g. "
                             "01_leaf_and_intermediate='Lesson 1 (12345)'")
        headers[lesson.strip()] = one_line(header.strip(), 200)
    return headers


@dataclass
class Exported:
    path: Path
    students: int
    lessons: int
    warnings: list[str]


class LmsExport(ExportPlugin):
    """nbgrader's ExportPlugin writing the gradebook's grades (the `assignment` lessons, all by
    default) to `to` in one learning system's import format (`rows`)."""

    format = "csv"
    roster = Any(None, allow_none=True, help="an autograder Roster, or None").tag(config=True)
    columns = Dict({}, help="lesson -> its column's header").tag(config=True)
    missing = Enum(["blank", "zero"], "blank", help="a lesson without a submission").tag(
        config=True)
    merge = Bool(False, help="one row for students who share an LMS user").tag(config=True)
    course_root = Unicode("", help="the course whose lesson order the columns follow (by "
                          "default nbgrader's course root)").tag(config=True)
    exported: Exported | None = None  # what the last export wrote

    def rows(self, grades: Grades) -> list[list[str]]:
        raise NotImplementedError

    def export(self, gradebook: Gradebook) -> None:
        """Write the file; `self.exported` says what was written."""
        root = self.course_root or getattr(getattr(self.parent, "coursedir", None), "root", "")
        order = course_lessons(Path(root)) if root and (Path(root) / "solutions").is_dir() else []
        grades = read_grades(gradebook, order, [str(a) for a in self.assignment] or None,
                             self.roster)
        if self.student:
            wanted = {str(s) for s in self.student}
            grades.students = [s for s in grades.students if s.id in wanted]
        strays = sorted(set(self.columns) - {name for name, _ in grades.lessons})
        if strays:
            raise ValueError(f"--column names lessons not exported: {', '.join(strays)}")
        warnings = _settle_shared(grades, self.format, self.merge, self.roster)
        out = Path(self.to or f"export-{self.format}.csv")
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows([[cell if cell == CANVAS_POINTS
                                           else spreadsheet_cell(one_line(cell, 500))
                                           for cell in row] for row in self.rows(grades)])
        warnings += _warnings(grades, self.format)
        for warning in warnings:
            self.log.warning(warning)
        self.exported = Exported(path=out, students=len(grades.students),
                                 lessons=len(grades.lessons), warnings=warnings)


class CanvasExport(LmsExport):
    """Canvas's gradebook import CSV."""

    format = "canvas"

    def rows(self, grades: Grades) -> list[list[str]]:
        return canvas_rows(grades, self.columns, self.roster, self.missing)


class MoodleExport(LmsExport):
    """Moodle's grade import CSV."""

    format = "moodle"

    def rows(self, grades: Grades) -> list[list[str]]:
        return moodle_rows(grades, self.columns, self.roster, self.missing)


class CsvExport(LmsExport):
    """One row per student and lesson, every figure nbgrader keeps."""

    format = "csv"

    def rows(self, grades: Grades) -> list[list[str]]:
        return csv_rows(grades, self.columns, self.roster, self.missing)


PLUGINS = {"canvas": CanvasExport, "moodle": MoodleExport, "csv": CsvExport}


def _warnings(grades: Grades, to: str) -> list[str]:
    """What to tell the instructor about the rows written in the format `to`."""
    warnings = []
    manual = [f"{s.id}/{lesson}" for s in grades.students for lesson, score in s.scores.items()
              if score.needs_manual_grade]
    if manual:
        warnings.append(f"{len(manual)} submissions still need manual grading in the "
                        f"formgrader ({', '.join(manual[:5])}{' ...' if len(manual) > 5 else ''}); "
                        "their autograded scores were exported.")
    if to == "moodle":
        without = [s.id for s in grades.students if not s.email]
        if without:
            warnings.append(f"{len(without)} students have no email in the gradebook "
                            f"({', '.join(without[:5])}{' ...' if len(without) > 5 else ''}): "
                            "map `ID number` at import, or grade with --roster (id,name,email) "
                            "to record their emails.")
    if to == "canvas":
        without = [s.id for s in grades.students if not s.lms_user_id.isdigit()]
        if without and len(without) == len(grades.students):
            warnings.append("No Canvas user ids are known (the class was not read from a "
                            "Canvas export, and the roster has no lms_id column): Canvas "
                            "will match students by SIS Login ID, which is the student id.")
    return warnings


COURSE_MARKS = ("nbgrader_config.py", "gradebook.db")  # what makes a folder a course root
# Folders whose contents students write: a course's copies of their submissions, and the
# exchange's inbound. A mark in them is a student's file (nbgrader_config.py is Python that
# loading runs; gradebook.db holds grades), never a course.
STUDENT_FOLDERS = ("submitted", "autograded", "feedback")


def _students_file(folder: Path) -> bool:
    """Whether `folder` is inside a course's student folder or the exchange's inbound."""
    for above in folder.parents:
        if above.name == "inbound" or (
                above.name in STUDENT_FOLDERS
                and any((above.parent / mark).is_file() for mark in COURSE_MARKS)):
            return True
    return False


def find_course_root(start: Path) -> Path:
    """The course `start` is in: the nearest folder, from `start` up, with an
    nbgrader_config.py or a gradebook.db (the class hub's course folder, or this repository),
    other than a folder a student wrote (in the course's submitted/, autograded/ or
    feedback/, or the exchange's inbound/); FileNotFoundError says where it looked and what
    to do."""
    start = Path(start).resolve()
    for folder in (start, *start.parents):
        if any((folder / mark).is_file() for mark in COURSE_MARKS) and not _students_file(
                folder):
            return folder
    raise FileNotFoundError(
        f"{start} is in no course: no folder from it up to / has an nbgrader_config.py or a "
        "gradebook.db. Run the command in the course folder (on the class hub, the folder a "
        "terminal of an instructor's server opens in), or give it with --course-root FOLDER")


def export(to: str, out: Path, course_root: Path = COURSE_ROOT,
           lessons: list[str] | None = None, roster: Roster | None = None,
           columns: dict[str, str] | None = None, missing: str = "blank",
           merge: bool = False) -> Exported:
    """Write the gradebook's grades to `out` in the format `to` (one of FORMATS). `merge`:
    write one row for students who share a Canvas user id (Moodle: an email) instead of
    refusing."""
    from autograder.nbgrader_glue.inproc import course_config

    if to not in FORMATS:
        raise ValueError(f"unknown format {to!r} (choose from {', '.join(FORMATS)})")
    if missing not in ("blank", "zero"):
        raise ValueError(f"--missing {missing!r}: blank or zero")
    root = Path(course_root).resolve()
    config = course_config(root)
    db_url = config.CourseDirectory.db_url
    path = Path(db_url[len("sqlite:///"):]) if db_url.startswith("sqlite:///") else None
    if path is not None and not path.is_file():
        raise FileNotFoundError(f"there is no gradebook at {path}: grade a class first "
                                "(`make grade SUBMISSIONS=...`)")
    plugin = PLUGINS[to](to=str(out), assignment=list(lessons or []), roster=roster,
                         columns=columns or {}, missing=missing, merge=merge,
                         course_root=str(root))
    with gradebook(config) as gb:
        plugin.export(gb)
    return plugin.exported
