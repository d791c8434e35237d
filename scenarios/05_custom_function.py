"""Scenarios of lesson 05 (custom autograd functions): what the grader observes of each answer.

Instructors only: never released to students. See docs/AUTHORING.md, "Scenarios".

Each answer is a `torch.autograd.Function` subclass; a scenario receives the class and calls
`.apply`. It observes forward values, gradients (second derivatives too, with
`create_graph=True`), the tensor passed to `backward` (a backward must not change its
`grad_output` in place), `gradcheck` and `gradgradcheck` results as booleans
(`raise_exception=False`), and what `torch.func` transforms return, or which error they raise.
"""

import torch
from torch.autograd import Function, gradcheck, gradgradcheck

from coursekit.drawing import domain, draw, float_lists
from coursekit.scenarios import (cell_checks, expect_same, expect_tensor, expect_true, mistake,
                                 scenario)

domain("05-ex1", "float32 and float64 inputs of 1 to 3 dimensions with values up to about ±15, "
                 "zeros and magnitudes up to 1000 (past 88, where exp overflows), random "
                 "upstream gradients, gradcheck, an input changed in place after forward")
domain("05-ex2", "float32 and float64 inputs of 1 to 3 dimensions with entries at and near ±1, "
                 "random upstream gradients")
domain("05-ex3", "random inputs, upstream gradients and float bounds, the function between two "
                 "operations, several calls with bounds of their own, gradcheck")
domain("05-ex4", "float32 and float64 inputs: first and second derivatives, gradgradcheck, a "
                 "larger expression, an input changed in place, torch.func.grad of grad at "
                 "random points, float32 values up to ±1000 (past 88, where exp overflows)")


def _silu_slope(x):
    sig = torch.sigmoid(x)
    return sig + x * sig * (1 - sig)


def _gradient_after_in_place_change(SiLU, x, change):
    """Change x in place after the forward pass and run backward. A safe SiLU either raises
    there autograd's own error for a saved tensor that changed (it saved x with
    save_for_backward) or still gives the gradient at the original x (it saved what it needs,
    such as sigmoid(x) and the output); where autograd refused, the gradient it gives on an
    unchanged copy of x is observed instead, so that both report the gradient at the original
    x. Any other error is observed as what it is. Nothing here knows the right gradient."""
    unchanged = x.detach().clone().requires_grad_()
    y = SiLU.apply(x)
    with torch.no_grad():
        x.add_(change)
    try:
        y.sum().backward()
    except RuntimeError as err:
        if "modified by an inplace operation" not in str(err):
            return "backward raised RuntimeError, not autograd's check of a saved tensor"
        SiLU.apply(unchanged).sum().backward()
        return unchanged.grad
    return x.grad


def _attempt(compute):
    """The value `compute()` returns, or which exception it raised (transforms refuse some
    Functions: the refusal is an observation)."""
    try:
        return compute()
    except Exception as err:  # noqa: BLE001 (which error the answer raises is observed)
        return f"raised {type(err).__name__}"


def _saves_with_save_for_backward(Function_, x):
    """Whether a forward call of the answer saved any tensor with ctx.save_for_backward:
    those tensors, and only those, pass through saved-tensor hooks."""
    packed = []

    def pack(tensor):
        packed.append(True)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        Function_.apply(x)
    return bool(packed)


_ON_CTX = "a tensor is kept as a ctx attribute (not saved with ctx.save_for_backward)"


def _tensor_on_ctx(Function_, *inputs):
    """Whether a call of the answer kept a tensor (or a NumPy copy of one) as a ctx attribute,
    also inside a list, tuple or dict there. The output's grad_fn is the call's ctx; its
    attributes are the ones the answer set. Every exercise of the lesson saves tensors with
    ctx.save_for_backward and keeps only what is not a tensor on ctx (torch's rule: saved
    tensors are checked for in-place changes and pass through saved-tensor hooks)."""
    output = Function_.apply(*inputs)
    ctx = getattr(output, "grad_fn", None)
    kept = list(vars(ctx).values()) if hasattr(ctx, "__dict__") else []
    found = []
    for value in kept:
        found += list(value.values()) if isinstance(value, dict) else \
            list(value) if isinstance(value, (list, tuple)) else [value]
    return any(isinstance(v, torch.Tensor) or type(v).__name__ == "ndarray" for v in found)


# ------------------------------------------------------------------------- 05-ex1: SiLU

@scenario("05-ex1", uses=["SiLU"], visible=True, rtol=1e-4, atol=1e-5,
          title="the example of the test cell")
