"""Scenarios of lesson 01 (leaf and intermediate tensors): what the grader observes of each answer.

Instructors only: never released to students. See docs/AUTHORING.md, "Scenarios".
"""

from collections import OrderedDict

import torch
from torch import nn

from coursekit.drawing import domain, draw, float_lists, module_names
from coursekit.scenarios import (cell_checks, count_calls, expect_equal, expect_tensor,
                                 expect_true, gradients_delivered, mistake, scenario)

domain("01-ex1", "two lists of 1 to 8 numbers of equal length between -1000 and 1000: floats, "
                 "and whole numbers given as Python ints (a single entry and zeros included); "
                 "the function called twice on the same lists")
domain("01-ex2", "graphs drawn at random: leaves on either input of each operation at varying "
                 "depths, intermediates and tensors of equal values in `named`, an output "
                 "computed without a graph, a deep chain (40 to 80 Nodes)")
domain("01-ex3", "models of Linear layers nested in Sequential containers and blocks, a module "
                 "beside one whose name starts the same, a module with a parameter of its own "
                 "and a submodule, a partly frozen model frozen twice, modules under any names "
                 "with the frozen one's name used again deeper in the model")
domain("01-ex4", "w of any shape (a single number, one entry, 1 to 3 dimensions) with its .grad "
                 "filled and values up to ±1000: one step, then many steps on a quadratic, and a "
                 "loss whose gradient is not a multiple of w; a step of hundreds at once")


