"""Finding the submissions in a folder or zip, telling whose they are and their lessons, and
checking each file.

A class arrives as a folder or a zip (possibly wrapped in one more top-level folder) in one of
these layouts (`LAYOUTS`; "auto" tells them apart entry by entry):

- folders: `<student_id>/<lesson>.ipynb` or nbgrader's `<student_id>/<lesson>/<lesson>.ipynb`;
  the folder name is the student id, as it is (nbgrader's own ids);
- canvas: Canvas's "Download Submissions", flat:
  `<name>[_LATE]_<userid>_<submissionid>_<file>` (a re-upload: `<file>-1.ipynb`);
- moodle: Moodle's "Download all submissions" in folders,
  `<Full Name>_<participantid>_assignsubmission_file_/<file>` (or the same prefix on flat files);
- blackboard: `<Assignment>_<username>_attempt_<YYYY-MM-DD-HH-MM-SS>_<file>`, with the
  attempt's receipt `<Assignment>_<username>_attempt_<date>.txt` beside it.

From an LMS's names a clean student id is derived (`clean_id`: lowercase, only a-z 0-9 _ . -):
Canvas `<name>_<userid>` (`smithjohn_12345`), Moodle the full name (`john_smith`; two students
of the same name in one export get `_<participantid>`), Blackboard the username. Two different
students never share an id: a folder holding several students' notebooks, or two origins
giving the same id, is refused (`Submission.refused`), named in the reason, never merged.

The lesson comes from the file name, tolerating what browsers, Jupyter and learning systems do
to names (`01_x (1).ipynb`, `01_x-Copy1.ipynb`, `01_x-2.ipynb`, `01 X.ipynb`); a name that
matches no lesson, or more than one, is reported, never guessed. The submissions are only
read; a symbolic link in them is never followed, and every reason is one line of text.
"""

from __future__ import annotations

from autograder import _imports  # noqa: F401 (first: a quicker jsonschema import)

import contextlib
import csv
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import time
import unicodedata
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.text import CONTROL, one_line

MAX_NOTEBOOK_BYTES = 100 * 1024 * 1024
MAX_ARCHIVE_BYTES = 4 * 1024 * 1024 * 1024  # all of a zip's members together, extracted
MAX_ARCHIVE_MEMBERS = 50_000
MAX_CELLS = 2000  # the course's lessons have 37 to 74 cells
MAX_DEPTH = 100  # nesting of a notebook's JSON (about 6 in a lesson notebook)
# A cell's text (a lesson's longest is under 5 KB): rendering and highlighting a long one for
# the feedback page costs the grader far more time and memory than its size.
MAX_CELL_SOURCE = 256 * 1024
MAX_NOTEBOOK_SOURCE = 1024 * 1024  # all its cells' text (a lesson's is under 50 KB)
LAYOUTS = ("auto", "folders", "canvas", "moodle", "blackboard")
_SKIPPED_PARTS = {"__MACOSX", ".ipynb_checkpoints", "__pycache__"}


@dataclass
class Submission:
    student: str
    lesson: str | None
    path: Path  # the file to read (inside the extracted copy for a zip)
    shown: str  # the path as the instructor knows it, relative to SUBMISSIONS (printable)
    mtime: float
    notes: list[str] = field(default_factory=list)  # added to the reason of its row
    problem: str = ""  # why it cannot be attributed to a student and lesson (not guessed)
    original: Path | None = None  # where it lies in SUBMISSIONS, when read from a copy
    layout: str = "folders"  # folders | canvas | moodle | blackboard
    key: str = ""  # the LMS's own key: Canvas user id, Moodle participant id, username, folder
    name: str = ""  # the student's name as the LMS wrote it, when it did
    order: int = 0  # the LMS's order of submissions (Canvas's file id, Blackboard's attempt)
    refused: bool = False  # refused: whose it is cannot be told (several students, one id)
    digest: str = ""  # of its content (and nbgrader's timestamp.txt), for "new since last run"


@dataclass
class LessonSpec:
    """What a lesson's notebook must hold, from the gradebook (nbgrader's own record)."""

    name: str
    graded_ids: list[str]  # answer and test cells, in notebook order
    tests: dict[str, float]  # test cell id -> points
    locked: dict[str, set[str]]  # locked cell id -> checksums accepted (source, released)
    max_score: float


# --------------------------------------------------------------------------------------------
# Cells of grades.csv that a spreadsheet reads as text

