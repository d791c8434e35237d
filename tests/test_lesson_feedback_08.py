"""Lesson 08: the visible test cell of each exercise, run against a typical wrong answer,
fails with the message that names that mistake, or that shows what it measured; valid
alternatives and the solution pass it.

The test cells run in this process after the solution notebook's other cells, with the
answer cell replaced by the wrong answer (from tests/variants/08_hooks_in_a_training_stack.py);
exercise 3's test cell starts two processes (gloo over 127.0.0.1), as a student's does.
"""

from __future__ import annotations

import pytest

from feedback_support import first_message, variant_source, visible_test
from scenario_support import answer_cells

LESSON = "08_hooks_in_a_training_stack"

CASES = [
    # 08-ex1: checkpointing's second forward, the scale, the reentrant first pass, the names
    ("08-ex1", "rms-appended-in-forward", "runs again in the checkpoint's recomputation"),
    ("08-ex1", "scaled-norms", "divide by scaler.get_scale()"),
    ("08-ex1", "scale-read-once", "the scale was read once"),
    ("08-ex1", "children-only", "every nn.Linear at any depth"),
    ("08-ex1", "no-requires-grad-test", "only when output.requires_grad"),
    ("08-ex1", "mean-square-not-rms", "output rms of body.block.0"),
    ("08-ex1", "divides-by-the-square", "grad norm of body.block.0"),
    ("08-ex1", "no-handles", "return the handles"),
    # a late-binding closure is not told it appended in the recomputation
    ("08-ex1", "late-binding", "entries per layer (output rms, grad norm) after 3 steps"),
    # 08-ex3: the buffer read after all_reduce, a sum, no future, not a float
    ("08-ex3", "norm-after-average", "norms after averaging"),
    ("08-ex3", "summed", "summed, not averaged"),
    ("08-ex3", "returns-the-tensor", "must return a torch.futures.Future"),
    ("08-ex3", "returns-none", "must return a torch.futures.Future"),
    ("08-ex3", "rank-zero-only", "append one norm per call of the hook"),
    ("08-ex3", "norm-as-tensor", "append Python floats"),
    # 08-ex2: infinities, grad_output, forward only, counting from 1, hooks left
    ("08-ex2", "isnan-only", "torch.isnan does not see infinities"),
    ("08-ex2", "grad-output", "grad_output holds the NaN"),
    ("08-ex2", "forward-only", "the result for root_net(11)"),
    ("08-ex2", "loss-only", "the NaN appears only in the backward pass"),
    ("08-ex2", "steps-from-one", "count the steps from 0"),
    ("08-ex2", "last-found", "the first failed check of the run"),
    ("08-ex2", "hooks-left", "remove every handle before returning"),
]


@pytest.mark.parametrize("exercise,variant,phrase", CASES,
                         ids=[f"{e}-{v}" for e, v, _ in CASES])
def test_wrong_answer_gets_the_message_of_its_mistake(exercise, variant, phrase):
    message = first_message(LESSON, exercise, variant_source(LESSON, exercise, variant))
    assert message, f"the test cell of {exercise} passes {variant}"
    assert phrase in message, message


def test_a_late_binding_closure_is_not_told_it_appended_in_the_recomputation():
    message = first_message(LESSON, "08-ex1", variant_source(LESSON, "08-ex1", "late-binding"))
    assert "recomputation" not in message, message


@pytest.mark.parametrize("exercise", ["08-ex1", "08-ex3", "08-ex2"])
def test_the_solution_passes_its_test_cell(exercise):
    assert first_message(LESSON, exercise, answer_cells(LESSON)[f"{exercise}-answer"]) is None


@pytest.mark.parametrize("exercise,variant", [
    ("08-ex1", "pending-flag-and-floats"), ("08-ex1", "rms-from-norm"),
    ("08-ex3", "divide-in-then"), ("08-ex3", "torch-default-hook"),
    ("08-ex2", "nan-or-inf"), ("08-ex2", "watch-class"),
])
def test_valid_alternatives_pass_the_test_cell(exercise, variant):
    assert first_message(LESSON, exercise, variant_source(LESSON, exercise, variant)) is None


@pytest.mark.parametrize("exercise", ["08-ex1", "08-ex3", "08-ex2"])
def test_no_test_cell_says_passed(exercise):
    assert "passed" not in visible_test(LESSON, exercise).lower()