def _float32(value):
    """A floating-point tensor as float32, detached (the exercises ask for "float" tensors and
    accept float64 as well); anything else unchanged, so that a wrong type still shows."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.detach().to(torch.float32)
    return value


def _values(rng, n: int) -> list[float]:
    return torch.randn(n, generator=rng).tolist()


# ---------------------------------------------------------------- 01-ex1: leaf_gradients

@scenario("01-ex1", uses=["leaf_gradients"], visible=True, title="the example of the test cell")
def leaf_gradients_visible(leaf_gradients, rng):
    p_grad, q_grad = leaf_gradients([1.0, -2.0, 0.5], [3.0, 0.5, -1.0])
    return {"p.grad": _float32(p_grad), "q.grad": _float32(q_grad)}


_SWAPPED = "the two results are swapped: return (p.grad, q.grad) in that order"
_MEAN = "s is a mean, not a sum: every gradient is divided by the 3 entries; use .sum()"
_BUILT = "s = sum((p*q)**2 + p); did you build it from p and q as given?"
CELL_01_EX1 = cell_checks(
    "01-ex1",
    expect_tensor("p.grad", mistakes={_SWAPPED: [6.0, 4.0, -0.5], _MEAN: [19.0 / 3, 0.0, 2.0 / 3]},
                  hint=_BUILT),
    expect_tensor("q.grad", mistakes={_SWAPPED: [19.0, 0.0, 2.0],
                                      _MEAN: [2.0, 4.0 / 3, -0.5 / 3]}, hint=_BUILT))


def _pair(rng, bound: float, *, integers: bool = False) -> tuple[list, list]:
    """Two lists of one length drawn from 1 to 8, values in [-bound, bound]."""
    n = int(torch.randint(1, 9, (), generator=rng))
    return (draw(float_lists(n, n, bound, integers=integers), rng),
            draw(float_lists(n, n, bound, integers=integers), rng))


@scenario("01-ex1", uses=["leaf_gradients"], title="other values, called twice")
def leaf_gradients_random(leaf_gradients, rng):
    p_values, q_values = _pair(rng, 1e3)
    with gradients_delivered() as delivered:
        p_grad, q_grad = leaf_gradients(p_values, q_values)
        p_again, q_again = leaf_gradients(p_values, q_values)
    return {"p.grad": _float32(p_grad), "q.grad": _float32(q_grad),
            "p.grad of a second call": _float32(p_again),
            "q.grad of a second call": _float32(q_again),
            "the results are gradients a backward pass delivered":
                delivered.holds(p_grad) and delivered.holds(q_grad)}


@scenario("01-ex1", uses=["leaf_gradients"],
          title="whole numbers given as Python ints ([2, 0, -1]): p and q are float tensors "
                "all the same")
def leaf_gradients_whole_numbers(leaf_gradients, rng):
    p_values, q_values = _pair(rng, 50, integers=True)
    p_grad, q_grad = leaf_gradients(p_values, q_values)
    return {"p.grad": _float32(p_grad), "q.grad": _float32(q_grad)}


@scenario("01-ex1", uses=["leaf_gradients"], title="a single entry, and zeros")
def leaf_gradients_single_and_zeros(leaf_gradients, rng):
    value = draw(float_lists(1, 1, 1e3), rng)
    single_p, single_q = leaf_gradients(value, [0.0])
    n = int(torch.randint(2, 9, (), generator=rng))
    zero_p, zero_q = leaf_gradients([0.0] * n, draw(float_lists(n, n, 1e3), rng))
    return {"p.grad for one entry each": _float32(single_p),
            "q.grad for one entry each": _float32(single_q),
            "p.grad when every p is 0": _float32(zero_p),
            "q.grad when every p is 0": _float32(zero_q)}


@mistake("01-ex1", "The two results are swapped: return (p.grad, q.grad) in that order.")
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float32, requires_grad=True)
    ((p * q) ** 2 + p).sum().backward()
    return q.grad, p.grad


@mistake("01-ex1", "p.grad misses the 1 that the `+ p` term adds to every entry: "
                   "build s = sum((p*q)**2 + p) from p and q as given.",
         replaces="leaf_gradients")
def leaf_gradients_without_p(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float32, requires_grad=True)
    ((p * q) ** 2).sum().backward()
    return p.grad, q.grad


@mistake("01-ex1", "The gradients are divided by the number of entries: s is a sum (.sum()), "
                   "not a mean.", replaces="leaf_gradients")
def leaf_gradients_mean(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float32, requires_grad=True)
    ((p * q) ** 2 + p).mean().backward()
    return p.grad, q.grad


@mistake("01-ex1", "The values are right, but they are not the tensors backward() put in "
                   "p.grad and q.grad (worked out by hand, or copied or converted afterwards): "
                   "build s from the leaves p and q, call s.backward(), and return p.grad and "
                   "q.grad themselves.", replaces="leaf_gradients")
def leaf_gradients_by_hand(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32)
    q = torch.tensor(q_values, dtype=torch.float32)
    return 2 * p * q ** 2 + 1, 2 * p ** 2 * q


@mistake("01-ex1", "The leaves p and q themselves were returned: return their gradients, "
                   "p.grad and q.grad, after backward().", replaces="leaf_gradients")
def leaf_gradients_returns_leaves(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float32, requires_grad=True)
    ((p * q) ** 2 + p).sum().backward()
    return p, q


# ---------------------------------------------------------------- 01-ex2: leaves_receiving_grad

@scenario("01-ex2", uses=["leaves_receiving_grad"], visible=True,
          title="the example of the test cell")
def leaves_visible(leaves_receiving_grad, rng):
    u = torch.tensor([1.0, 2.0], requires_grad=True)
    v = torch.tensor([3.0, 4.0])
    k = torch.tensor([5.0, 6.0], requires_grad=True)
    m = torch.tensor([0.5, 0.5], requires_grad=True)
    w = torch.tensor([2.0, -1.0], requires_grad=True)
    h = u * v
    out = (h + k.detach() * u + v * w).sum()
    named = {"u": u, "v": v, "k": k, "m": m, "h": h, "u2": u.detach(), "w": w}
    try:
        with count_calls(torch.autograd, "backward") as backward:
            names = leaves_receiving_grad(out, named)
    except RuntimeError as err:  # the cell's first check: tensors compared with == or `in`
        if "Boolean value of Tensor" not in str(err):
            raise
        return {_AMBIGUOUS_KEY: True}
    return {"leaves_receiving_grad(out, ...)": names, "backward() calls": backward.count,
            "u.grad after the call": u.grad, "k.grad after the call": k.grad,
            "w.grad after the call": w.grad, _AMBIGUOUS_KEY: False}


_AMBIGUOUS_KEY = "raised RuntimeError: Boolean value of Tensor ... is ambiguous"
_AMBIGUOUS = ("leaves_receiving_grad raised RuntimeError: Boolean value of Tensor with more than "
              "one value is ambiguous. `t in a_list` and `==` compare tensors entry by entry, "
              "which gives a tensor of booleans, not one answer; compare with `is`: "
              "any(t is leaf for leaf in leaves)")


_WHY_NOT = {"v": "v does not require grad, so backward never writes v.grad",
            "k": "k is used only through k.detach(), which cuts it out of the graph",
            "m": "m requires grad, but out was not computed from it",
            "h": "h is an intermediate (h.is_leaf is False): its gradient is freed",
            "u2": "u2 = u.detach() has u's values and even u's memory, but it is another "
                  "tensor: compare with `is`, not torch.equal, == or data_ptr()"}


def _leaves_hint(seen):
    names = seen["leaves_receiving_grad(out, ...)"]
    listed = list(names) if isinstance(names, list) else []
    if len(set(listed)) < len(listed):
        return ("a name appears more than once: two paths of the graph lead to u, but u is one "
                "leaf; list each name once")
    return "; ".join(_WHY_NOT[n] for n in _WHY_NOT if n in listed) or (
        "walk out.grad_fn.next_functions down to the AccumulateGrad Nodes")


CELL_01_EX2 = cell_checks(
    "01-ex2",
    expect_true(lambda seen: not seen[_AMBIGUOUS_KEY], _AMBIGUOUS),
    expect_true(lambda seen: all(seen[f"{n}.grad after the call"] is None for n in "ukw"),
                "u.grad was filled: find the leaves by walking out.grad_fn, not backward()"),
    expect_equal("backward() calls",
                 hint="backward() ran inside leaves_receiving_grad: find the leaves by walking "
                      "out.grad_fn, without calling backward()"),
    expect_equal("leaves_receiving_grad(out, ...)", hint=_leaves_hint))


def _random_graph(rng):
    """Leaves used once, twice, through detach(), under no_grad(), or not at all; constants;
    an intermediate; and two tensors with the values of a used leaf that are not that leaf.
    Returns (output, intermediate, named, leaves)."""
    labels = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota",
              "kappa", "lam", "mu"]
    order = torch.randperm(len(labels), generator=rng).tolist()
    labels = [labels[i] for i in order]
    n = int(torch.randint(4, 7, (), generator=rng))
    kinds = torch.randint(0, 5, (n,), generator=rng).tolist()
    kinds[int(torch.randint(0, n, (), generator=rng))] = 0  # at least one leaf used
    size = int(torch.randint(1, 4, (), generator=rng))
    named, leaves = {}, []
    total = torch.zeros(size)
    used = None
    for kind in kinds:
        name = labels.pop()
        leaf = torch.randn(size, generator=rng)
        coefficient = torch.randn(size, generator=rng)
        if kind != 4:
            leaf.requires_grad_()
        if kind == 0:                   # used once
            total = total + leaf * coefficient
            used = used if used is not None else leaf
        elif kind == 1:                 # used twice
            total = total + leaf * leaf
        elif kind == 2:                 # used only through detach()
            total = total + leaf.detach() * coefficient
        elif kind == 3:                 # requires grad, never used
            pass
        else:                           # a constant: used, no gradient
            total = total + leaf * coefficient
        named[name] = leaf
        leaves.append(leaf)
    with torch.no_grad():
        scaled = used * 3               # computed without a graph: a leaf without grad
    middle = used * used.detach().exp()
    output = (total + scaled * middle).sum()
    named[labels.pop()] = scaled
    named[labels.pop()] = middle
    named[labels.pop()] = used.detach()                        # same values, same storage
    named[labels.pop()] = used.detach().clone().requires_grad_()  # same values, another leaf
    return output, middle, named, leaves


@scenario("01-ex2", uses=["leaves_receiving_grad"], title="a graph drawn at random")
def leaves_random_graph(leaves_receiving_grad, rng):
    output, middle, named, leaves = _random_graph(rng)
    with count_calls(torch.autograd, "backward") as backward:
        names = leaves_receiving_grad(output, named)
        from_middle = leaves_receiving_grad(middle, named)
    return {"names for the output": names, "names for an intermediate output": from_middle,
            "backward() calls": backward.count,
            "every leaf's .grad is still None": all(t.grad is None for t in leaves)}


@scenario("01-ex2", uses=["leaves_receiving_grad"],
          title="an output without a graph, a deep chain")
def leaves_without_graph(leaves_receiving_grad, rng):
    a = torch.randn(3, generator=rng, requires_grad=True)
    b = torch.randn(3, generator=rng, requires_grad=True)
    with torch.no_grad():
        plain = (a * b).sum()
    depth = int(torch.randint(20, 40, (), generator=rng))
    chain = a
    for _ in range(depth):
        chain = chain * 0.9 + b
    return {"names for an output made under no_grad()": leaves_receiving_grad(
                plain, {"a": a, "b": b}),
            "names for a long chain": leaves_receiving_grad(chain.sum(), {"b": b, "a": a})}


def _leaves_on_either_side(rng):
    """A random tree of binary operations whose leaves (and one constant) sit on either
    input, at varying depths. Returns (output, named, leaves)."""
    size = int(torch.randint(1, 4, (), generator=rng))
    leaves = [torch.randn(size, generator=rng).requires_grad_()
              for _ in range(int(torch.randint(3, 7, (), generator=rng)))]
    constant = torch.randn(size, generator=rng)
    operations = [torch.mul, torch.add, torch.sub, torch.maximum]
    pool = list(leaves) + [constant]
    while len(pool) > 1:
        i, j = torch.randperm(len(pool), generator=rng)[:2].tolist()
        operation = operations[int(torch.randint(0, len(operations), (), generator=rng))]
        combined = operation(pool[i], pool[j])
        pool = [t for k, t in enumerate(pool) if k not in (i, j)] + [combined]
    named = {f"leaf{k}": leaf for k, leaf in enumerate(leaves)}
    named["constant"] = constant
    return pool[0].sum(), named, leaves


@scenario("01-ex2", uses=["leaves_receiving_grad"],
          title="leaves on either input of each operation, at varying depths")
def leaves_on_either_side(leaves_receiving_grad, rng):
    outputs = {}
    for k in range(3):
        output, named, leaves = _leaves_on_either_side(rng)
        outputs[f"names for tree {k}"] = leaves_receiving_grad(output, named)
    return outputs


class _WalkTooLong(BaseException):
    """Raised in a walk past its CPU time (a BaseException: an answer's `except Exception`
    does not swallow it)."""


# CPU seconds a walk over the shared graph below may take: one that visits each of its 122
# Nodes once needs well under a millisecond; one that visits each Node once per path needs
# 2**60 visits, so any limit between the two decides the same.
WALK_SECONDS = 2.0
DOUBLINGS = 60


def _within_walk_time(call):
    """(True, what `call()` returned), or (False, None) when it ran past WALK_SECONDS of CPU."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return True, call()

    def stop(signum, frame):
        raise _WalkTooLong

    previous = signal.signal(signal.SIGVTALRM, stop)
    signal.setitimer(signal.ITIMER_VIRTUAL, WALK_SECONDS)
    try:
        return True, call()
    except BaseException as err:  # by name: a mistake's walk may come from another load
        if type(err).__name__ != _WalkTooLong.__name__:
            raise
        return False, None
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