_FORMULA_START = ("=", "+", "-", "@")
_PLAIN_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def spreadsheet_cell(value: object) -> object:
    """A CSV cell that a spreadsheet will not read as a formula: text that starts with = + - @
    (a student id, a name, a file name in a reason) gets a leading apostrophe, as spreadsheets
    themselves write literal text; numbers and other text are left as they are."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) \
            and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def printable(name: str) -> str:
    """A file name as it can be shown: each control character written as an escape (\\n)."""
    return CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), name)


# --------------------------------------------------------------------------------------------
# Names: lessons

def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower()
    return re.sub(r"[^0-9a-z]+", "_", text).strip("_")


def recognise_lesson(name: str, lessons: list[str]) -> str | None:
    """The lesson whose name `name` (a file or folder name) contains; None if none or several."""
    stem = _normalise(re.sub(r"\.ipynb$", "", name, flags=re.IGNORECASE))
    found: dict[str, str] = {}  # lesson -> the longest of its patterns found in the name
    for lesson in lessons:
        full = _normalise(lesson)
        patterns = [full]
        unnumbered = re.sub(r"^\d+_", "", full)
        if unnumbered != full and "_" in unnumbered:
            patterns.append(unnumbered)
        for pattern in patterns:
            if re.search(rf"(?:^|_){re.escape(pattern)}(?:_|$)", stem):
                if len(pattern) > len(found.get(lesson, "")):
                    found[lesson] = pattern
    # "01_a_b" also contains lesson "01_a": a match inside a longer match does not count.
    winners = [lesson for lesson, pattern in found.items()
               if not any(pattern != other and pattern in other for other in found.values())]
    return winners[0] if len(winners) == 1 else None


# --------------------------------------------------------------------------------------------
# Names: students

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
        and re.search(r"[*?\[\]/\\]", name) is None and CONTROL.search(name) is None


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


def _blackboard_receipt(path: Path) -> tuple[str, str] | None:
    """(username, full name) from an attempt's receipt: `Name: First Last (username)`."""
    try:
        raw = _read_regular(path, 1 << 20)
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


# --------------------------------------------------------------------------------------------
# Reading files without following links

def _open_regular(path: Path) -> int:
    """A descriptor of `path` if it is a regular file, never through a symbolic link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise ValueError("it is a symbolic link, which is never followed") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError("it is not a regular file")
    return fd


def _read_regular(path: Path, limit: int) -> bytes:
    fd = _open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(handle.fileno()).st_size > limit:
            raise ValueError(f"it is larger than {limit >> 20} MB")
        return handle.read(limit + 1)


def copy_regular_file(source: Path, target: Path) -> None:
    """Copy `source` to `target` if it is a regular file (never through a symbolic link)."""
    fd = _open_regular(Path(source))
    with os.fdopen(fd, "rb") as src, open(target, "wb") as dest:
        shutil.copyfileobj(src, dest)


def _lmtime(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except OSError:
        return 0.0


# --------------------------------------------------------------------------------------------
# Collecting

def _extract(archive: Path, into: Path) -> list[str]:
    """Extract `archive` safely into `into`: no paths outside it, no links, no oversized
    members; a member that cannot be read is skipped and said so."""
    problems = []
    total = 0
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as err:
        raise ValueError(f"{archive} cannot be read as a zip archive ({one_line(err, 200)})")
    with zf:
        members = zf.infolist()
        if len(members) > MAX_ARCHIVE_MEMBERS:
            raise ValueError(f"{archive} holds {len(members)} files, more than the "
                             f"{MAX_ARCHIVE_MEMBERS} a class can have")
        for info in members:
            shown = printable(info.filename)
            name = info.filename.replace("\\", "/")
            parts = [p for p in name.split("/") if p not in ("", ".")]
            if info.is_dir() or not parts:
                continue
            if ".." in parts or name.startswith("/") or re.match(r"^[A-Za-z]:", name):
                problems.append(f"{shown}: skipped (a path outside the archive)")
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                problems.append(f"{shown}: skipped (a symbolic link in the archive, not "
                                "followed)")
                continue
            if info.file_size > MAX_NOTEBOOK_BYTES:
                problems.append(f"{shown}: skipped (larger than "
                                f"{MAX_NOTEBOOK_BYTES >> 20} MB)")
                continue
            total += info.file_size
            if total > MAX_ARCHIVE_BYTES:
                problems.append(f"{shown} and the files after it: skipped (the archive "
                                f"holds more than {MAX_ARCHIVE_BYTES >> 30} GB)")
                break
            target = into.joinpath(*parts)
            try:
                if target.is_symlink() or (target.exists() and not target.is_file()):
                    raise ValueError("another member of the archive is already there")
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as source, open(target, "wb") as dest:
                    shutil.copyfileobj(source, dest)
                stamp = time.mktime(info.date_time + (0, 0, -1))
                os.utime(target, (stamp, stamp))
            except Exception as err:  # noqa: BLE001 (a bad member is skipped, not fatal)
                problems.append(f"{shown}: skipped (cannot be extracted: "
                                f"{one_line(err, 200) or type(err).__name__})")
                if target.is_file() and not target.is_symlink():
                    target.unlink()  # no half-written file is graded
    return problems


def _visible(path: Path) -> bool:
    return not path.name.startswith(".") and path.name not in _SKIPPED_PARTS


def _lms_flat(paths: list[Path]) -> bool:
    return bool(paths) and all(parse_lms_file(p.name) for p in paths)


def _find_root(root: Path, lessons: list[str], layout: str = "auto") -> Path:
    """Step into a single wrapping folder (`export/alice/...`, or a folder holding a flat LMS
    export), but not into a student's."""
    for _ in range(3):
        # Stray files beside the wrapper (index.html, a manifest) do not count.
        entries = [p for p in root.iterdir()
                   if _visible(p) and not p.is_symlink()
                   and (p.is_dir() or p.suffix.lower() == ".ipynb")]
        if len(entries) != 1 or not entries[0].is_dir():
            return root
        wrapper = entries[0]
        if layout in ("auto", "moodle") and parse_moodle(wrapper.name):
            return root  # one Moodle student's folder
        inner = [p for p in wrapper.iterdir() if _visible(p) and not p.is_symlink()]
        notebooks = [p for p in inner if p.is_file() and p.suffix.lower() == ".ipynb"]
        folders = [p for p in inner if p.is_dir()]
        if notebooks:
            flat_export = layout in ("canvas", "blackboard", "moodle") or (
                layout == "auto" and not folders and _lms_flat(notebooks))
            if not flat_export:
                return root  # a student's folder with notebooks in it
        elif any(recognise_lesson(p.name, lessons) for p in folders):
            return root  # a student's folder in nbgrader's layout
        elif not folders:
            return root
        root = wrapper
    return root


