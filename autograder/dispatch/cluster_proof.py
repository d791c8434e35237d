"""A cluster's worker proves that it holds the course secret, without showing it.

The command draws a nonce for each connection; a worker answers with an HMAC of the nonce and
its own address, keyed by a key derived from the course secret. Only workers whose answer the
command can recompute are sent the course and chunks, pinned to them by address. A worker
that merely reaches the scheduler (or carries a module of the grader's name) cannot answer.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

SECRET_ENV = "AUTOGRADER_SECRET_FILE"  # a worker's course secret (default: its course's)
_PURPOSE = b"autograder cluster: a worker proves it holds the course secret"


def proof_key(secret: bytes) -> bytes:
    return hmac.new(secret, _PURPOSE, hashlib.sha256).digest()


def prove(key: bytes, nonce: str, address: str) -> str:
    return hmac.new(key, f"{nonce}\0{address}".encode(), hashlib.sha256).hexdigest()


def proven(key: bytes, nonce: str, address: str, answer: object) -> bool:
    return isinstance(answer, str) and hmac.compare_digest(prove(key, nonce, address), answer)


def secret_path(course: Path) -> Path:
    return Path(os.environ.get(SECRET_ENV) or Path(course) / ".autograder" / "secret")


def read_secret(path: Path) -> tuple[bytes | None, str | None]:
    """The worker's course secret, or None and why it cannot be read (with whom it runs as)."""
    try:
        text = Path(path).read_text().strip()
    except OSError as err:
        return None, (f"it cannot read the course secret at {path} ({err.strerror or err}; "
                      f"the worker runs as uid {os.getuid()}): mount it readable by that uid")
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) < 16:
        return None, f"its course secret at {path} is not 32 bytes of hex"
    return secret, None
