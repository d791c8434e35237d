"""Sizes of memory: the units, and the one way a person writes a memory limit.

The grading command (`--memory-limit`), the sandbox's policy and the class hub (`[limits]
memory` of class.toml) all read a size with `parse_memory` and print one with `format_memory`.
Only the standard library: the sandbox's side imports it too.
"""

from __future__ import annotations

import re

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40

_UNITS = {"": GiB, "k": KiB, "m": MiB, "g": GiB, "t": TiB}
# A number, then an optional unit letter, optionally followed by "B" or "iB" (4G, 4GB, 4GiB,
# 512m); a bare number is in GiB. "B" alone is no unit: "4B" is refused, never 4 GiB.
_SIZE = re.compile(r"\s*(\d{1,12}(?:\.\d{1,6})?)\s*(?:([kmgt])(?:i?b)?)?\s*", re.IGNORECASE)
_NO_LIMIT = ("none", "off")
_LONGEST = 40  # characters: a size is a few; anything longer is refused before it is read
EXAMPLE = 'write e.g. "4G", "512M" or "2.5GiB" (a bare number is in GiB), or "0" for no limit'
# The most a limit may be: setrlimit takes at most 2**63 - 1 bytes (a larger size was read,
# then failed every process it was set on), and no machine has a pebibyte of memory.
MOST = 1 << 50


def parse_memory(text: str) -> int:
    """'4G', '512M', '2.5GiB', '4GB' or '4' (GiB) in bytes; '0', 'none' or 'off': no limit (0).
    Raises ValueError, saying what was wrong and what to write, for anything else (a size over
    MOST, or one that is not zero but under a byte, included)."""
    if not isinstance(text, str):
        raise ValueError(f"not a memory size: {text!r}; {EXAMPLE}")
    if len(text) > _LONGEST:
        raise ValueError(f"not a memory size: {text[:_LONGEST]!r}... ({len(text)} characters); "
                         f"{EXAMPLE}")
    if text.strip().lower() in _NO_LIMIT:
        return 0
    match = _SIZE.fullmatch(text)
    if not match:
        raise ValueError(f"not a memory size: {text!r}; {EXAMPLE}")
    size = int(float(match.group(1)) * _UNITS[(match.group(2) or "").lower()])
    if size > MOST:
        raise ValueError(f"not a memory size: {text!r} is more than {format_memory(MOST)}, "
                         f"more than any machine has; {EXAMPLE}")
    if size == 0 and float(match.group(1)) != 0:  # "0.000001k": under a byte, never no limit
        raise ValueError(f"not a memory size: {text!r} is less than one byte; {EXAMPLE}")
    return size


def format_memory(size: int) -> str:
    """A size in bytes as a person reads it: '4 GiB', '256 MiB', '1.5 GiB'; 0 is 'no limit'."""
    if size <= 0:
        return "no limit"
    for unit, name in ((TiB, "TiB"), (GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if size >= unit:
            return f"{size / unit:g} {name}"
    return f"{size} bytes"