def collect(source: Path, lessons: list[str], workdir: Path, exclude: Path | None = None,
            layout: str = "auto") -> tuple[list[Submission], list[str]]:
    """All notebooks under `source` (a folder or a .zip), whose they are, and the names of
    the files skipped. `layout`: one of LAYOUTS."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r} (choose from {', '.join(LAYOUTS)})")
    source = Path(source)
    skipped: list[str] = []
    if source.is_file():
        if not zipfile.is_zipfile(source):
            raise ValueError(f"{source} is neither a folder nor a zip archive")
        root = Path(workdir) / "extracted"
        root.mkdir(parents=True, exist_ok=True)
        skipped += _extract(source, root)
    elif source.is_dir():
        root = source
    else:
        raise FileNotFoundError(f"{source} does not exist")
    base = _find_root(root, lessons, layout)
    notebooks: list[Path] = []
    receipts: dict[str, tuple[str, str]] = {}
    for dirpath, dirnames, filenames in os.walk(base):
        here = Path(dirpath)
        kept = []
        for name in sorted(dirnames):
            folder = here / name
            if not _visible(folder):
                continue
            if folder.is_symlink():
                skipped.append(f"{printable(folder.relative_to(base).as_posix())}/: a "
                               "symbolic link, not followed")
                continue
            if exclude is not None and folder.resolve() == exclude:
                continue
            kept.append(name)
        dirnames[:] = kept
        for filename in sorted(filenames):
            path = here / filename
            if not _visible(path):
                continue
            rel = path.relative_to(base)
            if path.suffix.lower() == ".ipynb":
                notebooks.append(path)
                continue
            if filename in ("timestamp.txt", "timestamp_claimed.txt",
                            "submission_secret.txt") and len(rel.parts) == 3:
                continue  # nbgrader's exchange keeps these with the notebook (its time, and
                # the secret its feedback is filed under)
            match = _BLACKBOARD.match(filename)
            if match and match["receipt"] and not path.is_symlink():
                receipt = _blackboard_receipt(path)
                if receipt:
                    receipts[f"{match['prefix']}_attempt_{match['date']}"] = receipt
                    continue  # read for the usernames
            kind = "a symbolic link, not followed" if path.is_symlink() else "not a notebook"
            skipped.append(f"{printable(rel.as_posix())}: {kind}")
    found = [_submission(path, path.relative_to(base).parts, lessons, layout, receipts)
             for path in notebooks]
    _refuse_crowded_folders(found)
    _separate_namesakes(found)
    refuse_merged(found)
    return found, skipped


_WHERE = {
    "folders": "each student's notebooks go in <student>/<lesson>.ipynb or "
               "<student>/<lesson>/<lesson>.ipynb",
    "canvas": "Canvas names a submission <name>_<userid>_<submissionid>_<file>",
    "moodle": "Moodle puts a submission in a folder <Full Name>_<id>_assignsubmission_file_",
    "blackboard": "Blackboard names a submission <Assignment>_<username>_attempt_<date>_<file>",
}


def _submission(path: Path, parts: tuple[str, ...], lessons: list[str], layout: str,
                receipts: dict) -> Submission:
    shown = printable("/".join(parts))
    sub = Submission(student="", lesson=None, path=path, shown=shown, mtime=_lmtime(path))
    identity, rest = None, list(parts)
    if layout in ("auto", "canvas", "blackboard", "moodle"):
        flat = {"auto": parse_lms_file(parts[-1], receipts),
                "canvas": parse_canvas(parts[-1]),
                "blackboard": parse_blackboard(parts[-1], receipts),
                "moodle": parse_moodle_file(parts[-1])}[layout]
        # In Moodle's folder export the folder is Moodle's, the file name the student's.
        if flat and (len(parts) == 1 or layout in ("canvas", "blackboard")):
            identity, rest = flat, [flat.file]
    if identity is None and layout in ("auto", "moodle"):
        folders = range(len(parts) - 1) if layout == "moodle" else range(min(1, len(parts) - 1))
        for index in folders:
            folder = parse_moodle(parts[index])
            if folder:
                identity, rest = folder, list(parts[index + 1:])
                break
    if identity is None and layout in ("canvas", "moodle", "blackboard"):
        sub.problem = (f"'{shown}' is not named as a {layout.capitalize()} export names a "
                       f"submission, so it was not graded: {_WHERE[layout]}.")
        return sub
    if identity is None:  # folders: the first folder is the student
        identity = Identity("folders", parts[0], parts[0] if len(parts) > 1 else "", parts[-1])
        rest = list(parts[1:]) or [parts[0]]
        if len(parts) > 1 and not usable_folder_id(parts[0]):
            sub.problem = (f"The folder name '{printable(parts[0])}' cannot be used as a "
                           "student id (spaces at its ends, a leading dot, control characters "
                           "or one of * ? [ ] \\), so its notebooks were not graded.")
            return sub
    sub.layout, sub.key, sub.student = identity.layout, identity.key, identity.student
    sub.name, sub.order, sub.notes = identity.name, identity.order, list(identity.notes)
    name = rest[-1]
    sub.lesson = recognise_lesson(name, lessons) if name else None
    if sub.lesson is None and identity.assignment:
        sub.lesson = recognise_lesson(identity.assignment, lessons)
    folder_lesson = recognise_lesson(rest[0], lessons) if len(rest) == 2 else None
    if sub.lesson is None:
        sub.lesson = folder_lesson
    if len(rest) > 2 or (len(rest) == 2 and folder_lesson is None):
        where = _WHERE["folders"] if identity.layout == "folders" else (
            f"in a {identity.layout.capitalize()} export the notebooks lie directly in the "
            "student's folder (or in <lesson>/)")
        sub.problem = (f"'{shown}' is not where a submission goes, so it was not graded: "
                       f"{where}.")
    return sub


def _refuse_crowded_folders(found: list[Submission]) -> None:
    """A student's folder whose notebooks carry several students' LMS names (a Canvas export
    unzipped into one folder) cannot be one student's: refuse all of it."""
    folders: dict[str, list[Submission]] = defaultdict(list)
    for sub in found:
        if sub.layout == "folders" and sub.student and not sub.problem:
            folders[sub.key].append(sub)
    for folder, subs in folders.items():
        owners: dict[str, list[str]] = defaultdict(list)
        for sub in subs:
            identity = parse_lms_file(sub.path.name)
            if identity is not None:
                owners[f"{identity.layout} {identity.student}"].append(sub.shown)
        if len(owners) < 2:
            continue
        listed = "; ".join(f"{owner.split(' ', 1)[1]}: {', '.join(files[:3])}"
                           + (" ..." if len(files) > 3 else "")
                           for owner, files in sorted(owners.items()))
        layouts = sorted({owner.split(" ", 1)[0] for owner in owners})
        for sub in subs:
            sub.refused, sub.student = True, ""
            sub.problem = (f"The folder '{printable(folder)}' holds the notebooks of "
                           f"{len(owners)} different students ({listed}), which cannot be "
                           "graded as one student's work: nothing in it was graded. Grade it "
                           f"with --layout {layouts[0]}, or give each student a folder of "
                           "their own.")


