"""Scenarios of lesson 06 (module hooks): what the grader observes of each answer.

Instructors only: never released to students. See docs/AUTHORING.md, "Scenarios".
Every model is small and built here, its weights drawn from `rng` (never the ResNet-50).
"""

import warnings
from collections import OrderedDict

import torch
from torch import nn

from coursekit.drawing import domain, draw, module_names
from coursekit.scenarios import (cell_checks, expect_equal, expect_tensor, expect_true, mistake,
                                 scenario)

domain("06-ex1", "nested models with an in-place ReLU after the captured layer and a hook of "
                 "the caller's own on a layer, forward passes that raise before or after the "
                 "captured layer")
domain("06-ex2", "models with repeated cells, a shared activation and an unused branch, a flat "
                 "model of one layer, a model with a hook of its own, two models called in two "
                 "orders, modules under any names nested three deep with one module registered "
                 "under two names")
domain("06-ex3", "random networks blocked at a middle layer, a network in eval mode, a residual "
                 "block whose gate branch is blocked, a module of two inputs (a tensor and a "
                 "tensor or a number), a first layer "
                 "whose input needs no gradient, two modules of one network blocked and one "
                 "block lifted, a block of several layers blocked as one and lifted")


def _randomise(model, rng, scale=0.5):
    """Draw every parameter of `model` from `rng`, so no run depends on the global seed."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=rng) * scale)
    return model


def _size(rng, low, high):
    """An integer in [low, high]."""
    return int(torch.randint(low, high + 1, (), generator=rng))


def _forward_hooks_left(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def _requires_grad(value):
    return value.requires_grad if isinstance(value, torch.Tensor) else None


class _FailsAfter(nn.Module):
    """A model whose forward pass raises after its first layer has run."""

    def __init__(self, width):
        super().__init__()
        self.first = nn.Linear(width, width)

    def forward(self, x):
        self.first(x)
        raise ValueError("this forward pass fails after its first layer")


# Said as a fact, not as "expected a string, found None" (a blind review)
_REACHED = "the ValueError model(x) raised reached the caller"


def _after_failure(capture_activation, width, rng):
    """What reaches the caller when the forward pass raises, and the hooks left behind."""
    failing = _randomise(_FailsAfter(width), rng)
    try:
        capture_activation(failing, failing.first, torch.randn(1, width, generator=rng))
        reached = None
    except Exception as err:  # noqa: BLE001 (which error reaches the caller is observed)
        reached = type(err).__name__
    return {_REACHED: reached == "ValueError",
            "hooks left after the forward pass raised": _forward_hooks_left(failing)}


# ---------------------------------------------------------- 06-ex1: capture_activation

@scenario("06-ex1", uses=["capture_activation"], visible=True,
          title="the example of the test cell")
def capture_visible_example(capture_activation, rng):
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(inplace=True), nn.Linear(3, 1))
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[1., -1.], [2., 0.5], [-1., -1.]]))
        net[0].bias.copy_(torch.tensor([0., -1., 0.5]))
        net[2].weight.copy_(torch.tensor([[0.5, -0.5, 1.]]))
        net[2].bias.zero_()
    x = torch.tensor([[1., 2.], [-1., 0.]])
    activation = capture_activation(net, net[0], x)
    return {"activation": activation,
            "activation.requires_grad": _requires_grad(activation),
            "hooks left on the model": _forward_hooks_left(net),
            "a forward pass that raises": _after_failure(capture_activation, 2, rng)}


_RAISES = "a forward pass that raises"
CELL_06_EX1 = cell_checks(
    "06-ex1",
    expect_tensor("activation", mistakes={
        "These are the values after the in-place ReLU: the hook kept a reference to the output "
        "(output or output.detach(), which share its memory), or copied it only after model(x) "
        "returned. Store output.detach().clone() inside the hook.":
            [[0., 2., 0.], [0., 0., 1.5]]}),
    expect_true(lambda seen: not seen["activation.requires_grad"],
                "The activation still requires grad: output.clone() copies the values but stays "
                "in the graph. Detach it as well: output.detach().clone()."),
    expect_equal("hooks left on the model", name="hooks left on the layer",
                 hint="Remove the hook with the handle that register_forward_hook returned."),
    expect_true(lambda seen: seen[_RAISES][_REACHED],
                "model(x) raised a ValueError, but capture_activation returned normally: let the "
                "error reach the caller."),
    expect_true(lambda seen: seen[_RAISES]["hooks left after the forward pass raised"] == 0,
                "Remove the hook in a finally block (or use the handle as a context "
                "manager), so that it goes also when model(x) raises."))


@scenario("06-ex1", uses=["capture_activation"],
          title="a nested model with an in-place ReLU after the captured layer")
def capture_nested_model(capture_activation, rng):
    a, b, c = _size(rng, 2, 5), _size(rng, 3, 6), _size(rng, 2, 4)
    inner = nn.Sequential(nn.Linear(b, b), nn.Tanh())
    outer = _randomise(nn.Sequential(nn.Linear(a, b), inner, nn.ReLU(inplace=True),
                                     nn.Linear(b, c)), rng)
    x = torch.randn(_size(rng, 2, 5), a, generator=rng, requires_grad=True)
    # outer[0] already has a hook of the caller's own: capturing there must leave it in place
    own = outer[0].register_forward_hook(lambda module, args, output: None)
    observed = {}
    for name, layer in [("inner", inner), ("inner[1]", inner[1]), ("outer[0]", outer[0])]:
        activation = capture_activation(outer, layer, x)
        observed[f"activation of {name}"] = activation
        observed[f"activation of {name}: requires_grad"] = _requires_grad(activation)
    observed[_OWN_HOOK_KEPT] = own.id in outer[0]._forward_hooks
    own.remove()
    observed["hooks left on the model"] = _forward_hooks_left(outer)
    return observed


_OWN_HOOK_KEPT = "the hook outer[0] already had before the calls is still registered"


@scenario("06-ex1", uses=["capture_activation"],
          title="a forward pass that raises after the captured layer")
def capture_when_forward_raises(capture_activation, rng):
    return _after_failure(capture_activation, _size(rng, 2, 6), rng)


class _FailsBefore(nn.Module):
    """A model whose forward pass raises before its first layer runs."""

    def __init__(self, width):
        super().__init__()
        self.first = nn.Linear(width, width)

    def forward(self, x):
        raise ValueError("this forward pass fails before its first layer")


@scenario("06-ex1", uses=["capture_activation"],
          title="a forward pass that raises before the captured layer")
def capture_when_forward_raises_early(capture_activation, rng):
    width = _size(rng, 2, 6)
    failing = _randomise(_FailsBefore(width), rng)
    try:
        capture_activation(failing, failing.first, torch.randn(1, width, generator=rng))
        reached = None
    except Exception as err:  # noqa: BLE001 (which error reaches the caller is observed)
        reached = type(err).__name__
    return {_REACHED: reached == "ValueError",
            "hooks left after the forward pass raised": _forward_hooks_left(failing)}


@mistake("06-ex1", "The activation shows the in-place ReLU's change: the hook kept a reference "
                   "to the output (output or output.detach() share its memory), or copied it only "
                   "after model(x) returned. Store output.detach().clone() inside the hook.",
         replaces="capture_activation")
def capture_keeps_a_reference(model, layer, x):
    captured = {}
    handle = layer.register_forward_hook(
        lambda module, args, output: captured.__setitem__("out", output.detach()))
    try:
        model(x)
    finally:
        handle.remove()
    return captured["out"]


@mistake("06-ex1", "The hook kept the output tensor itself: the in-place ReLU changed it "
                   "afterwards, and it is still part of the graph. Store "
                   "output.detach().clone() inside the hook.", replaces="capture_activation")
def capture_keeps_the_output(model, layer, x):
    captured = {}
    handle = layer.register_forward_hook(
        lambda module, args, output: captured.__setitem__("out", output))
    try:
        model(x)
    finally:
        handle.remove()
    return captured["out"]


@mistake("06-ex1", "The activation still requires grad: output.clone() copies the values but "
                   "stays in the graph. Detach it as well: output.detach().clone().",
         replaces="capture_activation")
def capture_clones_without_detach(model, layer, x):
    captured = {}
    handle = layer.register_forward_hook(
        lambda module, args, output: captured.__setitem__("out", output.clone()))
    try:
        model(x)
    finally:
        handle.remove()
    return captured["out"]


@mistake("06-ex1", "The hook stays on the layer after the function returns: remove it with the "
                   "handle that register_forward_hook returned.",
         replaces="capture_activation")
def capture_never_removes(model, layer, x):
    captured = {}
    layer.register_forward_hook(
        lambda module, args, output: captured.__setitem__("out", output.detach().clone()))
    model(x)
    return captured["out"]


@mistake("06-ex1", "When model(x) raises, the hook stays on the layer: remove it in a finally "
                   "block (or use the handle as a context manager), so that it goes in every "
                   "case.", replaces="capture_activation")
def capture_removes_only_on_success(model, layer, x):
    captured = {}
    handle = layer.register_forward_hook(
        lambda module, args, output: captured.__setitem__("out", output.detach().clone()))
    model(x)
    handle.remove()
    return captured["out"]


@mistake("06-ex1", "The hooks the layer already had were deleted too: clearing "
                   "layer._forward_hooks removes every forward hook on the layer, not only "
                   "yours. Remove your hook with the handle that register_forward_hook "
                   "returned.", replaces="capture_activation")
def capture_clears_all_hooks(model, layer, x):
    captured = {}
    layer.register_forward_hook(
        lambda module, args, output: captured.__setitem__("out", output.detach().clone()))
    try:
        model(x)
    finally:
        layer._forward_hooks.clear()
    return captured["out"]


@mistake("06-ex1", "These are the values that go into the layer (args[0]), not what comes out: "
                   "a forward hook receives (module, args, output); keep the output.",
         replaces="capture_activation")
def capture_the_input(model, layer, x):
    captured = {}
    handle = layer.register_forward_hook(
        lambda module, args, output: captured.__setitem__("in", args[0].detach().clone()))
    try:
        model(x)
    finally:
        handle.remove()
    return captured["in"]


# ---------------------------------------------------------------- 06-ex2: count_calls

class _Reuse(nn.Module):
    """The model of the visible test."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(3, 3)
        self.act = nn.Tanh()
        self.block = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
        self.head = nn.Linear(3, 2)
        self.spare = nn.Linear(3, 3)

    def forward(self, x):
        x = self.act(self.inp(x))
        for _ in range(3):
            x = self.block(x)
        return self.head(self.act(x))


