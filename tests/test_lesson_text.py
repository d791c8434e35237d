"""What students read is honest about the texts the lessons correct: it says
what a text is instead of "the source", keeps the internal example ids in cell tags only, and
each note on a text is an Erratum (the text was wrong) or a Then and now (torch changed)."""

from __future__ import annotations

import re

import pytest

from autograder.release import COURSE_ROOT, NAV_TAG
from coursekit.lab import course_intro
from conftest import SPEC_EXAMPLES, read_notebook, solution_path, student_path

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


def test_each_time_line_adds_up(lesson):
    """The **Time:** line splits the core into sections and exercises, and gives the total:
    the parts add up to the core, and core plus Going further to the total."""
    opening = next(c.source for c in read_notebook(solution_path(lesson)).cells
                   if "**Time:**" in c.source)
    line = " ".join(opening[opening.index("**Time:**"):].split())
    core = re.search(r"about (\d+) minutes for the core[,:] some (\d+) for .*? (?:and )?(\d+) for the "
                     r"(?:\w+ )?exercises", line)
    total = re.search(r'"Going further".*?about (\d+) (?:minutes )?more: (\d+) in all', line)
    assert core and total, f"{lesson}: the **Time:** line lacks its parts or its total: {line}"
    assert int(core[2]) + int(core[3]) == int(core[1]), f"{lesson}: {line}"
    assert int(core[1]) + int(total[1]) == int(total[2]), f"{lesson}: {line}"


def test_the_instructors_table_gives_the_readmes_times():
    """docs/INSTRUCTORS.md's lesson table repeats the README's times: core, Going further,
    total."""
    _, teaches = course_intro(COURSE_ROOT)
    table = (COURSE_ROOT / "docs" / "INSTRUCTORS.md").read_text()
    for name, what in teaches.items():
        readme = re.search(r"\((\d+) \+ (\d+) min\)\s*$", what)
        row = re.search(rf"(?m)^\| `{name}` \| (\d+) min \| (\d+) min \| (\d+) min \|", table)
        assert readme and row, f"{name}: no time in README.md's table or docs/INSTRUCTORS.md's"
        core, further = int(readme[1]), int(readme[2])
        assert (int(row[1]), int(row[2]), int(row[3])) == (core, further, core + further), \
            f"{name}: docs/INSTRUCTORS.md gives {row.group(0)}, README.md ({core} + {further} min)"


def test_each_time_line_gives_the_readmes_times(lesson):
    """A lesson's **Time:** line, the README's table and so the start pages give one core and
    one Going further: a lesson whose material moved between them says so everywhere."""
    _, teaches = course_intro(COURSE_ROOT)
    readme = re.search(r"\((\d+) \+ (\d+) min\)\s*$", teaches[lesson])
    opening = next(c.source for c in read_notebook(solution_path(lesson)).cells
                   if "**Time:**" in c.source)
    line = " ".join(opening[opening.index("**Time:**"):].split())
    core = re.search(r"about (\d+) minutes for the core", line)
    further = re.search(r'"Going further".*?about (\d+) (?:minutes )?more', line)
    assert readme and core and further, f"{lesson}: {teaches[lesson]!r} / {line}"
    assert (int(core[1]), int(further[1])) == (int(readme[1]), int(readme[2])), \
        f"{lesson}: the **Time:** line says {line!r}, README.md ({readme[1]} + {readme[2]} min)"


SECTION = re.compile(r"(?m)^#{2,3} (\d+)\. ")


def test_sections_are_numbered_in_reading_order(lesson):
    """A lesson's numbered sections run 1, 2, 3… in the order a student reads them, the core's
    first and Going further's after them, and the **Time:** line and Going further's opening
    name the same core (lesson 05's core once ran 1–5, 7, 8, and its section 6 came after the
    summary)."""
    cells = read_notebook(solution_path(lesson)).cells
    numbers, core = [], None
    for cell in cells:
        if cell.cell_type != "markdown":
            continue
        if cell.source.startswith("## Exercises"):
            core = len(numbers)
        numbers += [int(n) for n in SECTION.findall(cell.source)]
    assert numbers == list(range(1, len(numbers) + 1)), \
        f"{lesson}: sections in reading order are numbered {numbers}"
    assert core, f"{lesson}: no numbered section before '## Exercises'"
    opening = next(c.source for c in cells if "**Time:**" in c.source)
    line = " ".join(opening[opening.index("**Time:**"):].split())
    said = re.search(r"for sections 1–(\d+)", line)
    assert said is None or int(said[1]) == core, f"{lesson}: the core is sections 1–{core}: {line}"
    further = re.search(r"\(sections? (\d+)(?:–(\d+))?\)", line)
    assert further is None or (int(further[1]), int(further[2] or further[1])) == \
        (core + 1, len(numbers)), f"{lesson}: Going further is sections {core + 1}–{len(numbers)}: {line}"
    needs = [re.search(r"need only sections 1–(\d+)", c.source) for c in cells
             if c.cell_type == "markdown" and c.source.startswith("## Going further")]
    assert all(found and int(found[1]) == core for found in needs), \
        f"{lesson}: Going further's opening must say the exercises need only sections 1–{core}"