def silu_visible_example(SiLU, rng):
    x = torch.tensor([-1.5, 0., 0.5, 2.], requires_grad=True)
    y = SiLU.apply(x)
    upstream = torch.tensor([1., 2., -1., 0.5])
    y.backward(upstream)
    x64 = torch.linspace(-3, 3, 7, dtype=torch.float64, requires_grad=True)
    moved = torch.tensor([0.3, -0.7], requires_grad=True)
    return {"SiLU forward": y, "x.grad": x.grad,
            "upstream unchanged by backward": torch.equal(upstream,
                                                          torch.tensor([1., 2., -1., 0.5])),
            "gradcheck on float64 inputs": gradcheck(SiLU.apply, (x64,),
                                                     raise_exception=False),
            "x.grad when x changed in place after forward (backward may raise instead)":
                _gradient_after_in_place_change(SiLU, moved, 1.0)}


_IN_PLACE = "x.grad when x changed in place after forward (backward may raise instead)"


def _silu_grads():
    """The test cell's wrong x.grad values (its x and upstream)."""
    x, upstream = torch.tensor([-1.5, 0., 0.5, 2.]), torch.tensor([1., 2., -1., 0.5])
    sig = torch.sigmoid(x)
    slope = sig + x * sig * (1 - sig)
    return {"x.grad is σ(x) · grad_output: the product rule's second term, "
            "x · σ(x) · (1 − σ(x)), is missing.": upstream * sig,
            "x.grad ignores grad_output: multiply the local derivative by it (vector-Jacobian "
            "product).": slope,
            "x.grad uses σ′(x) = σ(x)(1 − σ(x)), the derivative of the sigmoid alone: "
            "silu(x) = x · σ(x) needs the product rule.": upstream * sig * (1 - sig)}


CELL_05_EX1 = cell_checks(
    "05-ex1",
    expect_tensor("SiLU forward", atol=1e-4, hint="silu(x) is x * torch.sigmoid(x)."),
    expect_true(lambda seen: seen["upstream unchanged by backward"],
                "backward changed grad_output in place, so the caller's gradient "
                "changed too: return grad_output * slope, a new tensor."),
    expect_tensor("x.grad", mistakes=_silu_grads()),
    expect_true(lambda seen: seen["gradcheck on float64 inputs"],
                "gradcheck failed on float64 inputs: compare backward with the formula."),
    expect_same(_IN_PLACE, "After x changed in place, backward silently used the new values: a "
                           "tensor kept as a ctx attribute (ctx.x = x) is not checked. Save it "
                           "with ctx.save_for_backward(x) and read it from ctx.saved_tensors.",
                rtol=1e-4, atol=1e-5))


@scenario("05-ex1", uses=["SiLU"], rtol=1e-4, atol=1e-5,
          title="a random 2-D input and gradient")
def silu_random(SiLU, rng):
    rows, columns = int(torch.randint(2, 5, (), generator=rng)), 3
    x = (torch.randn(rows, columns, generator=rng) * 3).requires_grad_()
    upstream = torch.randn(rows, columns, generator=rng)
    y = SiLU.apply(x)
    y.backward(upstream)
    return {"SiLU forward": y, "x.grad": x.grad}


@scenario("05-ex1", uses=["SiLU"], rtol=1e-4, atol=1e-5,
          title="zeros and magnitudes past 88, where exp overflows in float32")
def silu_extremes(SiLU, rng):
    observed = {}
    for dtype, top in ((torch.float32, 1000.0), (torch.float64, 800.0)):
        base = torch.tensor([-top, -100.0, -89.0, -88.5, -20.0, 0.0, 0.0, 20.0, 88.5, 89.0,
                             100.0, top], dtype=dtype)
        x = base[torch.randperm(len(base), generator=rng)].requires_grad_()
        y = SiLU.apply(x)
        y.backward(torch.rand(len(base), generator=rng, dtype=dtype) + 0.5)
        name = str(dtype).replace("torch.", "")
        observed[f"SiLU forward, {name}"] = y
        observed[f"x.grad, {name}"] = x.grad
    return observed


@scenario("05-ex1", uses=["SiLU"], rtol=1e-6, atol=1e-8,
          title="float64 inputs, gradcheck and an in-place change")
def silu_float64(SiLU, rng):
    x64 = (torch.randn(3, 4, generator=rng, dtype=torch.float64) * 4).requires_grad_()
    y = SiLU.apply(x64)
    upstream = torch.randn(3, 4, generator=rng, dtype=torch.float64)
    (gradient,) = torch.autograd.grad(y, x64, upstream)
    moved = torch.randn(5, generator=rng).requires_grad_()
    change = float(torch.rand((), generator=rng)) + 0.5
    return {"SiLU forward": y, "x.grad": gradient,
            "gradcheck on float64 inputs": gradcheck(SiLU.apply, (x64,),
                                                     raise_exception=False),
            "x.grad when x changed in place after forward (backward may raise instead)":
                _gradient_after_in_place_change(SiLU, moved, change)}


