"""Lesson 03: each visible test cell, run against a typical wrong answer, names that mistake
first; run against the reference, it passes."""

from __future__ import annotations

import pytest

import scenario_support as support
from feedback_support import first_message

LESSON = "03_tensor_hooks"


@pytest.mark.parametrize("exercise", ["03-ex1", "03-ex2", "03-ex3"])
def test_reference_passes_the_visible_checks(exercise):
    reference = support.answer_cells(LESSON)[f"{exercise}-answer"]
    assert first_message(LESSON, exercise, reference) is None


WRONG = [
    # a hook that returns None gets a hint
    ("03-ex1", "a hook that returns None", '''
def freeze_entries(param, mask):
    def hook(grad):
        grad.masked_fill(mask, 0.0)
    return param.register_hook(hook)
'''),
    ("03-ex1", "the hook edits its argument in place", '''
def freeze_entries(param, mask):
    def hook(grad):
        grad[mask] = 0.0
        return grad
    return param.register_hook(hook)
'''),
    ("03-ex1", "wrong way round", '''
def freeze_entries(param, mask):
    return param.register_hook(lambda grad: grad * mask)
'''),
    # clamp_ in place now fails the visible checks
    ("03-ex2", "clamps its argument in place", '''
def clip_and_count(tensor, low, high):
    calls = []
    def clip(grad):
        calls.append(int(((grad < low) | (grad > high)).sum()))
        grad.clamp_(low, high)
    return tensor.register_hook(clip), calls
'''),
    ("03-ex2", "does the hook return the clamped gradient", '''
def clip_and_count(tensor, low, high):
    calls = []
    def clip(grad):
        calls.append(int(((grad < low) | (grad > high)).sum()))
    return tensor.register_hook(clip), calls
'''),
    # the example's bounds are not symmetric about 0, so a clamp to [-high, high] shows
    ("03-ex2", "The clamp is symmetric, [-high, high]", '''
def clip_and_count(tensor, low, high):
    calls = []
    def clip(grad):
        calls.append(int(((grad < low) | (grad > high)).sum()))
        return grad.clamp(-high, high)
    return tensor.register_hook(clip), calls
'''),
    # register_hook is named as such, not "set param.grad = None"
    ("03-ex3", "registered hooks with register_hook", '''
def sgd_in_backward(params, lr):
    def step(param):
        param.add_(param.grad, alpha=-lr)
        param.grad = None
    return [param.register_hook(step) for param in params]
'''),
    ("03-ex3", "registered hooks with register_hook", '''
def sgd_in_backward(params, lr):
    handles = []
    for param in params:
        def hook(grad, param=param):
            with torch.no_grad():
                param -= lr * grad
        handles.append(param.register_hook(hook))
    return handles
'''),
    # the late-binding closure is named although backward raises a TypeError
    ("03-ex3", "a hook defined in a loop", '''
def sgd_in_backward(params, lr):
    def step(param):
        param.add_(param.grad, alpha=-lr)
        param.grad = None
    handles = []
    for param in params:
        handles.append(param.register_post_accumulate_grad_hook(lambda _: step(param)))
    return handles
'''),
    ("03-ex3", "w did not move", '''
def sgd_in_backward(params, lr):
    def step(param):
        param = param - lr * param.grad
        param.grad = None
    return [p.register_post_accumulate_grad_hook(step) for p in params]
'''),
]


@pytest.mark.parametrize("exercise,phrase,answer", WRONG, ids=[f"{w[0]}-{i}" for i, w in enumerate(WRONG)])
def test_wrong_answer_gets_its_message_first(exercise, phrase, answer):
    message = first_message(LESSON, exercise, answer)
    assert message is not None, "the visible checks pass this wrong answer"
    assert phrase in message, message
