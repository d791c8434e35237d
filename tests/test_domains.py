"""Hidden inputs from the whole domain an exercise allows, not only from its usual corner.

Each exercise declares once, in its scenario module, what its hidden checks draw from; the
statement cell of the exercise ends with the same "Graded on: ..." line, and the feedback page
shows it above the hidden checks. `coursekit.drawing.draw` draws from Hypothesis strategies,
seeded by the scenario's generator: the same seed draws the same value in any process, and
nothing is written to disk.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import nbformat
import pytest
from nbformat import from_dict

from autograder.release import lessons
from autograder.trusted.domains import add_domain_line, declared
from coursekit.drawing import (GRADED_ON, domain, domains, draw, float_lists, module_names,
                               names)
from coursekit.scenarios import generator

import scenario_support as support

LESSONS = lessons()


def _statement(lesson: str, exercise: str) -> str:
    """The markdown cell that states `exercise` (the last "### Exercise" cell before its
    answer cell)."""
    cells = support.solution(lesson).cells
    answer = next(i for i, c in enumerate(cells)
                  if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                  == f"{exercise}-answer")
    return next(c.source for c in reversed(cells[:answer])
                if c.cell_type == "markdown" and "### Exercise" in c.source)


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_exercise_declares_its_domain_once_and_its_statement_says_it(lesson):
    source = support.scenario_path(lesson).read_text()
    texts = domains(support.scenario_module(lesson))
    exercises = [gid.rsplit("-answer", 1)[0] for gid in support.answer_cells(lesson)]
    assert sorted(texts) == sorted(exercises), "one domain(...) per exercise"
    assert declared(source) == {k: " ".join(v.split()) for k, v in texts.items()}, \
        "the feedback page reads the same declarations"
    for exercise in exercises:
        statement = _statement(lesson, exercise)
        last = statement.rstrip().rsplit("\n\n", 1)[-1]
        assert last.startswith(GRADED_ON), f"{exercise}: the statement ends without the line"
        assert " ".join(last.removeprefix(GRADED_ON).split()) == " ".join(
            texts[exercise].split()), f"{exercise}: the notebook and the declaration differ"
    released = nbformat.read(support.ROOT / "notebooks" / lesson / f"{lesson}.ipynb",
                             as_version=4)
    said = " ".join(" ".join(c.source.split()) for c in released.cells
                    if c.cell_type == "markdown")
    for exercise in exercises:
        assert " ".join((GRADED_ON + texts[exercise]).split()) in said, \
            f"{exercise}: the released notebook lacks the line (run make release)"


def test_a_domain_is_one_line_declared_once():
    space: dict = {}
    exec("from coursekit.drawing import domain\ndomain('09-ex1', 'lists of floats')", space)  # noqa: S102
    assert domains(space) == {"09-ex1": "lists of floats"}
    with pytest.raises(ValueError, match="declared twice"):
        exec("domain('09-ex1', 'other')", space)  # noqa: S102
    with pytest.raises(ValueError, match="one line"):
        domain("09-ex2", "two\nlines")


def test_the_feedback_page_shows_the_domain_above_the_hidden_checks():
    cell = from_dict({"cell_type": "code", "source": "", "metadata": {}, "outputs": [
        {"output_type": "stream", "name": "stdout",
         "text": "Exercise 1: 2 of 3 checks passed.\n✓ visible example: the example\n"
                 "✗ hidden check: other values\n    - found 1\n✓ hidden check: zeros\n"}]})
    add_domain_line(cell, "lists of 1 to 12 floats")
    lines = cell.outputs[0]["text"].split("\n")
    assert lines[2] == "Graded on: lists of 1 to 12 floats"
    assert lines[3].startswith("✗ hidden check") and lines[1].startswith("✓ visible")
    assert sum(GRADED_ON in line for line in lines) == 1
    declared.cache_clear()
    assert declared('domain("09-ex1", "a " "b")\nx = domain(1, 2)\n') == {"09-ex1": "a b"}


def test_draws_depend_on_the_seed_only_and_cover_the_domain():
    strategy = float_lists(1, 12, 1e3)
    first = [draw(strategy, generator(seed)) for seed in range(40)]
    again = [draw(strategy, generator(seed)) for seed in range(40)]
    assert first == again
    assert len({repr(values) for values in first}) > 30
    flat = [x for values in first for x in values]
    assert all(-1e3 <= x <= 1e3 for x in flat)
    assert min(flat) < -100 and max(flat) > 100   # not only values near zero
    lengths = {len(values) for values in first}
    assert min(lengths) <= 3 and max(lengths) >= 9
    labels = [draw(names(1, 16), generator(seed)) for seed in range(40)]
    assert all(label.isidentifier() for label in labels)
    assert len(set(labels)) > 20 and not all(label.startswith("fc") for label in labels)


def test_drawn_module_names_are_names_a_submodule_can_have():
    """Names a model's submodules are registered under: distinct, any identifier, none that a
    module already has as an attribute (add_module refuses 'eval', 'forward', 'training')."""
    from collections import OrderedDict

    from torch import nn

    drawn = [draw(module_names(6, 1, 16), generator(seed)) for seed in range(60)]
    assert drawn == [draw(module_names(6, 1, 16), generator(seed)) for seed in range(60)]
    for labels in drawn:
        assert len(set(labels)) == 6
        nn.Sequential(OrderedDict((label, nn.Identity()) for label in labels))
    assert len({label for labels in drawn for label in labels}) > 200
    taken = set(dir(nn.Sequential()))
    assert not taken & {label for labels in drawn for label in labels}


def test_a_draw_is_the_same_in_another_process_and_writes_nothing(tmp_path):
    """The reference process and a student's sandbox draw the same inputs, whatever their hash
    seed; the draw leaves no file behind (no example database)."""
    code = textwrap.dedent("""
        from coursekit.drawing import draw, float_lists, names
        from coursekit.scenarios import generator
        print(repr([draw(float_lists(1, 12, 1e3), generator(s)) for s in range(5)]))
        print(repr([draw(names(), generator(s)) for s in range(5)]))
    """)
    env = dict(os.environ, PYTHONHASHSEED="123", HOME=str(tmp_path))
    found = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                           capture_output=True, text=True, check=True).stdout
    here = (repr([draw(float_lists(1, 12, 1e3), generator(s)) for s in range(5)]) + "\n"
            + repr([draw(names(), generator(s)) for s in range(5)]) + "\n")
    assert found == here
    assert list(tmp_path.iterdir()) == []


def test_importing_the_drawing_module_draws_nothing_and_the_runner_host_warms_it_up():
    """Hypothesis's one-off set-up (about 0.4 s) is paid once by the runner host before it
    forks notebooks, not by every process that imports `coursekit.drawing` (a student's kernel,
    the grader's trusted process, which reads only GRADED_ON)."""
    code = textwrap.dedent("""
        import sys
        import coursekit.drawing
        print("hypothesis" in sys.modules)
        from hypothesis.internal.conjecture import providers
        print("coursekit-drawing" in providers.AVAILABLE_PROVIDERS)
        from autograder.sandbox import shell
        shell.prepare([])
        print("coursekit-drawing" in providers.AVAILABLE_PROVIDERS)
    """)
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.split()
    assert found == ["False", "False", "True"]