def _separate_namesakes(found: list[Submission]) -> None:
    """Two Moodle students with the same full name keep apart by their participant id."""
    names: dict[str, set[str]] = defaultdict(set)
    for sub in found:
        if sub.layout == "moodle" and not sub.problem:
            names[sub.student].add(sub.key)
    for sub in found:
        if sub.layout == "moodle" and not sub.problem and len(names[sub.student]) > 1:
            note = (f"Two students named '{sub.name}' submitted; this one is told apart by "
                    f"Moodle's participant number {sub.key}.")
            sub.student = f"{sub.student}_{sub.key}"
            sub.notes.append(note)


def refuse_merged(found: list[Submission]) -> None:
    """Refuse every notebook of a student id that two different origins would share (a
    Canvas file and a folder of that name, two names cleaned alike): never merge students."""
    origins: dict[str, dict[tuple[str, str], list[str]]] = defaultdict(lambda: defaultdict(list))
    for sub in found:
        if sub.student and not sub.problem:
            origins[sub.student][(sub.layout, sub.key)].append(sub.shown)
    for sub in found:
        if not sub.student or sub.problem or len(origins[sub.student]) < 2:
            continue
        listed = "; ".join(", ".join(f"'{f}'" for f in files[:2])
                           for files in origins[sub.student].values())
        sub.problem = (f"These notebooks come from {len(origins[sub.student])} different "
                       f"students who would all get the id '{sub.student}' ({listed}): none "
                       "of them was graded, so that no two students are merged. Rename the "
                       "folders or files so that each student's id is their own.")
        sub.refused, sub.student = True, ""


