"""Finding the submissions in a folder or zip, telling their lessons, and checking each file.

A class arrives as `<student_id>/<lesson>.ipynb` or nbgrader's
`<student_id>/<lesson>/<lesson>.ipynb`, from a folder or a zip (possibly wrapped in one more
top-level folder). The lesson comes from the file name, tolerating what browsers, Jupyter and
learning systems do to names (`01_x (1).ipynb`, `01_x-Copy1.ipynb`, `jdoe_1234_01_x-2.ipynb`,
`01 X.ipynb`); a name that matches no lesson, or more than one, is reported, never guessed.
The submissions themselves are only read.
"""

from __future__ import annotations

from autograder import _imports  # noqa: F401 (first: a quicker jsonschema import)

import json
import os
import re
import shutil
import time
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

MAX_NOTEBOOK_BYTES = 100 * 1024 * 1024
_SKIPPED_PARTS = {"__MACOSX", ".ipynb_checkpoints", "__pycache__"}


@dataclass
class Submission:
    student: str
    lesson: str | None
    path: Path  # the file to read (inside the extracted copy for a zip)
    shown: str  # the path as the instructor knows it, relative to SUBMISSIONS
    mtime: float
    notes: list[str] = field(default_factory=list)
    problem: str = ""  # why it cannot be attributed to a student and lesson (not guessed)
    original: Path | None = None  # where it lies in SUBMISSIONS, when read from a copy


@dataclass
class LessonSpec:
    """What a lesson's notebook must hold, from the gradebook (nbgrader's own record)."""

    name: str
    graded_ids: list[str]  # answer and test cells, in notebook order
    tests: dict[str, float]  # test cell id -> points
    locked: dict[str, set[str]]  # locked cell id -> checksums accepted (source, released)
    max_score: float


# --------------------------------------------------------------------------------------------
# Names

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
# Collecting

def _extract(archive: Path, into: Path) -> list[str]:
    """Extract `archive` safely into `into` (no paths outside it, no oversized members)."""
    problems = []
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            name = info.filename.replace("\\", "/")
            parts = [p for p in name.split("/") if p not in ("", ".")]
            if info.is_dir() or not parts:
                continue
            if ".." in parts or name.startswith("/"):
                problems.append(f"{info.filename}: skipped (a path outside the archive)")
                continue
            if info.file_size > MAX_NOTEBOOK_BYTES:
                problems.append(f"{info.filename}: skipped (larger than "
                                f"{MAX_NOTEBOOK_BYTES >> 20} MB)")
                continue
            target = into.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as source, open(target, "wb") as dest:
                shutil.copyfileobj(source, dest)
            stamp = time.mktime(info.date_time + (0, 0, -1))
            os.utime(target, (stamp, stamp))
    return problems


def _visible(path: Path) -> bool:
    return not path.name.startswith(".") and path.name not in _SKIPPED_PARTS


def _find_root(root: Path, lessons: list[str]) -> Path:
    """Step into a single wrapping folder (`export/alice/...`), but not into a student's."""
    for _ in range(3):
        # Stray files beside the wrapper (index.html, a manifest) do not count.
        entries = [p for p in root.iterdir()
                   if _visible(p) and (p.is_dir() or p.suffix.lower() == ".ipynb")]
        if len(entries) != 1 or not entries[0].is_dir():
            return root
        inner = [p for p in entries[0].iterdir() if _visible(p)]
        if any(p.is_file() and p.suffix.lower() == ".ipynb" for p in inner):
            return root  # a student's folder with notebooks in it
        if any(p.is_dir() and recognise_lesson(p.name, lessons) for p in inner):
            return root  # a student's folder in nbgrader's layout
        if not any(p.is_dir() for p in inner):
            return root
        root = entries[0]
    return root