@scenario("01-ex2", uses=["leaves_receiving_grad"],
          title="an output that is a leaf, a retained intermediate, Nodes shared by many paths")
def leaves_shared_nodes(leaves_receiving_grad, rng):
    size = int(torch.randint(1, 4, (), generator=rng))
    w = torch.randn(size, generator=rng, requires_grad=True)
    u = torch.randn(size, generator=rng, requires_grad=True)
    h = u * torch.randn(size, generator=rng)
    h.retain_grad()  # backward would fill h.grad too, but h is no leaf
    a = torch.randn(size, generator=rng, requires_grad=True)
    y = a
    for _ in range(DOUBLINGS):  # each Node's two inputs are the one Node below it
        y = y + y
    finished, names = _within_walk_time(lambda: leaves_receiving_grad(y.sum(), {"a": a, "y": y}))
    return {"names for an output that is itself a leaf": leaves_receiving_grad(
                w, {"w": w, "u": u}),
            "names with a retained intermediate in named": leaves_receiving_grad(
                (h * h).sum(), {"h": h, "u": u}),
            f"names for {DOUBLINGS} levels of y = y + y": names if finished else
            f"not finished after {WALK_SECONDS:g} s of CPU time (visiting each Node once "
            "takes under a millisecond)"}


def _accumulate_nodes(node, found, seen=None):
    """The leaves behind `node`, each Node visited once."""
    seen = set() if seen is None else seen
    if node is None or node in seen:
        return
    seen.add(node)
    if hasattr(node, "variable"):
        found.append(node.variable)
    for child, _ in node.next_functions:
        _accumulate_nodes(child, found, seen)


