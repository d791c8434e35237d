"""Scenarios of lesson 03 (tensor hooks): what the grader observes of each answer.

Instructors only: never released to students. See docs/AUTHORING.md, "Scenarios".
"""

import torch

from coursekit.drawing import domain, draw
from coursekit.scenarios import (cell_checks, count_calls, expect_equal, expect_tensor,
                                 expect_true, mistake, scenario)

domain("03-ex1", "parameters and intermediate tensors of other shapes with random boolean "
                 "masks, a single entry, a 0-d tensor, every entry frozen or none, float64, a "
                 "gradient shared with another branch, two tensors frozen at once")
domain("03-ex2", "tensors of other shapes, asymmetric bounds, entries on the bounds, two hooks "
                 "on one tensor, a gradient shared with another branch, two tensors called in "
                 "two orders")
domain("03-ex3", "the parameters of a small model, a parameter used twice, two backward "
                 "passes, an empty list, two sets of parameters registered with learning rates "
                 "of their own")


def _bounds(rng):
    """low < 0 < high, both exactly representable in float32 (multiples of 1/8), so that an
    entry equal to a bound compares the same way in every valid answer."""
    low = -float(torch.randint(1, 9, (), generator=rng)) / 8
    high = float(torch.randint(1, 17, (), generator=rng)) / 8
    return low, high


def _size(rng, low, high):
    """An integer in [low, high]."""
    return int(torch.randint(low, high + 1, (), generator=rng))


def _removable(handle) -> bool:
    return hasattr(handle, "remove")


# ---------------------------------------------------------------- 03-ex1: freeze_entries