class _Tower(nn.Module):
    """A stem, a stack of cells run `repeats` times, a shared activation, an unused branch."""

    def __init__(self, width, depth, repeats):
        super().__init__()
        self.repeats = repeats
        self.stem = nn.Linear(width, width)
        self.act = nn.ReLU()
        self.cells = nn.Sequential(*[nn.Sequential(nn.Linear(width, width), nn.Tanh())
                                     for _ in range(depth)])
        self.skip = nn.Identity()
        self.unused = nn.Sequential(nn.Linear(width, width), nn.Sigmoid())
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        x = self.act(self.stem(x))
        for _ in range(self.repeats):
            x = self.act(self.cells(x)) + self.skip(x)
        return self.head(x)


def _count_twice(count_calls, model, x):
    first = count_calls(model, x)
    if isinstance(first, dict):  # as the first call returned it (the second may change it)
        first = dict(first)
    return {"counts": first, "hooks left on the model": _forward_hooks_left(model),
            "counts of a second call": count_calls(model, x)}


@scenario("06-ex2", uses=["count_calls"], visible=True, title="the example of the test cell")
def count_visible_example(count_calls, rng):
    model = _Reuse()
    observed = _count_twice(count_calls, model, torch.ones(2, 3))
    # the cell's last check: a hook the model already had still fires, and stays
    fired = []
    own = model.head.register_forward_hook(lambda module, args, output: fired.append(1))
    try:
        count_calls(model, torch.ones(2, 3))
    except Exception:  # noqa: BLE001 (an answer that failed a check above: the cell stopped)
        return observed
    observed["calls of the model's own hook in one call"] = len(fired)
    observed["the model's own hook is still registered"] = own.id in model.head._forward_hooks
    own.remove()
    return observed


