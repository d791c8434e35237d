"""Answers to lesson 05's exercises that the grader must fail (naming the mistake) or pass.

Each entry: the exercise, a short name, whether it must "pass" or "fail", for a failing one a
phrase that the feedback's named mistake must contain (None: any failure will do), and the
source that replaces the answer cell. tests/test_scenarios.py runs them in-process.
"""

VARIANTS = [
    # ------------------------------------------------------------------------ 05-ex1
    dict(exercise="05-ex1", name="missing-product-rule-term", expect="fail",
         mistake="second term", source='''
class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return torch.sigmoid(x) * grad_output
'''),
    dict(exercise="05-ex1", name="ignores-grad-output", expect="fail",
         mistake="ignores grad_output", source='''
class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return s + x * s * (1 - s)
'''),
    dict(exercise="05-ex1", name="sigmoid-derivative", expect="fail",
         mistake="derivative of the sigmoid alone", source='''
class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * s * (1 - s)
'''),
    dict(exercise="05-ex1", name="ctx-attribute", drawn="ctx attributes", expect="fail", mistake="ctx attribute",
         source='''
class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        s = torch.sigmoid(ctx.x)
        return grad_output * (s + ctx.x * s * (1 - s))
'''),
    dict(exercise="05-ex1", name="hard-coded-visible", expect="fail", mistake=None,
         relation="the shapes of two tensors do not fit together",
         source='''
class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        if x.shape == (4,):
            return torch.tensor([-0.2736, 0., 0.3112, 1.7616])
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return torch.tensor([0.0, 1.0, -0.7, 0.5]) * grad_output
'''),
    dict(exercise="05-ex1", name="saves-sigmoid-and-output", expect="pass", mistake=None,
         source='''
class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        sig = torch.sigmoid(x)
        out = x * sig
        ctx.save_for_backward(sig, out)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        sig, out = ctx.saved_tensors
        return grad_output * (sig + out * (1 - sig))
'''),
    dict(exercise="05-ex1", name="setup-context", expect="pass", mistake=None, source='''
class SiLU(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.silu(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        sig = x.sigmoid()
        return grad_output * sig * (1 + x * (1 - sig))
'''),
    dict(exercise="05-ex1", name="multiplies-grad-output-in-place", drawn="caller's tensors unchanged", expect="fail", mistake="in place", source='''
class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        grad_output *= s * (1 + x * (1 - s))
        return grad_output
'''),
    dict(exercise="05-ex1", name="ctx-clone", drawn="ctx attributes", expect="fail", mistake="kept as a copy", source='''
class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x.clone()
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        x = ctx.x
        s = torch.sigmoid(x)
        return grad_output * (s + x * s * (1 - s))
'''),
    dict(exercise="05-ex1", name="numpy-backward-from-a-copy", drawn="ctx attributes", expect="fail", mistake="kept as a copy", source='''
import numpy as np

class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x_np = x.detach().numpy().copy()
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        x = ctx.x_np
        s = 1 / (1 + np.exp(-x))
        return grad_output * torch.from_numpy(s + x * s * (1 - s))
'''),
    dict(exercise="05-ex1", name="minus-second-term", expect="fail", mistake=None, relation="gradcheck on float64 inputs is False", source='''
class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * (s - x * s * (1 - s))
'''),
    dict(exercise="05-ex1", name="saves-output-uses-it-as-x", expect="fail", mistake=None, relation="gradcheck on float64 inputs is False", source='''
class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        y = x * torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad_output * (s + x * s * (1 - s))
'''),
    dict(exercise="05-ex1", name="numpy-backward-from-saved-x", expect="pass", mistake=None, source='''
import numpy as np

class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        xn = x.detach().numpy()
        s = 1 / (1 + np.exp(-xn))
        return grad_output * torch.from_numpy(s + xn * s * (1 - s))
'''),
    # ------------------------------------------------------------------------ 05-ex2
    dict(exercise="05-ex2", name="true-derivative", expect="fail",
         mistake="true derivative of sign", source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * 0
'''),
    dict(exercise="05-ex2", name="no-mask", expect="fail", mistake="grad_output everywhere",
         source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output
'''),
    dict(exercise="05-ex2", name="mask-only", expect="fail", mistake="(the mask)", source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return (x.abs() <= 1).float()
'''),
    dict(exercise="05-ex2", name="hardtanh-boundary", expect="fail", mistake="boundary",
         source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            t = x.detach().requires_grad_()
            (g,) = torch.autograd.grad(torch.nn.functional.hardtanh(t), t, grad_output)
        return g
'''),
    dict(exercise="05-ex2", name="mask-from-grad-output", expect="fail",
         mistake="taken from grad_output", source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        return torch.where(grad_output.abs() <= 1, grad_output, 0.)
'''),
    dict(exercise="05-ex2", name="masks-in-place", drawn="caller's tensors unchanged", expect="fail", mistake="in place", source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        grad_output[x.abs() > 1] = 0
        return grad_output
'''),
    dict(exercise="05-ex2", name="hard-coded-visible", expect="fail", mistake=None,
         relation="right on the test cell's example", source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        return torch.tensor([0., 2., 3., 4., 5., 6., 0.])
'''),
    dict(exercise="05-ex2", name="torch-where", expect="pass", mistake=None, source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sign()

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return torch.where(x.abs() > 1, torch.zeros_like(grad_output), grad_output)
'''),
    dict(exercise="05-ex2", name="mask-saved-in-forward", expect="pass", mistake=None,
         source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x.abs() <= 1)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        (inside,) = ctx.saved_tensors
        return grad_output * inside
'''),
    dict(exercise="05-ex2", name="inverted-mask", expect="fail", mistake=None, relation="zero where the expected values are not", source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x.abs() > 1)
'''),
    dict(exercise="05-ex2", name="mask-from-output", expect="fail", mistake="grad_output everywhere", source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.sign(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return torch.where(y.abs() <= 1, grad_output, torch.zeros_like(grad_output))
'''),
    dict(exercise="05-ex2", name="forward-clamps", expect="fail", mistake="clamped to [-1, 1]", source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(-1, 1)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x.abs() <= 1)
'''),
    # ------------------------------------------------------------------------ 05-ex3
    dict(exercise="05-ex3", name="no-clamp", expect="fail", mistake="unchanged", source='''
class ClipGradient(Function):
    @staticmethod
    def forward(ctx, x, bound):
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None
'''),
    dict(exercise="05-ex3", name="clamps-input", expect="fail", mistake="x clamped", source='''
class ClipGradient(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.save_for_backward(x)
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return torch.clamp(x, -ctx.bound, ctx.bound), None
'''),
    dict(exercise="05-ex3", name="zero-to-bound", expect="fail", mistake="[0, bound]",
         source='''
class ClipGradient(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.clamp(0, ctx.bound), None
'''),
    dict(exercise="05-ex3", name="upper-only", expect="fail", mistake="upper bound",
         source='''
class ClipGradient(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return torch.minimum(grad_output, torch.tensor(ctx.bound)), None
'''),
    dict(exercise="05-ex3", name="clamp-in-place", drawn="caller's tensors unchanged", expect="fail", mistake="in place",
         source='''
class ClipGradient(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        grad_output.clamp_(-ctx.bound, ctx.bound)
        return grad_output, None
'''),
    dict(exercise="05-ex3", name="no-none-for-bound", expect="fail",
         mistake="one value per input", source='''
class ClipGradient(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.clamp(-ctx.bound, ctx.bound)
'''),
    dict(exercise="05-ex3", name="hard-coded-bound", expect="fail", mistake=None,
         relation="with bound 0.5: every item is the same", source='''
class ClipGradient(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        bound = 1.5 if ctx.bound < 5 else ctx.bound
        return grad_output.clamp(-bound, bound), None
'''),
    dict(exercise="05-ex3", name="returns-x-itself", expect="pass", mistake=None, source='''
class ClipGradient(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.clamp(min=-ctx.bound, max=ctx.bound), None
'''),
    dict(exercise="05-ex3", name="bound-as-tensor-where", expect="pass", mistake=None,
         source='''
class ClipGradient(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = float(bound)
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        b = ctx.bound
        clipped = torch.where(grad_output > b, b, grad_output)
        return torch.where(clipped < -b, -b, clipped), None
'''),
    dict(exercise="05-ex3", name="bound-on-the-class", drawn="second instance", expect="fail", mistake="stored on the class", source='''
class ClipGradient(Function):
    bound = None

    @staticmethod
    def forward(ctx, x, bound):
        ClipGradient.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        b = ClipGradient.bound
        return grad_output.clamp(-b, b), None
'''),
    dict(exercise="05-ex3", name="rescales-by-norm", expect="fail", mistake="norm", source='''
class ClipGradient(Function):
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
'''),
    dict(exercise="05-ex3", name="bound-saved-as-tensor", expect="pass", mistake=None, source='''
class ClipGradient(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.save_for_backward(torch.tensor(bound))
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        (b,) = ctx.saved_tensors
        return torch.minimum(torch.maximum(grad_output, -b), b), None
'''),
    # ------------------------------------------------------------------------ 05-ex4
    dict(exercise="05-ex4", name="slope-under-no-grad", expect="fail", mistake='second derivative is missing',
         source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        with torch.no_grad():
            slope = torch.sigmoid(x)
        return grad_output * slope
'''),
    dict(exercise="05-ex4", name="slope-from-detached-x", expect="fail", mistake='second derivative is missing',
         source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x.detach())
'''),
    dict(exercise="05-ex4", name="slope-in-numpy", expect="fail", mistake=None, relation='requires grad (create_graph=True) is False',
         source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        slope = 1 / (1 + np.exp(-x.detach().numpy()))
        return grad_output * torch.as_tensor(slope, dtype=grad_output.dtype)
'''),
    dict(exercise="05-ex4", name="slope-saved-in-setup-context", expect="fail", mistake='second derivative is missing',
         source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(torch.sigmoid(inputs[0]))

    @staticmethod
    def backward(ctx, grad_output):
        (slope,) = ctx.saved_tensors
        return grad_output * slope
'''),
    dict(exercise="05-ex4", name="once-differentiable", expect="fail", mistake='second derivative is missing',
         source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)
'''),
    dict(exercise="05-ex4", name="ctx-in-forward", expect="fail", mistake='forward takes ctx',
         source='''
class Softplus(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.nn.functional.softplus(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)
'''),
    dict(exercise="05-ex4", name="saves-the-inputs-tuple", expect="fail", mistake='tuple',
         source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)
'''),
    dict(exercise="05-ex4", name="ctx-attribute", drawn="ctx attributes", expect="fail", mistake='ctx attribute',
         source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.x = inputs[0]

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * torch.sigmoid(ctx.x)
'''),
    dict(exercise="05-ex4", name="sigmoid-of-output", expect="fail", mistake='sigmoid of the output',
         source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(y)
'''),
    dict(exercise="05-ex4", name="one-minus-sigmoid", expect="fail", mistake='1 − σ(x)',
         source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (1 - torch.sigmoid(x))
'''),
    dict(exercise="05-ex4", name="ignores-grad-output", expect="fail", mistake='ignores grad_output',
         source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return torch.sigmoid(x)
'''),
    dict(exercise="05-ex4", name="saves-output-expm1", expect="pass", mistake=None,
         source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.logaddexp(x, torch.zeros_like(x))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        return -torch.expm1(-y) * grad_output  # sigma(x) = 1 - exp(-softplus(x))
'''),
    dict(exercise="05-ex4", name="vmap-rule-and-explicit-formula", expect="pass", mistake=None,
         source='''
class Softplus(Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.where(x > 20, x, torch.log1p(torch.exp(x)))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.exp(-torch.nn.functional.softplus(-x))  # sigma(x), finite
'''),
    # ---------------------------------------------- more valid alternatives (issue 32: 3 or more)
    dict(exercise="05-ex2", name="masked-fill-in-backward", expect="pass", mistake=None,
         source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.sgn(x)

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output.masked_fill((x < -1) | (x > 1), 0.0)
'''),
    dict(exercise="05-ex4", name="softplus-by-log1p", expect="pass", mistake=None, source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.special.expit(x)
'''),
    # ---------------------------------------------- more wrong answers (issue 32: 10 or more)
    dict(exercise="05-ex3", name="clamps-only-from-above", expect="fail", mistake="Only the upper bound", source='''
class ClipGradient(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.clamp(max=ctx.bound), None
'''),
    # ------------------------------------- issue 32, item 3: inputs from the whole domain
    # σ′ in its ratio form e^-x / (1 + e^-x)²: right wherever exp(-x) is finite, NaN for
    # x < -88 in float32 (inf / inf), which the task allows.
    dict(exercise="05-ex1", name="ratio-form-of-the-sigmoid-derivative", drawn="extreme magnitudes", expect="fail",
         mistake=None, source='''
class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        e = torch.exp(-x)
        return grad_output * (1 / (1 + e) + x * e / (1 + e) ** 2)
'''),
    # softplus and its derivatives far from zero: exp(x) overflows float32 past x ≈ 88.7.
    dict(exercise="05-ex4", name="log-of-one-plus-exp", expect="fail", mistake=None,
         relation="Softplus forward holds inf", drawn="extreme magnitudes", source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.log(1 + torch.exp(x))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)
'''),
    dict(exercise="05-ex4", name="sigmoid-as-an-exp-ratio", expect="fail", mistake=None,
         relation="x.grad holds NaN", drawn="extreme magnitudes", source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.exp(x) / (1 + torch.exp(x))
'''),
    # right first derivative, but autograd's derivative of 1 / (1 + e^-x) is e^-x / (1 + e^-x)²,
    # inf / inf = NaN for x < -88
    dict(exercise="05-ex4", name="second-derivative-as-a-ratio", expect="fail", mistake=None,
         relation="d((x.grad * w).sum())/dx holds NaN", drawn="extreme magnitudes",
         source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output / (1 + torch.exp(-x))
'''),
    dict(exercise="05-ex4", name="forward-cut-at-twenty", expect="pass", mistake=None,
         drawn="extreme magnitudes", source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.where(x > 20, x, torch.log1p(torch.exp(x.clamp(max=20))))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(x)
'''),
    # A blind reviewer's answer: sigma cached on the class at the first backward, reused while
    # the shape matches. Its test cell stops where torch.func raises torch's internal assert; the
    # page said the cell had found grad(grad(...)) all zeros (the visible check ran grad before
    # grad of grad, the cell does not) and advised retain_graph=True for a backward the
    # grader's check ran once.
    dict(exercise="05-ex4", name="sigma-cached-on-the-class", expect="fail", mistake=None,
         cell="torch.func refused Softplus", source='''
class Softplus(Function):
    @staticmethod
    def forward(x):
        return torch.nn.functional.softplus(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        if getattr(Softplus, "cache", None) is None or Softplus.cache.shape != x.shape:
            Softplus.cache = torch.sigmoid(x)
        return grad_output * Softplus.cache
'''),
    # A blind reviewer's answer: the page measured only that x.grad differs; the grader now
    # names it (a mistake of its own, and a likely mistake of the test cell's)
    dict(exercise="05-ex3", name="rescales-by-largest-entry", expect="fail",
         mistake="largest entry is ±bound", cell="largest entry is ±bound", source='''
class ClipGradient(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = bound
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        m = grad_output.abs().max()
        scale = min(1.0, ctx.bound / m.item()) if m > 0 else 1.0
        return grad_output * scale, None
'''),
    # One rule in the four exercises (the lesson's statement, torch's documentation): a tensor
    # backward needs is saved with ctx.save_for_backward; a ctx attribute holds only what is
    # not a tensor. 05-ex2 and 05-ex3 passed a tensor kept on ctx, 05-ex1 a saved x beside a
    # tensor kept on ctx.
    dict(exercise="05-ex2", name="mask-kept-on-ctx", expect="fail", mistake="ctx attribute",
         source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mask = x.abs() <= 1
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.mask
'''),
    dict(exercise="05-ex2", name="x-kept-on-ctx", expect="fail", mistake="ctx attribute",
         source='''
class SignSTE(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        return torch.sign(x)

    @staticmethod
    def backward(ctx, grad_output):
        return torch.where(ctx.x.abs() <= 1, grad_output, torch.zeros_like(grad_output))
'''),
    dict(exercise="05-ex3", name="bound-tensor-on-ctx", expect="fail",
         mistake="kept as a ctx attribute", source='''
class ClipGradient(Function):
    @staticmethod
    def forward(ctx, x, bound):
        ctx.bound = torch.tensor(bound)
        return x.clone()

    @staticmethod
    def backward(ctx, grad_output):
        return torch.minimum(torch.maximum(grad_output, -ctx.bound), ctx.bound), None
'''),
    dict(exercise="05-ex1", name="sigmoid-kept-on-ctx", expect="fail", mistake=None,
         relation="kept as a ctx attribute", source='''
class SiLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.sig = torch.sigmoid(x)
        return x * ctx.sig

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        s = ctx.sig
        return grad_output * (s + x * s * (1 - s))
'''),
    # a blind review's answer (05-ex1/w_class_cache.py): the copy is on the class, not on ctx
    dict(exercise="05-ex1", name="copy-on-the-class", expect="fail",
         mistake=None, source='''
class SiLU(Function):
    saved = None

    @staticmethod
    def forward(ctx, x):
        SiLU.saved = x.detach().clone()
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad_output):
        x = SiLU.saved
        s = torch.sigmoid(x)
        return grad_output * (s + x * s * (1 - s))
'''),
]