PATH_VISITS = 100_000  # a walk along every path stops here (only the shared graph needs more)


def _along_every_path(node, found, visits=None):
    """The leaves behind `node`, once per path that reaches them (no Node remembered); raises
    _WalkTooLong past PATH_VISITS visits, as such a walk runs out of time on the shared graph."""
    visits = [0] if visits is None else visits
    if node is None:
        return
    visits[0] += 1
    if visits[0] > PATH_VISITS:
        raise _WalkTooLong
    if hasattr(node, "variable"):
        found.append(node.variable)
    for child, _ in node.next_functions:
        _along_every_path(child, found, visits)


@mistake("01-ex2", "A tensor that holds the same values as a leaf was counted as that leaf: "
                   "compare tensors with `is` (identity), not with torch.equal, == or "
                   "data_ptr().")
def leaves_receiving_grad(output, named):
    found = []
    _accumulate_nodes(output.grad_fn, found)
    return sorted(name for name, t in named.items()
                  if any(t.shape == leaf.shape and torch.equal(t, leaf) for leaf in found))


@mistake("01-ex2", "A tensor that shares memory with a leaf (such as leaf.detach()) was "
                   "counted as that leaf: compare tensors with `is`, not with data_ptr().",
         replaces="leaves_receiving_grad")
def leaves_by_data_ptr(output, named):
    found = []
    _accumulate_nodes(output.grad_fn, found)
    return sorted(name for name, t in named.items()
                  if any(t.data_ptr() == leaf.data_ptr() for leaf in found))


@mistake("01-ex2", "A name appears more than once: a leaf reached along several paths of the "
                   "graph is still one leaf. List each name once.",
         replaces="leaves_receiving_grad")
def leaves_with_duplicates(output, named):
    found = []
    _along_every_path(output.grad_fn, found)
    return sorted(name for leaf in found for name, t in named.items() if t is leaf)


@mistake("01-ex2", "Every tensor that requires grad was listed. Only leaves reached by "
                   "walking output.grad_fn down to the AccumulateGrad Nodes get a .grad: "
                   "intermediates and leaves the output does not use do not.",
         replaces="leaves_receiving_grad")
def leaves_requiring_grad(output, named):
    return sorted(name for name, t in named.items() if t.requires_grad)


@mistake("01-ex2", "Every leaf that requires grad was listed, also leaves the output was not "
                   "computed from (or reaches only through detach()): walk output.grad_fn and "
                   "its next_functions to find the leaves it depends on.",
         replaces="leaves_receiving_grad")
def leaves_all_leaves(output, named):
    return sorted(name for name, t in named.items() if t.is_leaf and t.requires_grad)


@mistake("01-ex2", "Only the first level of next_functions was searched: walk the graph "
                   "recursively, down to the AccumulateGrad Nodes.",
         replaces="leaves_receiving_grad")
def leaves_one_level(output, named):
    found = []
    if output.grad_fn is not None:
        found = [node.variable for node, _ in output.grad_fn.next_functions
                 if node is not None and hasattr(node, "variable")]
    return sorted(name for name, t in named.items() if any(t is leaf for leaf in found))


