"""A class that arrives as a zip: extracted safely (no path out, no link, bounded sizes)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import time
import zipfile
from pathlib import Path

from autograder.intake.files import MAX_NOTEBOOK_BYTES
from autograder.text import one_line, printable

MAX_ARCHIVE_BYTES = 4 * 1024 * 1024 * 1024  # all of a zip's members together, extracted
MAX_ARCHIVE_MEMBERS = 50_000


def extract_zip(archive: Path, into: Path) -> list[str]:
    """Extract `archive` safely into `into`: no paths outside it, no links, no oversized
    members; a member that cannot be read is skipped and said so."""
    problems = []
    total = 0
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as err:
        raise ValueError(f"{archive} cannot be read as a zip archive ({one_line(err, 200)})")
    except UnicodeDecodeError:  # Python reads every member's name on opening the archive
        raise ValueError(f"{archive} cannot be read as a zip archive: the name of a file in it "
                         "is marked as UTF-8 but is not. Extract it with another tool (unzip) "
                         "and grade the folder: that file alone is then refused.") from None
    with zf:
        members = zf.infolist()
        if len(members) > MAX_ARCHIVE_MEMBERS:
            raise ValueError(f"{archive} holds {len(members)} files, more than the "
                             f"{MAX_ARCHIVE_MEMBERS} a class can have")
        for info in members:
            shown = printable(info.filename)
            name = info.filename.replace("\\", "/")
            parts = [p for p in name.split("/") if p not in ("", ".")]
            if info.is_dir() or not parts:
                continue
            if ".." in parts or name.startswith("/") or re.match(r"^[A-Za-z]:", name):
                problems.append(f"{shown}: skipped (a path outside the archive)")
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                problems.append(f"{shown}: skipped (a symbolic link in the archive, not "
                                "followed)")
                continue
            if info.file_size > MAX_NOTEBOOK_BYTES:
                problems.append(f"{shown}: skipped (larger than "
                                f"{MAX_NOTEBOOK_BYTES >> 20} MB)")
                continue
            total += info.file_size
            if total > MAX_ARCHIVE_BYTES:
                problems.append(f"{shown} and the files after it: skipped (the archive "
                                f"holds more than {MAX_ARCHIVE_BYTES >> 30} GB)")
                break
            target = into.joinpath(*parts)
            try:
                if target.is_symlink() or (target.exists() and not target.is_file()):
                    raise ValueError("another member of the archive is already there")
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as source, open(target, "wb") as dest:
                    shutil.copyfileobj(source, dest)
                stamp = time.mktime(info.date_time + (0, 0, -1))
                os.utime(target, (stamp, stamp))
            except Exception as err:  # noqa: BLE001 (a bad member is skipped, not fatal)
                problems.append(f"{shown}: skipped (cannot be extracted: "
                                f"{one_line(err, 200) or type(err).__name__})")
                if target.is_file() and not target.is_symlink():
                    target.unlink()  # no half-written file is graded
    return problems
