"""Reading a submission's files without following links: only regular files, bounded."""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

MAX_NOTEBOOK_BYTES = 100 * 1024 * 1024


def open_regular(path: Path) -> int:
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


def read_regular(path: Path, limit: int) -> bytes:
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(handle.fileno()).st_size > limit:
            raise ValueError(f"it is larger than {limit >> 20} MB")
        return handle.read(limit + 1)


def copy_regular_file(source: Path, target: Path) -> None:
    """Copy `source` to `target` if it is a regular file (never through a symbolic link)."""
    fd = open_regular(Path(source))
    with os.fdopen(fd, "rb") as src, open(target, "wb") as dest:
        shutil.copyfileobj(src, dest)


def lmtime(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except OSError:
        return 0.0