@scenario("05-ex1", uses=["SiLU"], rtol=1e-4, atol=1e-5,
          title="inputs of 1 to 3 dimensions: a plain sum, what was saved, an in-place change")
def silu_shapes_and_saving(SiLU, rng):
    dims = int(torch.randint(1, 4, (), generator=rng))
    shape = tuple(int(n) for n in torch.randint(2, 5, (dims,), generator=rng))
    x = (torch.randn(shape, generator=rng) * 3).requires_grad_()
    upstream = torch.randn(shape, generator=rng)
    sent = upstream.clone()
    SiLU.apply(x).backward(upstream)
    summed = x.detach().clone().requires_grad_()

    def gradient_of_a_sum():
        SiLU.apply(summed).sum().backward()
        return summed.grad

    moved = torch.randn(shape, generator=rng).requires_grad_()
    change = float(torch.rand((), generator=rng)) + 0.5
    return {"x.grad": x.grad,
            "upstream unchanged by backward": torch.equal(upstream, sent),
            "x.grad of SiLU.apply(x).sum()": _attempt(gradient_of_a_sum),
            "forward saved a tensor with ctx.save_for_backward":
                _saves_with_save_for_backward(SiLU, x.detach().clone().requires_grad_()),
            _ON_CTX: _tensor_on_ctx(SiLU, x.detach().clone().requires_grad_()),
            "x.grad when x changed in place after forward (backward may raise instead)":
                _gradient_after_in_place_change(SiLU, moved, change)}


@mistake("05-ex1", "x.grad is σ(x) · grad_output: the product rule's second term, "
                   "x · σ(x) · (1 − σ(x)), is missing.", replaces="SiLU")
class SiLUWithoutSecondTerm(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)


@mistake("05-ex1", "x.grad ignores grad_output: multiply the local derivative silu′(x) by "
                   "grad_output (the vector–Jacobian product).", replaces="SiLU")
