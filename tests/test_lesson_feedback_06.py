"""Lesson 06: the visible test cell of each exercise, run against a typical wrong answer,
fails with the message that names that mistake.

The test cells run in this process, after the lesson's import cell and the wrong answer
(the answers come from tests/variants/06_module_hooks.py); the first check that fails
raises an AssertionError whose text must contain the phrase given here.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io

import pytest

from conftest import read_notebook, solution_path
from notebook_support import grading

LESSON = "06_module_hooks"


def _variants() -> dict[tuple[str, str], str]:
    path = solution_path(LESSON).parents[2] / "tests" / "variants" / f"{LESSON}.py"
    spec = importlib.util.spec_from_file_location("variants_06", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {(v["exercise"], v["name"]): v["source"] for v in module.VARIANTS}


VARIANTS = _variants()
NOTEBOOK = read_notebook(solution_path(LESSON))


def _cell(grade_id: str) -> str:
    return next(c.source for c in NOTEBOOK.cells if grading(c).get("grade_id") == grade_id)


def first_failure(exercise: str, answer: str) -> str:
    """Run the lesson's imports, `answer` and the exercise's test cell; the message of the
    AssertionError it raises ("" when it passes)."""
    namespace: dict = {"__name__": "__main__"}
    imports = next(c.source for c in NOTEBOOK.cells if c.cell_type == "code")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        exec(compile(imports, "<imports>", "exec"), namespace)  # noqa: S102
        exec(compile(answer, "<answer>", "exec"), namespace)  # noqa: S102
        try:
            exec(compile(_cell(f"{exercise}-test"), "<test cell>", "exec"), namespace)  # noqa: S102
        except AssertionError as err:
            return str(err)
    return ""


CASES = [
    # 06-ex1: a copy made after model(x) returned is told so, not "you kept the output"
    ("06-ex1", "clones-after-the-pass", "copied it only after model(x) returned"),
    ("06-ex1", "keeps-detached-reference", "values after the in-place ReLU"),
    ("06-ex1", "clone-without-detach", "still requires grad"),
    ("06-ex1", "hook-never-removed", "Remove the hook with the handle"),
    ("06-ex1", "no-finally", "finally block"),
    # 06-ex2: late-binding closures get their own message
    ("06-ex2", "late-binding-closure", "reads the loop variable when it runs"),
    ("06-ex2", "named-children", "named_modules()"),
    ("06-ex2", "hooks-left-behind", "Hooks were left on the model"),
    # 06-ex3: the legacy hook is named as such; in-place zeroing fails on a residual block
    ("06-ex3", "legacy-backward-hook", "legacy hook (register_backward_hook)"),
    ("06-ex3", "zeroes-grad-output", "not grad_output"),
    ("06-ex3", "returns-none", "returns None changes nothing"),
    ("06-ex3", "zeroes-in-place", "do not change the tensors of grad_input in place"),
    ("06-ex3", "zeros-for-none", "keep None entries as None"),
]


@pytest.mark.parametrize("exercise,variant,phrase", CASES,
                         ids=[f"{e}-{v}" for e, v, _ in CASES])
def test_wrong_answer_gets_the_message_of_its_mistake(exercise, variant, phrase):
    message = first_failure(exercise, VARIANTS[(exercise, variant)])
    assert message, f"the test cell of {exercise} passes {variant}"
    assert phrase in message, message


@pytest.mark.parametrize("exercise", ["06-ex1", "06-ex2", "06-ex3"])
def test_the_solution_passes_its_test_cell(exercise):
    answer = _cell(f"{exercise}-answer")
    assert first_failure(exercise, answer) == ""
