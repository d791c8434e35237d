"""The committed student notebooks are exactly what `make release` generates from solutions/,
and every one of them has what the release adds: navigation between lessons, points in the
exercise headings, and the tag that lets Run All go past an unanswered exercise."""

from __future__ import annotations

import filecmp
import re

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.release import (NAV_TAG, RUN_ON, START_PAGE, ReleaseError, finish_lesson,
                                lesson_title, release)
from coursekit.lab import course_intro
from conftest import COURSE_ROOT, LESSONS, read_notebook, solution_path, student_path
from notebook_support import grading

HEADING = re.compile(r"^#{2,4}\s*Exercise\s+(\d+)\b.*$", re.M)


def test_notebooks_folder_is_up_to_date(tmp_path):
    generated = release(release_dir=tmp_path / "notebooks")
    committed = COURSE_ROOT / "notebooks"
    stale = []
    for lesson in LESSONS:
        ours = sorted(p.name for p in (generated / lesson).iterdir())
        theirs = sorted(p.name for p in (committed / lesson).iterdir()) if (committed / lesson).is_dir() else []
        if ours != theirs:
            stale.append(f"{lesson}: files {theirs} committed, {ours} generated")
            continue
        _, mismatch, errors = filecmp.cmpfiles(generated / lesson, committed / lesson, ours, shallow=False)
        stale += [f"{lesson}/{name}" for name in mismatch + errors]
    if not filecmp.cmp(generated / START_PAGE, committed / START_PAGE, shallow=False):
        stale.append(START_PAGE)
    assert not stale, "notebooks/ is out of date; run `make release` and commit: " + "; ".join(stale)


# --- what every released lesson has ------------------------------------------------------------

def _links(cell) -> list[str]:
    return re.findall(r"\]\(([^)]+)\)", cell.source)


def test_each_lesson_opens_and_closes_with_links_to_its_neighbours_and_the_start_page(lesson):
    cells = read_notebook(student_path(lesson)).cells
    index = LESSONS.index(lesson)
    before = LESSONS[index - 1] if index else None
    after = LESSONS[index + 1] if index + 1 < len(LESSONS) else None
    expected = {f"../{START_PAGE}"} | {f"../{n}/{n}.ipynb" for n in (before, after) if n}
    for cell in (cells[0], cells[-1]):
        assert cell.cell_type == "markdown" and NAV_TAG in cell.metadata.tags
        assert set(_links(cell)) == expected, cell.source
    for link in expected:
        assert (COURSE_ROOT / "notebooks" / lesson / link).resolve().is_file(), link
    assert "Restart Kernel and Run All Cells" in cells[0].source
    if after:
        number, title = lesson_title(read_notebook(solution_path(after)), after)
        assert f"**Next:** [Lesson {number}: {title} →](../{after}/{after}.ipynb)" in cells[-1].source
    assert [NAV_TAG in c.metadata.get("tags", []) for c in cells].count(True) == 2


def test_every_test_cell_lets_run_all_go_on_and_answer_cells_keep_running(lesson):
    for cell in read_notebook(student_path(lesson)).cells:
        meta, tags = grading(cell), cell.metadata.get("tags", [])
        if meta.get("grade"):
            assert RUN_ON in tags, meta["grade_id"]
        elif meta.get("solution") and cell.cell_type == "code":
            # Stubs of these lessons sit inside functions: the answer cell itself runs.
            assert RUN_ON not in tags, meta["grade_id"]


def test_every_exercise_heading_names_its_points_once(lesson):
    notebook = read_notebook(student_path(lesson))
    points = {int(re.search(r"-ex(\d+)-", grading(c)["grade_id"])[1]): grading(c)["points"]
              for c in notebook.cells if grading(c).get("grade")}
    found = {}
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            for match in HEADING.finditer(cell.source):
                found[int(match[1])] = match[0]
    assert set(found) == set(points)
    for number, heading in found.items():
        assert heading.lower().count("point") == 1, heading
        unit = "point" if points[number] == 1 else "points"
        assert heading.endswith(f"({points[number]:g} {unit})"), heading


def test_graded_and_answer_cells_are_unchanged_so_nbgrader_checksums_hold(lesson):
    from nbgrader.utils import compute_checksum

    for cell in read_notebook(student_path(lesson)).cells:
        meta = grading(cell)
        if meta.get("grade") or meta.get("solution"):
            assert compute_checksum(cell) == meta["checksum"], meta["grade_id"]


def test_the_release_folders_start_page_sends_students_to_make_lab():
    text = (COURSE_ROOT / "notebooks" / START_PAGE).read_text()
    assert "make lab" in text and "work/" in text


def _readme_times() -> dict[str, tuple[int, int]]:
    """Each lesson's (core, Going further) minutes from the README's lesson table."""
    _, teaches = course_intro(COURSE_ROOT)
    times = {}
    for lesson, what in teaches.items():
        found = re.search(r"\((\d+) \+ (\d+) min\)\s*$", what)
        assert found, f"README.md's row for {lesson} ends without (<core> + <Going further> min)"
        times[lesson] = int(found[1]), int(found[2])
    return times


