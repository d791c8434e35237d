"""Lesson 07: the visible test cell of each exercise, run against a typical wrong answer,
fails with the message that names that mistake.

The test cells run in this process after the cells of the lesson they need (the imports,
the data, `layer_profile`) and the wrong answer (from tests/variants/07_hooks_in_practice.py);
the first check that fails raises an AssertionError whose text must contain the phrase.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.util
import io
import os

import pytest

from conftest import read_notebook, solution_path
from notebook_support import grading

LESSON = "07_hooks_in_practice"
NEEDED = {"torch", "train_images", "test_images", "layer_profile"}  # what the test cells use


def _variants() -> dict[tuple[str, str], str]:
    path = solution_path(LESSON).parents[2] / "tests" / "variants" / f"{LESSON}.py"
    spec = importlib.util.spec_from_file_location("variants_07", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {(v["exercise"], v["name"]): v["source"] for v in module.VARIANTS}


VARIANTS = _variants()
NOTEBOOK = read_notebook(solution_path(LESSON))


def _cell(grade_id: str) -> str:
    return next(c.source for c in NOTEBOOK.cells if grading(c).get("grade_id") == grade_id)


def _defines(source: str) -> set[str]:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import):
            names |= {alias.asname or alias.name for alias in node.names}
    return names


@functools.lru_cache(maxsize=None)
def _prologue() -> dict:
    """The namespace after the lesson's cells that define what the test cells need."""
    namespace: dict = {"__name__": "__main__"}
    here = os.getcwd()
    os.chdir(solution_path(LESSON).parent)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            for cell in NOTEBOOK.cells:
                if cell.cell_type == "code" and not grading(cell) \
                        and _defines(cell.source) & NEEDED:
                    exec(compile(cell.source, "<lesson cell>", "exec"), namespace)  # noqa: S102
    finally:
        os.chdir(here)
    return namespace


def first_failure(exercise: str, answer: str) -> str:
    """Run `answer` and the exercise's test cell; the message of the AssertionError it
    raises ("" when it passes)."""
    namespace = dict(_prologue())
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        exec(compile(answer, "<answer>", "exec"), namespace)  # noqa: S102
        try:
            exec(compile(_cell(f"{exercise}-test"), "<test cell>", "exec"), namespace)  # noqa: S102
        except AssertionError as err:
            return str(err)
    return ""


CASES = [
    # 07-ex1: the rules (no retain_grad, no kept outputs) are checked visibly; late binding
    ("07-ex1", "retain-grad", "retain_grad calls"),
    ("07-ex1", "autograd-grad-on-kept-outputs", "keep no output tensor"),
    ("07-ex1", "late-binding-closure", "reads the loop variable when it runs"),
    ("07-ex1", "backward-order", "forward order"),
    ("07-ex1", "weight-gradients", "weights' gradients"),
    ("07-ex1", "norms-as-tensors", "Python floats"),
    # 07-ex1: steepest_drop is the ratio diagnosis of section 4; each wrong reading named
    ("07-ex1", "smallest-norm", "fc2 has the smallest norm"),
    ("07-ex1", "ratio-inverted", "fc8 has the largest ratio"),
    ("07-ex1", "max-ratio", "fc8 has the largest ratio"),
    ("07-ex1", "names-next-layer", "key each ratio by its first layer"),
    ("07-ex1", "sorted-names", "fc10 and fc11 come before fc2"),
    ("07-ex1", "reversed-as-backward-order", "read backwards"),
    ("07-ex1", "difference-not-ratio", "not their difference"),
    ("07-ex1", "returns-the-ratio", "not a number"),
    # 07-ex2: the named messages come before the count mismatch
    ("07-ex2", "ignores-threshold", "fewer than min_elements elements are stored unchanged"),
    ("07-ex2", "strict-threshold", ">=, not >"),
    ("07-ex2", "converts-integers", "integer tensors (indices)"),
    ("07-ex2", "unpack-keeps-float16", "convert back to the dtype pack remembered"),
    ("07-ex2", "unpack-always-float32", "not always float32"),
    ("07-ex2", "counts-elements", "numbers of elements"),
    ("07-ex2", "counts-received-as-stored", "not of the one it receives"),
    # 07-ex3: no optimizer object; post-accumulate hooks; None, not zero_()
    ("07-ex3", "sgd-objects", "without torch.optim"),
    ("07-ex3", "tensor-hooks", "register_post_accumulate_grad_hook"),
    ("07-ex3", "grad-zeroed", "zero_() keeps the tensor"),
    ("07-ex3", "no-weight-decay", "weight-decay term is missing"),
    ("07-ex3", "uphill", "goes uphill"),
]


@pytest.mark.parametrize("exercise,variant,phrase", CASES,
                         ids=[f"{e}-{v}" for e, v, _ in CASES])
def test_wrong_answer_gets_the_message_of_its_mistake(exercise, variant, phrase):
    message = first_failure(exercise, VARIANTS[(exercise, variant)])
    assert message, f"the test cell of {exercise} passes {variant}"
    assert phrase in message, message


@pytest.mark.parametrize("exercise", ["07-ex1", "07-ex2", "07-ex3"])
def test_the_solution_passes_its_test_cell(exercise):
    assert first_failure(exercise, _cell(f"{exercise}-answer")) == ""


@pytest.mark.parametrize("exercise,variant", [
    ("07-ex1", "hook-factory-and-sorted"), ("07-ex1", "default-argument-and-ratios-dict"),
    ("07-ex2", "half-and-nbytes"), ("07-ex2", "half-when-floating"),
    ("07-ex3", "data-update-and-loop"), ("07-ex3", "decay-added-to-grad-first"),
])
def test_valid_alternatives_pass_the_test_cell(exercise, variant):
    assert first_failure(exercise, VARIANTS[(exercise, variant)]) == ""


# One of about 300 course secrets draws, for the hidden scenario "a random multilayer
# perceptron", a ReLU network with a layer whose units are all dead: the gradient that reaches
# it is zero, and steepest_drop divided by it, in the reference too (grading broke for that
# secret). This is the scenario seed that secret gives.
_DEAD_LAYER_SEED = 3440841560983473886


def test_the_reference_passes_a_random_network_with_a_layer_that_gets_no_gradient():
    from autograder.sandbox.observe import run_scenarios
    from autograder.trusted.outcomes import read_outcome

    import scenario_support as support

    runs = run_scenarios(support.scenario_module(LESSON), support.reference_namespace(LESSON),
                         [("profile_random_mlp", _DEAD_LAYER_SEED)])
    outcome = read_outcome(runs[f"profile_random_mlp/{_DEAD_LAYER_SEED}"])
    assert outcome.raised is None, outcome
    assert 0.0 in outcome.observations["norms"].values()
