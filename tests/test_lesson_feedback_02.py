"""Lesson 02: each visible test cell, run against a typical wrong answer, names that mistake
first; run against the reference, it passes."""

from __future__ import annotations

import pytest

import scenario_support as support
from feedback_support import first_message

LESSON = "02_retain_grad"


@pytest.mark.parametrize("exercise", ["02-ex1", "02-ex2", "02-ex3"])
def test_reference_passes_the_visible_checks(exercise):
    reference = support.answer_cells(LESSON)[f"{exercise}-answer"]
    assert first_message(LESSON, exercise, reference) is None


WRONG = [
    ("02-ex1", "this is x.grad", '''
def intermediate_gradient(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    h.retain_grad()
    (h ** 3).sum().backward()
    return x.grad
'''),
    ("02-ex1", "call h.retain_grad() before backward()", '''
def intermediate_gradient(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    (h ** 3).sum().backward()
    return h.grad
'''),
    # the "no retain_grad" rule is checked visibly
    ("02-ex2", "retain_grad() was called", '''
def collect_gradients(named, loss):
    for tensor in named.values():
        tensor.retain_grad()
    loss.backward()
    return {name: tensor.grad for name, tensor in named.items()}
'''),
    # torch.autograd.grad without any hook fails visibly
    ("02-ex2", "loss.backward() did not run", '''
def collect_gradients(named, loss):
    return dict(zip(named, torch.autograd.grad(loss, list(named.values()))))
'''),
    # torch.autograd.grad followed by a backward() that only fills .grad fails visibly too
    ("02-ex2", "the gradients came from torch.autograd.grad", '''
def collect_gradients(named, loss):
    grads = dict(zip(named, torch.autograd.grad(loss, list(named.values()),
                                                retain_graph=True)))
    loss.backward()
    return grads
'''),
    ("02-ex2", "a hook defined in a loop", '''
def collect_gradients(named, loss):
    grads, handles = {}, []
    for name, tensor in named.items():
        handles.append(tensor.register_hook(lambda grad: grads.update({name: grad})))
    loss.backward()
    for handle in handles:
        handle.remove()
    return grads
'''),
    ("02-ex2", "the hooks were not removed", '''
def collect_gradients(named, loss):
    grads = {}
    for name, tensor in named.items():
        tensor.register_hook(save_into(grads, name))
    loss.backward()
    return grads
'''),
    ("02-ex3", "reverse order", '''
def chain_gradients(values, factors):
    h = torch.tensor(values, requires_grad=True)
    steps = []
    for f in factors:
        h = h * f + 1
        h.retain_grad()
        steps.insert(0, h)
    (h ** 2).sum().backward()
    return [s.grad for s in steps]
'''),
    # an all-last list or an off-by-one list is not "reverse order"
    ("02-ex3", "every entry is the last step's gradient", '''
def chain_gradients(values, factors):
    h = torch.tensor(values, requires_grad=True)
    for f in factors:
        h = h * f + 1
        h.retain_grad()
    (h ** 2).sum().backward()
    return [h.grad for f in factors]
'''),
    ("02-ex3", "shifted by one step", '''
def chain_gradients(values, factors):
    h = torch.tensor(values, requires_grad=True)
    kept = []
    for f in factors:
        kept.append(h)
        h = h * f + 1
        h.retain_grad()
    (h ** 2).sum().backward()
    return [k.grad for k in kept]
'''),
    ("02-ex3", "call retain_grad() on every step", '''
def chain_gradients(values, factors):
    h = torch.tensor(values, requires_grad=True)
    steps = []
    for f in factors:
        h = h * f + 1
        steps.append(h)
    h.retain_grad()
    (h ** 2).sum().backward()
    return [s.grad for s in steps]
'''),
]


@pytest.mark.parametrize("exercise,phrase,answer", WRONG, ids=[w[1] for w in WRONG])
def test_wrong_answer_gets_its_message_first(exercise, phrase, answer):
    message = first_message(LESSON, exercise, answer)
    assert message is not None, "the visible checks pass this wrong answer"
    assert phrase in message, message
