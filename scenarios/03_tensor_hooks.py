"""Scenarios of lesson 03 (tensor hooks): what the grader observes of each answer.

Instructors only: never released to students. See docs/AUTHORING.md, "Scenarios".
"""

import torch

from coursekit.scenarios import mistake, scenario


# ---------------------------------------------------------------- 03-ex2: clip_and_count

@scenario("03-ex2", uses=["clip_and_count"], visible=True,
          title="the example of the test cell")
def visible_example(clip_and_count, rng):
    t = torch.tensor([0.5, -1.0, 2.0, 4.0], requires_grad=True)
    handle, calls = clip_and_count(t, -1.5, 1.5)
    loss = (t ** 2).sum()
    loss.backward(retain_graph=True)
    first = t.grad.clone()
    loss.backward()
    handle.remove()
    (t ** 2).sum().backward()
    return {"t.grad after one backward": first, "calls": list(calls),
            "t.grad at the end": t.grad}


@scenario("03-ex2", uses=["clip_and_count"], title="asymmetric bounds on an intermediate")
def asymmetric_bounds(clip_and_count, rng):
    source = torch.randn(8, generator=rng, requires_grad=True)
    middle = source * 1.0
    low = -float(torch.rand((), generator=rng)) * 0.5 - 0.1     # in [-0.6, -0.1]
    high = float(torch.rand((), generator=rng)) * 2 + 1.0        # in [1, 3]
    weights = torch.randn(8, generator=rng) * 2
    weights[0] = (low + -high) / 2   # between -high and low: only the lower bound clips it
    handle, calls = clip_and_count(middle, low, high)
    (middle * weights).sum().backward()
    return {"source.grad": source.grad, "calls": list(calls)}


@mistake("03-ex2", "The count uses |grad| > high, so the lower bound `low` is ignored: count "
                   "the entries below low and the entries above high.")
def clip_and_count(tensor, low, high):
    calls = []

    def clip(grad):
        calls.append(int((grad.abs() > high).sum()))
        return grad.clamp(low, high)

    return tensor.register_hook(clip), calls
