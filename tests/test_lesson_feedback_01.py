"""Lesson 01: each visible test cell, run against a typical wrong answer, names that mistake
first; run against the reference, it passes."""

from __future__ import annotations

import pytest

import scenario_support as support
from feedback_support import first_message

LESSON = "01_leaf_and_intermediate"


@pytest.mark.parametrize("exercise", ["01-ex1", "01-ex2", "01-ex3", "01-ex4"])
def test_reference_passes_the_visible_checks(exercise):
    reference = support.answer_cells(LESSON)[f"{exercise}-answer"]
    assert first_message(LESSON, exercise, reference) is None


WRONG = [
    ("01-ex1", "swapped", '''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, requires_grad=True)
    q = torch.tensor(q_values, requires_grad=True)
    ((p * q) ** 2 + p).sum().backward()
    return q.grad, p.grad
'''),
    # a leaf reached along two paths, listed twice: not "walk next_functions"
    ("01-ex2", "appears more than once", '''
def leaves_receiving_grad(output, named):
    names = []
    def walk(node):
        if node is None:
            return
        if hasattr(node, "variable"):
            names.extend(n for n, t in named.items() if t is node.variable)
        for child, _ in node.next_functions:
            walk(child)
    walk(output.grad_fn)
    return sorted(names)
'''),
    # equal values are not the same tensor
    ("01-ex2", "compare with `is`", '''
def leaves_receiving_grad(output, named):
    leaves, todo = [], [output.grad_fn]
    while todo:
        node = todo.pop()
        if node is None:
            continue
        if hasattr(node, "variable"):
            leaves.append(node.variable)
        todo += [child for child, _ in node.next_functions]
    return sorted(n for n, t in named.items() if any(torch.equal(t, leaf) for leaf in leaves))
'''),
    ("01-ex2", "not backward()", '''
def leaves_receiving_grad(output, named):
    output.backward(retain_graph=True)
    return sorted(n for n, t in named.items() if t.is_leaf and t.grad is not None)
'''),
    ("01-ex3", "plain attribute", '''
def freeze(model, module_name):
    model.get_submodule(module_name).requires_grad = False
    return [n for n, p in model.named_parameters() if p.requires_grad]
'''),
    ("01-ex4", "w did not change", '''
def sgd_step_(w, lr):
    with torch.no_grad():
        w = w - lr * w.grad
    w.grad = None
'''),
    # only next_functions[0] followed: out has leaves behind both inputs of a Node
    ("01-ex2", "down to the AccumulateGrad Nodes", '''
def leaves_receiving_grad(output, named):
    node = output.grad_fn
    while node is not None and not hasattr(node, "variable"):
        node = node.next_functions[0][0] if node.next_functions else None
    return [] if node is None else sorted(n for n, t in named.items() if t is node.variable)
'''),
    # the example's loss is not (w**2).sum(), so a gradient of 2w is visibly wrong
    ("01-ex4", "w moved by lr * 2w", '''
def sgd_step_(w, lr):
    with torch.no_grad():
        w -= lr * 2 * w
    w.grad = None
'''),
]


@pytest.mark.parametrize("exercise,phrase,answer", WRONG, ids=[w[1] for w in WRONG])
def test_wrong_answer_gets_its_message_first(exercise, phrase, answer):
    message = first_message(LESSON, exercise, answer)
    assert message is not None, "the visible checks pass this wrong answer"
    assert phrase in message, message
