"""Whose a file is, from the names a learning system writes (Canvas, Moodle, Blackboard).

The part of a name the learning system wrote comes first; the rest is the student's own file
name, which may imitate it, so the first match counts, never a later one. A clean student id is
derived from the LMS's names (`clean_id`: lowercase, only a-z 0-9 _ . -).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from autograder.intake.files import read_regular
from autograder.text import has_control, one_line


def clean_id(text: str) -> str:
    """The clean form of a name for a student id: accents dropped, lowercase, every run of
    characters other than a-z 0-9 . - written as one `_`, no `_ . -` at the ends."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = re.sub(r"[^a-z0-9.\-]+", "_", text)
    return text.strip("_.-")


def usable_folder_id(name: str) -> bool:
    """Whether a folder name can be a student id as it is (nbgrader's ids are folder names)."""
    return bool(name) and name == name.strip() and not name.startswith(".") \
        and re.search(r"[*?\[\]/\\]", name) is None and not has_control(name)


@dataclass
class Identity:
    layout: str
    key: str  # the LMS's key for the student
    student: str  # the clean id derived from it
    file: str  # the file name as the student uploaded it (for the lesson)
    name: str = ""
    order: int = 0
    notes: list[str] = field(default_factory=list)
    assignment: str = ""  # Blackboard's assignment name (a lesson when the file has none)


_CANVAS = re.compile(r"^(?P<name>[^_]+)(?P<late>_LATE)?_(?P<user>\d+)_(?P<file_id>\d+)_"
                     r"(?P<file>.+)$", re.IGNORECASE)
_MOODLE_FOLDER = re.compile(r"^(?P<name>.+)_(?P<id>\d+)_(?P<plugin>assignsubmission_[a-z]+|"
                            r"onlinetext|file)_?$")
# The part of a name the learning system wrote comes first; the rest is the student's own file
# name, which may imitate it: the patterns take the first match (non-greedy), never a later one.
_MOODLE_FILE = re.compile(r"^(?P<name>.+?)_(?P<id>\d+)_assignsubmission_file_(?P<file>.+)$")
_BLACKBOARD = re.compile(r"^(?P<prefix>.+?)_attempt_(?P<date>\d{4}(?:-\d{2}){5})"
                         r"(?:_(?P<file>.+)|(?P<receipt>\.txt)|\.ipynb)?$", re.IGNORECASE)


def parse_canvas(filename: str) -> Identity | None:
    match = _CANVAS.match(filename)
    if not match:
        return None
    user = match["user"]
    student = f"{clean_id(match['name']) or 'canvas'}_{user}"
    notes = ["Canvas marked this submission late (LATE in its file name)."] \
        if match["late"] else []
    return Identity("canvas", user, student, match["file"], name=match["name"],
                    order=int(match["file_id"]), notes=notes)


def parse_moodle(folder: str) -> Identity | None:
    """A Moodle submission folder `<Full Name>_<participant id>_assignsubmission_file_`."""
    match = _MOODLE_FOLDER.match(folder)
    if not match:
        return None
    return _moodle_identity(match["name"], match["id"], "")


def parse_moodle_file(filename: str) -> Identity | None:
    match = _MOODLE_FILE.match(filename)
    if not match:
        return None
    return _moodle_identity(match["name"], match["id"], match["file"])


def _moodle_identity(name: str, participant: str, file: str) -> Identity:
    # The participant id is Moodle's per assignment (assign_user_mapping): the same student
    # has another in the next lesson's export, so the id is the full name. Blind marking
    # writes "Participant" for every name: then the number is all there is.
    student = clean_id(name)
    if not student or student == "participant":
        student = f"participant_{participant}"
    return Identity("moodle", participant, student, file, name=name.strip())


def parse_blackboard(filename: str, receipts: dict[str, tuple[str, str]] | None = None
                     ) -> Identity | None:
    """`<Assignment>_<username>_attempt_<date>_<file>`; the attempt's receipt, when there,
    says where the username starts (an assignment name may hold `_`, a username too)."""
    match = _BLACKBOARD.match(filename)
    if not match or match["receipt"]:
        return None
    prefix, date = match["prefix"], match["date"]
    username, name = (receipts or {}).get(f"{prefix}_attempt_{date}", ("", ""))
    if not username or not prefix.endswith("_" + username):
        if "_" not in prefix:
            return None
        username = prefix.rsplit("_", 1)[1]
    assignment = prefix[: -len(username) - 1]
    student = clean_id(username)
    if not student:
        return None
    file = match["file"] or ""
    return Identity("blackboard", username, student, file, name=name,
                    order=int(date.replace("-", "")), assignment=assignment)


def blackboard_receipt(path: Path) -> tuple[str, str] | None:
    """(username, full name) from an attempt's receipt: `Name: First Last (username)`."""
    try:
        raw = read_regular(path, 1 << 20)
    except (OSError, ValueError):
        return None
    for line in raw.decode("utf-8", errors="replace").splitlines()[:20]:
        match = re.match(r"\s*Name:\s*(?P<name>.*?)\s*\((?P<user>[^()\s]+)\)\s*$", line)
        if match:
            return match["user"], one_line(match["name"], 128)
    return None


def parse_lms_file(filename: str, receipts=None) -> Identity | None:
    """The identity in a flat LMS file name (Canvas, Blackboard, Moodle's flat form). Where
    two forms match, the one whose system-written prefix is shorter wins: the student's own
    file name, after it, may imitate another form (and another student)."""
    found = [identity for identity in (parse_canvas(filename),
                                       parse_blackboard(filename, receipts),
                                       parse_moodle_file(filename)) if identity]
    return max(found, key=lambda identity: len(identity.file)) if found else None



def receipt_key(filename: str) -> str | None:
    """The attempt (`<prefix>_attempt_<date>`) whose Blackboard receipt `filename` is, or None."""
    match = _BLACKBOARD.match(filename)
    return f"{match['prefix']}_attempt_{match['date']}" if match and match["receipt"] else None