@mistake("01-ex2", "backward() was called: find the leaves by walking output.grad_fn, "
                   "without running backward (it fills .grad, which the caller did not ask "
                   "for).", replaces="leaves_receiving_grad")
def leaves_by_backward(output, named):
    output.backward(retain_graph=True)
    names = sorted(name for name, t in named.items() if t.is_leaf and t.grad is not None)
    for t in named.values():
        if t.is_leaf:
            t.grad = None
    return names


@mistake("01-ex2", "Only the first input of each Node was followed (next_functions[0]): a Node "
                   "has one entry in next_functions per input, and leaves can sit behind any "
                   "of them. Follow every entry.", replaces="leaves_receiving_grad")
def leaves_first_input_only(output, named):
    found, node = [], output.grad_fn
    while node is not None:
        if hasattr(node, "variable"):
            found.append(node.variable)
            break
        node = node.next_functions[0][0] if node.next_functions else None
    return sorted(name for name, t in named.items() if any(t is leaf for leaf in found))


@mistake("01-ex2", "The names are not sorted: return them sorted (sorted(...)).",
         replaces="leaves_receiving_grad")
def leaves_unsorted(output, named):
    found = []
    _accumulate_nodes(output.grad_fn, found)
    return [name for name, t in named.items() if any(t is leaf for leaf in found)]


@mistake("01-ex2", "output itself was listed, a leaf that requires grad: the exercise leaves "
                   "output's own .grad out. Only leaves reached through output.grad_fn count "
                   "(a leaf output has none: the list is empty).",
         replaces="leaves_receiving_grad")
def leaves_with_leaf_output(output, named):
    found = [output] if output.grad_fn is None and output.requires_grad else []
    _accumulate_nodes(output.grad_fn, found)
    return sorted(name for name, t in named.items() if any(t is leaf for leaf in found))


@mistake("01-ex2", "An intermediate that called retain_grad() was listed: backward fills its "
                   ".grad too, but it is no leaf. List only the tensors of the AccumulateGrad "
                   "Nodes.", replaces="leaves_receiving_grad")
def leaves_with_retained(output, named):
    found = []
    _accumulate_nodes(output.grad_fn, found)
    return sorted(name for name, t in named.items()
                  if any(t is leaf for leaf in found) or (not t.is_leaf and t.retains_grad))


@mistake("01-ex2", "The walk over 60 levels of y = y + y did not finish: a walk that does not "
                   "remember the Nodes it visited goes through each Node once per path (2**60 "
                   "paths here). Keep a set of the Nodes visited, as print_graph's `seen` does.",
         replaces="leaves_receiving_grad")
def leaves_without_visited_set(output, named):
    found = []
    _along_every_path(output.grad_fn, found)
    return sorted(name for name, t in named.items() if any(t is leaf for leaf in found))


# ---------------------------------------------------------------- 01-ex3: freeze

def _flags(model):
    return {name: p.requires_grad for name, p in model.named_parameters()}


def _grads_after_backward(model, inputs):
    model(inputs).sum().backward()
    return {name: p.grad is not None for name, p in model.named_parameters()}


@scenario("01-ex3", uses=["freeze"], visible=True, title="the example of the test cell")
def freeze_visible(freeze, rng):
    net = nn.Sequential(OrderedDict(encoder=nn.Linear(4, 3), decoder=nn.Linear(3, 4)))
    trainable = freeze(net, "encoder")
    # `module.requires_grad = False` leaves this trace; a slip such as `p.requires_grad_`
    # without its call leaves none, and is not told it wrote the assignment
    plain = any("requires_grad" in vars(m) for m in net.modules())
    return {"freeze(net, 'encoder')": trainable, "requires_grad of each parameter": _flags(net),
            "a module got a plain requires_grad attribute": plain}


CELL_01_EX3 = cell_checks(
    "01-ex3",
    expect_true(lambda seen: not seen["requires_grad of each parameter"]["encoder.weight"]
                or not seen["a module got a plain requires_grad attribute"],
                "net.encoder.weight still requires grad: `module.requires_grad = False` only "
                "sets a plain attribute; call module.requires_grad_(False)"),
    expect_true(lambda seen: not seen["requires_grad of each parameter"]["encoder.weight"],
                "net.encoder.weight still requires grad: call module.requires_grad_(False), or "
                "p.requires_grad_(False) on each of its parameters (with the call's parentheses)"),
    expect_true(lambda seen: seen["requires_grad of each parameter"]["decoder.weight"],
                "net.decoder.weight was frozen too: freeze only the submodule named"),
    expect_equal("freeze(net, 'encoder')",
                 hint="return a list of the names of the parameters that still require grad"))


def _nested_model(rng):
    width = int(torch.randint(2, 5, (), generator=rng))
    depth = int(torch.randint(2, 5, (), generator=rng))
    body = []
    for i in range(depth):
        body += [nn.Linear(width, width), nn.Tanh()]
    return nn.Sequential(OrderedDict(
        stem=nn.Linear(3, width), stem_norm=nn.LayerNorm(width),
        body=nn.Sequential(*body[:-1]), head=nn.Linear(width, 1))), depth