_REUSE_COUNTS = {"inp": 1, "act": 2, "block": 3, "block.0": 3, "block.1": 3, "head": 1,
                 "spare": 0}


def _counts_names(seen):
    names = sorted(seen["counts"])
    shown = names if set(names) <= set(_REUSE_COUNTS) | {""} else "other names"
    return (f"Nested modules are missing (found {shown}): use named_modules(), "
            "not named_children().")


_HOOKS_LEFT = "Hooks were left on the model: remove each one with its handle."
_SECOND_CALL = ("The second call counted more: each call must count from zero, in a dict "
                "made inside the function (not at module level or as a default argument), "
                "and leave no hook behind.")


def _last_name_hint(seen):
    counts = seen["counts"]
    if counts and all(isinstance(counts.get(name), int) for name in _REUSE_COUNTS) and \
            counts["inp"] >= 2 and all(counts[name] == counts["inp"] * n
                                       for name, n in _REUSE_COUNTS.items()):
        # Every count a whole multiple of the expected one: the calls before this one (the
        # test cell's, which ran first) still count, as the cell said at its own later check.
        if seen["hooks left on the model"]:
            return _HOOKS_LEFT
        # Only when the counts grow from one call to the next; an answer that counts each run
        # twice by itself failed the cell's first look at the counts, which gave no hint.
        return _SECOND_CALL if seen.get("counts of a second call") != counts else None
    if seen["counts"] == dict.fromkeys(_REUSE_COUNTS, 0) | {"spare": sum(_REUSE_COUNTS.values())}:
        return ("Every call was counted under 'spare', the last name of the loop: a hook defined "
                "in a loop reads the loop variable when it runs, after the loop has ended. Bind "
                "the name when the hook is made (a default argument name=name, or a function "
                "that returns the hook).")
    return None


