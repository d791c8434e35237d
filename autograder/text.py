"""Text that goes into grades.csv, logs, feedback and pages: one line, nothing that acts on a
terminal or a page's layout."""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, line and paragraph separators, zero-width and bidirectional marks.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def one_line(text: object, limit: int = 2000) -> str:
    """`text` as one line: control characters (newlines, escapes, bidirectional marks) become
    spaces, each run of white space one space, and at most `limit` characters."""
    text = " ".join(CONTROL.sub(" ", str(text)).split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."
