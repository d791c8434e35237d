"""The course's conventions, in one place for the release (`make release`), the lab
(`make lab`) and the class hub: where the course is, the start page's name, which folders are
lessons, and how a lesson's title is written in its notebook."""

from __future__ import annotations

import re
from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parent.parent
START_PAGE = "START-HERE.md"  # the page JupyterLab opens first, beside the lessons' folders
# A lesson's first markdown heading: "# Lesson 01 — Title" (an en dash or a hyphen also do).
LESSON_HEADING = re.compile(r"^#\s+Lesson\s+(\d+)\s*[—–-]\s*(.+?)\s*$", re.M)


def lessons_in(folder: Path) -> list[str]:
    """The lessons of `folder`, in order: its folders that hold a notebook of their own name."""
    return sorted(p.name for p in folder.iterdir() if (p / f"{p.name}.ipynb").is_file())


def heading_title(notebook: dict) -> tuple[str, str] | None:
    """(number, title) from the first markdown cell with a lesson heading, or None."""
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "markdown":
            source = cell.get("source", "")
            match = LESSON_HEADING.search("".join(source) if isinstance(source, list)
                                          else str(source))
            if match:
                return match[1].zfill(2), match[2]
    return None
