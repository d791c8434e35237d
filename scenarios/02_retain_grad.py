"""Scenarios of lesson 02 (keeping intermediate gradients): what the grader observes of each answer.

Instructors only: never released to students. See docs/AUTHORING.md, "Scenarios".
"""

import torch

from coursekit.drawing import domain, draw, float_lists, names
from coursekit.scenarios import (cell_checks, count_calls, expect_equal, expect_tensor,
                                 expect_true, gradients_delivered, mistake, scenario)

domain("02-ex1", "lists of 1 to 12 floats between -1000 and 1000 (a single value, zeros and "
                 "both bounds included)")
domain("02-ex2", "a leaf and up to three intermediates of 1 to 4 entries, used several times, "
                 "under any names, three of them in `named`; several calls on other graphs")
domain("02-ex3", "lists of 1 to 12 floats between -3 and 3 (a single value and zeros included) "
                 "and 1 to 6 factors between -1.5 and 1.5 (zero included)")


def _float32(value):
    """A floating-point tensor as float32, detached (the exercises ask for "float" tensors and
    accept float64 as well); a list of them likewise; anything else unchanged."""
    if isinstance(value, (list, tuple)):
        return [_float32(v) for v in value]
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.detach().to(torch.float32)
    return value


def _as_values(value):
    """A list or tuple of plain numbers as a float32 tensor: whether a backward pass delivered
    those values is then measured on them, apart from the result's type (h.grad.tolist() keeps
    the gradient's values; the h.grad check tells the type)."""
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return torch.tensor(value, dtype=torch.float32)
    return value


# ---------------------------------------------------------------- 02-ex1: intermediate_gradient

@scenario("02-ex1", uses=["intermediate_gradient"], visible=True,
          title="the example of the test cell")
def intermediate_visible(intermediate_gradient, rng):
    with gradients_delivered() as delivered:
        h_grad = intermediate_gradient([1.0, -2.0, 0.5])
    return {"h.grad": _float32(h_grad),
            # what the test cell checks too: h kept the gradient backward() delivered
            "h kept its gradient (retain_grad() before backward())":
                delivered.retaining > 0 and delivered.holds(_as_values(h_grad))}


CELL_02_EX1 = cell_checks(
    "02-ex1",
    expect_true(lambda seen: seen["h.grad"] is not None,
                "h.grad is None: h is not a leaf, call h.retain_grad() before backward(), on the "
                "h that L is computed from"),
    expect_tensor("h.grad", mistakes={
        "this is x.grad (dL/dx = 6 x**5), the gradient of the leaf; return h.grad":
        [6.0, -192.0, 0.1875],
        "L is a mean of h**3, not a sum: every gradient is divided by the 3 entries; use .sum()":
        [1.0, 16.0, 0.0625]}),
    expect_true(lambda seen: seen["h kept its gradient (retain_grad() before backward())"],
                "the values are right, but h did not keep them: call h.retain_grad() before "
                "backward() and return h.grad (torch.autograd.grad, or a gradient worked out by "
                "hand, gives the values without keeping them)"))


@scenario("02-ex1", uses=["intermediate_gradient"], title="other values")
def intermediate_random(intermediate_gradient, rng):
    values = draw(float_lists(1, 12, 1e3), rng)
    with gradients_delivered() as delivered:
        h_grad = intermediate_gradient(values)
    return {"h.grad": _float32(h_grad),
            "the result is a gradient a backward pass delivered":
                delivered.holds(_as_values(h_grad)),
            "an intermediate tensor retains its gradient": delivered.retaining > 0}


@mistake("02-ex1", "This is x.grad (dL/dx), the gradient of the leaf: return h.grad, kept with "
                   "h.retain_grad() before backward().")
