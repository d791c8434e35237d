"""The words of the graded page, end to end through `python -m autograder grade`: a hidden
check's exception shows its message without the hidden input, a long tensor says where its
largest difference is, and a paragraph is said once per page.

The course is the grading fixture (tests/fixtures/grading) with one more hidden scenario for
exercise 1, on 60 points; the inputs each student was drawn are computed here again from the
course secret, the student and the submission (as the grader draws them)."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.demo import Lessons, _write

pytestmark = pytest.mark.slow

A = fixture_course.LESSON_A
MANY_POINTS = '''

@scenario("01-ex1", uses=["cube_grad"], title="many points")
def many_points(cube_grad, rng):
    return {"cube_grad(x) on 60 points": cube_grad(torch.randn(60, generator=rng))}
'''
RAISES = '''import torch
def cube_grad(x):
    if x.numel() > 2:
        raise ValueError(f"cannot take {x} (<b>size</b> {x.numel()}, first {x[0].item():.3f})")
    return 3 * x.detach() ** 2
'''
LONG = '''import torch
def cube_grad(x):
    g = 3 * x.detach() ** 2
    if x.numel() > 10:
        g[37] = g[37] + 1000.0
    return g
'''


def page_text(page: str) -> str:
    page = re.sub(r"(?s)<(style|script|head)\b.*?</\1>", "", page)
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("words")
    root = fixture_course.build_course(base / "course")
    scenarios = root / "scenarios" / f"{A}.py"
    scenarios.write_text(scenarios.read_text() + MANY_POINTS)
    course = Lessons(root)
    for student, source in (("raises", RAISES), ("long", LONG)):
        _write(course.with_answer(A, source, base="correct"),
               base / "class" / student / f"{A}.ipynb")
    command = [sys.executable, "-m", "autograder", "grade", str(base / "class"), "--out",
               str(base / "out"), "--course-root", str(root), "--jobs", "1", "--timeout", "20",
               "--memory-limit", "2G", "--lessons", A]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, CI="true"))
    assert done.returncode == 0, done.stdout + done.stderr
    return {"root": root, "base": base, "out": base / "out"}


def _page(graded, student: str) -> str:
    return (graded["out"] / "feedback" / student / f"{A}.html").read_text(encoding="utf-8")


def _drawn(graded, student: str, name: str):
    """The input the hidden scenario `name` gave `student`'s answer."""
    from autograder.sandbox.observe import load_module
    from autograder.trusted.seeds import course_secret, scenario_seed, submission_digest
    from coursekit.scenarios import collect, generator

    root = graded["root"]
    found = {s.name: s for s in collect(load_module(
        (root / "scenarios" / f"{A}.py").read_text()))[0]}[name]
    digest = submission_digest((graded["base"] / "class" / student / f"{A}.ipynb").read_bytes())
    seen = []
    found.func(cube_grad=lambda x: seen.append(x.clone()) or x,
               rng=generator(scenario_seed(course_secret(root), student, "01-ex1", name,
                                           digest)))
    return seen[0]


def test_a_hidden_check_s_exception_shows_its_message_without_the_hidden_input(graded):
    page = _page(graded, "raises")
    text = page_text(page)
    said = re.findall(r"your code raised ValueError: “([^”]*)”", text)
    assert said and said[0].startswith("cannot take tensor(…) (<b>size</b> …, first …)"), said
    assert "line 4 of your cell" in text
    assert "<b>size</b>" not in page  # escaped: the student's text makes no markup
    for name in ("random_points", "many_points"):
        drawn = _drawn(graded, "raises", name)
        for value in drawn.tolist():
            for shown in (f"{value:.3f}", f"{value:.4f}", repr(value)):
                assert shown not in text, (name, shown)


def test_a_long_tensor_says_where_its_largest_difference_is(graded):
    text = page_text(_page(graded, "long"))
    assert ("cube_grad(x) on 60 points: 1 of 60 entries differ; the largest difference is at "
            "[37], about") in text, text[-3000:]
    drawn = _drawn(graded, "long", "many_points")
    for value in (3 * drawn ** 2).tolist():
        assert f"{value:.4g}" not in text.split("many points", 1)[-1]


def test_a_paragraph_is_said_once_on_the_page_and_kept_in_the_autograded_notebook(graded):
    relation = "right on the test cell's example, wrong on these inputs"
    text = page_text(_page(graded, "raises"))
    exercise = text[text.index("Exercise 1: 1 of 3 checks passed"):]
    exercise = exercise[:exercise.index("Exercise 2")]
    assert exercise.count(relation) == 1, exercise
    assert "CheckFailed: not right yet: see the first ✗ above" in exercise, exercise
    autograded = nbformat.read(graded["root"] / "autograded" / "raises" / A / f"{A}.ipynb",
                               as_version=4)
    outputs = str([c.get("outputs") for c in autograded.cells if c.cell_type == "code"])
    assert outputs.count(relation) >= 3  # under both hidden checks, and in the error