def layout_summary(found: list[Submission]) -> str:
    """`Canvas export (12 notebooks), folders (3 notebooks)`: what the class was read as."""
    names = {"folders": "student folders", "canvas": "Canvas export",
             "moodle": "Moodle export", "blackboard": "Blackboard export"}
    counts: dict[str, int] = defaultdict(int)
    for sub in found:
        if sub.student:
            counts[sub.layout] += 1
    return ", ".join(f"{names[layout]} ({count} notebook{'s' if count != 1 else ''})"
                     for layout, count in sorted(counts.items(), key=lambda kv: -kv[1]))


def pick_newest(files: list[Submission]) -> tuple[Submission, str | None]:
    """Of several files for one student and lesson, the newest wins: by the LMS's own order
    (Canvas's file id, Blackboard's attempt), then modification time, copy number, name."""
    if len(files) == 1:
        return files[0], None
    ordered = sorted(files, key=lambda s: (s.order, s.mtime, _copy_number(s.shown), s.shown))
    chosen = ordered[-1]
    others = ", ".join(f"'{s.shown}'" for s in ordered[:-1])
    return chosen, (f"{len(files)} files were submitted for this lesson; the newest, "
                    f"'{chosen.shown}', was graded and {others} ignored.")


def _copy_number(name: str) -> int:
    match = re.search(r"(?:\((\d+)\)|-copy(\d+)|-(\d+))\.ipynb$", name, flags=re.IGNORECASE)
    return int(next(g for g in match.groups() if g)) if match else 0


# --------------------------------------------------------------------------------------------
# The roster: ids, names and emails of the class

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
        text = _read_regular(path, 50 << 20).decode("utf-8-sig")
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


def record_students(config, records: dict[str, dict]) -> None:
    """Write the students' names, emails and LMS ids into nbgrader's gradebook."""
    from autograder.nbgrader_glue.inproc import gradebook

    fields = ("first_name", "last_name", "email", "lms_user_id")
    with gradebook(config) as gb:
        for student, record in sorted(records.items()):
            current = gb.update_or_create_student(student)
            values = {}
            for name in fields:
                value = one_line(record.get(name) or "", 128)
                if value and (record.get("overwrite") or not getattr(current, name)):
                    values[name] = value
            if values:
                gb.update_or_create_student(student, **values)


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


