"""Reading and copying what a student wrote, trusting none of it: each entry opened without
following a link (O_NOFOLLOW, relative to its folder's descriptor), only regular files and
folders, owned by the student, within limits of count and size. Used by the exchange's Collect
and Release Feedback, and by the hub's feedback on submit."""

from __future__ import annotations

import errno
import fnmatch
import os
import pwd
import stat
from dataclasses import dataclass, field

from autograder.text import one_line, printable

OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
OPEN_DIR = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC


class Refused(Exception):
    """A submission (or a feedback file) that is not taken; the message says why."""


@dataclass(frozen=True)
class Limits:
    entries: int
    file_bytes: int
    total_bytes: int
    depth: int = 8


@dataclass
class Scan:
    """What a submission's folder holds: the files to copy (paths relative to it), its
    folders, and the newest change time of it and its content."""
    files: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    ctime: float = 0.0
    total: int = 0  # bytes of its files
    seen: int = 0  # entries met, ignored ones included


def kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def account_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def open_folder(name: str, dir_fd: int | None) -> int:
    try:
        return os.open(name, OPEN_DIR, dir_fd=dir_fd)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused(f"{printable(name)} is not a folder (a link or a file)") from None
        raise


def scan(dir_fd: int, owner: int | None, limits: Limits, ignore: list[str],
         into: str | None = None, modes: tuple[int, int] = (0o750, 0o640)) -> Scan:
    """Walk the folder open at `dir_fd` without following links; with `into`, copy it there.

    Every entry must be a regular file or a folder owned by `owner` (None: any owner); names
    matching `ignore` (nbgrader's CourseDirectory.ignore) are left alone. Raises Refused."""
    found = Scan(ctime=os.fstat(dir_fd).st_ctime)
    _walk(dir_fd, "", owner, limits, ignore, into, modes, found, 0)
    return found


def _check_owner(info: os.stat_result, owner: int | None, where: str) -> None:
    if owner is not None and info.st_uid != owner:
        raise Refused(f"{where} belongs to {account_name(info.st_uid)}, not to the student")


def _walk(fd: int, rel: str, owner: int | None, limits: Limits, ignore: list[str],
          into: str | None, modes: tuple[int, int], found: Scan, depth: int) -> None:
    if depth > limits.depth:
        raise Refused(f"{printable(rel)}/ is nested more than {limits.depth} folders deep")
    _check_owner(os.fstat(fd), owner, f"{printable(rel) or 'the folder'}/")
    with os.scandir(fd) as entries:
        for entry in entries:
            found.seen += 1
            if found.seen > limits.entries:
                raise Refused(f"it holds more than {limits.entries} files and folders")
            name = entry.name
            if any(fnmatch.fnmatch(name, pattern) for pattern in ignore):
                continue
            path = f"{rel}/{name}" if rel else name
            shown = printable(path)
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            found.ctime = max(found.ctime, info.st_ctime)
            if stat.S_ISLNK(info.st_mode):
                target = os.readlink(name, dir_fd=fd)
                raise Refused(f"{shown} is a symbolic link (to {one_line(printable(target), 200)});"
                              " links are never followed")
            if stat.S_ISDIR(info.st_mode):
                found.folders.append(path)
                if into is not None:
                    os.mkdir(os.path.join(into, path))
                    os.chmod(os.path.join(into, path), modes[0])
                child = open_folder(name, fd)
                try:
                    _walk(child, path, owner, limits, ignore, into, modes, found, depth + 1)
                finally:
                    os.close(child)
            elif stat.S_ISREG(info.st_mode):
                _check_owner(info, owner, shown)
                found.files.append(path)
                found.total += info.st_size
                if info.st_size > limits.file_bytes:
                    raise Refused(f"{shown} is larger than {limits.file_bytes} bytes")
                if found.total > limits.total_bytes:
                    raise Refused(f"its files are larger than {limits.total_bytes} bytes together")
                if into is not None:
                    _copy_file(fd, name, shown, owner, limits, os.path.join(into, path),
                               modes[1], found)
            else:
                raise Refused(f"{shown} is {kind_of(info.st_mode)}, which is never read")


def _copy_file(fd: int, name: str, shown: str, owner: int | None, limits: Limits,
               target: str, mode: int, found: Scan) -> None:
    """Copy one file, opened without following a link, reading no more than the limits allow."""
    try:
        source = os.open(name, OPEN_FILE, dir_fd=fd)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise Refused(f"{shown} became a symbolic link; links are never followed") from None
        raise
    try:
        info = os.fstat(source)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"{shown} is {kind_of(info.st_mode)}, which is never read")
        _check_owner(info, owner, shown)
        room = min(limits.file_bytes, limits.total_bytes - found.total + info.st_size)
        written = 0
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      mode)
        try:
            while chunk := os.read(source, min(1 << 20, room + 1 - written)):
                written += len(chunk)
                if written > room:
                    raise Refused(f"{shown} grew past the limit while it was copied")
                os.write(out, chunk)
        finally:
            os.close(out)
        os.chmod(target, mode)
        found.total += written - info.st_size
        found.ctime = max(found.ctime, os.fstat(source).st_ctime)
    finally:
        os.close(source)


def make_folders(path: str, mode: int) -> None:
    """os.makedirs, each folder it makes with `mode` whatever the umask (none for others)."""
    if os.path.isdir(path):
        return
    make_folders(os.path.dirname(path), mode)
    os.mkdir(path)
    os.chmod(path, mode)


def read_small(path: str, limit: int) -> str:
    """The text of a regular file of at most `limit` bytes (never through a link)."""
    try:
        fd = os.open(path, OPEN_FILE)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise Refused(f"{path} is a symbolic link; links are never followed") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"{path} is {kind_of(info.st_mode)}")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise Refused(f"{path} is larger than {limit} bytes")
    return data.decode("utf-8", errors="replace")