def collect(source: Path, lessons: list[str], workdir: Path,
            exclude: Path | None = None) -> tuple[list[Submission], list[str]]:
    """All notebooks under `source` (a folder or a .zip) and the names of the files skipped."""
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
    base = _find_root(root, lessons)
    found: list[Submission] = []
    for dirpath, dirnames, filenames in os.walk(base):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if _visible(here / d)
                             and (exclude is None or (here / d).resolve() != exclude))
        for filename in sorted(filenames):
            path = here / filename
            shown = path.relative_to(base).as_posix()
            if not _visible(path):
                continue
            if path.suffix.lower() != ".ipynb":
                skipped.append(f"{shown}: not a notebook")
                continue
            parts = path.relative_to(base).parts
            student = parts[0] if len(parts) > 1 else ""
            lesson = recognise_lesson(filename, lessons)
            folder_lesson = recognise_lesson(parts[1], lessons) if len(parts) == 3 else None
            if lesson is None:
                lesson = folder_lesson
            problem = ""
            if len(parts) > 3 or (len(parts) == 3 and folder_lesson is None):
                problem = (f"'{shown}' is not where a submission goes, so it was not graded: "
                           "each student's notebooks go in <student>/<lesson>.ipynb or "
                           "<student>/<lesson>/<lesson>.ipynb.")
            found.append(Submission(student=student, lesson=lesson, path=path, shown=shown,
                                    mtime=path.stat().st_mtime, problem=problem))
    return found, skipped


def pick_newest(files: list[Submission]) -> tuple[Submission, str | None]:
    """Of several files for one student and lesson, the newest (then the last by name) wins."""
    if len(files) == 1:
        return files[0], None
    ordered = sorted(files, key=lambda s: (s.mtime, _copy_number(s.shown), s.shown))
    chosen = ordered[-1]
    others = ", ".join(f"'{s.shown}'" for s in ordered[:-1])
    return chosen, (f"{len(files)} files were submitted for this lesson; the newest, "
                    f"'{chosen.shown}', was graded and {others} ignored.")


def _copy_number(name: str) -> int:
    match = re.search(r"(?:\((\d+)\)|-copy(\d+)|-(\d+))\.ipynb$", name, flags=re.IGNORECASE)
    return int(next(g for g in match.groups() if g)) if match else 0


# --------------------------------------------------------------------------------------------
# Checking one file

def cell_ids(nb) -> list[str]:
    ids = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade_id") and (meta.get("grade") or meta.get("solution")):
            ids.append(meta["grade_id"])
    return ids


def read_notebook(path: Path) -> tuple[object | None, str | None]:
    """The notebook at `path`, or None and the reason it cannot be read."""
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        return None, (f"The file is larger than {MAX_NOTEBOOK_BYTES >> 20} MB, too large to be a "
                      "lesson notebook.")
    raw = path.read_bytes()
    if not raw.strip():
        return None, "The file is empty, so there is nothing to grade."
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, "The file is not a readable notebook: it is not text (was it saved as a notebook?)."
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        return None, (f"The file is not a readable notebook: its JSON is broken at line "
                      f"{err.lineno}, column {err.colno} ({err.msg}).")
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return None, "The file is not a Jupyter notebook (it has no list of cells)."
    try:
        nb = nbformat.reads(text, as_version=4, capture_validation_error={})
        nbformat.validate(nb)
    except Exception as err:  # noqa: BLE001 (nbformat raises several kinds)
        message = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        return None, f"The file is not a valid Jupyter notebook: {message}."
    return nb, None


def check(path: Path, lesson: str, spec: LessonSpec,
          lesson_ids: dict[str, set[str]]) -> tuple[str | None, str, list[str]]:
    """(status, reason, notes) for the file submitted as `lesson`: status None when gradeable."""
    from nbgrader import utils

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
    notes = []
    edited = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        gid = meta.get("grade_id")
        if gid in spec.locked:
            try:
                same = utils.compute_checksum(cell) in spec.locked[gid]
            except (KeyError, ValueError, TypeError):
                same = False
            if not same:
                edited.append(gid)
    if edited:
        tests = [gid for gid in edited if gid in spec.tests]
        kind = "test cell" if len(tests) == len(edited) else "read-only cell"
        plural = "s" if len(edited) > 1 else ""
        notes.append(f"The {kind}{plural} {', '.join(edited)} had been edited; the original"
                     f"{plural} {'were' if plural else 'was'} restored before grading.")
    return None, "", notes
