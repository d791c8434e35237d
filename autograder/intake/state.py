"""The grader's one state file in a course, kept between runs: `autograded/.autograder-state.json`.

Its sections:
- "graded": per file in the course's submitted/ (as shown), the content digest the last run
  read and whether the gradebook keeps its grades: grading only what is new since then.
- "notebooks": per student and lesson, the digest of the notebook whose grades the gradebook
  holds (hand-given grades belong to that notebook only: `autograder.course_records`).

Writing one section keeps the other. A course graded before the two were one file has them
in `.autograder-graded.json` and `.autograder-notebooks.json` beside it: a section the state
file does not hold is read from there, and they are removed once the state file is written.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

from autograder.intake.collect import Submission
from autograder.intake.digests import content_digest

STATE_FILE = ".autograder-state.json"  # in the course's autograded/ folder
EARLIER_FILES = {"graded": ".autograder-graded.json", "notebooks": ".autograder-notebooks.json"}


def _section(path: Path, name: str):
    """The section `name` of the state file at `path`, else of the earlier file of it beside
    it; None when neither holds it (or cannot be read)."""
    path = Path(path)
    for candidate in (path, path.with_name(EARLIER_FILES[name])):
        try:
            data = json.loads(candidate.read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        if name in data:
            return data[name]
    return None


def read_state(path: Path) -> dict[str, dict]:
    """{file shown: {"digest": sha256, "graded": whether the gradebook keeps its grades}}."""
    try:
        graded = _section(path, "graded") or {}
        return {str(k): {"digest": str(v.get("digest", "")), "graded": bool(v.get("graded"))}
                for k, v in graded.items() if isinstance(v, dict)}
    except (OSError, ValueError, AttributeError):
        return {}


def read_notebooks(path: Path) -> dict[str, dict[str, str]]:
    """{student: {lesson: sha256 of the notebook whose grades the gradebook holds}}."""
    try:
        data = _section(path, "notebooks") or {}
        return {str(student): {str(lesson): str(digest) for lesson, digest in lessons.items()}
                for student, lessons in data.items() if isinstance(lessons, dict)}
    except (OSError, ValueError, AttributeError):
        return {}


def write_state(path: Path, graded: dict[str, dict]) -> None:
    _write(Path(path), graded, read_notebooks(path))


def write_notebooks(path: Path, notebooks: dict[str, dict[str, str]]) -> None:
    _write(Path(path), read_state(path), notebooks)


def _write(path: Path, graded: dict[str, dict], notebooks: dict[str, dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps({"version": 2, "graded": graded, "notebooks": notebooks},
                                    indent=0, sort_keys=True), encoding="utf-8")
    os.replace(temporary, path)
    for name in EARLIER_FILES.values():  # their sections are in the state file now
        earlier = path.with_name(name)
        if earlier != path and (earlier.is_file() or earlier.is_symlink()):
            earlier.unlink()


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
