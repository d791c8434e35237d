"""The roster: ids, names and emails of the class, and how submissions take their roster ids."""

from __future__ import annotations

import csv
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from autograder.intake.collect import Submission, refuse_merged
from autograder.intake.files import read_regular
from autograder.intake.lms import clean_id, usable_folder_id
from autograder.text import one_line, printable


@dataclass
class RosterEntry:
    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_id: str = ""
    extra: dict = field(default_factory=dict)  # other columns (section, sis_user_id, ...)

    @property
    def full_name(self) -> str:
        return " ".join(part for part in (self.first_name, self.last_name) if part)


@dataclass
class Roster:
    entries: dict[str, RosterEntry]
    path: Path | None = None


@dataclass
class RosterReport:
    """Submissions whose student is not on the roster, and roster students with nothing."""

    unknown: dict[str, list[str]] = field(default_factory=dict)  # id -> files
    absent: list[RosterEntry] = field(default_factory=list)


_ID_COLUMNS = ("id", "student_id", "username", "login")


def read_roster(path: Path) -> Roster:
    """A roster CSV with a header: `id` (or student_id, username, login), optional `name`
    (or first_name and last_name), `email`, `lms_id`; other columns are kept as they are."""
    path = Path(path)
    try:
        text = read_regular(path, 50 << 20).decode("utf-8-sig")
    except FileNotFoundError:
        raise FileNotFoundError(f"the roster {path} does not exist") from None
    except (OSError, ValueError) as err:
        raise ValueError(f"the roster {path} cannot be read: {one_line(err, 200)}") from None
    rows = list(csv.reader(text.splitlines()))
    if not rows:
        raise ValueError(f"the roster {path} is empty: it needs a header line "
                         "`id,name,email` and a line per student")
    header = [one_line(h).strip().lower().replace(" ", "_") for h in rows[0]]
    id_column = next((c for c in _ID_COLUMNS if c in header), None)
    if id_column is None:
        raise ValueError(f"the roster {path} has no `id` column (its header is "
                         f"{', '.join(header) or 'empty'}): the first line must name the "
                         "columns, e.g. `id,name,email`")
    entries: dict[str, RosterEntry] = {}
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        values = {h: one_line(row[i]).strip() if i < len(row) else ""
                  for i, h in enumerate(header)}
        student = values.pop(id_column)
        if not usable_folder_id(student):
            raise ValueError(f"the roster {path}, line {number}: '{printable(student)}' cannot "
                             "be a student id (empty, spaces at its ends, a leading dot, or one "
                             "of * ? [ ] / \\)")
        if student in entries:
            raise ValueError(f"the roster {path}, line {number}: the id '{student}' is there "
                             "twice")
        first, last = values.pop("first_name", ""), values.pop("last_name", "")
        name = values.pop("name", "")
        if name and not (first or last):
            if "," in name:  # "Last, First", as Canvas writes names
                last, first = (part.strip() for part in name.split(",", 1))
            elif " " in name:
                first, last = name.rsplit(" ", 1)
            else:
                first = name
        entries[student] = RosterEntry(id=student, first_name=first, last_name=last,
                                       email=values.pop("email", ""),
                                       lms_id=values.pop("lms_id", ""), extra=values)
    return Roster(entries=entries, path=path)


def apply_roster(found: list[Submission], roster: Roster) -> RosterReport:
    """Give each submission its roster id: the same id, the LMS's key (`lms_id` column or an
    id equal to it: a Canvas user id, a Blackboard username), or for Moodle the full name when
    one roster student has it. Report the others and the roster students with nothing."""
    by_id = {key.casefold(): entry for key, entry in roster.entries.items()}
    by_lms = {entry.lms_id.casefold(): entry for entry in roster.entries.values() if entry.lms_id}
    names: dict[str, list[RosterEntry]] = defaultdict(list)
    for entry in roster.entries.values():
        if entry.full_name:
            names[clean_id(entry.full_name)].append(entry)
            names[clean_id(f"{entry.last_name} {entry.first_name}")].append(entry)
    # Moodle names borne by two students of this export tell neither apart: not matched.
    keys_of_name: dict[str, set[str]] = defaultdict(set)
    for sub in found:
        if sub.layout == "moodle" and sub.name:
            keys_of_name[clean_id(sub.name)].add(sub.key)
    report = RosterReport()
    seen: set[str] = set()
    for sub in found:
        if not sub.student or sub.problem:
            continue
        entry = roster.entries.get(sub.student) or by_id.get(sub.student.casefold())
        if entry is None and sub.layout != "folders" and sub.key:
            entry = by_lms.get(sub.key.casefold()) or by_id.get(sub.key.casefold())
        if entry is None and sub.layout == "moodle" and sub.name \
                and len(keys_of_name[clean_id(sub.name)]) == 1:
            candidates = {e.id: e for e in names.get(clean_id(sub.name), [])}
            if len(candidates) == 1:
                entry = next(iter(candidates.values()))
        if entry is None:
            report.unknown.setdefault(sub.student, []).append(sub.shown)
            continue
        sub.student = entry.id
        seen.add(entry.id)
    report.absent = [entry for key, entry in roster.entries.items() if key not in seen]
    refuse_merged(found)
    return report


def student_records(found: list[Submission], roster: Roster | None,
                    named: set[str] | None = None) -> dict[str, dict]:
    """What the gradebook learns about each student (those in `found`, and roster students
    among `named`): names, email, LMS user id. `overwrite`: from the roster (replaces what is
    there); otherwise only fills empty fields."""
    records: dict[str, dict] = {}
    for student in named or ():
        if roster is not None and student in roster.entries:
            records.setdefault(student, {"overwrite": False})
    for sub in found:
        if not sub.student or sub.problem:
            continue
        record = records.setdefault(sub.student, {"overwrite": False})
        if sub.layout in ("canvas", "blackboard") and sub.key:
            record.setdefault("lms_user_id", sub.key)
        if sub.name and sub.layout in ("moodle", "blackboard") and "first_name" not in record:
            first, _, last = sub.name.rpartition(" ")
            record.update(first_name=first or last, last_name=last if first else "")
    for student, record in records.items():
        entry = roster.entries.get(student) if roster else None
        if entry is not None:
            record.update(first_name=entry.first_name, last_name=entry.last_name,
                          email=entry.email, overwrite=True)
            if entry.lms_id:
                record["lms_user_id"] = entry.lms_id
    return records



def renamed_students(records: dict[str, dict],
                     gradebook_students: list[dict]) -> dict[str, tuple[str, str]]:
    """{gradebook id: (this run's id, what they share)} for the gradebook's students who are
    one of this run's under another id: the same LMS user id, else the same email, matched one
    to one (a key several students share tells no one apart)."""
    ours = set(records)
    pairs: dict[str, tuple[str, str]] = {}
    for field_name, shown in (("lms_user_id", "LMS user id"), ("email", "email")):
        run: dict[str, list[str]] = defaultdict(list)
        for student, record in records.items():
            key = (record.get(field_name) or "").strip().casefold()
            if key:
                run[key].append(student)
        held: dict[str, list[str]] = defaultdict(list)
        for student in gradebook_students:
            key = (student.get(field_name) or "").strip().casefold()
            if key and student["id"] not in ours:
                held[key].append(student["id"])
        taken = {new for new, _ in pairs.values()}
        for key, olds in sorted(held.items()):
            news = run.get(key, [])
            if len(olds) == 1 and len(news) == 1 and olds[0] not in pairs \
                    and news[0] not in taken:
                pairs[olds[0]] = (news[0], f"{shown} {key}")
    return pairs