class SiLUIgnoringGradOutput(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return _silu_slope(x)


@mistake("05-ex1", "x.grad uses σ′(x) = σ(x)(1 − σ(x)), the derivative of the sigmoid alone: "
                   "silu(x) = x · σ(x) needs the product rule, σ(x) + x · σ′(x).",
         replaces="SiLU")
class SiLUWithSigmoidDerivative(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        sig = torch.sigmoid(x)
        return grad_output * sig * (1 - sig)


@mistake("05-ex1", "x is kept as a ctx attribute (ctx.x = x): when x changes in place after the "
                   "forward pass, backward silently uses the new values. Save it with "
                   "ctx.save_for_backward(x) and read it from ctx.saved_tensors.",
         replaces="SiLU")
class SiLUWithCtxAttribute(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * _silu_slope(ctx.x)


@mistake("05-ex1", "x is kept as a copy (a ctx attribute such as ctx.x = x.clone(), a NumPy "
                   "copy, or a copy kept elsewhere) "
                   "instead of being saved with ctx.save_for_backward(x): the task asks for "
                   "save_for_backward, which lets autograd check that x did not change.",
         replaces="SiLU")
class SiLUWithCtxCopy(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x.detach().clone()
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * _silu_slope(ctx.x)


@mistake("05-ex1", "backward multiplies grad_output in place (grad_output *= ... or mul_): "
                   "the caller's gradient changes, and the gradient of y.sum(), whose "
                   "grad_output is one number expanded, raises. Return a new tensor: "
                   "grad_output * slope.", replaces="SiLU")
class SiLUMultiplyingInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output.mul_(_silu_slope(x))


# ---------------------------------------------------------------------- 05-ex2: SignSTE

def _ste_observations(SignSTE, x, upstream):
    y = SignSTE.apply(x)
    sent = upstream.clone()
    y.backward(upstream)
    return {"SignSTE forward": y, "x.grad": x.grad,
            "upstream unchanged by backward": torch.equal(upstream, sent)}


@scenario("05-ex2", uses=["SignSTE"], visible=True, title="the example of the test cell")
def ste_visible_example(SignSTE, rng):
    x = torch.tensor([-2.5, -1., -0.5, 0., 0.75, 1., 1.25], requires_grad=True)
    upstream = torch.tensor([1., 2., 3., 4., 5., 6., 7.])
    return _ste_observations(SignSTE, x, upstream)


CELL_05_EX2 = cell_checks(
    "05-ex2",
    expect_tensor("SignSTE forward", hint="The forward pass is torch.sign(x)."),
    expect_tensor("x.grad", mistakes={
        "x.grad is zero: that is the true derivative of sign. A straight-through "
        "estimator passes grad_output through instead.": [0., 0., 0., 0., 0., 0., 0.],
        "x.grad is grad_output everywhere: zero it where |x| > 1.": [1., 2., 3., 4., 5., 6., 7.],
        "x.grad holds ones instead of grad_output: pass grad_output itself through, "
        "masked where |x| > 1.": [0., 1., 1., 1., 1., 1., 0.],
        "At x = ±1 the gradient was stopped: the rule is |x| ≤ 1, the boundary included "
        "(PyTorch's hardtanh sends 0 there; this exercise does not).":
            [0., 0., 3., 4., 5., 0., 0.],
        "The mask is taken from grad_output: which entries pass depends on the input x "
        "(|x| ≤ 1), so save x in forward and mask with it.": [1., 0., 0., 0., 0., 0., 0.]}),
    expect_true(lambda seen: seen["upstream unchanged by backward"],
                "backward changed grad_output in place, so the caller's gradient "
                "changed too: build a new tensor (grad_output * mask, torch.where)."))


@scenario("05-ex2", uses=["SignSTE"], title="random inputs with entries at and near ±1")
def ste_random(SignSTE, rng):
    shape = (int(torch.randint(2, 5, (), generator=rng)),
             int(torch.randint(4, 8, (), generator=rng)))
    x = torch.randn(shape, generator=rng) * 1.5
    edges = torch.tensor([1., -1., 0.999, -1.001, 1.001, -0.999, 0.])
    places = torch.randperm(x.numel(), generator=rng)[: len(edges)]
    x.view(-1)[places] = edges
    upstream = torch.randn(shape, generator=rng) * 2
    return _ste_observations(SignSTE, x.requires_grad_(), upstream)


@scenario("05-ex2", uses=["SignSTE"], title="float64 inputs of 1 to 3 dimensions")
def ste_float64(SignSTE, rng):
    dims = int(torch.randint(1, 4, (), generator=rng))
    shape = tuple(int(n) for n in torch.randint(1, 5, (dims,), generator=rng))
    x = (torch.randn(shape, generator=rng, dtype=torch.float64) * 2).requires_grad_()
    upstream = torch.randn(shape, generator=rng, dtype=torch.float64)
    return {**_ste_observations(SignSTE, x, upstream),
            _ON_CTX: _tensor_on_ctx(SignSTE, x.detach().clone().requires_grad_())}


@mistake("05-ex2", "x.grad is zero: that is the true derivative of sign. A straight-through "
                   "estimator passes grad_output through instead.", replaces="SignSTE")
class SignWithTrueDerivative(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        return torch.zeros_like(grad_output)


@mistake("05-ex2", "x.grad is grad_output everywhere: set it to zero where |x| > 1.",
         replaces="SignSTE")
class SignPassingEverything(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.clone()


@mistake("05-ex2", "x.grad holds ones (the mask) instead of grad_output: pass grad_output "
                   "itself through, masked where |x| > 1.", replaces="SignSTE")
class SignReturningTheMask(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return (x.abs() <= 1).to(grad_output.dtype)


@mistake("05-ex2", "At |x| = 1 exactly the gradient was stopped: the rule is |x| ≤ 1, the "
                   "boundary included (PyTorch's hardtanh sends 0 there; this exercise does "
                   "not).", replaces="SignSTE")
class SignWithStrictBoundary(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x.abs() < 1).to(grad_output.dtype)


@mistake("05-ex2", "The mask is taken from grad_output: which entries pass depends on the "
                   "input x (|x| ≤ 1), so save x in forward and mask with it.",
         replaces="SignSTE")
class SignMaskingByGradient(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * (grad_output.abs() <= 1).to(grad_output.dtype)


@mistake("05-ex2", "backward writes into grad_output in place: the caller's gradient tensor "
                   "changed. Build a new tensor (grad_output * mask, torch.where) instead.",
         replaces="SignSTE")
class SignMaskingInPlace(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        grad_output[x.abs() > 1] = 0
        return grad_output


@mistake("05-ex2", "x (or the mask) is kept as a ctx attribute: save the tensor backward needs "
                   "with ctx.save_for_backward and read it from ctx.saved_tensors (ctx "
                   "attributes are for what is not a tensor).", replaces="SignSTE")
class SignWithCtxAttribute(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * (ctx.x.abs() <= 1).to(grad_output.dtype)


@mistake("05-ex2", "The forward pass returns x clamped to [-1, 1] (hard-tanh): that is the "
                   "function whose derivative the estimator borrows. Forward returns "
                   "torch.sign(x).", replaces="SignSTE")
class SignForwardClamped(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(-1, 1)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x.abs() <= 1).to(grad_output.dtype)


# ----------------------------------------------------------------- 05-ex3: ClipGradient

def _clip_observations(ClipGradient, x, bound, upstream):
    y = ClipGradient.apply(x, bound)
    sent = upstream.clone()
    y.backward(upstream)
    return {"ClipGradient forward": y, "x.grad": x.grad,
            "upstream unchanged by backward": torch.equal(upstream, sent)}


def _gradchecks(ClipGradient, x64):
    return [gradcheck(lambda t: ClipGradient.apply(t, bound), (x64,), raise_exception=False)
            for bound in (10., 0.5)]


@scenario("05-ex3", uses=["ClipGradient"], visible=True, title="the example of the test cell")
def clip_visible_example(ClipGradient, rng):
    x = torch.tensor([0.5, -1., 2.], requires_grad=True)
    observed = _clip_observations(ClipGradient, x, 1.5, torch.tensor([3., -0.2, -5.]))
    x64 = torch.tensor([0.3, -2., 4.], dtype=torch.float64, requires_grad=True)
    observed["gradcheck with bound 10, with bound 0.5"] = _gradchecks(ClipGradient, x64)
    return observed


_GRADCHECKS = "gradcheck with bound 10, with bound 0.5"
CELL_05_EX3 = cell_checks(
    "05-ex3",
    expect_tensor("ClipGradient forward",
                  hint="The forward pass is the identity: return x.clone()."),
    expect_tensor("x.grad", mistakes={
        "x.grad is grad_output unchanged: clamp it to [-bound, bound].": [3., -0.2, -5.],
        "x.grad looks like x clamped: clamp grad_output, not the input.": [0.5, -1., 1.5],
        "Negative gradients were set to 0: clamp to [-bound, bound], not [0, bound].":
            [1.5, 0., 0.],
        "Only the upper bound clips: gradients below -bound pass unchanged. Clamp on both "
        "sides.": [1.5, -0.2, -5.],
        "x.grad was scaled down as a whole so that its largest entry is ±bound: clamp each "
        "element on its own, and leave the entries within the bound as they are.":
            [0.9, -0.06, -1.5]}),
    expect_true(lambda seen: seen["upstream unchanged by backward"],
                "backward clamped grad_output in place (clamp_), so the caller's "
                "gradient changed too: return grad_output.clamp(...), a new tensor."),
    expect_true(lambda seen: seen[_GRADCHECKS][0],
                "With bound = 10 no gradient is clipped, yet gradcheck failed: is the "
                "forward pass the identity and the backward grad_output when small?"),
    expect_true(lambda seen: not seen[_GRADCHECKS][1],
                "With bound = 0.5 the entries of 1 that gradcheck sends back must be clipped, "
                "so gradcheck must fail, yet it passed: does backward use the bound?"))


@scenario("05-ex3", uses=["ClipGradient"], title="a random input, gradient and bound")
def clip_random(ClipGradient, rng):
    x = torch.randn(4, 3, generator=rng).requires_grad_()
    bound = float(torch.rand((), generator=rng)) * 1.5 + 0.3
    upstream = torch.randn(4, 3, generator=rng) * 3
    return {**_clip_observations(ClipGradient, x, bound, upstream),
            _ON_CTX: _tensor_on_ctx(ClipGradient, x.detach().clone().requires_grad_(), bound)}


@scenario("05-ex3", uses=["ClipGradient"], rtol=1e-4, atol=1e-5,
          title="between two operations, and gradcheck")
def clip_between_operations(ClipGradient, rng):
    x = torch.randn(5, generator=rng).requires_grad_()
    weight = torch.randn(5, generator=rng) * 3
    bound = float(torch.rand((), generator=rng)) + 0.5
    hidden = ClipGradient.apply(x * weight, bound)
    (hidden ** 2 * 2).sum().backward()
    x64 = torch.randn(4, generator=rng, dtype=torch.float64).requires_grad_()
    return {"x.grad": x.grad,
            "gradcheck with bound 10, with bound 0.5": _gradchecks(ClipGradient, x64)}


@scenario("05-ex3", uses=["ClipGradient"], title="several calls with their own bounds, "
                                                  "then one backward")
def clip_several_bounds(ClipGradient, rng):
    calls = int(torch.randint(2, 5, (), generator=rng))
    size = int(torch.randint(2, 7, (), generator=rng))
    xs = [torch.randn(size, generator=rng).requires_grad_() for _ in range(calls)]
    bounds = [0.2 + 0.6 * k + 0.3 * float(torch.rand((), generator=rng)) for k in range(calls)]
    weights = [torch.randn(size, generator=rng) * 4 for _ in range(calls)]
    outputs = [ClipGradient.apply(x, bound) for x, bound in zip(xs, bounds)]
    sum((weight * out).sum() for weight, out in zip(weights, outputs)).backward()
    return {"x.grad of each call, in the order of the calls": [x.grad for x in xs]}


@mistake("05-ex3", "x.grad is grad_output unchanged: clamp it to [-bound, bound].",
         replaces="ClipGradient")
class ClipNothing(Function):
    @staticmethod
    def forward(ctx, x, bound):
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.clone(), None


@mistake("05-ex3", "x.grad looks like x clamped: clamp grad_output, not the input.",
         replaces="ClipGradient")
class ClipTheInput(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.save_for_backward(x)
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return x.clamp(-ctx.bound, ctx.bound), None


@mistake("05-ex3", "Negative gradients were set to 0: clamp to [-bound, bound], not "
                   "[0, bound].", replaces="ClipGradient")
class ClipToPositive(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.clamp(0, ctx.bound), None


@mistake("05-ex3", "Only the upper bound clips: gradients below -bound pass unchanged. Clamp "
                   "on both sides, to [-bound, bound].", replaces="ClipGradient")
class ClipAboveOnly(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.clamp(max=ctx.bound), None


@mistake("05-ex3", "backward clamps grad_output in place (clamp_): the caller's gradient "
                   "tensor changed too. Return a new tensor: grad_output.clamp(...).",
         replaces="ClipGradient")
class ClipInPlace(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.clamp_(-ctx.bound, ctx.bound), None


@mistake("05-ex3", "backward raised a RuntimeError. backward must return one value per input "
                   "of forward: the clipped gradient for x, and None for the float bound.",
         replaces="ClipGradient")
class ClipWithoutNone(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.clamp(-ctx.bound, ctx.bound)


@mistake("05-ex3", "x.grad was scaled down as a whole to a norm of bound (what "
                   "clip_grad_norm_ does): clamp each element on its own to [-bound, bound].",
         replaces="ClipGradient")
class ClipTheNorm(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        norm = grad_output.norm()
        if norm > ctx.bound:
            return grad_output * (ctx.bound / norm), None
        return grad_output, None


@mistake("05-ex3", "x.grad was scaled down as a whole so that its largest entry is ±bound: "
                   "clamp each element on its own to [-bound, bound], and leave the entries "
                   "within the bound as they are.", replaces="ClipGradient")
class ClipByTheLargestEntry(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        largest = grad_output.abs().max()
        if largest > ctx.bound:
            return grad_output * (ctx.bound / largest), None
        return grad_output, None


@mistake("05-ex3", "A tensor is kept as a ctx attribute (the bound made a tensor, or x): a "
                   "tensor goes through ctx.save_for_backward, and the float bound stays a "
                   "float on ctx (ctx.bound = bound).", replaces="ClipGradient")
class ClipWithTensorOnCtx(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = torch.tensor(bound)
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return torch.clamp(grad_output, -ctx.bound, ctx.bound), None


@mistake("05-ex3", "The bound is stored on the class (ClipGradient.bound = bound), shared by "
                   "every call: the last call's bound clips them all. Keep it on ctx "
                   "(ctx.bound = bound), which belongs to one call.", replaces="ClipGradient")
class ClipWithBoundOnClass(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ClipWithBoundOnClass.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        bound = ClipWithBoundOnClass.bound
        return grad_output.clamp(-bound, bound), None


# --------------------------------------------------------------------- 05-ex4: Softplus

def _twice(Softplus, x, upstream, weight):
    """Forward value, the gradient for `upstream` taken with create_graph=True, and the
    gradient of (x.grad * weight).sum(), where autograd recorded one."""
    y = Softplus.apply(x)
    (x_grad,) = torch.autograd.grad(y, x, upstream, create_graph=True)
    observed = {"Softplus forward": y, "x.grad": x_grad,
                "x.grad requires grad (create_graph=True)": x_grad.requires_grad}
    if x_grad.requires_grad:
        (second,) = torch.autograd.grad((x_grad * weight).sum(), x)
        observed["d((x.grad * w).sum())/dx"] = second
    return observed


def _transformed(Softplus, points):
    """What torch.func makes of Softplus: second and first derivatives at each point. The
    second first, as the test cell computes it (after the same calls as the cell's): an answer
    that keeps state between calls meets it as the cell's call met it."""
    grad = torch.func.grad
    second = _attempt(
        lambda: torch.stack([grad(grad(Softplus.apply))(point) for point in points]))
    return {"grad(Softplus.apply) at each point": _attempt(
                lambda: torch.stack([grad(Softplus.apply)(point) for point in points])),
            "grad(grad(Softplus.apply)) at each point": second}


@scenario("05-ex4", uses=["Softplus"], visible=True, rtol=1e-4, atol=1e-6,
          title="the example of the test cell")
def softplus_visible_example(Softplus, rng):
    x = torch.tensor([-2., 0., 1.5, 3.], requires_grad=True)
    upstream = torch.tensor([1., -2., 0.5, 3.])
    observed = _twice(Softplus, x, upstream, torch.ones(4))
    x64 = torch.linspace(-3, 3, 7, dtype=torch.float64, requires_grad=True)
    observed["gradcheck, gradgradcheck on float64 inputs"] = [
        gradcheck(Softplus.apply, (x64,), raise_exception=False),
        gradgradcheck(Softplus.apply, (x64,), raise_exception=False)]
    observed.update(_transformed(Softplus, x.detach()))
    moved = torch.tensor([0.3, -0.7], requires_grad=True)
    observed["x.grad when x changed in place after forward (backward may raise instead)"] = \
        _gradient_after_in_place_change(Softplus, moved, 1.0)
    if isinstance(observed["grad(grad(Softplus.apply)) at each point"], str):
        # what the test cell tells apart when torch.func refuses (an answer that fails already)
        observed["torch.func asks for setup_context"] = _asks_for_setup_context(Softplus,
                                                                                x.detach())
    return observed


def _asks_for_setup_context(Softplus, points):
    try:
        torch.stack([torch.func.grad(torch.func.grad(Softplus.apply))(p) for p in points])
    except RuntimeError as err:
        return "setup_context" in str(err)
    except Exception:  # noqa: BLE001 (another refusal: not this one)
        return False
    return False


def _softplus_grads():
    """The test cell's wrong x.grad values (its x and upstream)."""
    x, upstream = torch.tensor([-2., 0., 1.5, 3.]), torch.tensor([1., -2., 0.5, 3.])
    sig = torch.sigmoid(x)
    y = torch.nn.functional.softplus(x)
    return {"x.grad uses 1 − σ(x) = σ(−x): the derivative of log(1 + eˣ) is σ(x).":
            upstream * (1 - sig),
            "x.grad ignores grad_output: multiply σ(x) by it (vector–Jacobian product).": sig,
            "x.grad is σ(y), the sigmoid of the output: backward needs σ(x). Save x, or compute "
            "σ(x) = 1 − e^(−y) from the output.": upstream * torch.sigmoid(y)}


_CHECKS_64 = "gradcheck, gradgradcheck on float64 inputs"
CELL_05_EX4 = cell_checks(
    "05-ex4",
    expect_tensor("Softplus forward",
                  hint="softplus(x) is log(1 + exp(x)): torch.nn.functional.softplus(x)."),
    expect_tensor("x.grad", mistakes=_softplus_grads()),
    expect_true(lambda seen: seen["x.grad requires grad (create_graph=True)"],
                "x.grad, computed with create_graph=True, does not require grad: autograd did "
                "not record how backward computed it. Compute σ(x) in backward with torch "
                "operations from a saved input or output: not in forward or setup_context (both "
                "run without gradient tracking), not under torch.no_grad(), not from a detached "
                "tensor, not in NumPy, and without @once_differentiable."),
    expect_tensor("d((x.grad * w).sum())/dx",
                  name="d(x.grad)/dx, the second derivative times grad_output",
                  hint="the second derivative of softplus is σ(x)(1 − σ(x))."),
    expect_true(lambda seen: seen[_CHECKS_64][0],
                "gradcheck failed on float64 inputs: compare backward with σ(x)."),
    expect_true(lambda seen: seen[_CHECKS_64][1],
                "gradgradcheck failed on float64 inputs: the second derivative is wrong."),
    expect_true(lambda seen: not isinstance(seen["grad(grad(Softplus.apply)) at each point"],
                                            str),
                lambda seen: "torch.func refused Softplus: a Function whose forward takes ctx "
                "cannot be transformed. Write forward(x) and setup_context(ctx, inputs, "
                "output), as in section 7." if seen.get("torch.func asks for setup_context")
                # the cell quotes torch's own error (a RuntimeError, the one it catches) here,
                # which the page does not repeat
                else "torch.func refused Softplus: (the test cell quotes torch's error)"
                if seen["grad(grad(Softplus.apply)) at each point"] == "raised RuntimeError"
                else None),
    expect_tensor("grad(grad(Softplus.apply)) at each point",
                  name="grad(grad(Softplus.apply)) at each entry of x"),
    expect_same(_IN_PLACE, "After x changed in place, backward silently used the new values: a "
                           "tensor kept as a ctx attribute (ctx.x = x) is not checked. Save it "
                           "with ctx.save_for_backward(x) in setup_context.", atol=1e-6))


@scenario("05-ex4", uses=["Softplus"], rtol=1e-4, atol=1e-6,
          title="a random 2-D input: gradient and second derivative")
def softplus_random(Softplus, rng):
    shape = (int(torch.randint(2, 5, (), generator=rng)),
             int(torch.randint(2, 6, (), generator=rng)))
    x = (torch.randn(shape, generator=rng) * 3).requires_grad_()
    upstream = torch.randn(shape, generator=rng)
    weight = torch.randn(shape, generator=rng)
    return _twice(Softplus, x, upstream, weight)


@scenario("05-ex4", uses=["Softplus"], rtol=1e-6, atol=1e-8,
          title="float64 inputs: gradgradcheck, a larger expression, an in-place change")
def softplus_float64(Softplus, rng):
    x64 = (torch.randn(5, generator=rng, dtype=torch.float64) * 3).requires_grad_()
    scale = torch.randn(5, generator=rng, dtype=torch.float64)
    loss = (scale * Softplus.apply(x64)).sum() + (x64 ** 2).sum()
    (first,) = torch.autograd.grad(loss, x64, create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), x64)
    moved = torch.randn(4, generator=rng).requires_grad_()
    change = float(torch.rand((), generator=rng)) + 0.5
    return {"gradcheck, gradgradcheck": [
                gradcheck(Softplus.apply, (x64,), raise_exception=False),
                gradgradcheck(Softplus.apply, (x64,), raise_exception=False)],
            "d/dx of L = sum(c * softplus(x)) + sum(x²)": first,
            "d²L/dx² (diagonal)": second,
            "x.grad when x changed in place after forward (backward may raise instead)":
                _gradient_after_in_place_change(Softplus, moved, change),
            _ON_CTX: _tensor_on_ctx(Softplus, x64.detach().clone().requires_grad_())}


@scenario("05-ex4", uses=["Softplus"], rtol=1e-4, atol=1e-6,
          title="torch.func: grad and grad of grad at random points")
def softplus_transformed(Softplus, rng):
    points = torch.randn(int(torch.randint(3, 9, (), generator=rng)), generator=rng) * 3
    return _transformed(Softplus, points)


@scenario("05-ex4", uses=["Softplus"], rtol=1e-4, atol=1e-6,
          title="float32 inputs far from zero (|x| up to 1000, where exp(x) overflows): "
                "value, gradient and second derivative")
def softplus_extreme(Softplus, rng):
    """exp(x) overflows float32 past x ≈ 88.7: log(1 + eˣ), eˣ / (1 + eˣ) or a second
    derivative in a ratio form give inf or NaN there, while softplus, σ and σ(1 − σ) are
    finite everywhere."""
    drawn = draw(float_lists(1, 8, 1e3), rng)
    x = torch.tensor([-1000.0, -100.0, -89.0, 0.0, 89.0, 100.0, 1000.0] + drawn,
                     requires_grad=True)
    upstream = torch.randn(x.shape, generator=rng)
    weight = torch.randn(x.shape, generator=rng)
    return _twice(Softplus, x, upstream, weight)


class _SoftplusSavingX(Function):
    """The ctx-free form the mistakes below change one piece of."""

    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])


@mistake("05-ex4", "The second derivative is missing: autograd did not record how backward "
                   "computed σ(x), so it is a constant to the second pass. That happens when "
                   "backward computes it under torch.no_grad(), from a detached tensor or in "
                   "NumPy, when it was computed in forward or setup_context (both run without "
                   "gradient tracking), or with @once_differentiable. Compute σ(x) in backward "
                   "with torch operations from a saved input or output.", replaces="Softplus")
class SoftplusConstantSlope(_SoftplusSavingX):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        with torch.no_grad():
            slope = torch.sigmoid(x)
        return grad_output * slope


@mistake("05-ex4", "torch.func refused Softplus: a Function whose forward takes ctx cannot be "
                   "transformed. Write forward(x) and setup_context(ctx, inputs, output), as in "
                   "section 7.", replaces="Softplus")
class SoftplusWithCtxInForward(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)


@mistake("05-ex4", "save_for_backward received the tuple `inputs` and raised a TypeError: it "
                   "takes tensors. Take x out of the tuple first, (x,) = inputs.",
         replaces="Softplus")
class SoftplusSavingTheTuple(_SoftplusSavingX):
    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)


@mistake("05-ex4", "x is kept as a ctx attribute (ctx.x = x) in setup_context: when x changes in "
                   "place after the forward pass, backward silently uses the new values. Save "
                   "it with ctx.save_for_backward.", replaces="Softplus")
class SoftplusWithCtxAttribute(_SoftplusSavingX):
    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.x = inputs[0]

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * torch.sigmoid(ctx.x)


@mistake("05-ex4", "x.grad is σ(y), the sigmoid of the output: backward needs σ(x). Save x, or "
                   "compute σ(x) = 1 − e^(−y) from the saved output.", replaces="Softplus")
class SoftplusSigmoidOfOutput(_SoftplusSavingX):
    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(y)


@mistake("05-ex4", "x.grad uses 1 − σ(x) = σ(−x): the derivative of log(1 + eˣ) is σ(x).",
         replaces="Softplus")
class SoftplusMirroredSlope(_SoftplusSavingX):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (1 - torch.sigmoid(x))


@mistake("05-ex4", "x.grad ignores grad_output: multiply σ(x) by it (the vector–Jacobian "
                   "product).", replaces="Softplus")
class SoftplusIgnoringGradOutput(_SoftplusSavingX):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return torch.sigmoid(x)
