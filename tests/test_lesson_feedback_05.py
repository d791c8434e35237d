"""Lesson 05: the visible test cell of each exercise names the mistake a wrong answer makes,
and correct answers that earlier tests refused now pass.

Each case runs the exercise's visible test cell (as students have it) against an answer from
tests/variants/05_custom_function.py and checks the first message printed.
"""

from __future__ import annotations

import pytest

from feedback_support import first_message, variant_source

LESSON = "05_custom_function"

CASES = [
    # (exercise, variant, a phrase the first message must contain)
    ("05-ex1", "missing-product-rule-term", "second term"),
    ("05-ex1", "ignores-grad-output", "ignores grad_output"),
    ("05-ex1", "sigmoid-derivative", "the derivative of the sigmoid alone"),
    ("05-ex1", "ctx-attribute", "kept as a ctx attribute"),
    # the expected x.grad used to be computed from the upstream that backward had changed
    ("05-ex1", "multiplies-grad-output-in-place", "changed grad_output in place"),
    ("05-ex2", "true-derivative", "true derivative of sign"),
    ("05-ex2", "no-mask", "grad_output everywhere"),
    ("05-ex2", "mask-only", "holds ones instead of grad_output"),
    ("05-ex2", "hardtanh-boundary", "the boundary included"),
    ("05-ex2", "mask-from-grad-output", "taken from grad_output"),
    ("05-ex2", "masks-in-place", "changed grad_output in place"),
    ("05-ex3", "no-clamp", "grad_output unchanged"),
    ("05-ex3", "clamps-input", "looks like x clamped"),
    ("05-ex3", "zero-to-bound", "not [0, bound]"),
    ("05-ex3", "upper-only", "Only the upper bound clips"),
    ("05-ex3", "clamp-in-place", "clamped grad_output in place"),
    ("05-ex4", "slope-under-no-grad", "does not require grad"),
    ("05-ex4", "slope-from-detached-x", "does not require grad"),
    ("05-ex4", "slope-in-numpy", "does not require grad"),
    ("05-ex4", "slope-saved-in-setup-context", "does not require grad"),
    ("05-ex4", "once-differentiable", "does not require grad"),
    ("05-ex4", "ctx-in-forward", "a Function whose forward takes ctx"),
    ("05-ex4", "saves-the-inputs-tuple", "take x out of it"),
    ("05-ex4", "ctx-attribute", "kept as a ctx attribute"),
    ("05-ex4", "sigmoid-of-output", "the sigmoid of the output"),
    ("05-ex4", "one-minus-sigmoid", "1 − σ(x) = σ(−x)"),
    ("05-ex4", "ignores-grad-output", "ignores grad_output"),
]


@pytest.mark.parametrize("exercise,variant,phrase", CASES,
                         ids=[f"{e}-{v}" for e, v, _ in CASES])
def test_visible_feedback_names_the_mistake(exercise, variant, phrase):
    message = first_message(LESSON, exercise, variant_source(LESSON, exercise, variant))
    assert message is not None, "this wrong answer passes the visible test"
    assert phrase in message, message


def test_a_missing_none_for_bound_stops_with_pytorch_own_message():
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        first_message(LESSON, "05-ex3", variant_source(LESSON, "05-ex3", "no-none-for-bound"))


@pytest.mark.parametrize("exercise,variant", [
    # saves sigmoid(x) and the output: right gradients, and safe against a later in-place
    # change of x; the old visible test refused it ("save x")
    ("05-ex1", "saves-sigmoid-and-output"),
    ("05-ex1", "setup-context"), ("05-ex1", "numpy-backward-from-saved-x"),
    ("05-ex2", "torch-where"), ("05-ex2", "mask-saved-in-forward"),
    ("05-ex3", "returns-x-itself"), ("05-ex3", "bound-as-tensor-where"),
    ("05-ex3", "bound-saved-as-tensor"),
    ("05-ex4", "saves-output-expm1"), ("05-ex4", "vmap-rule-and-explicit-formula"),
])
def test_valid_alternatives_pass_the_visible_tests(exercise, variant):
    assert first_message(LESSON, exercise, variant_source(LESSON, exercise, variant)) is None
