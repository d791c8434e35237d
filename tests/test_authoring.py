"""docs/AUTHORING.md's "Scenarios" section: adding an exercise needs no change to
the grading code, and the worked example it quotes is the real exercise.

`test_a_new_exercise_grades_without_touching_the_grader` copies the fixture course
(tests/fixtures/grading), adds a third exercise to its lesson A exactly as the section says
(a markdown cell, an answer cell, a test cell, two scenarios and a mistake, nothing else), and
grades a right and a wrong notebook through `python -m autograder grade`: the right one earns
the new test cell's points, the wrong one does not, and its feedback names the mistake.
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell

from conftest import COURSE_ROOT

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

A = fixture_course.LESSON_A
DOC = COURSE_ROOT / "docs" / "AUTHORING.md"

NEW_ANSWER = ("def weight_grad(x, w):\n"
              "    ### BEGIN SOLUTION\n"
              "    w = w.detach().clone().requires_grad_(True)\n"
              "    (w * x).sum().backward()\n"
              "    return w.grad\n"
              "    ### END SOLUTION")
NEW_TEST = ("check_tensor('weight_grad(x, w)',\n"
            "             weight_grad(torch.tensor([1.0, -2.0]), torch.tensor([0.5, 3.0])),\n"
            "             torch.tensor([1.0, -2.0]))\n"
            "print('Exercise 3: correct.')")
NEW_SCENARIOS = '''

@scenario("01-ex3", uses=["weight_grad"], visible=True, title="the example")
def weights_example(weight_grad, rng):
    x, w = torch.tensor([1.0, -2.0]), torch.tensor([0.5, 3.0])
    return {"weight_grad(x, w)": weight_grad(x, w)}


@scenario("01-ex3", uses=["weight_grad"], title="random weights")
def random_weights(weight_grad, rng):
    n = int(torch.randint(2, 7, (), generator=rng))
    x, w = torch.randn(n, generator=rng), torch.randn(n, generator=rng)
    return {"weight_grad(x, w)": weight_grad(x, w)}


@mistake("01-ex3", "That is the gradient with respect to x (it equals w): differentiate with "
                   "respect to w, whose gradient is x.", replaces="weight_grad")
def gradient_for_x(x, w):
    return w.detach().clone()
'''
MISTAKE = "That is the gradient with respect to x (it equals w)"

# What two students wrote (not copied from the solution).
ANSWERS = {
    "01-ex1-answer": "def cube_grad(x):\n    return 3 * x.detach() ** 2",
    "01-ex2-answer": "def intermediate_grad(x):\n    return 2 * x.detach(), None",
}
RIGHT = ("def weight_grad(x, w):\n    w = w.detach().requires_grad_()\n"
         "    torch.dot(w, x).backward()\n    return w.grad")
WRONG = ("def weight_grad(x, w):\n    x = x.detach().requires_grad_()\n"
         "    (w * x).sum().backward()\n    return x.grad")


def _meta(grade_id: str, *, solution: bool, points: int | None = None) -> dict:
    meta = {"grade": not solution, "grade_id": grade_id, "locked": not solution,
            "schema_version": 3, "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def add_exercise(root: Path) -> None:
    """The course author's whole change: cells in the solution notebook, a scenario file edit."""
    path = root / "solutions" / A / f"{A}.ipynb"
    nb = nbformat.read(path, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if c.source.startswith("## Summary"))
    nb.cells[at:at] = [
        new_markdown_cell("## Exercise 3\nReturn the gradient of `(w * x).sum()` with respect "
                          "to `w`."),
        new_code_cell(NEW_ANSWER, metadata=_meta("01-ex3-answer", solution=True)),
        new_code_cell(NEW_TEST, metadata=_meta("01-ex3-test", solution=False, points=2)),
    ]
    nbformat.write(nb, path)
    scenarios = root / "scenarios" / f"{A}.py"
    scenarios.write_text(scenarios.read_text() + NEW_SCENARIOS)


def _student(root: Path, new_answer: str):
    nb = nbformat.read(root / "notebooks" / A / f"{A}.ipynb", as_version=4)
    answers = dict(ANSWERS, **{"01-ex3-answer": new_answer})
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution"):
            cell.source = answers[meta["grade_id"]]
    return nb


