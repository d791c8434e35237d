"""Finding the submissions in a folder or zip and telling whose they are and their lessons
(each file is checked later, by `autograder.intake.validate`).

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

import os
import re
import unicodedata
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from autograder.intake.archives import extract_zip
from autograder.intake.files import lmtime
from autograder.intake.lms import (Identity, blackboard_receipt, parse_blackboard, parse_canvas,
                                   parse_lms_file, parse_moodle, parse_moodle_file, receipt_key,
                                   usable_folder_id)
from autograder.text import printable

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
        skipped += extract_zip(source, root)
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
            key = receipt_key(filename)
            if key and not path.is_symlink():
                receipt = blackboard_receipt(path)
                if receipt:
                    receipts[key] = receipt
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
    sub = Submission(student="", lesson=None, path=path, shown=shown, mtime=lmtime(path))
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
                           "student id (spaces at its ends, a leading dot, control characters, "
                           "bytes that are not UTF-8 or one of * ? [ ] \\), so its notebooks "
                           "were not graded.")
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

