"""What students read is honest about the texts the lessons correct (issue 33 item 2): it says
what a text is instead of "the source", keeps the internal example ids in cell tags only, and
each note on a text is an Erratum (the text was wrong) or a Then and now (torch changed)."""

from __future__ import annotations

import re

import pytest

from autograder.release import NAV_TAG
from conftest import SPEC_EXAMPLES, read_notebook, student_path

pytestmark = pytest.mark.fast

THE_SOURCE = re.compile(r"(?i)\b(the|a|one of the)\s+source(\s+texts?|'s|s')?\b|\bsource texts?\b")
# The ids of COURSE-SPEC's examples ("000.3": seed 000, third example), and any of that form.
ANY_ID = re.compile(r"(?<![\d.])00\d\.\d+(?![\d.])")
NOTE = re.compile(r"(?m)^> \*\*([^*]+)\*\*")
NOTE_HEADINGS = {"Erratum.", "Then and now."}


def _student_text(lesson: str) -> list[tuple[int, str]]:
    """(cell index, text) of what a student reads: markdown cells and the comments of code."""
    found = []
    for index, cell in enumerate(read_notebook(student_path(lesson)).cells):
        if cell.cell_type == "markdown":
            found.append((index, cell.source))
        elif cell.cell_type == "code":
            comments = [line.split("#", 1)[1] for line in cell.source.splitlines() if "#" in line]
            found.append((index, "\n".join(comments)))
    return found


def test_no_student_text_says_the_source(lesson):
    said = [(index, match.group(0)) for index, text in _student_text(lesson)
            for match in THE_SOURCE.finditer(text)]
    assert not said, f"{lesson}: say what the text is (COURSE-SPEC's opening), not {said}"


def test_no_student_text_shows_an_example_id(lesson):
    ids = set(SPEC_EXAMPLES[lesson])
    shown = [(index, match.group(0)) for index, text in _student_text(lesson)
             for match in ANY_ID.finditer(text)]
    shown += [(index, "# Example") for index, text in _student_text(lesson)
              if re.search(r"(?m)^\s*Example\b", text)]
    assert not shown, f"{lesson}: example ids belong in cell tags ({sorted(ids)}), not in {shown}"


def test_every_note_on_a_text_is_an_erratum_or_then_and_now(lesson):
    """A lesson's blockquote notes (the release's navigation cells aside) are notes on texts."""
    for index, cell in enumerate(read_notebook(student_path(lesson)).cells):
        if cell.cell_type != "markdown" or NAV_TAG in cell.metadata.get("tags", []):
            continue
        headings = NOTE.findall(cell.source)
        wrong = [h for h in headings if h not in NOTE_HEADINGS]
        assert not wrong, \
            f"{lesson}, cell {index}: a note headed {wrong}, not one of {NOTE_HEADINGS}"
        # A note's name appears only as its heading, so no prose calls an error a change.
        for name in ("Then and now", "Erratum"):
            assert cell.source.count(f"**{name}") == cell.source.count(f"> **{name}."), \
                f"{lesson}, cell {index}: '{name}' outside a note's heading"
