"""Grading only what is new since the last run (the course's submitted/): content digests kept
between runs."""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from pathlib import Path

from autograder.intake.collect import Submission
from autograder.intake.files import MAX_NOTEBOOK_BYTES, read_regular

STATE_FILE = ".autograder-graded.json"  # in the course's autograded/ folder


def content_digest(sub: Submission) -> str:
    """sha256 of the notebook and of nbgrader's timestamp.txt beside it ('' if unreadable)."""
    digest = hashlib.sha256()
    try:
        if sub.path.is_symlink():  # where it points, never what
            digest.update(b"link\0" + os.fsencode(os.readlink(sub.path)))
            return digest.hexdigest()
        digest.update(read_regular(sub.path, MAX_NOTEBOOK_BYTES))
        stamp = sub.path.parent / "timestamp.txt"
        if len(Path(sub.shown).parts) == 3 and stamp.is_file() and not stamp.is_symlink():
            digest.update(b"\0timestamp\0" + read_regular(stamp, 1 << 16))
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

