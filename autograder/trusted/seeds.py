"""The course secret and the seeds it draws: each student's hidden inputs (trusted side only)."""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from autograder.intake.digests import submission_digest  # noqa: F401 (what seeds draw for)


def course_secret(root: Path) -> bytes:
    """The course's secret for drawing each student's inputs: `<root>/.autograder/secret`,
    created on first use (never in git, never in a notebook, never in a sandbox)."""
    folder = Path(root) / ".autograder"
    path = folder / "secret"
    try:
        return bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        pass
    folder.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(os.urandom(32).hex())
    return bytes.fromhex(path.read_text().strip())


def scenario_seed(secret: bytes, student: str, exercise: str, scenario: str,
                  submission: str) -> int:
    """The seed of a hidden scenario's inputs: drawn for this student and this submission
    (`submission`: its content's digest), so a re-grade of the same file draws the same inputs
    and any changed file other ones (what one submission learns of its inputs is of no use
    to the next)."""
    digest = hmac.new(secret, f"{student}\0{exercise}\0{scenario}\0{submission}".encode(),
                      hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 62) - 1)