def intermediate_gradient(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    h.retain_grad()
    (h ** 3).sum().backward()
    return x.grad


@mistake("02-ex1", "h.grad is None: h is not a leaf, so backward() frees its gradient unless "
                   "h.retain_grad() is called before backward().",
         replaces="intermediate_gradient")
def intermediate_not_retained(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    (h ** 3).sum().backward()
    return h.grad


@mistake("02-ex1", "h.grad is None although h.retain_grad() was called: call it before "
                   "backward(), on the h that L = sum(h**3) is computed from.",
         replaces="intermediate_gradient")
def intermediate_retained_late(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    (h ** 3).sum().backward()
    h.retain_grad()
    return h.grad


@mistake("02-ex1", "The gradient is divided by the number of entries: L is a sum of h³ "
                   "(.sum()), not a mean.", replaces="intermediate_gradient")
def intermediate_mean(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    h.retain_grad()
    (h ** 3).mean().backward()
    return h.grad


@mistake("02-ex1", "The values are right, but they are not the gradient backward() kept for "
                   "h (worked out by hand as 3 h², or copied or converted afterwards): call "
                   "h.retain_grad() before backward() and return h.grad itself.",
         replaces="intermediate_gradient")
def intermediate_by_hand(values):
    x = torch.tensor(values)
    return 3 * (x * x) ** 2


@scenario("02-ex1", uses=["intermediate_gradient"],
          title="a single value, zeros and the largest values allowed")
def intermediate_edges(intermediate_gradient, rng):
    found = {}
    for values in ([0.0], [2.5], [0.0, -1e3, 1e3, 1e-3]):
        with gradients_delivered() as delivered:
            h_grad = intermediate_gradient(values)
        found[f"h.grad for {len(values)} value(s)"] = _float32(h_grad)
        found[f"a gradient backward() delivered, {len(values)} value(s)"] = \
            delivered.holds(h_grad)
    return found


# ---------------------------------------------------------------- 02-ex2: collect_gradients

def _hooks_left(named):
    return sum(len(t._backward_hooks or {}) for t in named.values())


def _collect(collect_gradients, named, loss):
    """Call collect_gradients under spies; the observations of its rules."""
    with count_calls(torch.Tensor, "retain_grad") as retain, \
            count_calls(torch.Tensor, "register_hook") as hooks, \
            count_calls(torch.autograd, "grad") as grad, \
            count_calls(torch.autograd, "backward") as backward:
        grads = collect_gradients(named, loss)
    rules = {"retain_grad() calls": retain.count, "torch.autograd.grad calls": grad.count,
             "loss.backward() calls": backward.count,
             # on the tensors of `named` themselves: a hook on a copy (t.clone()) never fires
             "a hook registered on every tensor": all(hooks.on(t) for t in named.values()),
             "hooks left on the tensors afterwards": _hooks_left(named)}
    return grads, rules


@scenario("02-ex2", uses=["collect_gradients"], visible=True,
          title="the example of the test cell")
def collect_visible(collect_gradients, rng):
    p = torch.tensor([2.0, -3.0], requires_grad=True)
    pre = p - 1.0
    act = pre.relu() + 1
    loss = (act * act).sum()
    later = (pre * 5).sum()
    grads, rules = _collect(collect_gradients, {"pre": pre, "act": act}, loss)
    if not isinstance(grads, dict):
        return {"the result is a dict": False, "the type of the result": _kind(grads)}
    observed = {"the result is a dict": True, "sorted(grads)": sorted(grads),
                "grads['act']": grads.get("act"), "grads['pre']": grads.get("pre"),
                "pre.retains_grad or act.retains_grad": pre.retains_grad or act.retains_grad,
                "p.grad (filled by loss.backward())": p.grad,
                "torch.autograd.grad calls": rules["torch.autograd.grad calls"]}
    later.backward()
    observed["grads['pre'] after another backward"] = grads.get("pre")
    # what the test cell checks too: a second call returns a dict of its own
    q = torch.tensor([1.0, 2.0], requires_grad=True)
    doubled = q * 2
    second = collect_gradients({"doubled": doubled}, (doubled * 3).sum())
    observed["sorted(the second call's result)"] = sorted(second)
    observed["sorted(grads) after the second call"] = sorted(grads)
    return observed


def _kind(value):
    """The name of a value's type when it is one of Python's or torch's (an answer's own class
    could carry any text in its name)."""
    kinds = (list, tuple, set, str, int, float, bool, type(None), torch.Tensor)
    return type(value).__name__ if type(value) in kinds else "an object of its own class"


def _safe_kind(seen):
    kind = seen["the type of the result"]
    return kind if kind in ("list", "tuple", "set", "str", "int", "float", "bool", "NoneType",
                            "Tensor") else "an object of its own class"


def _sorted_hint(seen):
    found = seen["sorted(grads)"]
    if set(found) - {"act", "pre"}:
        # Names this call was never given: kept from the calls before, the test cell's among
        # them (it ran first, and said so at its second call).
        return _OWN_DICT
    if len(found) == 1:
        return ("one name holds everything: a hook defined in a loop (a lambda or a def) sees "
                "the loop variable's last value; make each hook with a helper function "
                "(like save_into)")
    if not found:
        return ("the dict is empty: no hook ran while loss.backward() passed the tensors; "
                "register the hooks, call loss.backward(), and only then remove them")
    return "store each gradient under its own name"


_COLLECT_SWAPPED = "the two gradients are swapped: store each one under its own tensor's name"
_OWN_DICT = ("each call should return a dict of its own: make the dict inside the function, "
             "not at module level or as a default argument")
CELL_02_EX2 = cell_checks(
    "02-ex2",
    expect_true(lambda seen: seen["the result is a dict"],
                lambda seen: f"return a dict, not {_safe_kind(seen)}"),
    expect_equal("sorted(grads)", hint=_sorted_hint),
    expect_tensor("grads['act']", mistakes={_COLLECT_SWAPPED: [4.0, 0.0]}),
    expect_tensor("grads['pre']", mistakes={_COLLECT_SWAPPED: [4.0, 2.0]}),
    expect_true(lambda seen: not seen["pre.retains_grad or act.retains_grad"],
                "retain_grad() was called on pre or act: collect the gradients with hooks "
                "(register_hook) instead"),
    expect_true(lambda seen: seen["p.grad (filled by loss.backward())"] is not None,
                "p.grad is None, so loss.backward() did not run: register the hooks, then call "
                "loss.backward() (not torch.autograd.grad)"),
    expect_equal("torch.autograd.grad calls",
                 hint="the gradients came from torch.autograd.grad: catch each one with a hook "
                      "(register_hook) while loss.backward() passes it"),
    expect_tensor("grads['pre'] after another backward",
                  hint="the hooks were not removed: keep the handles register_hook returns "
                       "and call handle.remove() on each after loss.backward()"),
    expect_equal("sorted(the second call's result)", hint=_OWN_DICT),
    expect_equal("sorted(grads) after the second call", hint=_OWN_DICT))


def _graph(rng, labels):
    """A leaf x and intermediates, `loss` from them, and `later`: a second loss through the
    same tensors whose backward needs none of the values freed by loss.backward()."""
    size = int(torch.randint(1, 5, (), generator=rng))
    x = torch.randn(size, generator=rng, requires_grad=True)
    shift, weights = torch.randn(size, generator=rng), torch.randn(size, generator=rng)
    # additions and flips save nothing for backward, so `later` can still pass through them
    a = x + shift
    b = a.flip(0) - x
    c = (b + a).tanh()
    loss = (a * b).sum() + (c * weights).sum() + (b * c).sum()
    later = (a * weights).sum() + (b * 2.0).sum() + x.sum()
    order = torch.randperm(len(labels), generator=rng).tolist()
    names = [labels[i] for i in order]
    named = dict(zip(names, (x, a, b, c)))
    # three of the four, the leaf x always among them: an answer that reads a leaf's .grad
    # instead of hooking it shows on every draw (blind round: caught only when x was drawn)
    del named[names[int(torch.randint(1, 4, (), generator=rng))]]
    return named, loss, later, x


def _copy(grads):
    """A dict copied as it is now (later hooks may change it); anything else as it is, so that
    a wrong type still shows."""
    return dict(grads) if isinstance(grads, dict) else grads


def _drawn_labels(rng):
    """Four distinct names drawn from all identifiers (one-letter, long, with underscores)."""
    from hypothesis import strategies as st
    return draw(st.lists(names(1, 16), min_size=4, max_size=4, unique=True), rng)


@scenario("02-ex2", uses=["collect_gradients"],
          title="a leaf and intermediates used several times")
def collect_random(collect_gradients, rng):
    named, loss, later, x = _graph(rng, _drawn_labels(rng))
    grads, rules = _collect(collect_gradients, named, loss)
    observed = {"the dict returned": _copy(grads), **rules}
    # what the hooks passed on upstream reached the leaf x (named or not)
    observed["x.grad after the call (what the hooks passed on reached the leaf)"] = \
        None if x.grad is None else x.grad.clone()
    later.backward()
    observed["the dict after another backward"] = _copy(grads)
    return observed


@scenario("02-ex2", uses=["collect_gradients"], title="two calls, two graphs")
def collect_twice(collect_gradients, rng):
    first_named, first_loss, _, _ = _graph(rng, ["first", "second", "third", "fourth"])
    second_named, second_loss, _, _ = _graph(rng, ["one", "two", "three", "four"])
    first = collect_gradients(first_named, first_loss)
    second = collect_gradients(second_named, second_loss)
    return {"both calls return the same dict": first is second,
            "names of the first call found in the second result":
                sorted(name for name in first_named if name in second),
            "the second result, by the names of the second call":
                {name: second.get(name) for name in second_named}}


def _two_orders(what, call_a, call_b):
    """The answer called A, B, B again, A again, each call on fresh inputs it builds itself:
    the keys under which the grader tells a result that depends on the calls made before."""
    return {f"{what}, call 1 (A)": call_a(), f"{what}, call 2 (B)": call_b(),
            f"{what}, call 3 (B again)": call_b(), f"{what}, call 4 (A again)": call_a()}


def _seeds(rng, n):
    """`n` seeds drawn from `rng`, to build the same fresh inputs again for a repeated call."""
    return [int(torch.randint(0, 2 ** 31 - 1, (), generator=rng)) for _ in range(n)]


@scenario("02-ex2", uses=["collect_gradients"], title="two graphs, called in two orders")
def collect_in_two_orders(collect_gradients, rng):
    seeds = _seeds(rng, 2)
    labels = (["first", "second", "third", "fourth"], ["one", "two", "three", "four"])

    def call(k):
        named, loss, _, _ = _graph(torch.Generator().manual_seed(seeds[k]), labels[k])
        return _copy(collect_gradients(named, loss))

    return _two_orders("the dict returned", lambda: call(0), lambda: call(1))


@mistake("02-ex2", "Every gradient landed under one name: a hook defined in a loop (a lambda "
                   "or a def) looks the loop variable up when backward calls it, after the loop "
                   "has ended. Make each hook with a helper function (like save_into) or a "
                   "default argument.")
def collect_gradients(named, loss):
    grads, handles = {}, []
    for name, tensor in named.items():
        handles.append(tensor.register_hook(lambda grad: grads.update({name: grad})))
    loss.backward()
    for handle in handles:
        handle.remove()
    return grads


@mistake("02-ex2", "retain_grad() was used: the exercise asks for hooks (register_hook), "
                   "which keep nothing on the tensors.", replaces="collect_gradients")
def collect_with_retain_grad(named, loss):
    for tensor in named.values():
        tensor.retain_grad()
    loss.backward()
    return {name: tensor.grad for name, tensor in named.items()}


@mistake("02-ex2", "The gradients came from torch.autograd.grad, without hooks: register one "
                   "hook per tensor and call loss.backward().", replaces="collect_gradients")
def collect_with_autograd_grad(named, loss):
    return dict(zip(named, torch.autograd.grad(loss, list(named.values()))))


@mistake("02-ex2", "The gradients came from torch.autograd.grad, and loss.backward() ran only "
                   "to fill .grad: register one hook per tensor, and let loss.backward() hand "
                   "each gradient to its hook.", replaces="collect_gradients")
def collect_with_autograd_grad_then_backward(named, loss):
    grads = torch.autograd.grad(loss, list(named.values()), retain_graph=True)
    loss.backward()
    return dict(zip(named, grads))


@mistake("02-ex2", "The hooks were not removed, so a later backward() still fires them: keep "
                   "the handles register_hook returns and call handle.remove() on each after "
                   "loss.backward().", replaces="collect_gradients")
def collect_without_remove(named, loss):
    grads = {}
    for name, tensor in named.items():
        tensor.register_hook(lambda grad, name=name: grads.update({name: grad}))
    loss.backward()
    return grads


@mistake("02-ex2", "The hooks were removed before loss.backward() ran, so none of them fired: "
                   "call loss.backward() first, then handle.remove() on each handle.",
         replaces="collect_gradients")
def collect_removed_too_early(named, loss):
    grads = {}
    for name, tensor in named.items():
        tensor.register_hook(lambda grad, name=name: grads.update({name: grad})).remove()
    loss.backward()
    return grads


# ---------------------------------------------------------------- 02-ex3: chain_gradients

@scenario("02-ex3", uses=["chain_gradients"], visible=True, title="the example of the test cell")
def chain_visible(chain_gradients, rng):
    with gradients_delivered() as delivered:
        found = chain_gradients([1.0, -1.0], [2.0, 3.0])
    observed = {"chain_gradients([1.0, -1.0], [2.0, 3.0])": _float32(found)}
    if isinstance(found, (list, tuple)) and any(g is None for g in found):
        # what the test cell tells apart when a gradient is None (an answer that fails already)
        observed["every step kept its gradient"] = delivered.retaining >= len(found)
    return observed


_CHAIN = "chain_gradients([1.0, -1.0], [2.0, 3.0])"


def _chain_length(seen):
    found = seen[_CHAIN]
    return isinstance(found, list) and len(found) == 2


def _chain_not_a_list(seen):
    found = seen[_CHAIN]
    what = f"a list of {len(found)} items" if isinstance(found, list) else \
        "None" if found is None else "a tensor" if hasattr(found, "shape") else "another value"
    return f"return a list with one gradient per factor (2 here), not {what}"


CELL_02_EX3 = cell_checks(
    "02-ex3",
    expect_true(_chain_length, _chain_not_a_list),
    expect_true(lambda seen: all(g is not None for g in seen[_CHAIN]),
                lambda seen: "a step's gradient is None although every step kept its gradient "
                "(retain_grad()): L does not depend on that step; compute each step from the "
                "previous step's result, h = h * f + 1"
                if seen["every step kept its gradient"] else
                "a step's gradient is None: call retain_grad() on every step's result, inside "
                "the loop, before backward()"),
    expect_tensor(_CHAIN, name="the gradients, one row per step",
                  read=lambda seen: torch.stack([torch.as_tensor(g) for g in seen[_CHAIN]]),
                  mistakes={
        "the list is in reverse order: put the first step's gradient first":
            [[20.0, -4.0], [60.0, -12.0]],
        "every entry is the last step's gradient: append each step's tensor inside the loop "
        "and read .grad of each one after backward()": [[20.0, -4.0], [20.0, -4.0]],
        "the list is shifted by one step: it starts with the gradient of the leaf x and misses "
        "the last step; append each step's result after computing it":
            [[120.0, -24.0], [60.0, -12.0]],
        "L was built from every step's result: L = sum(h**2) of the last step only":
            [[66.0, -14.0], [20.0, -4.0]]}))


@scenario("02-ex3", uses=["chain_gradients"], title="other values and factors")
def chain_random(chain_gradients, rng):
    values = draw(float_lists(1, 12, 3.0), rng)
    factors = [round(f, 3) for f in draw(float_lists(1, 6, 1.5), rng)]
    with count_calls(torch.Tensor, "retain_grad") as retain:
        found = chain_gradients(values, factors)
    return {"the list of gradients": _float32(found),
            "retain_grad() called for every step": retain.count >= len(factors)}


@scenario("02-ex3", uses=["chain_gradients"], title="a single value, zeros and a zero factor")
def chain_edges(chain_gradients, rng):
    found = {}
    for values, factors in (([0.0], [1.5]), ([2.0], [0.0, -1.5]), ([0.0, 3.0, -3.0], [1.0])):
        with count_calls(torch.Tensor, "retain_grad") as retain:
            result = chain_gradients(values, factors)
        found[f"chain_gradients({values}, {factors})"] = _float32(result)
        found[f"retain_grad() called for every step of {factors}"] = retain.count >= len(factors)
    return found


@mistake("02-ex3", "The list is in reverse order: put the first step's gradient first.")
def chain_gradients(values, factors):
    h = torch.tensor(values, requires_grad=True)
    steps = []
    for factor in factors:
        h = h * factor + 1
        h.retain_grad()
        steps.append(h)
    (h ** 2).sum().backward()
    return [step.grad for step in reversed(steps)]


@mistake("02-ex3", "Every entry is the last step's gradient: keep each step's tensor (append "
                   "it inside the loop) and read .grad of each one after backward().",
         replaces="chain_gradients")
def chain_all_last(values, factors):
    h = torch.tensor(values, requires_grad=True)
    for factor in factors:
        h = h * factor + 1
        h.retain_grad()
    (h ** 2).sum().backward()
    return [h.grad for _ in factors]


@mistake("02-ex3", "The list is shifted by one step: it starts with the gradient of the leaf x "
                   "and misses the last step. Append each step's result after computing it.",
         replaces="chain_gradients")
def chain_shifted(values, factors):
    h = torch.tensor(values, requires_grad=True)
    steps = []
    for factor in factors:
        steps.append(h)
        h = h * factor + 1
        h.retain_grad()
    (h ** 2).sum().backward()
    return [step.grad for step in steps]


@mistake("02-ex3", "Only the last step kept its gradient: call retain_grad() on every step's "
                   "result, inside the loop, before backward().", replaces="chain_gradients")
def chain_only_last_retained(values, factors):
    h = torch.tensor(values, requires_grad=True)
    steps = []
    for factor in factors:
        h = h * factor + 1
        steps.append(h)
    h.retain_grad()
    (h ** 2).sum().backward()
    return [step.grad for step in steps]


@mistake("02-ex3", "L was built from every step's result: L = Σ h² of the last step only.",
         replaces="chain_gradients")
def chain_loss_of_every_step(values, factors):
    h = torch.tensor(values, requires_grad=True)
    steps = []
    for factor in factors:
        h = h * factor + 1
        h.retain_grad()
        steps.append(h)
    sum((step ** 2).sum() for step in steps).backward()
    return [step.grad for step in steps]


@mistake("02-ex3", "The gradients are divided by the number of entries: L is a sum "
                   "(.sum()), not a mean.", replaces="chain_gradients")
def chain_mean(values, factors):
    h = torch.tensor(values, requires_grad=True)
    steps = []
    for factor in factors:
        h = h * factor + 1
        h.retain_grad()
        steps.append(h)
    (h ** 2).mean().backward()
    return [step.grad for step in steps]