def settle_renamed_students(config, found: list[Submission], roster: Roster | None,
                            replace: bool, in_place: bool) -> dict[str, str]:
    """Before grading: when students of this run are in the gradebook under other ids, refuse
    (ValueError naming them; nothing is changed) or, with `replace`, give the gradebook's
    records and the course's folders this run's ids. Returns {old id: new id} replaced."""
    from nbgrader.api import SubmittedAssignment

    from autograder.nbgrader_glue.inproc import coursedir, gradebook

    if not Path(config.CourseDirectory.db_url.removeprefix("sqlite:///")).is_file():
        return {}
    records = student_records(found, roster, set(roster.entries) if roster else None)
    with gradebook(config) as gb:
        held = [{"id": s.id, "lms_user_id": s.lms_user_id, "email": s.email}
                for s in gb.students]
        pairs = renamed_students(records, held)
        if not pairs:
            return {}
        named = "; ".join(f"{old} is {new} in this run (the same {why})"
                          for old, (new, why) in sorted(pairs.items()))
        if not replace or in_place:
            how = ("rename the students' folders in submitted/ to the gradebook's ids" if
                   in_place else "run again with --replace-ids to give the gradebook's records "
                   "this run's ids (their submissions and manual grades go with them), or "
                   "grade with the ids the gradebook has (the roster used then)")
            raise ValueError(f"{len(pairs)} students of this run are in the gradebook under "
                             f"other ids already: {named}. Grading them would give each one "
                             f"two rows in the formgrader and the exports. To go on, {how}. "
                             "Nothing was graded or changed.")
        lessons = {old: {s.assignment.name for s in gb.find_student(old).submissions}
                   for old in pairs}
        for old, (new, _) in sorted(pairs.items()):
            both = sorted(lessons[old] & {s.assignment.name for s in gb.db.query(
                SubmittedAssignment).filter(SubmittedAssignment.student_id == new)})
            if both:
                raise ValueError(f"{old} and {new} (one student: {named}) both have "
                                 f"{', '.join(both)} in the gradebook, so the ids cannot be "
                                 f"replaced: remove one of them (`nbgrader db student remove "
                                 f"{old} --force`) and grade again. Nothing was graded or "
                                 "changed.")
        for old, (new, _) in sorted(pairs.items()):
            record = gb.find_student(old)
            target = gb.update_or_create_student(new)
            for name in ("first_name", "last_name", "email", "lms_user_id"):
                if not getattr(target, name) and getattr(record, name):
                    setattr(target, name, getattr(record, name))
            gb.db.query(SubmittedAssignment).filter(SubmittedAssignment.student_id == old) \
                .update({SubmittedAssignment.student_id: new}, synchronize_session=False)
            gb.db.commit()
            gb.db.expire_all()
            gb.db.delete(gb.find_student(old))
            gb.db.commit()
    course = coursedir(config)
    for old, (new, _) in pairs.items():
        for step in (course.submitted_directory, course.autograded_directory,
                     course.feedback_directory):
            for lesson in lessons[old]:
                source = Path(course.format_path(step, old, lesson))
                target = Path(course.format_path(step, new, lesson))
                if source.is_dir() and not source.is_symlink() and not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    source.rename(target)
            with contextlib.suppress(OSError):
                Path(course.format_path(step, old, "x")).parent.rmdir()  # only when empty
    return {old: new for old, (new, _) in pairs.items()}


# --------------------------------------------------------------------------------------------
# Grading only what is new since the last run (the course's submitted/)

STATE_FILE = ".autograder-graded.json"  # in the course's autograded/ folder


def content_digest(sub: Submission) -> str:
    """sha256 of the notebook and of nbgrader's timestamp.txt beside it ('' if unreadable)."""
    digest = hashlib.sha256()
    try:
        if sub.path.is_symlink():  # where it points, never what
            digest.update(b"link\0" + os.fsencode(os.readlink(sub.path)))
            return digest.hexdigest()
        digest.update(_read_regular(sub.path, MAX_NOTEBOOK_BYTES))
        stamp = sub.path.parent / "timestamp.txt"
        if len(Path(sub.shown).parts) == 3 and stamp.is_file() and not stamp.is_symlink():
            digest.update(b"\0timestamp\0" + _read_regular(stamp, 1 << 16))
    except (OSError, ValueError):
        return ""
    return digest.hexdigest()


