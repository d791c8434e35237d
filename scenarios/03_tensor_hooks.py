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


# ---------------------------------------------------------------- 03-ex1: freeze_entries

@scenario("03-ex1", uses=["freeze_entries"], visible=True, title="the example of the test cell")
def frozen_table(freeze_entries, rng):
    table = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    frozen = torch.tensor([[True, True], [False, False], [True, False]])
    handle = freeze_entries(table, frozen)
    (table * torch.tensor([[1.0], [2.0], [3.0]])).sum().backward()
    first = table.grad.clone()
    handle.remove()
    table.grad = None
    (table * torch.tensor([[1.0], [2.0], [3.0]])).sum().backward()
    return {"table.grad": first, "table.grad after handle.remove()": table.grad}


@scenario("03-ex1", uses=["freeze_entries"], title="a random mask on an intermediate, "
                                                    "and a shared branch")
def random_mask(freeze_entries, rng):
    rows = int(torch.randint(2, 5, (), generator=rng))
    mask = torch.rand(rows, 3, generator=rng) < 0.5
    source = torch.randn(rows, 3, generator=rng, requires_grad=True)
    middle = source * 2
    weights = torch.randn(rows, 3, generator=rng)
    handle = freeze_entries(middle, mask)
    (middle * weights).sum().backward()
    a = torch.randn(3, generator=rng, requires_grad=True)
    p = torch.randn(3, generator=rng, requires_grad=True)
    freeze_entries(p, torch.tensor([False, True, True]))
    (a * 2 + p).matmul(torch.tensor([1.0, 2.0, 3.0])).backward()
    return {"source.grad": source.grad, "has remove()": hasattr(handle, "remove"),
            "a.grad (shared branch)": a.grad, "p.grad": p.grad}


@mistake("03-ex1", "The mask is the wrong way round: the gradient must be 0 where mask is True.")
def freeze_entries(param, mask):
    return param.register_hook(lambda grad: grad.masked_fill(~mask, 0.0))


@mistake("03-ex1", "The hook edits its argument in place (masked_fill_ or grad[mask] = 0), which "
                   "changes a gradient shared with another branch: return a new tensor.")
def freeze_entries(param, mask):  # noqa: F811 (another wrong answer)
    def hook(grad):
        grad.masked_fill_(mask, 0.0)
    return param.register_hook(hook)


# ---------------------------------------------------------------- 03-ex3: sgd_in_backward

@scenario("03-ex3", uses=["sgd_in_backward"], visible=True, title="the example of the test cell")
def two_parameters(sgd_in_backward, rng):
    w = torch.tensor([1.0, -1.0], requires_grad=True)
    bias = torch.tensor(0.5, requires_grad=True)
    handles = sgd_in_backward([w, bias], lr=0.25)
    ((w.matmul(torch.tensor([2.0, 3.0])) + bias) ** 2).backward()
    after = {"w": w.detach().clone(), "bias": bias.detach().clone(),
             "grads are None": [w.grad is None, bias.grad is None]}
    for h in handles:
        h.remove()
    (w.sum() + bias).backward()
    return {"after backward": after, "number of handles": len(handles),
            "w after removing the hooks": w.detach(), "w.grad after removing": w.grad}


@scenario("03-ex3", uses=["sgd_in_backward"], title="random parameters and learning rate")
def random_step(sgd_in_backward, rng):
    params = [torch.randn(3, 2, generator=rng, requires_grad=True),
              torch.randn(2, generator=rng, requires_grad=True),
              torch.randn((), generator=rng, requires_grad=True)]
    lr = float(torch.rand((), generator=rng)) * 0.1 + 0.01
    x = torch.randn(4, 3, generator=rng)
    handles = sgd_in_backward(params, lr=lr)
    ((x @ params[0] + params[1]).tanh().sum() * params[2]).backward()
    return {"params after the step": [p.detach() for p in params],
            "grads are None": [p.grad is None for p in params],
            "number of handles": len(handles),
            "empty list": len(sgd_in_backward([], lr=lr))}


@mistake("03-ex3", "Each hook steps the last parameter of the loop (a late-binding closure): use "
                   "the hook's argument, the parameter it was registered on.")
def sgd_in_backward(params, lr):
    handles = []
    for param in params:
        def step(_):
            param.data.add_(param.grad if param.grad is not None else 0, alpha=-lr)
        handles.append(param.register_post_accumulate_grad_hook(step))
    return handles


@mistake("03-ex3", "The parameters move up the gradient: subtract lr * grad, do not add it.")
def sgd_in_backward(params, lr):  # noqa: F811 (another wrong answer)
    def step(param):
        param.add_(param.grad, alpha=lr)
        param.grad = None
    return [p.register_post_accumulate_grad_hook(step) for p in params]
