"""Hints: one markdown cell tagged `hint` right before each exercise's answer cell, holding one to
three collapsed blocks `<details><summary>Hint k</summary> ... </details>` that lead toward the
idea without giving the code. tests/test_browser.py checks that one expands when clicked."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from conftest import read_notebook, solution_path, student_path
from notebook_support import grading, without_markers

pytestmark = pytest.mark.fast

FIXTURE = Path(__file__).parent / "fixtures" / "lab" / "practice.ipynb"
HINT_TAG = "hint"
BLOCK = re.compile(r"<details><summary>Hint (\d+)</summary>\n\n(.+?)\n\n</details>", re.S)


def hint_problems(notebook: nbformat.NotebookNode) -> list[str]:
    """What is wrong with the hint cells of a notebook (empty when nothing is)."""
    problems = []
    cells = notebook.cells
    for index, cell in enumerate(cells):
        if HINT_TAG not in cell.metadata.get("tags", []):
            continue
        where = f"hint cell {index}"
        following = cells[index + 1] if index + 1 < len(cells) else None
        if cell.cell_type != "markdown":
            problems.append(f"{where} is a {cell.cell_type} cell, not markdown")
        if following is None or not grading(following).get("solution"):
            problems.append(f"{where} is not right before an answer cell")
            solution = ""
        else:
            where = f"the hint cell of {grading(following)['grade_id']}"
            solution = without_markers(following.source)
        blocks = BLOCK.findall(cell.source)
        numbers = [int(number) for number, _ in blocks]
        if not 1 <= len(blocks) <= 3 or numbers != list(range(1, len(blocks) + 1)):
            problems.append(f"{where} must hold Hint 1 to Hint 1-3 in order, found {numbers}")
        if BLOCK.sub("", cell.source).strip():
            problems.append(f"{where} holds text outside its <details> blocks")
        body_lines = {line.strip() for line in solution.splitlines()
                      if len(line.strip()) > 10 and not line.strip().startswith(("def ", '"""', "#"))}
        for _, text in blocks:
            given = [line for line in body_lines if line in text]
            if given:
                problems.append(f"{where} gives away the solution's code: {given[0]!r}")
    return problems


def test_the_fixture_hint_is_well_formed():
    assert hint_problems(nbformat.read(FIXTURE, as_version=4)) == []


@pytest.mark.parametrize("change, problem", [
    (lambda s: s.replace("Hint 2", "Hint 3"), "must hold Hint 1 to Hint 1-3 in order"),
    (lambda s: s + "\n\nAnd a line outside.", "holds text outside its <details> blocks"),
    (lambda s: s.replace("element by element.", "element by element: `return 2 * t`."),
     "gives away the solution's code"),
    (lambda s: "\n".join([s] * 2).replace("Hint 2</summary>", "Hint 4</summary>"),
     "must hold Hint 1 to Hint 1-3 in order"),
])
def test_a_malformed_hint_is_reported(change, problem):
    notebook = nbformat.read(FIXTURE, as_version=4)
    hint = next(c for c in notebook.cells if HINT_TAG in c.metadata.get("tags", []))
    hint.source = change(hint.source)
    assert any(problem in found for found in hint_problems(notebook)), hint_problems(notebook)


def test_a_hint_away_from_its_answer_cell_is_reported():
    notebook = nbformat.read(FIXTURE, as_version=4)
    notebook.cells.insert(3, nbformat.v4.new_markdown_cell("In between."))
    assert any("not right before an answer cell" in p for p in hint_problems(notebook))


def test_hints_in_the_lessons_are_well_formed(lesson):
    for path in (solution_path(lesson), student_path(lesson)):
        assert hint_problems(read_notebook(path)) == [], path


def test_every_exercise_has_hints(lesson):
    """One hint cell before every answer cell (the lessons' content gives them)."""
    cells = read_notebook(solution_path(lesson)).cells
    missing = [grading(cell)["grade_id"] for index, cell in enumerate(cells)
               if grading(cell).get("solution") and cell.cell_type == "code"
               and not (index and HINT_TAG in cells[index - 1].metadata.get("tags", []))]
    assert not missing, f"{lesson}: exercises without a hint cell before their answer: {missing}"
