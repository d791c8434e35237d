"""Scenarios of lesson 07 (hooks in practice): what the grader observes of each answer.

Instructors only: never released to students. See docs/AUTHORING.md, "Scenarios".
The models are small (a few layers of a few units, images of 8×8 pixels at most), their
weights drawn from `rng`; the visible scenarios rebuild the test cells' own models.
"""

import contextlib
import copy
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from coursekit.drawing import domain, draw, names
from coursekit.practice import (deep_mlp, make_shapes, replaced_outputs, shape_cnn, tensor_bytes,
                                watch_outputs)
from coursekit.scenarios import (cell_checks, count_calls, expect_equal, expect_tensor,
                                 expect_true, mistake, scenario)

domain("07-ex1", "random multilayer perceptrons (2 to 13 Linear layers), a small "
                 "CNN, Linear layers under any names with other modules named fc…, a batch "
                 "of one; steepest_drop on dicts of 10 to 14 norms named fc1… or 0, 1, …")
domain("07-ex2", "float32, float64 and int64 saved tensors, thresholds around their sizes, pack "
                 "and unpack called directly, two sets of hooks called in two orders, two sets "
                 "made before either is used")
domain("07-ex3", "random multilayer perceptrons and a small CNN with random lr and weight_decay, "
                 "two models with settings of their own, a layer used twice in one forward "
                 "pass, backward(create_graph=True)")


def _size(rng, low, high):
    """An integer in [low, high]."""
    return int(torch.randint(low, high + 1, (), generator=rng))


def _randomise(model, rng, scale):
    """Draw every parameter of `model` from N(0, scale²) with `rng`."""
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=rng) * scale)
    return model