def _own_hook_said(seen):
    fired, kept = seen["calls of the model's own hook in one call"], \
        seen["the model's own hook is still registered"] is True
    return (f"A hook the model already had (on reuse.head) fired {fired} time(s) in one "
            f"call, not once, and is {'still' if kept else 'no longer'} registered afterwards: "
            "leave alone the hooks you did not register; remove only yours, by their handles.")


CELL_06_EX2 = cell_checks(
    "06-ex2",
    expect_true(lambda seen: isinstance(seen["counts"], dict), None),
    expect_true(lambda seen: "block.0" in seen["counts"], _counts_names),
    expect_true(lambda seen: "" not in seen["counts"],
                "Leave out the model itself (the name '')."),
    expect_true(lambda seen: "spare" in seen["counts"],
                "Modules that never ran should appear with a count of 0."),
    expect_equal("counts", hint=_last_name_hint),
    expect_true(lambda seen: seen["hooks left on the model"] == 0, _HOOKS_LEFT),
    expect_equal("counts of a second call", hint=_SECOND_CALL),
    expect_true(lambda seen: seen["calls of the model's own hook in one call"] == 1
                and seen["the model's own hook is still registered"] is True, _own_hook_said))


@scenario("06-ex2", uses=["count_calls"],
          title="a model with repeated cells, a shared activation and an unused branch")
def count_tower(count_calls, rng):
    width = _size(rng, 2, 4)
    model = _randomise(_Tower(width, _size(rng, 1, 3), _size(rng, 2, 5)), rng)
    return _count_twice(count_calls, model,
                        torch.randn(_size(rng, 1, 3), width, generator=rng))


@scenario("06-ex2", uses=["count_calls"], title="a flat model of one layer")
def count_single_layer(count_calls, rng):
    width = _size(rng, 2, 5)
    model = nn.Sequential(nn.Linear(width, width))
    return {"counts": count_calls(model, torch.randn(1, width, generator=rng))}


@scenario("06-ex2", uses=["count_calls"], title="a model that already has a hook of its own")
def count_keeps_other_hooks(count_calls, rng):
    width = _size(rng, 2, 4)
    model = _randomise(_Tower(width, _size(rng, 1, 3), _size(rng, 2, 5)), rng)
    x = torch.randn(_size(rng, 1, 3), width, generator=rng)
    fired = []
    own = model.head.register_forward_hook(lambda module, args, output: fired.append(1))
    counts = count_calls(model, x)
    during = len(fired)
    model(x)
    own.remove()
    return {"counts": counts, "a hook registered before count_calls ran during it": during > 0,
            "and still runs after it": len(fired) > during}


def _two_orders(what, call_a, call_b):
    """The answer called A, B, B again, A again, each call on fresh inputs it builds itself:
    the keys under which the grader tells a result that depends on the calls made before."""
    return {f"{what}, call 1 (A)": call_a(), f"{what}, call 2 (B)": call_b(),
            f"{what}, call 3 (B again)": call_b(), f"{what}, call 4 (A again)": call_a()}


def _seeds(rng, n):
    """`n` seeds drawn from `rng`, to build the same fresh inputs again for a repeated call."""
    return [int(torch.randint(0, 2 ** 31 - 1, (), generator=rng)) for _ in range(n)]


@scenario("06-ex2", uses=["count_calls"], title="two models, called in two orders")
def count_in_two_orders(count_calls, rng):
    seeds = _seeds(rng, 2)

    def call(k):
        generator = torch.Generator().manual_seed(seeds[k])
        width = _size(generator, 2, 4)
        model = _randomise(_Tower(width, _size(generator, 1, 3), _size(generator, 2, 5)),
                           generator)
        return count_calls(model, torch.randn(_size(generator, 1, 3), width, generator=generator))

    return _two_orders("counts", lambda: call(0), lambda: call(1))


