"""Checking one submitted file: a readable notebook of bounded size, of the right lesson, with
every exercise cell once and grading labels nbgrader can read. Never raises: a problem is the
row's `invalid` with a reason."""

from __future__ import annotations

from autograder.nbgrader_glue import patches  # noqa: F401 (first: a quicker jsonschema import)

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import nbformat

from autograder.intake.collect import Submission
from autograder.intake.files import MAX_NOTEBOOK_BYTES, read_regular
from autograder.intake.jsonscan import scan
from autograder.text import one_line, printable

MAX_CELLS = 2000  # the course's lessons have 37 to 74 cells
MAX_DEPTH = 100  # nesting of a notebook's JSON (about 6 in a lesson notebook)
# A cell's text (a lesson's longest is under 5 KB): rendering and highlighting a long one for
# the feedback page costs the grader far more time and memory than its size.
MAX_CELL_SOURCE = 256 * 1024
MAX_NOTEBOOK_SOURCE = 1024 * 1024  # all its cells' text (a lesson's is under 50 KB)
RAW_SOURCE_FACTOR = 6  # the most bytes of JSON one character of text takes (\uXXXX)
# Counted before the JSON is parsed (`autograder.intake.jsonscan`): parsing builds an object
# for each container and value, some 32 bytes of them per byte for nested empty lists. Outside
# the cells' sources (metadata, outputs, the cells' own structure) a lesson's executed notebook
# holds about 2,100 values and under 1 MB of strings; its sources about 2,000 lines.
MAX_VALUES = 2_000_000  # in all (the sources' lines are bounded by MAX_NOTEBOOK_SOURCE after)
MAX_OTHER_VALUES = 200_000  # outside the cells' sources
MAX_OTHER_BYTES = 16 << 20  # of strings outside the cells' sources


@dataclass
class LessonSpec:
    """What a lesson's notebook must hold, from the gradebook (nbgrader's own record)."""

    name: str
    graded_ids: list[str]  # answer and test cells, in notebook order
    tests: dict[str, float]  # test cell id -> points
    locked: dict[str, set[str]]  # locked cell id -> checksums accepted (source, released)
    max_score: float


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


def _count_problem(raw: bytes) -> str | None:
    """Why the notebook's JSON holds too much to be parsed (counted, never parsed), or None."""
    found = scan(raw, MAX_VALUES, MAX_DEPTH, notebook=True, max_other_items=MAX_OTHER_VALUES,
                 max_other_bytes=MAX_OTHER_BYTES)
    if found.over == "depth":
        return (f"The file is not a readable notebook: its JSON is nested more than {MAX_DEPTH} "
                "levels deep, which no notebook is.")
    if found.over == "items":
        return (f"The notebook holds more than {MAX_VALUES:,} values and lines of text (a "
                "lesson's hold under 5,000). Remove what you added (cells, outputs, metadata), "
                "save, and submit it again.")
    if found.over == "other_items":
        return (f"Outside its cells' code and text, the notebook holds more than "
                f"{MAX_OTHER_VALUES:,} values in its outputs and metadata (a lesson's hold under "
                "5,000). Clear its outputs (Kernel > Restart Kernel and Clear Outputs), remove "
                "metadata you added, save, and submit it again.")
    if found.over == "other_bytes":
        return (f"Outside its cells' code and text, the notebook holds more than "
                f"{MAX_OTHER_BYTES >> 20} MB in its outputs and metadata (a lesson's hold under "
                "1 MB). Clear its outputs (Kernel > Restart Kernel and Clear Outputs), remove "
                "metadata you added, save, and submit it again.")
    # Checked again on the parsed text below; counted here too because a cell's "source" may
    # be given twice in the JSON, the parser building the first (however large) and keeping
    # the second. Raw bytes: an escape (\n, \u00e9) is several bytes for one character.
    if found.source_bytes > RAW_SOURCE_FACTOR * MAX_NOTEBOOK_SOURCE:
        return (f"The notebook's cells hold more than {MAX_NOTEBOOK_SOURCE:,} characters of "
                "text in all (a lesson's hold under 50,000). Remove what you added and submit "
                "it again.")
    return None


def count_problem(path: Path) -> str | None:
    """Why the notebook at `path` holds too much to be parsed (it is counted, never parsed),
    or None; a file that cannot be read, or over the size cap, is a problem too."""
    try:
        raw = read_regular(path, MAX_NOTEBOOK_BYTES)
    except (OSError, ValueError) as err:
        return f"The file was not read: {err}."
    if len(raw) > MAX_NOTEBOOK_BYTES:
        return f"The file is larger than {MAX_NOTEBOOK_BYTES >> 20} MB."
    return _count_problem(raw)


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
        raw = read_regular(path, MAX_NOTEBOOK_BYTES)
    except ValueError as err:
        if "larger" in str(err):
            return None, too_large
        return None, f"The file was not read: {err}."
    if len(raw) > MAX_NOTEBOOK_BYTES:
        return None, too_large
    if not raw.strip():
        return None, "The file is empty, so there is nothing to grade."
    problem = _count_problem(raw)
    if problem:
        return None, problem
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
          submission: Submission | None = None
          ) -> tuple[Literal["invalid"] | None, str, list[str]]:
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
