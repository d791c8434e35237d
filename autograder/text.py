"""Text that goes into grades.csv, logs, feedback and pages: one line, nothing that acts on a
terminal, a page's layout or a spreadsheet."""

from __future__ import annotations

import re

MAX_REASON = 2000

# C0 and C1 controls, DEL, line and paragraph separators, zero-width and bidirectional marks,
# and lone surrogates (a file name's bytes that are not UTF-8: nothing could write them).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"
                      "\ud800-\udfff]")


def one_line(text: object, limit: int = MAX_REASON) -> str:
    """`text` as one line: control characters (newlines, escapes, bidirectional marks) become
    spaces, each run of white space one space, and at most `limit` characters."""
    text = " ".join(_CONTROL.sub(" ", str(text)).split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


_FORMULA_START = ("=", "+", "-", "@")
_PLAIN_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def spreadsheet_cell(value: object) -> object:
    """A CSV cell that a spreadsheet will not read as a formula: text that starts with = + - @
    (a student id, a name, a file name in a reason) gets a leading apostrophe, as spreadsheets
    themselves write literal text; numbers and other text are left as they are."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) \
            and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def printable(name: str) -> str:
    """A file name as it can be shown: each control character written as an escape (\\n)."""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), name)


def has_control(text: str) -> bool:
    """Whether `text` holds a control character (as `one_line` and `printable` see them)."""
    return _CONTROL.search(text) is not None