@scenario("06-ex2", uses=["count_calls"],
          title="modules under any names, nested three deep, one module registered under two "
                "names")
def count_drawn_names(count_calls, rng):
    """named_modules() lists a module registered under two names once, under the first name
    it meets: the shared activation runs twice and is counted twice, under that name."""
    top, shared_name, outer, inner, first, second, last = draw(module_names(7, 1, 16), rng)
    width = _size(rng, 2, 4)
    shared = nn.Tanh()
    block = nn.Sequential(OrderedDict([(first, nn.Linear(width, width)), (second, shared)]))
    middle = nn.Sequential(OrderedDict([(inner, block), (last, nn.Linear(width, width))]))
    model = _randomise(nn.Sequential(OrderedDict([(top, nn.Linear(width, width)),
                                                  (shared_name, shared), (outer, middle)])), rng)
    return _count_twice(count_calls, model,
                        torch.randn(_size(rng, 1, 3), width, generator=rng))


@mistake("06-ex2", "Nested modules are missing: named_children() lists only the direct children. "
                   "Use named_modules() and leave out the model itself (name '').",
         replaces="count_calls")
def count_children_only(model, x):
    counts = {name: 0 for name, _ in model.named_children()}
    handles = []
    for name, module in model.named_children():
        def hook(module, args, output, name=name):
            counts[name] += 1
        handles.append(module.register_forward_hook(hook))
    model(x)
    for handle in handles:
        handle.remove()
    return counts


@mistake("06-ex2", "Every call was counted under one name, the last one of the loop: a hook "
                   "defined in a loop reads the loop variable when it runs, after the loop has "
                   "ended. Bind the name when the hook is made (a default argument name=name, "
                   "or a function that returns the hook).", replaces="count_calls")
def count_late_binding(model, x):
    counts = {name: 0 for name, _ in model.named_modules() if name}
    handles = []
    for name, module in model.named_modules():
        if name:
            def hook(module, args, output):
                counts[name] += 1
            handles.append(module.register_forward_hook(hook))
    model(x)
    for handle in handles:
        handle.remove()
    return counts


@mistake("06-ex2", "The hooks stay on the model, so a second call counts every module twice: "
                   "remove each hook with its handle after the forward pass.",
         replaces="count_calls")
def count_never_removes(model, x):
    counts = {name: 0 for name, _ in model.named_modules() if name}
    for name, module in model.named_modules():
        if name:
            def hook(module, args, output, name=name):
                counts[name] += 1
            module.register_forward_hook(hook)
    model(x)
    return counts


@mistake("06-ex2", "The model itself (the name '') is in the dict: named_modules() yields it "
                   "first; leave it out.", replaces="count_calls")
def count_includes_the_model(model, x):
    counts = {name: 0 for name, _ in model.named_modules()}
    handles = []
    for name, module in model.named_modules():
        def hook(module, args, output, name=name):
            counts[name] += 1
        handles.append(module.register_forward_hook(hook))
    model(x)
    for handle in handles:
        handle.remove()
    return counts


@mistake("06-ex2", "Modules that never ran are missing: start every name at 0 before the "
                   "forward pass.", replaces="count_calls")
def count_skips_unused(model, x):
    counts = {}
    handles = []
    for name, module in model.named_modules():
        if name:
            def hook(module, args, output, name=name):
                counts[name] = counts.get(name, 0) + 1
            handles.append(module.register_forward_hook(hook))
    model(x)
    for handle in handles:
        handle.remove()
    return counts


# ------------------------------------------------------------- 06-ex3: block_gradient

def _hooks_on(module):
    """Which kinds of hooks are registered on `module`."""
    backward = len(module._backward_hooks)
    kind = {True: "full", False: "legacy"}.get(module._is_full_backward_hook, "none")
    return {"backward hooks": backward, "kind of backward hooks": kind if backward else "none",
            "backward pre-hooks": len(module._backward_pre_hooks)}


def _small_net():
    torch.manual_seed(4)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


class _Residual(nn.Module):
    """h = first(x); out = head(h + gate(h)): the gate's branch beside a skip path."""

    def __init__(self, width, gate):
        super().__init__()
        self.first = nn.Linear(width, width)
        self.gate = gate
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        h = self.first(x)
        return self.head(h + self.gate(h))