def read_state(path: Path) -> dict[str, dict]:
    """{file shown: {"digest": sha256, "graded": whether the gradebook keeps its grades}}."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        graded = data.get("graded", {})
        return {str(k): {"digest": str(v.get("digest", "")), "graded": bool(v.get("graded"))}
                for k, v in graded.items() if isinstance(v, dict)}
    except (OSError, ValueError, AttributeError):
        return {}


def write_state(path: Path, graded: dict[str, dict]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps({"version": 1, "graded": graded}, indent=0, sort_keys=True),
                         encoding="utf-8")
    os.replace(temporary, path)


def new_since(found: list[Submission], state: dict[str, dict], in_gradebook) -> tuple[
        list[Submission], list[Submission]]:
    """(new, unchanged): a student's lesson is unchanged when every file of it has the digest
    recorded by the last run and, if that run graded it, the gradebook still holds it."""
    groups: dict[tuple[str, str], list[Submission]] = defaultdict(list)
    for sub in found:
        sub.digest = content_digest(sub)
        groups[(sub.student, sub.lesson or sub.shown)].append(sub)
    new, unchanged = [], []
    for (student, lesson), subs in groups.items():
        before = [state.get(sub.shown) or {} for sub in subs]
        same = all(sub.digest and old.get("digest") == sub.digest
                   for sub, old in zip(subs, before))
        if same and any(old.get("graded") for old in before):
            same = in_gradebook(student, lesson)
        (unchanged if same else new).extend(subs)
    return new, unchanged


# --------------------------------------------------------------------------------------------
# Checking one file

def cell_ids(nb) -> list[str]:
    ids = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade_id") and (meta.get("grade") or meta.get("solution")):
            ids.append(meta["grade_id"])
    return ids


def _labels_problem(nb) -> str | None:
    """What nbgrader's check of the cells' metadata (the first step of its autograding) finds
    wrong, or None."""
    from nbgrader.nbgraderformat import MetadataValidator

    try:
        MetadataValidator().validate_nb(nb)
    except Exception as err:  # noqa: BLE001 (ValidationError, SchemaTooOldError, ...)
        return one_line(str(err), 200) or type(err).__name__
    return None


def _nesting_problem(data) -> str | None:
    """Why the JSON is nested too deeply for a notebook, or None."""
    stack = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return (f"its JSON is nested more than {MAX_DEPTH} levels deep, which no notebook "
                    "is")
        if isinstance(item, dict):
            stack.extend((value, depth + 1) for value in item.values())
        elif isinstance(item, list):
            stack.extend((value, depth + 1) for value in item)
    return None


def _has_lone_surrogates(data) -> bool:
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def read_notebook(path: Path) -> tuple[object | None, str | None]:
    """The notebook at `path`, or None and the reason it cannot be read. Never raises."""
    try:
        return _read_notebook(Path(path))
    except Exception as err:  # noqa: BLE001 (whatever a file does, it is one row's problem)
        return None, one_line(f"The file could not be read as a notebook "
                              f"({type(err).__name__}: {err}".rstrip(": ") + ").", 300)


def _read_notebook(path: Path) -> tuple[object | None, str | None]:
    too_large = (f"The file is larger than {MAX_NOTEBOOK_BYTES >> 20} MB, too large to be a "
                 "lesson notebook: clear its outputs (Kernel > Restart Kernel and Clear "
                 "Outputs), save, and submit it again.")
    try:
        raw = _read_regular(path, MAX_NOTEBOOK_BYTES)
    except ValueError as err:
        if "larger" in str(err):
            return None, too_large
        return None, f"The file was not read: {err}."
    if len(raw) > MAX_NOTEBOOK_BYTES:
        return None, too_large
    if not raw.strip():
        return None, "The file is empty, so there is nothing to grade."
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        return None, (f"The file is not a readable notebook: it is not text (byte "
                      f"{err.start} is not UTF-8; was it saved as a notebook?).")
    del raw
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        return None, (f"The file is not a readable notebook: its JSON is broken at line "
                      f"{err.lineno}, column {err.colno} ({err.msg}).")
    except RecursionError:
        return None, ("The file is not a readable notebook: its JSON is nested more deeply "
                      "than any notebook is.")
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return None, "The file is not a Jupyter notebook (it has no list of cells)."
    if len(data["cells"]) > MAX_CELLS:
        return None, (f"The notebook has {len(data['cells'])} cells; a lesson notebook has "
                      f"fewer than 100 and a submission may have at most {MAX_CELLS}. Remove "
                      "the cells you added and submit it again.")
    problem = _nesting_problem(data)
    if problem:
        return None, f"The file is not a readable notebook: {problem}."
    total = 0
    for number, cell in enumerate(data["cells"], start=1):
        source = cell.get("source") if isinstance(cell, dict) else None
        size = (len(source) if isinstance(source, str) else
                sum(len(s) for s in source if isinstance(s, str))
                if isinstance(source, list) else 0)
        total += size
        if size > MAX_CELL_SOURCE:
            return None, (f"Cell {number} holds {size:,} characters of text; a cell may hold at "
                          f"most {MAX_CELL_SOURCE:,} (a lesson's longest is under 5,000). "
                          "Shorten it and submit the notebook again.")
        if total > MAX_NOTEBOOK_SOURCE:
            return None, (f"The notebook's cells hold more than {MAX_NOTEBOOK_SOURCE:,} "
                          "characters of text in all (a lesson's hold under 50,000). Remove "
                          "what you added and submit it again.")
    if re.search(r"\\u[dD][89a-fA-F]", text) and _has_lone_surrogates(data):
        return None, ("The file is not a readable notebook: it holds characters that are not "
                      "valid text (lone surrogates).")
    try:
        nb = nbformat.reads(text, as_version=4, capture_validation_error={})
        nbformat.validate(nb)
    except Exception as err:  # noqa: BLE001 (nbformat raises several kinds)
        message = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        return None, one_line(f"The file is not a valid Jupyter notebook: {message}.", 300)
    return nb, None


def _folder_links(sub: Submission | None) -> list[str]:
    """Symbolic links in the lesson folder of a notebook in nbgrader's layout (nbgrader copies
    that folder when it grades)."""
    if sub is None or sub.layout != "folders" or len(Path(sub.shown).parts) != 3:
        return []
    links = []
    for dirpath, dirnames, filenames in os.walk(sub.path.parent):
        for name in dirnames + filenames:
            if os.path.islink(os.path.join(dirpath, name)):
                links.append(printable(os.path.relpath(os.path.join(dirpath, name),
                                                       sub.path.parent)))
    return links


def check(path: Path, lesson: str, spec: LessonSpec, lesson_ids: dict[str, set[str]],
          submission: Submission | None = None) -> tuple[str | None, str, list[str]]:
    """(status, reason, notes) for the file submitted as `lesson`: status None when gradeable.
    Never raises: whatever goes wrong is the row's `invalid` with a reason."""
    try:
        status, reason, notes = _check(path, lesson, spec, lesson_ids, submission)
    except Exception as err:  # noqa: BLE001
        status, reason, notes = "invalid", (f"The notebook could not be checked "
                                            f"({type(err).__name__}); your instructor can "
                                            "review it."), []
    if submission is not None:
        notes = [*submission.notes, *notes]
    return status, one_line(reason), [one_line(note) for note in notes]


