"""A notebook's digests, in one place (each a sha256 in hex):

- `submission_digest`: of a submitted notebook's bytes. It seeds the notebook's hidden inputs
  (`autograder.trusted.seeds`), and a cluster's worker returns it to say which file it graded.
- `notebook_digest`: the same digest of a file, read without following a symbolic link: which
  notebook the gradebook's hand-given grades belong to (`autograder.course_records`).
- `content_digest`: of a notebook and of nbgrader's timestamp.txt beside it: whether a file in
  the course's submitted/ changed since the last run (`autograder.intake.state`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from autograder.intake.collect import Submission
from autograder.intake.files import MAX_NOTEBOOK_BYTES, read_regular


def submission_digest(content: bytes) -> str:
    """The digest of a submitted notebook's content, which its hidden inputs are drawn for."""
    return hashlib.sha256(content).hexdigest()


def notebook_digest(path: str | os.PathLike) -> str:
    """sha256 of a regular file's bytes (never read through a symbolic link)."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


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