@pytest.mark.slow
def test_a_new_exercise_grades_without_touching_the_grader(tmp_path):
    from nbgrader.api import Gradebook

    from autograder.nbgrader_glue.inproc import release_notebooks

    root = fixture_course.build_course(tmp_path / "course", release=False)
    add_exercise(root)
    release_notebooks(root, root / "notebooks")
    released = (root / "notebooks" / A / f"{A}.ipynb").read_text()
    assert "weight_grad" in released and "BEGIN SOLUTION" not in released
    submissions = tmp_path / "class"
    for student, answer in (("right", RIGHT), ("wrong", WRONG)):
        (submissions / student).mkdir(parents=True)
        nbformat.write(_student(root, answer), submissions / student / f"{A}.ipynb")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
         "--course-root", str(root), "--jobs", "2", "--lessons", A],
        capture_output=True, text=True, env=dict(os.environ, CI="true"), timeout=600,
        cwd=COURSE_ROOT)
    assert done.returncode == 0, done.stdout + done.stderr

    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)
                if row["lesson"] == A}
    assert (rows["right"]["score"], rows["right"]["max_score"]) == ("5", "5"), rows["right"]
    assert (rows["wrong"]["score"], rows["wrong"]["max_score"]) == ("3", "5"), rows["wrong"]
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "autograd-hooks") as gb:
        for student, points in (("right", 2), ("wrong", 0)):
            grade = gb.find_grade("01-ex3-test", A, A, student)
            assert (grade.auto_score, grade.max_score) == (points, 2), student

    wrong = (out / "feedback" / "wrong" / f"{A}.html").read_text(encoding="utf-8")
    right = (out / "feedback" / "right" / f"{A}.html").read_text(encoding="utf-8")
    assert "Exercise 3: 2 of 2 checks passed" in right
    assert "Exercise 3: 0 of 2 checks passed" in wrong
    assert "✗ hidden check: random weights" in wrong
    assert f"likely mistake: {MISTAKE}" in wrong
    # The scenario source and the mistake's implementation never reach a student.
    for page in (wrong, right):
        assert "def random_weights" not in page and "gradient_for_x" not in page


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/AUTHORING.md has no section '## {title}'"
    return match.group(1)


def test_the_worked_example_is_the_real_exercise():
    """Every code block of the worked example is, line for line, in scenarios/02_retain_grad.py
    or in a cell of the lesson's solution notebook: the doc cannot drift from the course."""
    section = _section("Scenarios")
    example = section.split("### A worked example", 1)
    assert len(example) == 2, "the Scenarios section has no '### A worked example'"
    blocks = re.findall(r"```python\n(.*?)```", example[1].split("\n### ", 1)[0], re.S)
    assert len(blocks) >= 3, blocks
    lesson = "02_retain_grad"
    sources = [(COURSE_ROOT / "scenarios" / f"{lesson}.py").read_text()]
    nb = nbformat.read(COURSE_ROOT / "solutions" / lesson / f"{lesson}.ipynb", as_version=4)
    sources += [cell.source for cell in nb.cells if cell.cell_type == "code"]

    def lines(text: str) -> str:
        return "\n".join(line.rstrip() for line in text.strip().splitlines())

    real = [lines(s) for s in sources]
    for block in blocks:
        assert any(lines(block) in s for s in real), f"not in the course:\n{block}"


def test_the_scenarios_section_covers_what_an_author_needs():
    section = _section("Scenarios")
    for needed in ("@scenario(", "visible=True", "rng", "uses=", "encode", "tolerance=",
                   "@mistake(", "replaces=", ".autograder/secret", "count_calls",
                   "likely mistake:", "no change to the grading code"):
        assert needed in section, needed


def test_the_scenarios_section_says_how_floats_compare_now():
    """The tolerances the doc gives are coursekit.tolerance's: fitted to the dtype and to the
    largest value, with the scenario's rtol/atol as floors."""
    from coursekit.scenarios import DEFAULT_ATOL, DEFAULT_RTOL
    from coursekit.tolerance import EPS, ULPS

    section = " ".join(_section("Scenarios").split())
    assert "coursekit/tolerance.py" in section
    assert f"max(rtol, {ULPS} × eps)" in section and f"max(atol, {ULPS} × eps × scale)" in section
    assert set(EPS) <= set(re.findall(r"\b(b?float\d+)\b", section)), "each dtype's eps"
    defaults = re.search(r"by default `([^`]+)` and `([^`]+)`", section)
    assert defaults and (float(defaults[1]), float(defaults[2])) == (DEFAULT_RTOL, DEFAULT_ATOL)
    assert "largest finite" in section and "floors" in section
    assert "floats compare with `rtol=1e-5, atol=1e-6`" not in section