@scenario("03-ex1", uses=["freeze_entries"], visible=True, title="the example of the test cell")
def freeze_entries_visible(freeze_entries, rng):
    table = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    frozen = torch.tensor([[True, True], [False, False], [True, False]])
    scale = torch.tensor([[1.0], [2.0], [3.0]])
    handle = freeze_entries(table, frozen)
    observed = {"freeze_entries returns a handle with remove()": _removable(handle)}
    (table * scale).sum().backward()
    observed["table.grad"] = table.grad
    if _removable(handle):
        handle.remove()
    table.grad = None
    (table * scale).sum().backward()
    observed["table.grad after handle.remove()"] = table.grad
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    p = torch.tensor([5.0, 6.0], requires_grad=True)
    freeze_entries(p, torch.tensor([True, False]))
    (a * 3 + p).matmul(torch.tensor([1.0, 1.0])).backward()
    observed["p.grad"] = p.grad
    observed["a.grad (the hook sits on p)"] = a.grad
    # the cell's last check: param may be an intermediate tensor
    leaf = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    middle = leaf * 2
    try:
        freeze_entries(middle, torch.tensor([False, True, False]))
    except RuntimeError:
        observed["freeze_entries(middle, mask) raised RuntimeError"] = True
        return observed
    observed["freeze_entries(middle, mask) raised RuntimeError"] = False
    try:  # an answer that failed a check above may raise here: the cell stopped before
        (middle * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    except Exception:  # noqa: BLE001
        return observed
    observed["leaf.grad through a hooked intermediate"] = leaf.grad
    return observed


INTERMEDIATE_REFUSED = ("freeze_entries(middle, mask) raised RuntimeError: param may be an "
                        "intermediate tensor (here middle = leaf * 2), not only a leaf: use a "
                        "hook that intermediate tensors accept too, such as register_hook.")
CELL_03_EX1 = cell_checks(
    "03-ex1",
    expect_true(lambda seen: seen["freeze_entries returns a handle with remove()"],
                "freeze_entries should return the handle that register_hook gives back."),
    expect_tensor("table.grad",
                  mistakes={"The mask is the wrong way round: the gradient must be 0 where "
                            "mask is True.": [[1.0, 1.0], [0.0, 0.0], [3.0, 0.0]],
                            "The gradient is unchanged: no hook changed it. Register the "
                            "hook on param itself (a hook on a copy such as param.clone() "
                            "never runs) and return the masked gradient (a hook that returns "
                            "None leaves the gradient as it was).":
                            [[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]}),
    expect_tensor("table.grad after handle.remove()",
                  hint="After handle.remove() the hook must be gone: return the handle that "
                       "register_hook gave you."),
    expect_tensor("p.grad"),
    expect_tensor("a.grad (the hook sits on p)", name="a.grad",
                  mistakes={"a.grad changed although the hook sits on p: the hook edits its "
                            "argument in place (grad[mask] = 0, masked_fill_). Return a new "
                            "tensor instead (masked_fill, torch.where, grad * ~mask).":
                            [0.0, 3.0]}),
    expect_true(lambda seen: not seen["freeze_entries(middle, mask) raised RuntimeError"],
                INTERMEDIATE_REFUSED),
    expect_tensor("leaf.grad through a hooked intermediate"))


@scenario("03-ex1", uses=["freeze_entries"], title="an intermediate tensor of another shape")
def freeze_entries_intermediate(freeze_entries, rng):
    shape = tuple(int(n) for n in torch.randint(1, 5, (int(torch.randint(1, 4, (),
                                                                          generator=rng)),),
                                                generator=rng))
    mask = torch.rand(shape, generator=rng) < 0.5
    source = torch.randn(shape, generator=rng, requires_grad=True)
    middle = source * 2
    weights = torch.randn(shape, generator=rng)
    handle = freeze_entries(middle, mask)
    (middle * weights).sum().backward(retain_graph=True)
    observed = {"source.grad": source.grad}
    if _removable(handle):
        handle.remove()
    source.grad = None
    (middle * weights).sum().backward()
    observed["source.grad after handle.remove()"] = source.grad
    return observed


@scenario("03-ex1", uses=["freeze_entries"], title="a gradient shared with another branch")
def freeze_entries_shared(freeze_entries, rng):
    n = int(torch.randint(2, 7, (), generator=rng))
    a = torch.randn(n, generator=rng, requires_grad=True)
    p = torch.randn(n, generator=rng, requires_grad=True)
    mask = torch.rand(n, generator=rng) < 0.5
    mask[0] = True
    factor = float(torch.randint(2, 6, (), generator=rng))
    freeze_entries(p, mask)
    # a hook on p itself, not on a copy such as p.clone() (whose hook never runs): tells that
    # slip apart from a hook on p that returns None, which leaves p.grad unchanged as well
    on_p = bool(getattr(p, "_backward_hooks", None))
    (a * factor + p).matmul(torch.randn(n, generator=rng)).backward()
    return {"p.grad": p.grad, "a.grad (the hook sits on p)": a.grad,
            "a hook registered on p itself": on_p}


@scenario("03-ex1", uses=["freeze_entries"], title="two tensors frozen at once")
def freeze_entries_two_at_once(freeze_entries, rng):
    n = _size(rng, 3, 6)
    first = torch.randn(n, generator=rng, requires_grad=True)
    second = torch.randn(n, generator=rng, requires_grad=True)
    first_mask = torch.rand(n, generator=rng) < 0.5
    first_mask[0], first_mask[1] = True, False
    second_mask = ~first_mask    # another mask: a hook that reads the last mask given differs
    given = (first_mask.clone(), second_mask.clone())
    freeze_entries(first, first_mask)
    freeze_entries(second, second_mask)
    (first * torch.randn(n, generator=rng) + second * 3.0).sum().backward()
    return {"first.grad (frozen first)": first.grad, "second.grad (frozen second)": second.grad,
            "the caller's masks unchanged": torch.equal(first_mask, given[0])
            and torch.equal(second_mask, given[1])}


@scenario("03-ex1", uses=["freeze_entries"],
          title="a single entry, a 0-d tensor, every entry frozen or none, float64")
def freeze_entries_edges(freeze_entries, rng):
    n = _size(rng, 2, 5)
    cases = {"one entry, frozen": (torch.randn(1, generator=rng), torch.tensor([True])),
             "a 0-d tensor, not frozen": (torch.randn((), generator=rng), torch.tensor(False)),
             "every entry frozen": (torch.randn(n, generator=rng),
                                    torch.ones(n, dtype=torch.bool)),
             "no entry frozen": (torch.randn(n, generator=rng), torch.zeros(n, dtype=torch.bool)),
             "float64": (torch.randn(n, generator=rng, dtype=torch.float64),
                         torch.rand(n, generator=rng) < 0.5)}
    observed = {}
    for what, (values, mask) in cases.items():
        param = values.clone().requires_grad_()
        freeze_entries(param, mask)
        (param * (values + 3.0)).sum().backward()
        observed[f"param.grad, {what}"] = param.grad
    return observed


@mistake("03-ex1", "The mask is the wrong way round: the gradient must be 0 where mask is "
                   "True and unchanged where it is False.")
def freeze_entries(param, mask):
    return param.register_hook(lambda grad: grad.masked_fill(~mask, 0.0))


@mistake("03-ex1", "The hook edits its argument in place (grad[mask] = 0, masked_fill_), and "
                   "the change leaks into another branch that shares the same gradient tensor: "
                   "return a new tensor instead (masked_fill, torch.where, grad * ~mask).",
         replaces="freeze_entries")
def freeze_entries_in_place(param, mask):
    def hook(grad):
        grad[mask] = 0.0
        return grad
    return param.register_hook(hook)


@mistake("03-ex1", "The gradient is unchanged: the hook computes the masked gradient but does "
                   "not return it, and a hook that returns None leaves the gradient as it was.",
         replaces="freeze_entries")
def freeze_entries_returns_none(param, mask):
    def hook(grad):
        grad.masked_fill(mask, 0.0)
    return param.register_hook(hook)


@mistake("03-ex1", "freeze_entries returned no handle, so the hook cannot be removed: return "
                   "what register_hook gives back.", replaces="freeze_entries")
def freeze_entries_without_handle(param, mask):
    param.register_hook(lambda grad: grad.masked_fill(mask, 0.0))


# ---------------------------------------------------------------- 03-ex2: clip_and_count

@scenario("03-ex2", uses=["clip_and_count"], visible=True,
          title="the example of the test cell")
def visible_example(clip_and_count, rng):
    t = torch.tensor([0.5, -1.0, 2.0, 4.0], requires_grad=True)
    handle, calls = clip_and_count(t, -1.0, 3.0)
    loss = (t ** 2).sum()
    loss.backward(retain_graph=True)
    first = None if t.grad is None else t.grad.clone()
    observed = {"t.grad after one backward": first, "calls": _copy(calls)}
    if not isinstance(calls, list):  # what the test cell checks first (an answer that fails)
        observed["the type of calls"] = _kind(calls)
    observed["calls after one backward"] = _copy(calls)
    loss.backward()
    observed["calls after two backward passes"] = _copy(calls)
    observed["t.grad after two passes"] = None if t.grad is None else t.grad.clone()
    handle.remove()
    (t ** 2).sum().backward()
    observed["calls after handle.remove()"] = _copy(calls)
    a = torch.tensor(1.0, requires_grad=True)
    p = torch.tensor(1.0, requires_grad=True)
    _, p_calls = clip_and_count(p, -2.0, 0.5)
    (a * 4 + p).mul(3).backward()
    # what the test cell checks too: each call returns a list of its own
    observed.update({"calls": list(calls), "t.grad at the end": t.grad,
                     "a.grad (the hook sits on p)": a.grad, "p.grad": p.grad,
                     "the counts of the second call (the hook on p)": list(p_calls),
                     "calls, after the hook on p ran": list(calls)})
    return observed


def _clone(grad):
    return None if grad is None else grad.clone()


def _copy(calls):
    return list(calls) if isinstance(calls, (list, tuple)) else calls


def _kind(value):
    """The name of a value's type when it is one of Python's or torch's (an answer's own class
    could carry any text in its name)."""
    kinds = (list, tuple, set, str, int, float, bool, type(None), torch.Tensor, dict)
    return type(value).__name__ if type(value) in kinds else "an object of its own class"


def _numbers(value) -> str:
    """A number, tensor or list of them as the test cell prints it (never a string: an
    answer's text is not quoted)."""
    items = value if isinstance(value, list) else [value]
    if any(not isinstance(v, (int, float, bool, torch.Tensor)) and v is not None for v in items):
        return "other values"
    return repr(value) if isinstance(value, list) else f"{value}"


def _safe_kind(kind) -> str:
    return kind if kind in ("list", "tuple", "set", "str", "int", "float", "bool", "NoneType",
                            "Tensor", "dict") else "an object of its own class"


_OWN_LIST = ("each call of clip_and_count should return a list of its own: make the list "
             "inside the function, not at module level or as a default argument")


def _counts_hint(key, expected, hint=None):
    """The cell's hint for the counts `key`; where they hold the expected counts after counts
    of earlier calls (the test cell's own, which ran first), the cell's words for that."""
    def said(seen):
        found = seen[key]
        if isinstance(found, list) and len(found) > len(expected) and \
                found[len(found) - len(expected):] == expected:
            return _OWN_LIST
        return hint
    return said


CELL_03_EX2 = cell_checks(
    "03-ex2",
    expect_tensor("t.grad after one backward", name="t.grad",
                  mistakes={"The gradient is unchanged: does the hook return the clamped "
                            "gradient?": [1.0, -2.0, 4.0, 8.0],
                            "The clamp is symmetric, [-high, high]: clamp into [low, high], "
                            "the two bounds as given.": [1.0, -2.0, 3.0, 3.0]}),
    expect_true(lambda seen: "the type of calls" not in seen,
                lambda seen: "calls should be a list, found "
                             f"{_safe_kind(seen['the type of calls'])}."),
    expect_true(lambda seen: all(type(n) is int for n in seen["calls after one backward"]),
                lambda seen: "calls should hold plain ints (use int(...) or .item()), found "
                             f"{_numbers(seen['calls after one backward'])}."),
    expect_equal("calls after one backward", hint=_counts_hint(
        "calls after one backward", [3], "three entries of [1, -2, 4, 8] lie outside [-1, 3]; "
                                         "append one count per call of the hook.")),
    expect_equal("calls after two backward passes",
                 hint=_counts_hint("calls after two backward passes", [3, 3])),
    expect_tensor("t.grad after two passes"),
    expect_equal("calls after handle.remove()", hint=_counts_hint(
        "calls after handle.remove()", [3, 3],
        "a removed hook must not fire: return the handle of the hook.")),
    expect_tensor("a.grad (the hook sits on p)",
                  mistakes={"a.grad changed although the hook sits on p: the hook clamps its "
                            "argument in place (clamp_). Return grad.clamp(low, high), a new "
                            "tensor.": 2.0}),
    expect_tensor("p.grad"),
    expect_equal("the counts of the second call (the hook on p)", hint=_OWN_LIST),
    expect_equal("calls, after the hook on p ran", hint=_OWN_LIST))


@scenario("03-ex2", uses=["clip_and_count"], title="asymmetric bounds on an intermediate")
def asymmetric_bounds(clip_and_count, rng):
    shape = (int(torch.randint(3, 9, (), generator=rng)),) * int(torch.randint(1, 3, (),
                                                                               generator=rng))
    source = torch.randn(shape, generator=rng, requires_grad=True)
    middle = source * 1.0
    low = -float(torch.rand((), generator=rng)) * 0.5 - 0.1     # in [-0.6, -0.1]
    high = float(torch.rand((), generator=rng)) * 2 + 1.0        # in [1, 3]
    weights = torch.randn(shape, generator=rng) * 2
    weights.view(-1)[0] = (low + -high) / 2   # between -high and low: only low clips it
    handle, calls = clip_and_count(middle, low, high)
    (middle * weights).sum().backward()
    return {"source.grad": source.grad, "calls": list(calls)}


@scenario("03-ex2", uses=["clip_and_count"], title="entries on the bounds, nothing to clip")
def on_the_bounds(clip_and_count, rng):
    low, high = _bounds(rng)
    source = torch.randn(6, generator=rng, requires_grad=True)
    middle = source * 1.0
    # One entry strictly inside, closer to 0 than both bounds: counting |grad| > high then
    # never gives the 4 that counting the bounds gives (with (low + high) / 2 it could).
    weights = torch.tensor([low - 1.0, low, 0.0, high, high + 1.0, max(low, -high) / 2])
    weights = weights[torch.randperm(6, generator=rng)]
    handle, calls = clip_and_count(middle, low, high)
    (middle * weights).sum().backward()
    inside = torch.randn(3, generator=rng) * min(-low, high) / 4
    u = inside.clone().requires_grad_()
    handle, quiet = clip_and_count(u, low, high)
    (u * u).sum().backward()
    return {"source.grad": source.grad, "calls": list(calls),
            "calls when nothing is clipped": list(quiet), "u.grad": u.grad}


@scenario("03-ex2", uses=["clip_and_count"], title="two hooks on one tensor")
def two_hooks(clip_and_count, rng):
    low, high = _bounds(rng)
    u = (torch.randn(5, generator=rng) * 2).requires_grad_()
    first_handle, first = clip_and_count(u, low * 2, high * 2)
    first_start = len(first)
    second_handle, second = clip_and_count(u, low, high)
    second_start = len(second)
    (u * u).sum().backward()
    return {"u.grad after both hooks": u.grad, "both calls return the same list": first is second,
            "counts of the first hook": list(first[first_start:]),
            "counts of the second hook": list(second[second_start:])}


@scenario("03-ex2", uses=["clip_and_count"], title="a gradient shared with another branch")
def shared_branch(clip_and_count, rng):
    n = int(torch.randint(1, 5, (), generator=rng))
    a = torch.randn(n, generator=rng, requires_grad=True)
    p = torch.randn(n, generator=rng, requires_grad=True)
    low, high = _bounds(rng)
    factor = float(torch.randint(2, 6, (), generator=rng))
    outer = float(torch.randint(3, 6, (), generator=rng)) * high     # larger than high
    handle, calls = clip_and_count(p, low, high)
    ((a * factor + p) * outer).sum().backward()
    return {"a.grad (the hook sits on p)": a.grad, "p.grad": p.grad, "calls": list(calls)}


def _two_orders(what, call_a, call_b):
    """The answer called A, B, B again, A again, each call on fresh inputs it builds itself:
    the keys under which the grader tells a result that depends on the calls made before."""
    return {f"{what}, call 1 (A)": call_a(), f"{what}, call 2 (B)": call_b(),
            f"{what}, call 3 (B again)": call_b(), f"{what}, call 4 (A again)": call_a()}


@scenario("03-ex2", uses=["clip_and_count"], title="two tensors, called in two orders")
def clip_in_two_orders(clip_and_count, rng):
    inputs = [(torch.randn(_size(rng, 2, 6), generator=rng) * 2, *_bounds(rng)) for _ in "AB"]

    def call(k):
        values, low, high = inputs[k]
        t = values.clone().requires_grad_()
        handle, calls = clip_and_count(t, low, high)
        (t * t).sum().backward()
        handle.remove()
        return {"t.grad": t.grad, "calls": list(calls)}

    return _two_orders("the hook's results", lambda: call(0), lambda: call(1))


@mistake("03-ex2", "The count uses |grad| > high, so the lower bound `low` is ignored: count "
                   "the entries below low and the entries above high.")
def clip_and_count(tensor, low, high):
    calls = []

    def clip(grad):
        calls.append(int((grad.abs() > high).sum()))
        return grad.clamp(low, high)

    return tensor.register_hook(clip), calls


@mistake("03-ex2", "The hook clamps its argument in place (clamp_), and the change leaks into "
                   "another branch that shares the same gradient tensor: return "
                   "grad.clamp(low, high), a new tensor.", replaces="clip_and_count")
def clip_in_place(tensor, low, high):
    calls = []

    def clip(grad):
        calls.append(int(((grad < low) | (grad > high)).sum()))
        grad.clamp_(low, high)

    return tensor.register_hook(clip), calls


@mistake("03-ex2", "The gradient is unchanged: the hook counts but does not return the "
                   "clamped gradient, and a hook that returns None leaves it as it was.",
         replaces="clip_and_count")
def clip_returns_none(tensor, low, high):
    calls = []

    def clip(grad):
        calls.append(int(((grad < low) | (grad > high)).sum()))
        grad.clamp(low, high)

    return tensor.register_hook(clip), calls


@mistake("03-ex2", "Entries equal to low or high were counted as clipped: count only the "
                   "entries strictly below low or strictly above high.",
         replaces="clip_and_count")
def clip_counts_bounds(tensor, low, high):
    calls = []

    def clip(grad):
        calls.append(int(((grad <= low) | (grad >= high)).sum()))
        return grad.clamp(low, high)

    return tensor.register_hook(clip), calls


@mistake("03-ex2", "calls holds tensors, not plain ints: append int(...) or .item() of the "
                   "count.", replaces="clip_and_count")
def clip_counts_tensors(tensor, low, high):
    calls = []

    def clip(grad):
        calls.append(((grad < low) | (grad > high)).sum())
        return grad.clamp(low, high)

    return tensor.register_hook(clip), calls


@mistake("03-ex2", "The clamp is symmetric, [-high, high]: clamp into [low, high], the two "
                   "bounds as given.", replaces="clip_and_count")
def clip_symmetric(tensor, low, high):
    calls = []

    def clip(grad):
        calls.append(int(((grad < low) | (grad > high)).sum()))
        return grad.clamp(-high, high)

    return tensor.register_hook(clip), calls


# ---------------------------------------------------------------- 03-ex3: sgd_in_backward

def _register(sgd_in_backward, params, lr):
    with count_calls(torch.Tensor, "register_hook") as tensor_hooks, \
            count_calls(torch.Tensor, "register_post_accumulate_grad_hook") as post_hooks:
        handles = sgd_in_backward(params, lr)
    is_list = isinstance(handles, list)
    return handles, {
        "returns a list": is_list,
        "handles returned for params": len(handles) if is_list else None,
        "every handle has remove()": is_list and all(hasattr(h, "remove") for h in handles),
        "post-accumulate-grad hooks registered": post_hooks.count,
        "tensor hooks (register_hook) registered": tensor_hooks.count}


def _remove(handles):
    for handle in handles if isinstance(handles, list) else []:
        if hasattr(handle, "remove"):
            handle.remove()


@scenario("03-ex3", uses=["sgd_in_backward"], visible=True, title="the example of the test cell")
def sgd_visible(sgd_in_backward, rng):
    w = torch.tensor([1.0, -1.0], requires_grad=True)
    bias = torch.tensor(0.5, requires_grad=True)
    addresses = [w.data_ptr(), bias.data_ptr()]
    handles, observed = _register(sgd_in_backward, [w, bias], 0.25)
    if handles is None:  # what the test cell says of it (an answer that fails already)
        observed["the result is None"] = True
    features = torch.tensor([2.0, 3.0])
    try:
        ((w.matmul(features) + bias) ** 2).backward()
    except Exception:  # re-raised below unless the cell stopped at an earlier check
        if observed["returns a list"] and observed["handles returned for params"] == 2 and \
                observed["tensor hooks (register_hook) registered"] == 0:
            raise
        return observed  # the cell stopped at a check above, before this backward
    observed.update({"w after backward": w.detach().clone(),
                     "bias after backward": bias.detach().clone(),
                     IN_PLACE: [w.data_ptr(), bias.data_ptr()] == addresses,
                     "w.grad": _clone(w.grad), "bias.grad": _clone(bias.grad)})
    _remove(handles)
    (w.sum() + bias).backward()
    observed.update({"w after removing the hooks": w.detach().clone(),
                     "w.grad after removing the hooks": w.grad})
    return observed


# Like Lesson 01's sgd_step_, the step changes each parameter in place: it keeps its storage,
# which a view of it, or an optimiser's state, shares.
IN_PLACE = "every parameter changed in place (same storage)"
NEW_STORAGE = ("w and bias moved but got new storage (param.data = ... swaps it, and a tensor "
               "that shared it no longer sees the step): change each parameter in place, "
               "param.add_(param.grad, alpha=-lr) or param -= lr * param.grad.")


CELL_03_EX3 = cell_checks(
    "03-ex3",
    expect_true(lambda seen: seen["returns a list"] and seen["handles returned for params"] == 2,
                lambda seen: "sgd_in_backward should return a list of 2 handles, found None."
                if seen.get("the result is None") else None),
    expect_true(lambda seen: seen["tensor hooks (register_hook) registered"] == 0,
                "sgd_in_backward registered hooks with register_hook: they run before the "
                "gradient is added to .grad, so .grad fills up again after the step. Use "
                "register_post_accumulate_grad_hook."),
    expect_tensor("w after backward",
                  mistakes={"w moved up the gradient: subtract lr * grad, do not add it.":
                            [0.5, -1.75],
                            "w did not move: change each parameter in place (param.add_(...), "
                            "param -= ...); `param = param - ...` only rebinds a local name.":
                            [1.0, -1.0]}),
    expect_tensor("bias after backward"),
    expect_true(lambda seen: seen[IN_PLACE], NEW_STORAGE),
    expect_true(lambda seen: seen["w.grad"] is None and seen["bias.grad"] is None,
                lambda seen: "After the step the hook should set param.grad = None, "
                f"found w.grad={_numbers(seen['w.grad'])}, "
                f"bias.grad={_numbers(seen['bias.grad'])}."),
    expect_tensor("w after removing the hooks",
                  hint="after removing the handles backward must not step any more"),
    expect_tensor("w.grad after removing the hooks"))


@scenario("03-ex3", uses=["sgd_in_backward"], title="three parameters of a small model")
def sgd_small_model(sgd_in_backward, rng):
    params = [torch.randn(3, 2, generator=rng).requires_grad_(),
              torch.randn(2, generator=rng).requires_grad_(),
              torch.randn((), generator=rng).requires_grad_()]
    order = torch.randperm(3, generator=rng).tolist()
    lr = float(torch.randint(1, 20, (), generator=rng)) / 100
    # Tensors hash by identity, so a set of them has an order of its own, which may happen to
    # be the list's: the same values in new tensors until a set made of the list given takes
    # another order, so that handles made over set(params) come in another order on every run
    given, kept = [params[i] for i in order], []
    for _ in range(100):
        if [id(p) for p in set(given)] != [id(p) for p in given]:
            break
        kept.append(params)
        params = [p.detach().clone().requires_grad_() for p in params]
        given = [params[i] for i in order]
    addresses = [p.data_ptr() for p in params]
    handles, observed = _register(sgd_in_backward, given, lr)
    x_in = torch.randn(4, 3, generator=rng)
    ((x_in @ params[0] + params[1]).tanh().sum() * params[2]).backward()
    observed["parameters after backward"] = [p.detach().clone() for p in params]
    observed[IN_PLACE] = [p.data_ptr() for p in params] == addresses
    observed["their .grad after backward"] = [p.grad for p in params]
    # The handles come in the order of the list given: removing them one by one stops the
    # parameters of that list one by one, in its order.
    if isinstance(handles, list) and handles and all(_removable(h) for h in handles):
        moved = []
        for handle in handles[:len(params)]:
            handle.remove()
            before = [p.detach().clone() for p in params]
            ((x_in @ params[0] + params[1]).tanh().sum() * params[2]).backward()
            moved.append([not torch.equal(b, p.detach()) for b, p in zip(before, params)])
        observed["which parameters moved after removing the handles one by one"] = moved
    return observed


@scenario("03-ex3", uses=["sgd_in_backward"],
          title="a parameter used twice, two backward passes, an empty list")
def sgd_twice(sgd_in_backward, rng):
    weight = torch.randn(4, generator=rng).requires_grad_()
    lr = float(torch.randint(1, 20, (), generator=rng)) / 100
    handles, observed = _register(sgd_in_backward, [weight], lr)
    data = torch.randn(4, generator=rng)
    positions = []
    for _ in range(2):
        ((weight * data).sum() ** 2 + (weight * weight).sum()).backward()
        positions.append(weight.detach().clone())
    observed["weight after each backward"] = positions
    observed["weight.grad at the end"] = weight.grad
    empty = sgd_in_backward([], lr)
    # the number of handles, not the handles: a list that kept earlier calls' handles is then
    # reported as too long instead of as data that cannot be reported
    observed["handles returned by sgd_in_backward([], lr)"] = (
        len(empty) if isinstance(empty, list) else repr(type(empty)))
    return observed


@scenario("03-ex3", uses=["sgd_in_backward"],
          title="two sets of parameters, each with a learning rate of its own")
def sgd_two_learning_rates(sgd_in_backward, rng):
    from hypothesis import strategies as st
    rates = draw(st.lists(st.integers(1, 50), min_size=2, max_size=2, unique=True), rng)
    first_lr, second_lr = (rate / 100 for rate in rates)
    first = torch.randn(3, generator=rng).requires_grad_()
    second = torch.randn(3, generator=rng).requires_grad_()
    first_handles, observed = _register(sgd_in_backward, [first], first_lr)
    second_handles, _ = _register(sgd_in_backward, [second], second_lr)
    data = torch.randn(3, generator=rng)
    for _ in range(2):
        ((first * data).sum() ** 2 + (second * data).sum() ** 2).backward()
    observed["first (its own lr) after two backward passes"] = first.detach().clone()
    observed["second (another lr) after two backward passes"] = second.detach().clone()
    _remove(first_handles)
    _remove(second_handles)
    return observed


@mistake("03-ex3", "The parameters moved up the gradient: subtract lr * param.grad, do not "
                   "add it.")
def sgd_in_backward(params, lr):
    def step(param):
        param.add_(param.grad, alpha=lr)
        param.grad = None

    return [param.register_post_accumulate_grad_hook(step) for param in params]


@mistake("03-ex3", "param.grad is still filled after the step: set param.grad = None at the end "
                   "of the hook.", replaces="sgd_in_backward")
def sgd_keeps_grad(params, lr):
    def step(param):
        param.add_(param.grad, alpha=-lr)

    return [param.register_post_accumulate_grad_hook(step) for param in params]


@mistake("03-ex3", "The hooks were registered with register_hook, which runs before the "
                   "gradient is added to .grad, so .grad is filled after the step: use "
                   "register_post_accumulate_grad_hook, which runs after.",
         replaces="sgd_in_backward")
def sgd_with_tensor_hooks(params, lr):
    def make(param):
        def hook(grad):
            with torch.no_grad():
                param.sub_(lr * grad)
        return hook

    return [param.register_hook(make(param)) for param in params]


@mistake("03-ex3", "A hook raised a TypeError, most likely because param.grad was None: each "
                   "hook must step the tensor it receives as its argument, while a hook defined "
                   "in a loop (a lambda or a def) that uses the loop variable sees the loop's "
                   "last parameter.", replaces="sgd_in_backward")
def sgd_late_binding(params, lr):
    def step(param):
        param.add_(param.grad, alpha=-lr)
        param.grad = None

    handles = []
    for param in params:
        handles.append(param.register_post_accumulate_grad_hook(lambda _: step(param)))
    return handles


@mistake("03-ex3", "The parameters moved but got new storage (param.data = ...): change each "
                   "parameter in place, param.add_(param.grad, alpha=-lr) or param -= lr * "
                   "param.grad, so that a tensor sharing its storage sees the step.",
         replaces="sgd_in_backward")
def sgd_new_storage(params, lr):
    def step(param):
        param.data = param.data - lr * param.grad
        param.grad = None
    return [param.register_post_accumulate_grad_hook(step) for param in params]


@mistake("03-ex3", "The parameters did not move: change each parameter in place "
                   "(param.add_(...), param -= ...); `param = param - ...` only rebinds a local "
                   "name.", replaces="sgd_in_backward")
def sgd_rebinds(params, lr):
    def step(param):
        param = param - lr * param.grad
        param.grad = None

    return [p.register_post_accumulate_grad_hook(step) for p in params]


@mistake("03-ex3", "sgd_in_backward must return a list with one handle per parameter, in the "
                   "order of params.", replaces="sgd_in_backward")
def sgd_returns_no_list(params, lr):
    def step(param):
        param.add_(param.grad, alpha=-lr)
        param.grad = None

    for param in params:
        param.register_post_accumulate_grad_hook(step)