@scenario("01-ex3", uses=["freeze"], title="a layer nested in a Sequential")
def freeze_nested(freeze, rng):
    model, depth = _nested_model(rng)
    target = f"body.{2 * int(torch.randint(0, depth, (), generator=rng))}"
    trainable = freeze(model, target)
    return {"returned names": trainable, "requires_grad of each parameter": _flags(model),
            "parameters with a .grad after backward":
                _grads_after_backward(model, torch.randn(5, 3, generator=rng))}


@scenario("01-ex3", uses=["freeze"], title="a module beside one whose name starts the same")
def freeze_prefix(freeze, rng):
    model, _ = _nested_model(rng)
    target = "stem"
    trainable = freeze(model, target)
    return {"returned names": trainable, "requires_grad of each parameter": _flags(model),
            "parameters with a .grad after backward":
                _grads_after_backward(model, torch.randn(4, 3, generator=rng))}


class _Scaled(nn.Module):
    """A module with a parameter of its own and a submodule: a container that is not a
    Sequential."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()))
        self.inner = inner

    def forward(self, x):
        return self.inner(x) * self.scale


def _model_of_blocks(rng):
    """Blocks of layers nested to a depth drawn at random, one of them wrapped in a _Scaled.
    Returns the model and the names of its containers (submodules with submodules)."""
    width = int(torch.randint(2, 5, (), generator=rng))
    blocks = []
    for _ in range(int(torch.randint(2, 4, (), generator=rng))):
        inner: nn.Module = nn.Linear(width, width)
        for _ in range(int(torch.randint(1, 3, (), generator=rng))):
            inner = nn.Sequential(nn.Linear(width, width), nn.Tanh(), inner)
        blocks.append(inner)
    scaled = int(torch.randint(0, len(blocks), (), generator=rng))
    blocks[scaled] = _Scaled(blocks[scaled])
    model = nn.Sequential(OrderedDict(embed=nn.Linear(3, width), blocks=nn.Sequential(*blocks),
                                      head=nn.Linear(width, 1)))
    containers = [name for name, module in model.named_modules()
                  if name and any(True for _ in module.children())]
    return model, containers


@scenario("01-ex3", uses=["freeze"], title="containers: a Sequential of nested blocks, and more")
def freeze_containers(freeze, rng):
    observed = {}
    for index in range(3):
        model, containers = _model_of_blocks(rng)
        target = "blocks" if index == 0 else containers[
            int(torch.randint(0, len(containers), (), generator=rng))]
        trainable = freeze(model, target)
        observed[f"model {index}: freeze(model, {target!r})"] = {
            "returned names": trainable, "requires_grad of each parameter": _flags(model),
            "parameters with a .grad after backward":
                _grads_after_backward(model, torch.randn(2, 3, generator=rng))}
    return observed


@scenario("01-ex3", uses=["freeze"], title="a module with a parameter of its own and a submodule")
def freeze_own_and_nested(freeze, rng):
    model, _ = _model_of_blocks(rng)
    target = next(name for name, module in model.named_modules() if isinstance(module, _Scaled))
    trainable = freeze(model, target)
    return {"frozen": target, "returned names": trainable,
            "requires_grad of each parameter": _flags(model)}


@scenario("01-ex3", uses=["freeze"], title="a partly frozen model, frozen twice")
def freeze_twice(freeze, rng):
    """Freezing is idempotent: a module frozen again (or one whose parameters are already
    partly frozen) stays frozen, and what was frozen before stays so."""
    model, depth = _nested_model(rng)
    model.head.bias.requires_grad_(False)            # frozen by the caller beforehand
    target = f"body.{2 * int(torch.randint(0, depth, (), generator=rng))}"
    model.get_submodule(target).weight.requires_grad_(False)  # half of the target already
    first = freeze(model, target)
    second = freeze(model, target)
    return {"returned names, first call": first, "returned names, second call": second,
            "requires_grad of each parameter": _flags(model)}


@scenario("01-ex3", uses=["freeze"],
          title="modules under any names, the frozen one's name used again deeper in the model")
def freeze_drawn_names(freeze, rng):
    """A top-level module and a module inside a container share their name: freezing the
    top-level one by its name leaves the nested one (whose full name ends the same) alone."""
    target, container, other, last = draw(module_names(4, 1, 16), rng)
    width = int(torch.randint(2, 5, (), generator=rng))
    inner = nn.Sequential(OrderedDict([(target, nn.Linear(width, width)),
                                       (other, nn.Linear(width, width))]))
    model = nn.Sequential(OrderedDict([(target, nn.Linear(3, width)), (container, inner),
                                       (last, nn.Linear(width, 1))]))
    nested = f"{container}.{target}"
    first = freeze(model, target)
    flags_first = _flags(model)
    again = nn.Sequential(OrderedDict([(target, nn.Linear(3, width)),
                                       (container, nn.Sequential(OrderedDict([
                                           (target, nn.Linear(width, width)),
                                           (other, nn.Linear(width, width))]))),
                                       (last, nn.Linear(width, 1))]))
    return {f"freeze(model, {target!r})": first,
            f"requires_grad of each parameter after freeze(model, {target!r})": flags_first,
            f"freeze(model, {nested!r}) on a fresh model": freeze(again, nested),
            f"requires_grad of each parameter after freeze(model, {nested!r})": _flags(again)}


@mistake("01-ex3", "Nothing was frozen: `module.requires_grad = False` only sets a plain "
                   "attribute on the module; call module.requires_grad_(False).")
def freeze(model, module_name):
    model.get_submodule(module_name).requires_grad = False
    return [name for name, p in model.named_parameters() if p.requires_grad]


@mistake("01-ex3", "The whole model was frozen: freeze only model.get_submodule(module_name).",
         replaces="freeze")
def freeze_everything(model, module_name):
    model.requires_grad_(False)
    return [name for name, p in model.named_parameters() if p.requires_grad]


@mistake("01-ex3", "The list holds the frozen parameters: return the names of the parameters "
                   "that still require grad.", replaces="freeze")
def freeze_returns_frozen(model, module_name):
    model.get_submodule(module_name).requires_grad_(False)
    return [name for name, p in model.named_parameters() if not p.requires_grad]


@mistake("01-ex3", "Only the weights were frozen: requires_grad_(False) on the submodule "
                   "freezes every parameter in it, biases included.", replaces="freeze")
def freeze_weights_only(model, module_name):
    for name, p in model.get_submodule(module_name).named_parameters():
        if name.endswith("weight"):
            p.requires_grad_(False)
    return [name for name, p in model.named_parameters() if p.requires_grad]


@mistake("01-ex3", "A module whose name merely starts with the same letters was frozen too: "
                   "freeze model.get_submodule(module_name), or compare names up to the dot "
                   "(name.startswith(module_name + '.')).", replaces="freeze")
def freeze_by_prefix(model, module_name):
    for name, p in model.named_parameters():
        if name.startswith(module_name):
            p.requires_grad_(False)
    return [name for name, p in model.named_parameters() if p.requires_grad]


@mistake("01-ex3", "Only the module's own parameters were frozen (parameters(recurse=False)): "
                   "a container such as a Sequential keeps its parameters in its submodules. "
                   "module.requires_grad_(False), or parameters() with no argument, reaches "
                   "them all.", replaces="freeze")
def freeze_without_recursion(model, module_name):
    for p in model.get_submodule(module_name).parameters(recurse=False):
        p.requires_grad_(False)
    return [name for name, p in model.named_parameters() if p.requires_grad]


@mistake("01-ex3", "An AttributeError: getattr(model, name) does not reach a nested module "
                   "such as 'body.2'; use model.get_submodule(module_name).", replaces="freeze")
def freeze_by_getattr(model, module_name):
    getattr(model, module_name).requires_grad_(False)
    return [name for name, p in model.named_parameters() if p.requires_grad]


# ---------------------------------------------------------------- 01-ex4: sgd_step_

def _after_step(w, address):
    return {"w": w.detach().clone(), "w is a leaf": w.is_leaf,
            "w.requires_grad": w.requires_grad, "w.grad": w.grad,
            "w changed in place (same storage)": w.data_ptr() == address}


@scenario("01-ex4", uses=["sgd_step_"], visible=True, title="the example of the test cell")
def sgd_step_visible(sgd_step_, rng):
    w = torch.tensor([1.0, -1.0, 2.0], requires_grad=True)
    (w ** 3).sum().backward()
    address = w.data_ptr()
    sgd_step_(w, lr=0.25)
    return _after_step(w, address)


CELL_01_EX4 = cell_checks(
    "01-ex4",
    expect_tensor("w", name="w after the step", mistakes={
        "w did not change: the update must change the caller's w itself, in place (w -= "
        "..., w.sub_(...)) inside torch.no_grad(); `w = w - ...` makes a new tensor, and an "
        "update of a copy (w.clone()) leaves w alone":
        [1.0, -1.0, 2.0],
        "w moved uphill: subtract lr * w.grad, do not add it": [1.75, -0.25, 5.0],
        "w moved by lr * 2w, the gradient of another loss: use w.grad, the gradient "
        "backward() filled": [0.5, -0.5, 1.0]}),
    expect_true(lambda seen: seen["w is a leaf"] and seen["w.requires_grad"],
                "w should still be a leaf that requires grad"),
    expect_true(lambda seen: seen["w changed in place (same storage)"],
                "w is still the same leaf, but its values now live in new memory (w.data = ... "
                "or w.set_(...) swaps the storage, and a tensor that shared it no longer sees the "
                "update): change the values in place, w -= lr * w.grad, inside torch.no_grad()"),
    expect_true(lambda seen: seen["w.grad"] is None,
                "w.grad should be None after the step (w.grad = None)"))


@scenario("01-ex4", uses=["sgd_step_"], title="one step, then many steps on a quadratic",
          tolerance={"w after the last step": (1e-4, 1e-5)})
def sgd_step_descends(sgd_step_, rng):
    shape = (int(torch.randint(2, 6, (), generator=rng)),)
    w = torch.randn(shape, generator=rng).requires_grad_()
    target = torch.randn(shape, generator=rng) * 3
    lr = float(torch.rand((), generator=rng)) * 0.2 + 0.05
    ((w - target) ** 2).sum().backward()
    address = w.data_ptr()
    sgd_step_(w, lr)
    first = _after_step(w, address)
    steps = int(torch.randint(5, 15, (), generator=rng))
    for _ in range(steps):
        ((w - target) ** 2).sum().backward()
        sgd_step_(w, lr)
    return {"after one step": first, "w after the last step": w.detach().clone(),
            "w.grad after the last step": w.grad, "w.grad_fn after the last step":
                None if w.grad_fn is None else w.grad_fn.name()}


@scenario("01-ex4", uses=["sgd_step_"], rtol=1e-4, atol=1e-5,
          title="a 2-D w and a loss whose gradient is not a multiple of w")
def sgd_step_matrix(sgd_step_, rng):
    shape = (int(torch.randint(1, 4, (), generator=rng)),
             int(torch.randint(2, 5, (), generator=rng)))
    w = torch.randn(shape, generator=rng).requires_grad_()
    weight = torch.randn(shape, generator=rng)
    lr = float(torch.rand((), generator=rng)) * 0.2 + 0.05
    (torch.sin(w) * weight + w ** 3 / 3).sum().backward()
    address = w.data_ptr()
    sgd_step_(w, lr)
    return _after_step(w, address)


@scenario("01-ex4", uses=["sgd_step_"], rtol=1e-4, atol=1e-5,
          title="a single number, one entry and a 3-D w, values up to ±1000, a large step")
def sgd_step_any_shape(sgd_step_, rng):
    observed = {}
    for label, shape in (("a single number", ()), ("one entry", (1,)), ("a 3-D w", (2, 3, 2))):
        count = max(1, int(torch.tensor(shape).prod()) if shape else 1)
        values = draw(float_lists(count, count, 1e3), rng)
        w = torch.tensor(values).reshape(shape).requires_grad_()
        lr = float(torch.rand((), generator=rng)) * 1e-3 + 1e-4
        (w ** 2 / 2 + torch.cos(w)).sum().backward()
        address = w.data_ptr()
        sgd_step_(w, lr)
        observed.update({f"{label}: {key}": value
                         for key, value in _after_step(w, address).items()})
    # large values and a learning rate that moves them by hundreds in one step (a step clamped
    # to a bound, or scaled down, shows here)
    signs = torch.randint(0, 2, (3,), generator=rng) * 2 - 1
    w = ((torch.rand(3, generator=rng) * 900 + 100) * signs).requires_grad_()
    lr = float(torch.rand((), generator=rng)) * 0.4 + 0.1
    (w ** 2 / 2).sum().backward()
    address = w.data_ptr()
    sgd_step_(w, lr)
    observed.update({f"a large step: {key}": value
                     for key, value in _after_step(w, address).items()})
    return observed


@mistake("01-ex4", "w did not change: the update must change the caller's w itself, in place "
                   "(w -= ..., w.sub_(...)) inside torch.no_grad(); `w = w - ...` makes a new "
                   "tensor, and an update of a copy (w.clone()) leaves w alone.")
def sgd_step_(w, lr):
    with torch.no_grad():
        w = w - lr * w.grad
    w.grad = None


@mistake("01-ex4", "w moved uphill: subtract lr * w.grad, do not add it.", replaces="sgd_step_")
def sgd_step_uphill(w, lr):
    with torch.no_grad():
        w += lr * w.grad
    w.grad = None


@mistake("01-ex4", "w.grad was not cleared: set w.grad = None after the update, or the next "
                   "backward() adds its gradient to the old one.", replaces="sgd_step_")
def sgd_step_keeps_grad(w, lr):
    with torch.no_grad():
        w -= lr * w.grad


@mistake("01-ex4", "w.grad was filled with zeros, not set to None: the exercise asks for "
                   "w.grad = None.", replaces="sgd_step_")
def sgd_step_zeroes_grad(w, lr):
    with torch.no_grad():
        w -= lr * w.grad
    w.grad.zero_()


@mistake("01-ex4", "w got new storage (w.data = ...) instead of being changed in place: update "
                   "it in place (w -= ...) inside torch.no_grad().", replaces="sgd_step_")
def sgd_step_new_data(w, lr):
    w.data = w - lr * w.grad
    w.grad = None


@mistake("01-ex4", "A RuntimeError: an in-place change of a leaf that requires grad is refused "
                   "while autograd records; make the update inside `with torch.no_grad():`.",
         replaces="sgd_step_")
def sgd_step_recorded(w, lr):
    w.sub_(lr * w.grad)
    w.grad = None


@mistake("01-ex4", "w moved by lr * 2w, the gradient of (w**2).sum() only: use w.grad, the "
                   "gradient that backward() filled.", replaces="sgd_step_")
def sgd_step_assumes_square(w, lr):
    with torch.no_grad():
        w -= lr * 2 * w
    w.grad = None