def test_the_release_folders_start_page_gives_each_lessons_time_from_the_readme():
    text = (COURSE_ROOT / "notebooks" / START_PAGE).read_text()
    times = _readme_times()
    for lesson in LESSONS:
        rows = [line for line in text.splitlines() if f"]({lesson}/{lesson}.ipynb)" in line]
        assert len(rows) == 1, f"{START_PAGE} has no row (or several) for {lesson}"
        core, further = times[lesson]
        assert rows[0].endswith(f"| {core} min | {further} min | {core + further} min | CPU only |"), rows[0]


def test_each_lessons_time_line_agrees_with_the_readme(lesson):
    """The opening cell's **Time:** line and the README's table give the same minutes."""
    opening = next(c.source for c in read_notebook(solution_path(lesson)).cells
                   if "**Time:**" in c.source)
    line = " ".join(opening[opening.index("**Time:**"):].split())
    core = re.search(r"about (\d+) minutes for the core", line)
    further = re.search(r'"Going further".*?(?:about|some) (\d+) (?:minutes )?more', line)
    assert core and further, line
    assert (int(core[1]), int(further[1])) == _readme_times()[lesson], line


# --- finish_lesson on small notebooks -----------------------------------------------------------

def _exercise(number: int, points: int, heading: str, *, top_level_stub: bool = False):
    answer = new_code_cell("# YOUR CODE HERE\nraise NotImplementedError()" if top_level_stub
                           else "def f():\n    # YOUR CODE HERE\n    raise NotImplementedError()")
    answer.metadata["nbgrader"] = {"grade": False, "solution": True, "locked": False,
                                   "grade_id": f"09-ex{number}-answer", "schema_version": 3}
    test = new_code_cell("f()")
    test.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True,
                                 "points": points, "grade_id": f"09-ex{number}-test",
                                 "schema_version": 3}
    return [new_markdown_cell(heading + "\n\nDo this."), answer, test]


def _lesson(tmp_path, *exercises):
    notebook = new_notebook(cells=[new_markdown_cell("# Lesson 09 — Small things")])
    for exercise in exercises:
        notebook.cells += exercise
    path = tmp_path / "09_small.ipynb"
    nbformat.write(notebook, path)
    return path


TITLES = {"08_before": ("08", "Before"), "09_small": ("09", "Small things"),
          "10_after": ("10", "After")}
ORDER = list(TITLES)


def test_finish_lesson_adds_points_tags_and_navigation_once(tmp_path):
    path = _lesson(tmp_path, _exercise(1, 2, "### Exercise 1 — One"),
                   _exercise(2, 1, "### Exercise 2 — Two (1 point)"),
                   _exercise(3, 3, "## Exercise 3: three", top_level_stub=True))
    finish_lesson(path, "09_small", ORDER, TITLES)
    finish_lesson(path, "09_small", ORDER, TITLES)  # a second run changes nothing
    cells = nbformat.read(path, as_version=4).cells
    assert [c.cell_type for c in cells].count("markdown") == 6
    assert cells[0].id == "course-navigation-top" and cells[-1].id == "course-navigation-bottom"
    assert "[← Lesson 08: Before](../08_before/08_before.ipynb)" in cells[0].source
    assert "[Lesson 10: After →](../10_after/10_after.ipynb)" in cells[0].source
    assert cells[2].source.startswith("### Exercise 1 — One (2 points)\n")
    assert cells[5].source.startswith("### Exercise 2 — Two (1 point)\n")
    assert cells[8].source.startswith("## Exercise 3: three (3 points)\n")
    tags = [c.metadata.get("tags", []) for c in cells]
    assert tags[3] == [] and tags[4] == [RUN_ON] and tags[9] == [RUN_ON] and tags[10] == [RUN_ON]


def test_the_last_lesson_points_back_to_the_start_page(tmp_path):
    path = _lesson(tmp_path, _exercise(1, 2, "### Exercise 1 — One"))
    finish_lesson(path, "09_small", ["08_before", "09_small"], TITLES)
    bottom = nbformat.read(path, as_version=4).cells[-1].source
    assert "This is the last lesson" in bottom and f"(../{START_PAGE})" in bottom


@pytest.mark.parametrize("heading, message", [
    ("### Exercise 2 — Wrong number", "the heading above it says 'Exercise 2'"),
    ("### Task 1 — No exercise heading", "no markdown heading '### Exercise 1"),
])
def test_an_exercise_without_its_heading_stops_the_release(tmp_path, heading, message):
    path = _lesson(tmp_path, _exercise(1, 2, heading))
    with pytest.raises(ReleaseError, match=re.escape(message)):
        finish_lesson(path, "09_small", ORDER, TITLES)