def _check(path: Path, lesson: str, spec: LessonSpec, lesson_ids: dict[str, set[str]],
           submission: Submission | None) -> tuple[str | None, str, list[str]]:
    from nbgrader import utils

    links = _folder_links(submission)
    if links:
        return "invalid", (f"The submission's folder holds symbolic links "
                           f"({', '.join(links[:5])}), which are never followed: submit the "
                           "files themselves."), []
    nb, problem = read_notebook(path)
    if nb is None:
        return "invalid", problem, []
    present = cell_ids(nb)
    expected = set(spec.graded_ids)
    if not expected & set(present):
        others = [name for name, ids in lesson_ids.items()
                  if name != lesson and ids & set(present)]
        if len(others) == 1:
            return "invalid", (f"This is the notebook of lesson {others[0]}, not of {lesson}: "
                               f"submit {lesson}.ipynb for this lesson."), []
        return "invalid", (f"None of the exercise cells of {lesson} are in this notebook (was it "
                           "re-created, or were the cells' metadata removed?). Download the "
                           "lesson again and copy your answers into it."), []
    missing = [gid for gid in spec.graded_ids if gid not in present]
    if missing:
        listed = ", ".join(missing[:6]) + (" ..." if len(missing) > 6 else "")
        return "invalid", (f"Cells missing: {len(missing)} of the lesson's exercise cells were "
                           f"deleted ({listed}). Download the lesson again and copy your answers "
                           "into it."), []
    foreign = [gid for gid in dict.fromkeys(present) if gid not in expected]
    if foreign:
        listed = ", ".join(printable(str(g)) for g in foreign[:6]) + \
            (" ..." if len(foreign) > 6 else "")
        return "invalid", (f"Cells labelled as exercise cells that {lesson} does not have "
                           f"({listed}; copied from another notebook?). Download the lesson "
                           "again and copy your answers into it."), []
    copied = sorted({gid for gid in present if present.count(gid) > 1})
    if copied:
        listed = ", ".join(printable(str(g)) for g in copied[:6]) + \
            (" ..." if len(copied) > 6 else "")
        return "invalid", (f"Cells copied: the exercise cell{'s' if len(copied) > 1 else ''} "
                           f"{listed} appear{'' if len(copied) > 1 else 's'} more than once (a "
                           "copied cell keeps the original's grading label). Keep one of each: "
                           "move your code into it, delete the copies, and submit again."), []
    problem = _labels_problem(nb)
    if problem:
        return "invalid", (f"The grading labels of its cells (nbgrader's metadata) are not "
                           f"valid: {problem}. Download the lesson again and copy your answers "
                           "into it."), []
    notes = []
    edited = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        gid = meta.get("grade_id")
        if gid in spec.locked:
            try:
                same = utils.compute_checksum(cell) in spec.locked[gid]
            except Exception:  # noqa: BLE001
                same = False
            if not same:
                edited.append(gid)
    if edited:
        tests = [gid for gid in edited if gid in spec.tests]
        kind = "test cell" if len(tests) == len(edited) else "read-only cell"
        plural = "s" if len(edited) > 1 else ""
        notes.append(f"The {kind}{plural} {', '.join(printable(str(g)) for g in edited)} had "
                     f"been edited; the original{plural} {'were' if plural else 'was'} "
                     "restored before grading.")
    return None, "", notes
