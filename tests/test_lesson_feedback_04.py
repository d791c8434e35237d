"""Lesson 04: the visible test cell of each exercise names the mistake a wrong answer makes.

Each case runs the exercise's visible test cell (as students have it) against a wrong answer
from tests/variants/04_vector_jacobian_products.py and checks the first message printed; the
reference answers pass every visible test cell.
"""

from __future__ import annotations

import pytest

from feedback_support import first_message, variant_source

LESSON = "04_vector_jacobian_products"

CASES = [
    # (exercise, variant, a phrase the first message must contain)
    ("04-ex1", "jv-instead-of-vjp", "That is J @ v, J times v taken as a column"),
    ("04-ex1", "sum-gradient-times-v", "multiplied by v entry by entry"),
    ("04-ex1", "ignores-v", "as if v were all ones"),
    ("04-ex1", "jacobian-row-by-row", "builds J row by row"),
    ("04-ex1", "jacrev", "torch.func.jacrev was called"),
    ("04-ex1", "requires-grad-on-x", "x must be left as it was"),
    ("04-ex2", "column-instead-of-row", "That is column 2 of J"),
    ("04-ex2", "ones", "sum of all rows"),
    ("04-ex2", "accumulates-into-x-grad", "rows 2 and 0 added together"),
    ("04-ex2", "all-rows-then-pick", "one pass per output builds all of J"),
    ("04-ex3", "row-instead-of-column", "That is row 1 of J"),
    ("04-ex3", "functional-jvp", "torch.autograd.functional.jvp is not forward mode"),
    ("04-ex3", "ones-tangent", "sum of all columns"),
    ("04-ex3", "rows-then-entry", "builds J row by row"),
    ("04-ex3", "jacfwd", "torch.func.jacfwd was called"),
    ("04-ex4", "never-resets", "sum of all the products"),
    ("04-ex4", "zero-without-copy", "Every row is the last product"),
    ("04-ex4", "running-sum", "running sum"),
    ("04-ex4", "transposed", "The result is transposed"),
    ("04-ex4", "forward-per-row", "build the graph once"),
    # all of J in one batched pass: caught by the products the passes carry
    ("04-ex1", "vmap-jacobian-then-product", "A pass batched over one-hot vectors"),
    ("04-ex1", "batched-grad-jacobian", "A pass batched over one-hot vectors"),
    ("04-ex2", "vmap-all-rows", "a pass batched over every one-hot vector"),
    ("04-ex3", "vmap-all-columns", "a pass batched over every one-hot tangent"),
    ("04-ex4", "rows-of-j-then-matmul", "multiplying vs @ J"),
    ("04-ex4", "vmap-j-then-matmul", "multiplying vs @ J"),
]


@pytest.mark.parametrize("exercise,variant,phrase", CASES,
                         ids=[f"{e}-{v}" for e, v, _ in CASES])
def test_visible_feedback_names_the_mistake(exercise, variant, phrase):
    message = first_message(LESSON, exercise, variant_source(LESSON, exercise, variant))
    assert message is not None, "this wrong answer passes the visible test"
    assert phrase in message, message


def test_no_retain_graph_stops_with_pytorch_own_message():
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        first_message(LESSON, "04-ex4", variant_source(LESSON, "04-ex4", "no-retain-graph"))


@pytest.mark.parametrize("exercise,variant", [
    ("04-ex1", "func-vjp"), ("04-ex1", "weighted-sum-backward"),
    ("04-ex2", "grad-of-one-output"), ("04-ex2", "func-vjp-one-hot"),
    ("04-ex3", "forward-ad-dual"),
    ("04-ex4", "autograd-grad-per-row"), ("04-ex4", "vmap-over-vjp"), ("04-ex4", "batched-grad"),
])
def test_valid_alternatives_pass_the_visible_tests(exercise, variant):
    assert first_message(LESSON, exercise, variant_source(LESSON, exercise, variant)) is None