def _forward_hooks_left(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def _random_mlp(rng):
    """A deep_mlp of random depth, width and activation on 8 input features."""
    depth, width = _size(rng, 3, 6), _size(rng, 4, 10)
    activation = ("sigmoid", "tanh", "relu")[_size(rng, 0, 2)]
    scale = float(torch.rand((), generator=rng)) * 0.8 + 0.2
    return _randomise(deep_mlp(depth, width, 8, 3, activation), rng, scale)


# ------------------------------------------------ 07-ex1: output_grad_norms, steepest_drop

# What the visible scenario reports when output_grad_norms raised, as its test cell tells it
_REPLACED = "the output a forward hook's return value replaced, before an error"
_KEY_ERROR = "the name output_grad_norms raised a KeyError for"


def _failure(error, replaced):
    """The observations of a call that raised `error`: the first child whose output a forward
    hook replaced (by a handle or by something else), else the name of a KeyError; None when the
    test cell would let the error through."""
    if replaced:
        layer, kind = next(iter(replaced.items()))
        return {_REPLACED: {"layer": layer, "by a handle": kind == "RemovableHandle"}}
    if isinstance(error, KeyError):
        key = error.args[0] if len(error.args) == 1 else None
        return {_KEY_ERROR: key if isinstance(key, str) else None}
    return None


def _profile(output_grad_norms, steepest_drop, model, images, labels, failures=False):
    """Run output_grad_norms under spies; observe its result, what it kept, and steepest_drop
    on that result. With `failures`, an error the test cell explains is observed, not raised."""
    replaced = {}
    try:
        with count_calls(torch.Tensor, "retain_grad") as retained, \
                count_calls(torch.autograd, "grad") as autograd_grad, \
                watch_outputs(model) as outputs, replaced_outputs(model) as replaced:
            found = output_grad_norms(model, images, labels)
    except Exception as error:  # re-raised unless the test cell explains it
        failure = _failure(error, replaced) if failures else None
        if failure is None:
            raise
        return failure
    observed = {"retain_grad calls": retained.count,
                "torch.autograd.grad calls": autograd_grad.count,
                "Linear outputs kept at the end of each forward pass": outputs.per_pass,
                "hooks left on the model": _forward_hooks_left(model)}
    if not isinstance(found, dict):
        observed["type of the result"] = type(found).__name__
        return observed
    observed["norms"] = {str(name): norm for name, norm in found.items()}
    observed["order of the layers"] = [str(name) for name in found]
    observed["types of the norms"] = sorted({type(norm).__name__ for norm in found.values()})
    # steepest_drop's domain: norms it can divide by (a layer whose ReLUs are all dead gets a
    # zero gradient, and the reference too would divide by zero)
    if len(found) >= 2 and all(norm != 0 for norm in found.values()):
        observed["steepest_drop(norms)"] = steepest_drop(found)
    return observed


# The test cell's dict: g[k]/g[k+1] is 1.2 at fc1, 0.1 at fc3, 1.5 at fc8
_VISIBLE_NORMS = {"fc1": 0.003402, "fc2": 0.002835, "fc3": 0.004725, "fc4": 0.04725,
                  "fc5": 0.0675, "fc6": 0.135, "fc7": 0.225, "fc8": 0.45, "fc9": 0.3,
                  "fc10": 0.5, "fc11": 1.0}


@scenario("07-ex1", uses=["output_grad_norms", "steepest_drop"], visible=True,
          title="the example of the test cell", tolerance={"norms": (1e-4, 1e-7)})
def profile_visible_example(output_grad_norms, steepest_drop, rng):
    test_images, test_labels, _ = make_shapes(100, seed=1)
    torch.manual_seed(5)
    tanh_mlp = deep_mlp(6, 32, 256, 3, "tanh", init_std=0.1)
    observed = _profile(output_grad_norms, steepest_drop, tanh_mlp, test_images[:40],
                        test_labels[:40], failures=True)
    if _REPLACED in observed or _KEY_ERROR in observed:
        return observed
    observed["steepest_drop of the eleven norms"] = steepest_drop(dict(_VISIBLE_NORMS))
    # the names a test cell's hint may quote (reported alike by every answer)
    observed["the names of the eleven norms"] = list(_VISIBLE_NORMS)
    return observed


def _visible_weight_norms():
    """The norms of the Linear layers' weight gradients in the test cell's example (the value of
    its "weights' gradients" mistake)."""
    test_images, test_labels, _ = make_shapes(100, seed=1)
    with torch.random.fork_rng():
        torch.manual_seed(5)
        model = deep_mlp(6, 32, 256, 3, "tanh", init_std=0.1)
    F.cross_entropy(model(test_images[:40]), test_labels[:40]).backward()
    return [layer.weight.grad.norm().item() for layer in model if isinstance(layer, nn.Linear)]


_LATE_BINDING = ("a hook defined in a loop reads the loop variable when it runs, after the "
                 "loop has ended, so every norm went under the last name: bind the name when "
                 "the hook is made (name=name)")
_DROP_MISTAKES = {
    "fc2": "fc2 has the smallest norm, but the question is where the gradient shrinks "
           "most: divide each layer's norm by the next layer's and take the smallest ratio",
    "fc8": "fc8 has the largest ratio g[k]/g[k+1], where the gradient grows most on its "
           "way back: the ratio is the layer's norm over the next layer's, and the "
           "smallest one is the steepest drop",
    "fc4": "fc4 is the second layer of the pair fc3, fc4: key each ratio by its first "
           "layer, as gradient_ratios does",
    "fc1": "fc1 comes out when the names are sorted: as strings fc10 and fc11 come "
           "before fc2, so the ratios paired layers that are not neighbours. Keep the "
           "dict's own order (forward order)",
    "fc9": "fc9 comes out when the dict is read backwards: it is in forward order "
           "already (fc1 first), so pair each layer with the one after it",
    "fc10": "fc10 has the largest difference to the next norm: compare norms by their "
            "ratio, not their difference, which is largest where the norms are large",
}


def _replaced_said(seen):
    layer = seen[_REPLACED]["layer"]
    what = ("the handle that register_hook gives (a lambda returns its expression's value)"
            if seen[_REPLACED]["by a handle"] else "a value other than None or its output")
    return (f"output_grad_norms raised an error: a forward hook on {layer} returned {what}, "
            f"which took the place of {layer}'s output (a forward hook's return value "
            "replaces the module's output). Let the forward hook return None: write it "
            "with def.")


def _key_error_said(seen):
    name = seen[_KEY_ERROR]
    return None if name is None else (
        f"output_grad_norms raised KeyError {name!r}: no norm was stored under that "
        f"name. Likely mistake: {_LATE_BINDING}.")


def _drop_said(seen):
    drop = seen["steepest_drop of the eleven norms"]
    if not isinstance(drop, str):
        return "return the name (a key), not a number"
    return _DROP_MISTAKES.get(drop, "return the name of the layer whose ratio "
                                    "g[k]/g[k+1] is the smallest")


_KEPT = "Linear outputs kept at the end of each forward pass"
_LAYERS = "order of the layers"
CELL_07_EX1 = cell_checks(
    "07-ex1",
    expect_true(lambda seen: _REPLACED not in seen, _replaced_said),
    expect_true(lambda seen: _KEY_ERROR not in seen, _key_error_said),
    expect_true(lambda seen: "type of the result" not in seen,
                lambda seen: "output_grad_norms should return a dict, not "
                             f"{seen['type of the result']}"),
    expect_equal("retain_grad calls",
                 hint="no retain_grad: a tensor hook on each output records the norm during "
                      "backward()"),
    expect_true(lambda seen: not seen[_KEPT] or seen[_KEPT][-1] == 0,
                "keep no output tensor (no list or dict of outputs): the tensor hook "
                "stores only grad.norm().item()"),
    expect_equal(_LAYERS, name="the set of layers", read=lambda seen: sorted(seen[_LAYERS]),
                 hint=lambda seen: _LATE_BINDING if seen[_LAYERS] == ["fc6"] else
                 "one entry per nn.Linear child, keyed by its name (fc1, fc2, ...)"),
    expect_equal(_LAYERS, name="the order of the layers",
                 hint="the tensor hooks fire from the output back to the input: build the "
                      "returned dict in forward order (fc1 first)"),
    expect_true(lambda seen: set(seen["types of the norms"]) <= {"float"},
                "the norms should be Python floats: store grad.norm().item()"),
    expect_tensor("norms", name="the gradient norms", rtol=1e-4,
                  read=lambda seen: torch.tensor(list(seen["norms"].values())),
                  mistakes={"these are the norms of the weights' gradients; record the "
                            "gradient of each layer's output (a tensor hook on the output)":
                            _visible_weight_norms()}),
    expect_true(lambda seen: seen["hooks left on the model"] == 0,
                "a forward hook is still registered: remove the handles before returning"),
    expect_equal("steepest_drop of the eleven norms", name="steepest_drop(norms)",
                 hint=_drop_said))


@scenario("07-ex1", uses=["output_grad_norms", "steepest_drop"],
          title="a random multilayer perceptron", tolerance={"norms": (1e-4, 1e-7)})
def profile_random_mlp(output_grad_norms, steepest_drop, rng):
    model = _random_mlp(rng)
    batch = _size(rng, 4, 12)
    images = torch.randn(batch, 8, generator=rng)
    labels = torch.randint(0, 3, (batch,), generator=rng)
    return _profile(output_grad_norms, steepest_drop, model, images, labels)


@scenario("07-ex1", uses=["output_grad_norms", "steepest_drop"],
          title="a small CNN: convolutions are not nn.Linear children",
          tolerance={"norms": (1e-4, 1e-7)})
def profile_small_cnn(output_grad_norms, steepest_drop, rng):
    model = _randomise(shape_cnn(size=8), rng, 0.3)
    batch = _size(rng, 2, 6)
    images = torch.randn(batch, 1, 8, 8, generator=rng)
    labels = torch.randint(0, 3, (batch,), generator=rng)
    return _profile(output_grad_norms, steepest_drop, model, images, labels)


@scenario("07-ex1", uses=["output_grad_norms", "steepest_drop"],
          title="a deep perceptron with one damped layer, more than nine layers",
          tolerance={"norms": (1e-4, 1e-7)})
def profile_damped_layer(output_grad_norms, steepest_drop, rng):
    depth = _size(rng, 10, 13)
    model = _randomise(deep_mlp(depth, _size(rng, 6, 10), 8, 3, "tanh"), rng, 0.5)
    with torch.no_grad():
        model.get_submodule(f"fc{_size(rng, 2, depth)}").weight.mul_(0.05)
    batch = _size(rng, 4, 12)
    images = torch.randn(batch, 8, generator=rng)
    labels = torch.randint(0, 3, (batch,), generator=rng)
    return _profile(output_grad_norms, steepest_drop, model, images, labels)


def _named_mlp(rng):
    """A Sequential whose Linear children have names drawn from all identifiers (not fc…),
    with activations between them named "fc…" (a name is no test of a layer's type)."""
    from collections import OrderedDict

    from hypothesis import strategies as st
    depth, width = _size(rng, 2, 5), _size(rng, 3, 8)
    labels = draw(st.lists(names(1, 12).filter(lambda n: not n.startswith("fc")),
                           min_size=depth, max_size=depth, unique=True), rng)
    layers, features = [], 8
    for index, label in enumerate(labels):
        out = 3 if index == depth - 1 else width
        layers.append((label, nn.Linear(features, out)))
        if index < depth - 1:
            layers.append((f"fc{index + 1}", nn.Tanh()))
        features = out
    return _randomise(nn.Sequential(OrderedDict(layers)), rng, 0.6)


@scenario("07-ex1", uses=["output_grad_norms", "steepest_drop"],
          title="Linear layers under other names, a batch of one",
          tolerance={"norms": (1e-4, 1e-7)})
def profile_named_layers(output_grad_norms, steepest_drop, rng):
    model = _named_mlp(rng)
    images = torch.randn(1, 8, generator=rng)
    labels = torch.randint(0, 3, (1,), generator=rng)
    observed = _profile(output_grad_norms, steepest_drop, model, images, labels)
    first = next(m for m in model if isinstance(m, nn.Linear))
    # what the tensor hooks passed on upstream reached the first layer's weight
    observed["the first Linear's weight.grad"] = first.weight.grad
    return observed


def _random_norms(rng, names):
    """Norms in the order of `names`, each the next one times a ratio drawn around 0.6,
    with one ratio ten times smaller and one above 1."""
    count = len(names)
    ratios = torch.exp(torch.randn(count - 1, generator=rng) * 0.3 - 0.5)
    spots = torch.randperm(count - 1, generator=rng)[:2]
    ratios[spots[0]] *= 0.1
    ratios[spots[1]] = 1.1 + float(torch.rand((), generator=rng))
    norms = [float(torch.rand((), generator=rng)) + 0.5]
    for ratio in reversed(ratios.tolist()):
        norms.insert(0, norms[0] * ratio)
    return dict(zip(names, norms))


@scenario("07-ex1", uses=["steepest_drop"],
          title="steepest_drop on dicts of 10 to 14 norms, named fc1… or 0, 1, …")
def steepest_of_random_norms(steepest_drop, rng):
    answers = []
    for prefix in ("fc", "", "fc"):
        count = _size(rng, 10, 14)
        start = 1 if prefix else 0
        names = [f"{prefix}{index}" for index in range(start, start + count)]
        answers.append(steepest_drop(_random_norms(rng, names)))
    return {"steepest_drop of three dicts": answers}


def _linear_names(model):
    return [name for name, child in model.named_children() if isinstance(child, nn.Linear)]


@mistake("07-ex1", "The outputs were kept with retain_grad(): that is what layer_profile does. "
                   "Register a tensor hook on each output that stores grad.norm().item(), and "
                   "keep no tensor.", replaces="output_grad_norms")
def norms_with_retain_grad(model, images, labels):
    outputs = {}
    handles = []
    for name in _linear_names(model):
        def keep(module, args, output, name=name):
            output.retain_grad()
            outputs[name] = output
        handles.append(model.get_submodule(name).register_forward_hook(keep))
    F.cross_entropy(model(images), labels).backward()
    for handle in handles:
        handle.remove()
    return {name: out.grad.norm().item() for name, out in outputs.items()}


@mistake("07-ex1", "The outputs were kept and their gradients taken with torch.autograd.grad. "
                   "The exercise asks for a tensor hook on each output that stores only the "
                   "number, so that no output is kept.", replaces="output_grad_norms")
def norms_with_autograd_grad(model, images, labels):
    outputs = {}
    handles = [model.get_submodule(name).register_forward_hook(
        lambda module, args, output, name=name: outputs.__setitem__(name, output))
        for name in _linear_names(model)]
    loss = F.cross_entropy(model(images), labels)
    for handle in handles:
        handle.remove()
    grads = torch.autograd.grad(loss, list(outputs.values()))
    return {name: grad.norm().item() for name, grad in zip(outputs, grads)}


def _reference_like(model, images, labels, norm_of=lambda grad: grad.norm().item(),
                    order=None, late_binding=False, remove=True, children=_linear_names):
    names = children(model)
    norms = {}
    handles = []
    for name in names:
        if late_binding:
            def forward_hook(module, inputs, output):
                output.register_hook(lambda grad: norms.__setitem__(name, norm_of(grad)))
        else:
            def forward_hook(module, inputs, output, name=name):
                output.register_hook(lambda grad: norms.__setitem__(name, norm_of(grad)))
        handles.append(model.get_submodule(name).register_forward_hook(forward_hook))
    F.cross_entropy(model(images), labels).backward()
    if remove:
        for handle in handles:
            handle.remove()
    if order == "backward":
        return dict(norms)
    return {name: norms[name] for name in names}


@mistake("07-ex1", "These are the norms of the weights' gradients: record the gradient of each "
                   "layer's output, with a tensor hook on the output.",
         replaces="output_grad_norms")
def norms_of_weight_grads(model, images, labels):
    names = _linear_names(model)
    F.cross_entropy(model(images), labels).backward()
    return {name: model.get_submodule(name).weight.grad.norm().item() for name in names}


@mistake("07-ex1", "The layers are in backward order (the order in which the tensor hooks "
                   "fired): build the returned dict in forward order, fc1 first.",
         replaces="output_grad_norms")
def norms_in_backward_order(model, images, labels):
    return _reference_like(model, images, labels, order="backward")


@mistake("07-ex1", "A KeyError for a layer's name: no norm was stored under it. A hook defined "
                   "in a loop reads the loop variable when it runs, after the loop has ended, so "
                   "every hook stored its norm under the last name: bind the name when the hook "
                   "is made (name=name).", replaces="output_grad_norms")
def norms_with_late_binding(model, images, labels):
    return _reference_like(model, images, labels, late_binding=True)


@mistake("07-ex1", "The forward hooks stay on the model: remove every handle before returning.",
         replaces="output_grad_norms")
def norms_hooks_left(model, images, labels):
    return _reference_like(model, images, labels, remove=False)


@mistake("07-ex1", "Layers that are not nn.Linear are in the result: keep only the children "
                   "for which isinstance(child, nn.Linear) holds.",
         replaces="output_grad_norms")
def norms_of_every_child(model, images, labels):
    def parametrised(model):
        return [name for name, child in model.named_children()
                if any(True for _ in child.parameters())]
    return _reference_like(model, images, labels, children=parametrised)


@mistake("07-ex1", "The norms are tensors: store grad.norm().item(), a Python float.",
         replaces="output_grad_norms")
def norms_as_tensors(model, images, labels):
    return _reference_like(model, images, labels, norm_of=lambda grad: grad.norm())


def _pairs(norms, order=None):
    names = list(norms) if order is None else order
    return list(zip(names, names[1:]))


@mistake("07-ex1", "steepest_drop named the layer with the smallest norm, the answer to a "
                   "different question: where every layer shrinks the gradient, the smallest "
                   "norm is at the first layer, whichever layer shrinks it most. Divide each "
                   "layer's norm by the next layer's and name the smallest ratio.",
         replaces="steepest_drop")
def steepest_is_smallest_norm(norms):
    return min(norms, key=norms.get)


@mistake("07-ex1", "steepest_drop named the layer with the largest ratio g[k]/g[k+1], where the "
                   "gradient grows most on its way back (the ratio turned upside down, or max "
                   "for min): the steepest drop is the smallest ratio of a layer's norm to the "
                   "next layer's.", replaces="steepest_drop")
def steepest_with_inverted_ratio(norms):
    ratios = {first: norms[second] / norms[first] for first, second in _pairs(norms)}
    return min(ratios, key=ratios.get)


@mistake("07-ex1", "steepest_drop named the second layer of the pair with the smallest ratio: key "
                   "each ratio g[k]/g[k+1] by its first layer k, as gradient_ratios does.",
         replaces="steepest_drop")
def steepest_names_the_next_layer(norms):
    ratios = {second: norms[first] / norms[second] for first, second in _pairs(norms)}
    return min(ratios, key=ratios.get)


@mistake("07-ex1", "The layers were sorted by name: as strings, fc10 comes before fc2 (and 10 "
                   "before 2), so the ratios paired layers that are not neighbours. Keep the "
                   "dict's own order, which is forward order.", replaces="steepest_drop")
def steepest_of_sorted_names(norms):
    ratios = {first: norms[first] / norms[second]
              for first, second in _pairs(norms, sorted(norms))}
    return min(ratios, key=ratios.get)


@mistake("07-ex1", "The dict was read backwards, as if it were in backward order: it is in "
                   "forward order already (fc1 first), so pair each layer with the one after "
                   "it.", replaces="steepest_drop")
def steepest_read_backwards(norms):
    ratios = {first: norms[first] / norms[second]
              for first, second in _pairs(norms, list(norms)[::-1])}
    return min(ratios, key=ratios.get)


@mistake("07-ex1", "steepest_drop compared differences of norms, not ratios: a difference is "
                   "largest where the norms are large, near the output. The factor by which a "
                   "layer scales the gradient is the ratio g[k]/g[k+1].",
         replaces="steepest_drop")
def steepest_by_difference(norms):
    drops = {first: norms[second] - norms[first] for first, second in _pairs(norms)}
    return max(drops, key=drops.get)


@mistake("07-ex1", "steepest_drop returned the ratio: return the name (the key) of the layer "
                   "whose ratio is the smallest.", replaces="steepest_drop")
def steepest_returns_the_ratio(norms):
    return min(norms[first] / norms[second] for first, second in _pairs(norms))


# ---------------------------------------------------------------- 07-ex2: float16_hooks

def _pack_report(pack, unpack, tensor, identity=False, unpacked=True):
    """The stored dtype, and the dtype and values unpack gives back; with `identity`, also
    whether pack stored the very tensor it received (not a copy). `unpacked="dtype"`: of what
    unpack gives back, its dtype only; False: unpack is not called (what the test cell reads
    of its example, and no more)."""
    packed = pack(tensor)
    stored = packed[1] if isinstance(packed, tuple) and len(packed) == 2 else None
    report = {"stored dtype": str(getattr(stored, "dtype", type(stored).__name__))}
    if unpacked:
        back = unpack(packed)
        report["unpacked dtype"] = str(getattr(back, "dtype", type(back).__name__))
    if unpacked is True:
        report["unpacked values"] = back if isinstance(back, torch.Tensor) else None
    if identity:
        report["stored is the tensor received itself"] = stored is tensor
    return report


_SECOND = "counts of a second call, before its forward pass"


@scenario("07-ex2", uses=["float16_hooks"], visible=True, title="the example of the test cell",
          tolerance={"the gradient of x": (1e-3, 1e-4), "the gradient of w": (1e-3, 1e-4)})
def float16_visible_example(float16_hooks, rng):
    torch.manual_seed(21)
    x = torch.randn(20, 30, requires_grad=True)
    w = torch.randn(30, 5, requires_grad=True)
    pack, unpack, counts = float16_hooks(min_elements=200)
    observed = {"counts before any forward pass": dict(counts)}
    # what the test cell reads, in its order: the stored dtype of each tensor, and the dtype
    # unpack gives back for the first and the last (one judge: the cell and this check
    # observe the same things)
    for name, tensor, unpacked in [
            ("a 300-element float32 tensor", torch.linspace(0, 1, 300), "dtype"),
            ("a 10-element float32 tensor", torch.ones(10), False),
            ("a 200-element float32 tensor", torch.ones(200), False),
            ("a 250-element int64 tensor", torch.arange(250), "dtype")]:
        observed[name] = _pack_report(pack, unpack, tensor, unpacked=unpacked)
    pack, unpack, counts = float16_hooks(min_elements=200)
    observed[_SECOND] = dict(counts)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = torch.tanh(x @ w).pow(2).sum()
    observed["counts after the forward pass"] = dict(counts)
    try:
        grad_x, grad_w = torch.autograd.grad(loss, (x, w))
    except Exception:  # re-raised unless the test cell stops before the gradients
        if observed["a 300-element float32 tensor"]["unpacked dtype"] == "torch.float32":
            raise
        # unpack gives back another dtype: the test cell stops at that check, before the
        # gradients, and the graded page says what it said (the gradients are not reported)
        return observed
    observed["the gradient of x"] = grad_x
    observed["the gradient of w"] = grad_w
    return observed


def _stored(what, field, dtype, hint):
    """The cell's check_equal of a dtype that pack stored (or unpack gave back)."""
    return expect_true(lambda seen: seen[what][field] == dtype, hint)


_RECEIVED_ZERO = ("the dict float16_hooks returned still holds 0 after the forward pass: pack "
                  "must add to that very dict (not to a copy, nor to another dict)")


def _received_hint(seen):
    return {950: "these are numbers of elements: count bytes with tensor_bytes(tensor)",
            2600: "the bytes of the stored tensors were added: add those of each tensor pack "
                  "receives",
            0: _RECEIVED_ZERO}.get(seen["counts after the forward pass"]["received"],
                                  "add tensor_bytes(tensor) for every tensor pack is "
                                  "given, converted or not")


def _gradient_scales():
    """The largest |gradient| of x and of w in the test cell's example (its atol's scale)."""
    with torch.random.fork_rng():
        torch.manual_seed(21)
        x = torch.randn(20, 30, requires_grad=True)
        w = torch.randn(30, 5, requires_grad=True)
    return [g.abs().max().item() for g in torch.autograd.grad(torch.tanh(x @ w).pow(2).sum(),
                                                              (x, w))]


_COUNTS = "counts after the forward pass"
CELL_07_EX2 = cell_checks(
    "07-ex2",
    expect_equal("counts before any forward pass",
                 hint="start each call of float16_hooks with a new dict of zeros"),
    _stored("a 300-element float32 tensor", "stored dtype", "torch.float16",
            "pack returns the pair (original dtype, stored tensor); a "
            "floating-point tensor of at least min_elements elements "
            "is stored as float16"),
    _stored("a 300-element float32 tensor", "unpacked dtype", "torch.float32",
            "convert back to the dtype pack remembered"),
    _stored("a 10-element float32 tensor", "stored dtype", "torch.float32",
            "tensors with fewer than min_elements elements are stored unchanged"),
    _stored("a 200-element float32 tensor", "stored dtype", "torch.float16",
            "'at least min_elements' includes min_elements itself: >=, not >"),
    _stored("a 250-element int64 tensor", "stored dtype", "torch.int64",
            "integer tensors (indices) are stored unchanged: convert only "
            "floating-point tensors"),
    _stored("a 250-element int64 tensor", "unpacked dtype", "torch.int64",
            "unpack gives back the dtype pack received, whatever it was (not always "
            "float32): convert back to the dtype pack remembered"),
    expect_equal(_SECOND, hint="start each call of float16_hooks with a new dict of zeros"),
    expect_true(lambda seen: seen[_COUNTS]["received"] == 3800, _received_hint),
    expect_true(lambda seen: seen[_COUNTS]["stored"] == 2600,
                lambda seen: "add tensor_bytes of the tensor pack stores (the float16 copy when "
                "it converts), not of the one it receives"
                if seen[_COUNTS]["stored"] == 3800 else None),
    *[expect_tensor(f"the gradient of {name}", rtol=1e-2, atol=1e-2 * scale)
      for name, scale in zip(("x", "w"), _gradient_scales())])


def _counts(counts):
    """The counts as a plain dict (whatever the answer returned)."""
    return dict(counts) if isinstance(counts, dict) else {"not a dict": type(counts).__name__}


def _added(counts, before):
    """What each count grew by since `before`."""
    now = _counts(counts)
    return {key: value - before.get(key, 0) if isinstance(value, (int, float)) else value
            for key, value in now.items()}


def _fresh(float16_hooks, min_elements):
    """A new set of hooks, whether its counts start at 0, and the counts at the start."""
    pack, unpack, counts = float16_hooks(min_elements=min_elements)
    start = _counts(counts)
    return pack, unpack, counts, start, start == {"received": 0, "stored": 0}


@scenario("07-ex2", uses=["float16_hooks"],
          title="float64 and int64 saved tensors, thresholds around their sizes",
          tolerance={"the gradient of a": (1e-3, 1e-6)})
def float16_mixed_dtypes(float16_hooks, rng):
    rows, columns, picks = _size(rng, 3, 7), _size(rng, 8, 40), _size(rng, 2, 5)
    a = torch.randn(rows, columns, dtype=torch.float64, generator=rng, requires_grad=True)
    index = torch.randint(0, columns, (rows, picks), generator=rng)

    def loss_of():
        return (torch.gather(a, 1, index).exp() * a[:, :picks]).sum()

    thresholds = [1, rows * picks - 1, rows * picks, rows * picks + 1]
    added, fresh = [], []
    for threshold in thresholds:
        pack, unpack, counts, start, starts_at_zero = _fresh(float16_hooks, threshold)
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            loss = loss_of()
        added.append(_added(counts, start))
        fresh.append(starts_at_zero)
    (grad,) = torch.autograd.grad(loss, a)
    return {"thresholds": thresholds, "counts start at 0": fresh,
            "counts added by one forward pass, for each threshold": added,
            "the gradient of a": grad}


@scenario("07-ex2", uses=["float16_hooks"],
          title="pack and unpack called directly; a second set of hooks")
def float16_direct_calls(float16_hooks, rng):
    threshold = _size(rng, 3, 30)
    pack, unpack, counts, start, starts_at_zero = _fresh(float16_hooks, threshold)
    observed = {"counts start at 0": starts_at_zero}
    tensors = {
        "float64, min_elements elements": torch.randn(threshold, dtype=torch.float64,
                                                      generator=rng),
        "float32, one element fewer": torch.randn(threshold - 1, generator=rng),
        "int64 indices": torch.randint(0, 1000, (threshold + 5,), generator=rng),
        "float32 matrix": torch.randn(2, threshold, generator=rng)}
    for name, tensor in tensors.items():
        observed[name] = _pack_report(pack, unpack, tensor, identity=True)
    observed["counts added"] = _added(counts, start)
    first = _counts(counts)
    second_pack, _, second_counts, second_start, _ = _fresh(float16_hooks, threshold)
    second_pack(torch.randn(threshold, generator=rng))
    observed["counts added to a second set of hooks by one pack"] = _added(second_counts,
                                                                           second_start)
    observed["the first counts unchanged by the second set"] = _counts(counts) == first
    return observed


def _float16_variant(min_elements, *, threshold=lambda n, m: n >= m,
                     convert=lambda t: t.is_floating_point(), stored_bytes=None,
                     restore=True, counter=None, unit=tensor_bytes):
    counts = counter if counter is not None else {"received": 0, "stored": 0}

    def pack(tensor):
        stored = tensor
        if convert(tensor) and threshold(tensor.numel(), min_elements):
            stored = tensor.to(torch.float16)
        counts["received"] += unit(tensor)
        counts["stored"] += unit(stored if stored_bytes is None else stored_bytes(tensor))
        return tensor.dtype, stored

    def unpack(packed):
        dtype, stored = packed
        return stored.to(dtype) if restore else stored

    return pack, unpack, counts


def _two_orders(what, call_a, call_b):
    """The answer called A, B, B again, A again, each call on fresh inputs it builds itself:
    the keys under which the grader tells a result that depends on the calls made before."""
    return {f"{what}, call 1 (A)": call_a(), f"{what}, call 2 (B)": call_b(),
            f"{what}, call 3 (B again)": call_b(), f"{what}, call 4 (A again)": call_a()}


@scenario("07-ex2", uses=["float16_hooks"], title="two thresholds, called in two orders")
def float16_in_two_orders(float16_hooks, rng):
    rows, columns = _size(rng, 2, 6), _size(rng, 4, 30)
    x = torch.randn(rows, columns, generator=rng)
    w = torch.randn(columns, 3, generator=rng)
    thresholds = (x.numel() + 1, _size(rng, 1, w.numel()))

    def call(k):
        pack, unpack, counts = float16_hooks(min_elements=thresholds[k])
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            torch.tanh(x.clone().requires_grad_() @ w.clone().requires_grad_()).sum()
        return _counts(counts)

    return _two_orders("counts after one forward pass", lambda: call(0), lambda: call(1))


@scenario("07-ex2", uses=["float16_hooks"],
          title="two sets of hooks, both made before either is used")
def float16_made_before_use(float16_hooks, rng):
    # Each set keeps its own threshold: an answer that keeps min_elements where the next call
    # of float16_hooks overwrites it (a module-level name) passes every check that uses one
    # set before making the next.
    rows, columns = _size(rng, 2, 6), _size(rng, 4, 30)
    x = torch.randn(rows, columns, generator=rng)
    w = torch.randn(columns, 3, generator=rng)
    sets = {"the first set (min_elements above every size)": float16_hooks(
                min_elements=x.numel() + w.numel() + rows * 3 + 1),
            "the second set (min_elements=1)": float16_hooks(min_elements=1)}
    observed = {}
    for label, (pack, unpack, counts) in sets.items():
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            torch.tanh(x.clone().requires_grad_() @ w.clone().requires_grad_()).sum()
        observed[f"counts of {label}"] = _counts(counts)
    return observed


@mistake("07-ex2", "Every floating-point tensor was converted: tensors with fewer than "
                   "min_elements elements should be stored unchanged.",
         replaces="float16_hooks")
def float16_ignores_threshold(min_elements):
    return _float16_variant(min_elements, threshold=lambda n, m: True)


@mistake("07-ex2", "A tensor with exactly min_elements elements was stored unchanged: 'at least "
                   "min_elements' includes min_elements itself (>=, not >).",
         replaces="float16_hooks")
def float16_strict_threshold(min_elements):
    return _float16_variant(min_elements, threshold=lambda n, m: n > m)


@mistake("07-ex2", "counts['stored'] adds the bytes of the tensor pack received: add those of "
                   "the tensor it stores (the float16 copy when it converts).",
         replaces="float16_hooks")
def float16_counts_received_as_stored(min_elements):
    return _float16_variant(min_elements, stored_bytes=lambda tensor: tensor)


@mistake("07-ex2", "The counts are numbers of elements: count bytes (tensor_bytes, numel × "
                   "element size).", replaces="float16_hooks")
def float16_counts_elements(min_elements):
    return _float16_variant(min_elements, unit=lambda t: t.numel())


@mistake("07-ex2", "The counts take 4 bytes for every element (numel × 4), whatever the dtype: "
                   "a float16 element takes 2 bytes, a float64 or int64 one 8. Count "
                   "tensor_bytes(tensor), numel × element_size().", replaces="float16_hooks")
def float16_four_bytes_each(min_elements):
    return _float16_variant(min_elements, unit=lambda t: t.numel() * 4)


@mistake("07-ex2", "unpack gives back float16: convert the stored tensor back to the dtype that "
                   "pack remembered.", replaces="float16_hooks")
def float16_never_restores(min_elements):
    return _float16_variant(min_elements, restore=False)


@mistake("07-ex2", "Integer tensors (indices) were converted: convert only floating-point "
                   "tensors (tensor.is_floating_point()).", replaces="float16_hooks")
def float16_converts_integers(min_elements):
    return _float16_variant(min_elements, convert=lambda t: True)


@mistake("07-ex2", "A tensor that should be stored as it is was copied (clone(), "
                   "detach().clone()): store the tensor itself. A copy holds a second time the memory "
                   "that the hooks are meant to save.", replaces="float16_hooks")
def float16_copies_the_unconverted(min_elements):
    pack, unpack, counts = _float16_variant(min_elements)

    def copying_pack(tensor):
        dtype, stored = pack(tensor)
        return dtype, stored.clone() if stored is tensor else stored

    return copying_pack, unpack, counts


@mistake("07-ex2", "unpack always gives float32: a float64 tensor must come back as float64. "
                   "Convert back to the dtype pack remembered.", replaces="float16_hooks")
def float16_restores_float32(min_elements):
    pack, _, counts = _float16_variant(min_elements)
    return pack, lambda packed: packed[1].float(), counts


# --------------------------------------------------------------- 07-ex3: attach_sgd_hooks

def _flat(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


class _Tied(nn.Module):
    """One square Linear layer used twice: its weight's gradient has two parts."""

    def __init__(self, width, n_classes=3):
        super().__init__()
        self.shared = nn.Linear(width, width)
        self.head = nn.Linear(width, n_classes)

    def forward(self, x):
        return self.head(torch.tanh(self.shared(torch.tanh(self.shared(x)))))


def _sgd_run(attach_sgd_hooks, model, lr, weight_decay, batches):
    """Attach the hooks, run one backward pass per batch; observe the parameters."""
    parameters = list(model.parameters())
    with count_calls(torch.optim.Optimizer, "__init__") as optimizers:
        handles = attach_sgd_hooks(model, lr, weight_decay)
        after = []
        for images, labels in batches:
            F.cross_entropy(model(images), labels).backward()
            after.append(_flat(model))
    observed = {
        "optimizer objects created": optimizers.count,
        "parameters after each backward pass": after,
        "param.grad is None after the last backward pass": [p.grad is None
                                                            for p in parameters],
        "post-accumulate-grad hooks per parameter": [len(p._post_accumulate_grad_hooks or {})
                                                     for p in parameters],
        "the result is a list": isinstance(handles, list),
        "number of handles": len(handles) if isinstance(handles, (list, tuple)) else None}
    if isinstance(handles, (list, tuple)) and all(hasattr(h, "remove") for h in handles):
        for handle in handles:
            handle.remove()
        for p in parameters:
            p.grad = None
        images, labels = batches[0]
        F.cross_entropy(model(images), labels).backward()
        observed["parameters after a backward pass with the handles removed"] = _flat(model)
    return observed


@scenario("07-ex3", uses=["attach_sgd_hooks"], visible=True,
          title="the example of the test cell", atol=1e-6, rtol=1e-5)
def sgd_visible_example(attach_sgd_hooks, rng):
    train_images, train_labels, _ = make_shapes(300, seed=0)
    torch.manual_seed(31)
    start = deep_mlp(3, 16, 256, 3, "tanh")
    graph_run = copy.deepcopy(start)
    batches = [(train_images[16 * step:16 * (step + 1)],
                train_labels[16 * step:16 * (step + 1)]) for step in range(4)]
    observed = _sgd_run(attach_sgd_hooks, start, 0.05, 0.01, batches)
    return {**observed, **_create_graph_step(attach_sgd_hooks, graph_run, 0.05, 0.01,
                                             *batches[0])}


def _create_graph_step(attach_sgd_hooks, model, lr, weight_decay, images, labels):
    """The test cell's last step: one backward(create_graph=True), which runs the hooks with
    grad mode on; an answer that changes a parameter in place outside no_grad is refused."""
    attach_sgd_hooks(model, lr, weight_decay)
    loss = F.cross_entropy(model(images), labels)
    refused = False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the reference cycle create_graph=True warns about
            loss.backward(create_graph=True)
    except RuntimeError as err:
        if "leaf Variable that requires grad" not in str(err):
            raise
        refused = True
    return {_REFUSED: refused, _GRAPH_STEP: _flat(model)}


def _visible_one_step():
    """The test cell's example: the flat parameters before the first step and their gradient
    on the first batch (what its mistakes of one step are made of)."""
    train_images, train_labels, _ = make_shapes(300, seed=0)
    with torch.random.fork_rng():
        torch.manual_seed(31)
        start = deep_mlp(3, 16, 256, 3, "tanh")
    loss = F.cross_entropy(start(train_images[:16]), train_labels[:16])
    grads = torch.autograd.grad(loss, list(start.parameters()))
    return _flat(start), torch.cat([g.flatten() for g in grads])


def _one_step_mistakes():
    start, grad = _visible_one_step()
    return {"the weight-decay term is missing": start - 0.05 * grad,
            "the step goes uphill: subtract lr times the gradient":
                start + 0.05 * (grad + 0.01 * start),
            "the parameters did not move: did the hook run, and update the "
            "parameter in place (param.add_ / param.sub_)?": start}


_AFTER = "parameters after each backward pass"
_REFUSED = "backward(create_graph=True) refused an in-place change of a leaf"
_GRAPH_STEP = "parameters after one step under backward(create_graph=True)"
_PER_PARAMETER = "post-accumulate-grad hooks per parameter"


def _per_parameter_hint(seen):
    """The cell's words: which parameters lack the hook when some have it (biases left out,
    07-ex3 of a blind review), the way to register it when none has."""
    hooked = [bool(count) for count in seen[_PER_PARAMETER]]
    if any(hooked):
        return (f"{hooked.count(False)} of the {len(hooked)} parameters have no "
                "post-accumulate-grad hook: register the step on every parameter of "
                "model.parameters(), biases included")
    return ("register the step on every parameter with register_post_accumulate_grad_hook: it "
            "runs once param.grad holds the whole gradient (a hook from register_hook runs "
            "before that)")


CELL_07_EX3 = cell_checks(
    "07-ex3",
    expect_equal("optimizer objects created",
                 hint="write the update itself in the hook, without torch.optim"),
    expect_true(lambda seen: seen["the result is a list"] is True,
                "attach_sgd_hooks should return the list of handles"),
    expect_true(lambda seen: all(seen[_PER_PARAMETER]), _per_parameter_hint),
    expect_tensor(_AFTER, name="the parameters after one step", atol=1e-6,
                  read=lambda seen: seen[_AFTER][0], mistakes=_one_step_mistakes()),
    expect_true(lambda seen: all(seen["param.grad is None after the last backward pass"]),
                "some param.grad is not None after backward: set param.grad = None in the hook "
                "(zero_() keeps the tensor)"),
    expect_tensor(_AFTER, name="the parameters after 4 steps", atol=1e-6,
                  read=lambda seen: seen[_AFTER][3]),
    expect_equal("number of handles", name="the number of handles"),
    expect_true(lambda seen: not seen[_REFUSED],
                "backward(create_graph=True) raised RuntimeError: grad mode is on while its hooks "
                "run, and autograd refuses an in-place change of a parameter (a leaf that requires "
                "grad) outside torch.no_grad(). Put the update inside with torch.no_grad():"),
    expect_tensor(_GRAPH_STEP, name="the parameters after one step under "
                                    "backward(create_graph=True)", atol=1e-6))


def _random_batches(rng, shape, steps):
    batch = _size(rng, 3, 8)
    return [(torch.randn(batch, *shape, generator=rng),
             torch.randint(0, 3, (batch,), generator=rng)) for _ in range(steps)]


def _lr_and_decay(rng):
    lr = float(torch.rand((), generator=rng)) * 0.3 + 0.01
    weight_decay = float(torch.rand((), generator=rng)) * 0.1 if _size(rng, 0, 3) else 0.0
    return lr, weight_decay


@scenario("07-ex3", uses=["attach_sgd_hooks"], title="a random multilayer perceptron",
          atol=1e-6, rtol=1e-5)
def sgd_random_mlp(attach_sgd_hooks, rng):
    model = _random_mlp(rng)
    lr, weight_decay = _lr_and_decay(rng)
    return _sgd_run(attach_sgd_hooks, model, lr, weight_decay,
                    _random_batches(rng, (8,), _size(rng, 2, 4)))


@scenario("07-ex3", uses=["attach_sgd_hooks"], title="a small CNN", atol=1e-6, rtol=1e-5)
def sgd_small_cnn(attach_sgd_hooks, rng):
    model = _randomise(shape_cnn(size=8), rng, 0.3)
    lr, weight_decay = _lr_and_decay(rng)
    return _sgd_run(attach_sgd_hooks, model, lr, weight_decay,
                    _random_batches(rng, (1, 8, 8), 2))


@scenario("07-ex3", uses=["attach_sgd_hooks"],
          title="a layer used twice in one forward pass (its gradient has two parts)",
          atol=1e-6, rtol=1e-5)
def sgd_tied_weights(attach_sgd_hooks, rng):
    width = _size(rng, 3, 6)
    model = _randomise(_Tied(width), rng, 0.5)
    lr, weight_decay = _lr_and_decay(rng)
    return _sgd_run(attach_sgd_hooks, model, lr, weight_decay,
                    _random_batches(rng, (width,), 2))


@scenario("07-ex3", uses=["attach_sgd_hooks"],
          title="two models, each with an lr and a weight_decay of its own",
          atol=1e-6, rtol=1e-5)
def sgd_two_models(attach_sgd_hooks, rng):
    from hypothesis import strategies as st
    rate = st.floats(0.01, 0.31)
    decay = st.one_of(st.just(0.0), st.floats(0.001, 0.1))
    settings = draw(st.lists(st.tuples(rate, decay), min_size=2, max_size=2,
                             unique_by=lambda pair: pair[0]), rng)
    models = [_random_mlp(rng), _random_mlp(rng)]
    handles = [attach_sgd_hooks(model, lr, wd) for model, (lr, wd) in zip(models, settings)]
    observed = {}
    for step, batch in enumerate(_random_batches(rng, (8,), 2)):
        for k, model in enumerate(models):
            F.cross_entropy(model(batch[0]), batch[1]).backward()
            observed[f"model {k + 1}'s parameters after backward pass {step + 1}"] = _flat(model)
    for found in handles:
        for handle in found if isinstance(found, (list, tuple)) else []:
            if hasattr(handle, "remove"):
                handle.remove()
    return observed


@scenario("07-ex3", uses=["attach_sgd_hooks"],
          title="backward(create_graph=True): grad mode is on while the hooks run",
          atol=1e-6, rtol=1e-5)
def sgd_create_graph(attach_sgd_hooks, rng):
    model = _random_mlp(rng)
    parameters = list(model.parameters())
    lr, weight_decay = _lr_and_decay(rng)
    attach_sgd_hooks(model, lr, weight_decay)
    images, labels = _random_batches(rng, (8,), 1)[0]
    loss = F.cross_entropy(model(images), labels)
    raised = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reference cycle create_graph=True warns about
        try:
            loss.backward(create_graph=True)
        except RuntimeError:
            raised = "RuntimeError"
    return {"the error backward(create_graph=True) raised": raised,
            "parameters after the backward pass": _flat(model),
            "every parameter is still a leaf with no grad_fn": [
                p.is_leaf and p.grad_fn is None for p in parameters],
            "param.grad is None after the backward pass": [p.grad is None for p in parameters]}


def _sgd_variant(model, lr, weight_decay, *, sign=-1.0, decay=True, clear="none",
                 register="post", guard=torch.no_grad):
    def step(param):
        with guard():
            update = param.grad + (weight_decay * param if decay else 0.0)
            param.add_(update, alpha=sign * lr)
        if clear == "none":
            param.grad = None
        elif clear == "zero":
            param.grad.zero_()

    if register == "tensor":
        def tensor_hook(param):
            def hook(grad):
                with torch.no_grad():
                    param.add_(grad + weight_decay * param, alpha=-lr)
            return hook
        return [param.register_hook(tensor_hook(param)) for param in model.parameters()]
    return [param.register_post_accumulate_grad_hook(step) for param in model.parameters()]


@mistake("07-ex3", "An optimizer object was created: write the update itself, p ← p − lr·(∇p + "
                   "weight_decay·p), in the hook.", replaces="attach_sgd_hooks")
def sgd_with_optimizer_objects(model, lr, weight_decay):
    optimizers = {param: torch.optim.SGD([param], lr=lr, weight_decay=weight_decay)
                  for param in model.parameters()}

    def step(param):
        optimizers[param].step()
        optimizers[param].zero_grad()

    return [param.register_post_accumulate_grad_hook(step) for param in model.parameters()]


@mistake("07-ex3", "The weight-decay term is missing: the step is lr·(∇p + weight_decay·p).",
         replaces="attach_sgd_hooks")
def sgd_without_decay(model, lr, weight_decay):
    return _sgd_variant(model, lr, weight_decay, decay=False)


@mistake("07-ex3", "weight_decay · p is subtracted without the factor lr: the step is "
                   "lr · (∇p + weight_decay · p), lr times the whole sum.",
         replaces="attach_sgd_hooks")
def sgd_decay_without_lr(model, lr, weight_decay):
    def step(param):
        with torch.no_grad():
            param.sub_(lr * param.grad + weight_decay * param)
        param.grad = None
    return [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]


@mistake("07-ex3", "The decay was applied after the gradient step, to the parameter that step had "
                   "already moved: both terms use p from before the step, p ← p − lr·(∇p + "
                   "weight_decay·p).", replaces="attach_sgd_hooks")
def sgd_decay_after_the_step(model, lr, weight_decay):
    def step(param):
        with torch.no_grad():
            param.sub_(lr * param.grad)
            param.sub_(lr * weight_decay * param)
        param.grad = None
    return [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]


@mistake("07-ex3", "The step goes uphill: subtract lr times the gradient.",
         replaces="attach_sgd_hooks")
def sgd_uphill(model, lr, weight_decay):
    return _sgd_variant(model, lr, weight_decay, sign=1.0)


@mistake("07-ex3", "param.grad is kept after the step, so the next backward pass adds to it: "
                   "set param.grad = None in the hook.", replaces="attach_sgd_hooks")
def sgd_keeps_grad(model, lr, weight_decay):
    return _sgd_variant(model, lr, weight_decay, clear="keep")


@mistake("07-ex3", "param.grad was zeroed (zero_()) instead of set to None: zero_grad() sets it "
                   "to None, which frees its memory.", replaces="attach_sgd_hooks")
def sgd_zeroes_grad(model, lr, weight_decay):
    return _sgd_variant(model, lr, weight_decay, clear="zero")


@mistake("07-ex3", "A tensor hook (register_hook) runs before the gradient is accumulated, once "
                   "for each part of it: use register_post_accumulate_grad_hook, which runs once "
                   "param.grad holds the whole gradient.", replaces="attach_sgd_hooks")
def sgd_with_tensor_hooks(model, lr, weight_decay):
    return _sgd_variant(model, lr, weight_decay, register="tensor")


@mistake("07-ex3", "The parameters did not move: update them in place (param.add_ or "
                   "param.sub_ under torch.no_grad()); assigning to the name param changes "
                   "nothing outside the hook.", replaces="attach_sgd_hooks")
def sgd_rebinds_the_name(model, lr, weight_decay):
    def step(param):
        with torch.no_grad():
            param = param - lr * (param.grad + weight_decay * param)
    return [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]


@mistake("07-ex3", "The update runs outside torch.no_grad(): under backward(create_graph=True) "
                   "grad mode is on in the hook, and the in-place change of a parameter (a "
                   "leaf that requires grad) raises. Put the update inside "
                   "with torch.no_grad():.", replaces="attach_sgd_hooks")
def sgd_without_no_grad(model, lr, weight_decay):
    return _sgd_variant(model, lr, weight_decay, guard=contextlib.nullcontext)