class _Mix(nn.Module):
    """A module of two inputs: lin(a) * b."""

    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, a, b):
        return self.lin(a) * b


def _blocked_residual(block_gradient, model, x):
    """Block the gate of a _Residual model and run one backward pass."""
    handle = block_gradient(model.gate)
    model(x).pow(2).sum().backward()
    observed = {"first.weight.grad (through the skip path only)": model.first.weight.grad,
                "head.weight.grad": model.head.weight.grad}
    if hasattr(handle, "remove"):
        handle.remove()
    return observed


@scenario("06-ex3", uses=["block_gradient"], visible=True, title="the example of the test cell")
def block_visible_example(block_gradient, rng):
    x = torch.tensor([[0.5, -1., 2.], [1., 1., -0.5]])
    net = _small_net()
    handle = block_gradient(net[2])
    hooks = _hooks_on(net[2])  # as block_gradient left them (the cell reads no later count)
    net(x).pow(2).sum().backward()
    observed = {"net[0].weight.grad": net[0].weight.grad,
                "net[2].weight.grad": net[2].weight.grad,
                "hooks on net[2]": hooks,
                "handle has remove()": hasattr(handle, "remove")}
    if hasattr(handle, "remove"):
        handle.remove()
    net.zero_grad()
    net(x).pow(2).sum().backward()
    observed["net[0].weight.grad after handle.remove()"] = net[0].weight.grad
    torch.manual_seed(5)
    residual = _Residual(3, nn.Identity())
    observed["residual block: first.weight.grad"] = _blocked_residual(
        block_gradient, residual, torch.tensor([[1., -2., 0.5], [0., 1., 1.]]))[
        "first.weight.grad (through the skip path only)"]
    net = _small_net()
    block_gradient(net[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net(x).sum().backward()
    observed["blocking the first layer (grad_input is (None,)): net[0].weight.grad"] = \
        net[0].weight.grad
    return observed


def _unblocked_first_grad():
    """net[0].weight.grad of the test cell's net without a hook (its first mistake's value)."""
    x = torch.tensor([[0.5, -1., 2.], [1., 1., -0.5]])
    with torch.random.fork_rng():
        net = _small_net()
    net(x).pow(2).sum().backward()
    return net[0].weight.grad


_LEGACY = ("This is a legacy hook (register_backward_hook): its grad_input holds the gradients "
           "of the last operation's inputs, the layer's own weights among them, so zeroing it "
           "also takes the weights' gradients. Use register_full_backward_hook.")
_SKIP_WIPED = ("The skip path's gradient is zero too: the block also reached the gradient of "
               "the tensor the gate shares with the skip path. Return a new tuple of zeros from "
               "a full backward hook; do not change the tensors of grad_input in place or the "
               "gradient of the module's input.")
CELL_06_EX3 = cell_checks(
    "06-ex3",
    expect_tensor("net[0].weight.grad", mistakes={
        "The gradient reached the first layer unchanged: a backward hook that returns None "
        "changes nothing. Return a new grad_input tuple of zeros.": _unblocked_first_grad()}),
    expect_true(lambda seen: not (seen["hooks on net[2]"]["kind of backward hooks"] == "legacy"
                                  and not seen["net[2].weight.grad"].abs().sum()), _LEGACY),
    expect_tensor("net[2].weight.grad", mistakes={
        "The blocked layer's own weights lost their gradient: zero grad_input (what flows "
        "out to earlier layers), not grad_output (what comes in, which the weights need).":
            torch.zeros(2, 4)}),
    expect_true(lambda seen: seen["handle has remove()"], "Return the handle of the hook."),
    expect_tensor("net[0].weight.grad after handle.remove()"),
    expect_tensor("residual block: first.weight.grad",
                  name="residual.first.weight.grad (the skip path's gradient)", mistakes={
                      _SKIP_WIPED: torch.zeros(3, 3)}),
    expect_true(lambda seen: bool(seen["blocking the first layer (grad_input is (None,)): "
                                       "net[0].weight.grad"].abs().sum() > 0),
                "net[0]'s own weights should still get their gradient."))


def _after_lifting(handle, net, x, observed):
    """`observed` with x's gradient after the block's handle was removed (if it can be)."""
    if hasattr(handle, "remove"):
        handle.remove()
        x.grad = None
        net.zero_grad()
        net(x).pow(2).sum().backward()
        observed["x.grad after handle.remove()"] = x.grad
    return observed


@scenario("06-ex3", uses=["block_gradient"],
          title="blocking a middle layer of a random network")
def block_middle_layer(block_gradient, rng):
    a, b, c = _size(rng, 2, 5), _size(rng, 2, 6), _size(rng, 1, 4)
    net = _randomise(nn.Sequential(nn.Linear(a, b), nn.Tanh(), nn.Linear(b, b), nn.Tanh(),
                                   nn.Linear(b, c)), rng)
    x = torch.randn(_size(rng, 1, 4), a, generator=rng, requires_grad=True)
    target = _size(rng, 1, 2) * 2 - 1  # net[1] or net[3]
    handle = block_gradient(net[target])
    net(x).pow(2).sum().backward()
    observed = {"x.grad": x.grad, "net[0].weight.grad": net[0].weight.grad,
                "net[4].weight.grad": net[4].weight.grad,
                f"hooks on net[{target}] after one backward pass": _hooks_on(net[target]),
                "handle has remove()": hasattr(handle, "remove")}
    return _after_lifting(handle, net, x, observed)


@scenario("06-ex3", uses=["block_gradient"],
          title="a block of several layers (a container) blocked as one, then lifted")
def block_container(block_gradient, rng):
    # The hook goes on the block itself: the layers inside it still get their gradients (only
    # what leaves the block's input is zero), and removing the one handle lifts the block.
    a, b, c = _size(rng, 2, 5), _size(rng, 2, 6), _size(rng, 1, 4)
    inner = nn.Sequential(nn.Linear(b, b), nn.Tanh(), nn.Linear(b, b))
    net = _randomise(nn.Sequential(nn.Linear(a, b), nn.Tanh(), inner, nn.Tanh(),
                                   nn.Linear(b, c)), rng)
    x = torch.randn(_size(rng, 1, 4), a, generator=rng, requires_grad=True)
    handle = block_gradient(net[2])
    net(x).pow(2).sum().backward()
    observed = {"x.grad": x.grad, "net[0].weight.grad": net[0].weight.grad,
                "net[2][0].weight.grad (inside the blocked block)": inner[0].weight.grad,
                "net[4].weight.grad": net[4].weight.grad,
                "handle has remove()": hasattr(handle, "remove")}
    return _after_lifting(handle, net, x, observed)


@scenario("06-ex3", uses=["block_gradient"], title="a network in eval mode")
def block_in_eval_mode(block_gradient, rng):
    """The block holds whatever the module's mode: a network evaluated (eval()) still
    trains through backward(), and the hook must stop the gradient there too."""
    a, b = _size(rng, 2, 5), _size(rng, 2, 6)
    net = _randomise(nn.Sequential(nn.Linear(a, b), nn.Tanh(), nn.Linear(b, 1)), rng).eval()
    x = torch.randn(_size(rng, 1, 4), a, generator=rng, requires_grad=True)
    block_gradient(net[1])
    net(x).pow(2).sum().backward()
    return {"x.grad": x.grad, "net[0].weight.grad": net[0].weight.grad,
            "net[2].weight.grad": net[2].weight.grad}


@scenario("06-ex3", uses=["block_gradient"],
          title="a residual block whose gate branch is blocked (the skip path must still carry "
                "the gradient)")
def block_residual_gate(block_gradient, rng):
    width = _size(rng, 2, 5)
    gate = nn.Identity() if _size(rng, 0, 1) else nn.Dropout(0.5).eval()
    model = _randomise(_Residual(width, gate), rng)
    return _blocked_residual(block_gradient, model,
                             torch.randn(_size(rng, 2, 4), width, generator=rng))


@scenario("06-ex3", uses=["block_gradient"],
          title="a module of two inputs, and a first layer whose input needs no gradient")
def block_two_inputs_and_none(block_gradient, rng):
    width = _size(rng, 2, 5)
    mix = _randomise(_Mix(width), rng)
    a = torch.randn(2, width, generator=rng, requires_grad=True)
    b = torch.randn(2, width, generator=rng, requires_grad=True)
    block_gradient(mix)
    mix(a, b).pow(2).sum().backward()
    net = _randomise(nn.Sequential(nn.Linear(width, 3), nn.Tanh(), nn.Linear(3, 1)), rng)
    block_gradient(net[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net(torch.randn(2, width, generator=rng)).sum().backward()
    return {"a.grad": a.grad, "b.grad": b.grad, "mix.lin.weight.grad": mix.lin.weight.grad,
            "net[0].weight.grad when its input needs no gradient": net[0].weight.grad,
            **_mix_one_input_without_grad(block_gradient, width, rng)}


def _mix_one_input_without_grad(block_gradient, width, rng):
    """A module of two inputs whose second is a number (it needs no gradient): grad_input is
    (tensor, None), and the hook's tuple must keep both entries."""
    mix = _randomise(_Mix(width), rng)
    a = torch.randn(2, width, generator=rng, requires_grad=True)
    block_gradient(mix)
    mix(a, float(_size(rng, 2, 5))).pow(2).sum().backward()
    return {"a.grad when the second input b is a number": a.grad,
            "mix.lin.weight.grad when b is a number": mix.lin.weight.grad}


@mistake("06-ex3", "The gradient went on unchanged: a backward hook that returns None changes "
                   "nothing. Return a new grad_input tuple of zeros.", replaces="block_gradient")
def block_returns_none(module):
    return module.register_full_backward_hook(lambda module, grad_input, grad_output: None)


@mistake("06-ex3", "The hook zeroes the tensors of grad_input in place (zero_()). Where that "
                   "tensor is shared with another path, as with the skip path of a residual "
                   "block, that gradient is wiped too. Return a new tuple of zeros "
                   "(torch.zeros_like) instead of editing the tensors you were given.",
         replaces="block_gradient")
def block_zeroes_in_place(module):
    def hook(module, grad_input, grad_output):
        for grad in grad_input:
            if grad is not None:
                grad.zero_()
    return module.register_full_backward_hook(hook)


@mistake("06-ex3", "This is a legacy hook (register_backward_hook): its grad_input holds the "
                   "gradients of the last operation's inputs, the layer's own weights among them, "
                   "so zeroing it also takes the weights' gradients. Use "
                   "register_full_backward_hook.", replaces="block_gradient")
def block_with_legacy_hook(module):
    def hook(module, grad_input, grad_output):
        return tuple(None if grad is None else torch.zeros_like(grad) for grad in grad_input)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return module.register_backward_hook(hook)


@mistake("06-ex3", "The blocked layer's own weights lost their gradient: zero grad_input (what "
                   "flows out to earlier layers) in a full backward hook, not grad_output (what "
                   "comes in, which the weights need).", replaces="block_gradient")
def block_zeroes_grad_output(module):
    return module.register_full_backward_pre_hook(
        lambda module, grad_output: tuple(None if g is None else torch.zeros_like(g)
                                          for g in grad_output))


@mistake("06-ex3", "torch.zeros_like(None) fails: an input that needs no gradient has None in "
                   "grad_input. Keep None entries as None in the tuple you return.",
         replaces="block_gradient")
def block_zeros_for_none(module):
    return module.register_full_backward_hook(
        lambda module, grad_input, grad_output: tuple(torch.zeros_like(g) for g in grad_input))


@mistake("06-ex3", "The function returns no handle: return what register_full_backward_hook "
                   "returned, so that the block can be lifted.", replaces="block_gradient")
def block_returns_no_handle(module):
    module.register_full_backward_hook(
        lambda module, grad_input, grad_output: tuple(
            None if g is None else torch.zeros_like(g) for g in grad_input))


@scenario("06-ex3", uses=["block_gradient"],
          title="two modules of one network blocked, then the block on one lifted")
def block_two_then_lift_one(block_gradient, rng):
    """Each call adds a block of its own: the second neither lifts nor replaces the first, and
    lifting one (its handle's remove()) leaves the other in place."""
    a, b = _size(rng, 2, 5), _size(rng, 2, 6)
    net = _randomise(nn.Sequential(nn.Linear(a, b), nn.Tanh(), nn.Linear(b, b), nn.Tanh(),
                                   nn.Linear(b, 1)), rng)
    x = torch.randn(_size(rng, 1, 4), a, generator=rng, requires_grad=True)
    block_gradient(net[1])
    second = block_gradient(net[3])
    net(x).pow(2).sum().backward()
    observed = {"x.grad with net[1] and net[3] blocked": x.grad,
                "net[4].weight.grad with net[1] and net[3] blocked": net[4].weight.grad}
    if hasattr(second, "remove"):
        second.remove()
        x.grad = None
        net.zero_grad()
        net(x).pow(2).sum().backward()
        observed["x.grad after the block on net[3] was lifted (net[1] still blocked)"] = x.grad
        observed["net[2].weight.grad after the block on net[3] was lifted"] = \
            net[2].weight.grad
    return observed

