"""Answers to lesson 03's exercises that the grader must fail (naming the mistake) or pass.

Each entry: the exercise, a short name, whether it must "pass" or "fail", for a failing one a
phrase that the feedback's named mistake must contain (None: any failure will do) or a phrase
of the relation it must state (`relation=`), and the source that replaces the answer cell.
tests/test_scenarios.py runs them in-process.
"""

VARIANTS = [
    # ------------------------------------------------------------ 03-ex1 freeze_entries
    dict(exercise="03-ex1", name="inverted-mask", expect="fail", mistake="wrong way round",
         source='''
def freeze_entries(param, mask):
    return param.register_hook(lambda grad: grad * mask)
'''),
    dict(exercise="03-ex1", name="in-place-index", expect="fail", mistake="in place", source='''
def freeze_entries(param, mask):
    def hook(grad):
        grad[mask] = 0
        return grad
    return param.register_hook(hook)
'''),
    dict(exercise="03-ex1", name="masked-fill-underscore", expect="fail", mistake="in place",
         source='''
def freeze_entries(param, mask):
    return param.register_hook(lambda grad: grad.masked_fill_(mask, 0.0))
'''),
    dict(exercise="03-ex1", name="returns-none", expect="fail", mistake="returns None",
         source='''
def freeze_entries(param, mask):
    def hook(grad):
        new_grad = grad.masked_fill(mask, 0.0)
    return param.register_hook(hook)
'''),
    dict(exercise="03-ex1", name="no-handle", expect="fail", mistake="no handle", source='''
def freeze_entries(param, mask):
    param.register_hook(lambda grad: grad.masked_fill(mask, 0.0))
'''),
    dict(exercise="03-ex1", name="hard-coded-visible", expect="fail", mistake=None,
         relation="another shape than the one it received", source='''
def freeze_entries(param, mask):
    return param.register_hook(lambda grad: torch.tensor([[0.0, 0.0], [2.0, 2.0], [0.0, 3.0]]))
'''),
    dict(exercise="03-ex1", name="global-handle-removes-previous", expect="fail", mistake=None,
         relation="right on the test cell's example", source='''
_handle = None


def freeze_entries(param, mask):
    global _handle
    if _handle is not None:
        _handle.remove()
    _handle = param.register_hook(lambda grad: grad.masked_fill(mask, 0.0))
    return _handle
'''),
    dict(exercise="03-ex1", name="mask-read-from-a-global", expect="fail", mistake=None,
         relation="right on the test cell's example", source='''
def freeze_entries(param, mask):
    global _mask
    _mask = mask
    return param.register_hook(lambda grad: grad.masked_fill(_mask, 0.0))
'''),
    dict(exercise="03-ex1", name="torch-where", expect="pass", mistake=None, source='''
def freeze_entries(param, mask):
    def zero_frozen(grad):
        return torch.where(mask, torch.zeros_like(grad), grad)
    handle = param.register_hook(zero_frozen)
    return handle
'''),
    dict(exercise="03-ex1", name="multiply-by-not-mask", expect="pass", mistake=None, source='''
def freeze_entries(param, mask):
    keep = (~mask).to(param.dtype)
    return param.register_hook(lambda grad: grad * keep)
'''),

    dict(exercise="03-ex3", name="global-handles-list", expect="fail", mistake=None,
         relation="times the expected value", source='''
handles = []


def sgd_in_backward(params, lr):
    def step(param):
        param.add_(param.grad, alpha=-lr)
        param.grad = None
    for param in params:
        handles.append(param.register_post_accumulate_grad_hook(step))
    return handles
'''),

    # ------------------------------------------------------------ 03-ex2 clip_and_count
    dict(exercise="03-ex2", name="abs-ignores-low", expect="fail", mistake="lower bound",
         source='''
def clip_and_count(tensor, low, high):
    calls = []
    def clip(grad):
        calls.append(int((grad.abs() > high).sum()))
        return grad.clamp(low, high)
    return tensor.register_hook(clip), calls
'''),
    dict(exercise="03-ex2", name="torch-where", expect="pass", mistake=None,
         source='''
def clip_and_count(tensor, low, high):
    counts = []
    def hook(grad):
        outside = (grad < low) | (grad > high)
        counts.append(int(outside.sum().item()))
        return torch.where(grad < low, torch.full_like(grad, low),
                           torch.where(grad > high, torch.full_like(grad, high), grad))
    handle = tensor.register_hook(hook)
    return handle, counts
'''),
    dict(exercise="03-ex2", name="clamp-in-place", expect="fail", mistake="in place", source='''
def clip_and_count(tensor, low, high):
    calls = []
    def clip(grad):
        calls.append(int(((grad < low) | (grad > high)).sum()))
        return grad.clamp_(low, high)
    return tensor.register_hook(clip), calls
'''),
    dict(exercise="03-ex2", name="returns-none", expect="fail", mistake="returns None", source='''
def clip_and_count(tensor, low, high):
    calls = []
    def clip(grad):
        calls.append(int(((grad < low) | (grad > high)).sum()))
        clipped = torch.clamp(grad, low, high)
    return tensor.register_hook(clip), calls
'''),
    dict(exercise="03-ex2", name="shared-global-list", cell="a list of its own", expect="fail", mistake=None,
         relation="more items before the expected ones",
         source='''
calls = []

def clip_and_count(tensor, low, high):
    def clip(grad):
        calls.append(int(((grad < low) | (grad > high)).sum()))
        return grad.clamp(low, high)
    return tensor.register_hook(clip), calls
'''),
    dict(exercise="03-ex2", name="counts-bounds", expect="fail", mistake="strictly", source='''
def clip_and_count(tensor, low, high):
    calls = []
    def clip(grad):
        calls.append(int((grad <= low).sum() + (grad >= high).sum()))
        return grad.clamp(low, high)
    return tensor.register_hook(clip), calls
'''),
    dict(exercise="03-ex2", name="symmetric-clamp", expect="fail", mistake="symmetric",
         source='''
def clip_and_count(tensor, low, high):
    calls = []

    def clip(grad):
        calls.append(int((grad < low).sum() + (grad > high).sum()))
        return torch.clamp(grad, -high, high)

    return tensor.register_hook(clip), calls
'''),
    dict(exercise="03-ex2", name="tensor-counts", expect="fail", mistake="plain ints", source='''
def clip_and_count(tensor, low, high):
    calls = []
    def clip(grad):
        calls.append(((grad < low) | (grad > high)).sum())
        return grad.clamp(low, high)
    return tensor.register_hook(clip), calls
'''),
    # The test cell's second call (one entry to clip) catches the count fitted to the example.
    dict(exercise="03-ex2", name="hard-coded-visible", expect="fail", mistake=None,
         relation="the 1st item of the counts of the second call (the hook on p) is three times",
         source='''
def clip_and_count(tensor, low, high):
    calls = []
    def clip(grad):
        calls.append(3)
        return grad.clamp(low, high)
    return tensor.register_hook(clip), calls
'''),
    dict(exercise="03-ex2", name="count-by-comparison", expect="pass", mistake=None, source='''
def clip_and_count(tensor, low, high):
    calls = []
    def clip(grad):
        clipped = grad.clamp(min=low, max=high)
        calls.append((clipped != grad).sum().item())
        return clipped
    return tensor.register_hook(clip), calls
'''),

    # ------------------------------------------------------------ 03-ex3 sgd_in_backward
    dict(exercise="03-ex3", name="uphill", expect="fail", mistake="up the gradient", source='''
def sgd_in_backward(params, lr):
    def step(param):
        param += lr * param.grad
        param.grad = None
    return [p.register_post_accumulate_grad_hook(step) for p in params]
'''),
    dict(exercise="03-ex3", name="keeps-grad", expect="fail", mistake="still filled", source='''
def sgd_in_backward(params, lr):
    def step(param):
        param.sub_(lr * param.grad)
    return [p.register_post_accumulate_grad_hook(step) for p in params]
'''),
    dict(exercise="03-ex3", name="register-hook", expect="fail", mistake="register_hook",
         source='''
def sgd_in_backward(params, lr):
    handles = []
    for param in params:
        def hook(grad, param=param):
            with torch.no_grad():
                param -= lr * grad
        handles.append(param.register_hook(hook))
    return handles
'''),
    # a def in the loop fails as a lambda does: the message names both
    dict(exercise="03-ex3", name="late-binding-closure", expect="fail",
         mistake="TypeError, most likely because param.grad was None: each hook must step the "
                 "tensor it receives as its argument, while a hook defined in a loop (a lambda "
                 "or a def)",
         cell="a hook defined in a loop (a lambda or a def) that uses the loop variable",
         source='''
def sgd_in_backward(params, lr):
    handles = []
    for param in params:
        def step(_):
            param.add_(param.grad, alpha=-lr)
            param.grad = None
        handles.append(param.register_post_accumulate_grad_hook(step))
    return handles
'''),
    dict(exercise="03-ex3", name="lambda-returns-a-tuple", expect="fail", mistake=None,
         relation="a hook returned a value", source='''
def sgd_in_backward(params, lr):
    handles = []
    for param in params:
        handles.append(param.register_post_accumulate_grad_hook(
            lambda p: (p.sub_(lr * p.grad), setattr(p, "grad", None))))
    return handles
'''),
    dict(exercise="03-ex3", name="rebinds", expect="fail", mistake="did not move", source='''
def sgd_in_backward(params, lr):
    def step(param):
        param = param - lr * param.grad
        param.grad = None
    return [p.register_post_accumulate_grad_hook(step) for p in params]
'''),
    dict(exercise="03-ex3", name="no-list", expect="fail", mistake="return a list", source='''
def sgd_in_backward(params, lr):
    def step(param):
        param.add_(param.grad, alpha=-lr)
        param.grad = None
    for p in params:
        p.register_post_accumulate_grad_hook(step)
'''),
    dict(exercise="03-ex3", name="hard-coded-visible", expect="fail", mistake=None,
         relation="right on the test cell's example", source='''
def sgd_in_backward(params, lr):
    def step(param):
        with torch.no_grad():
            param.copy_(torch.tensor([1.5, -0.25]) if param.dim() else torch.tensor(0.75))
        param.grad = None
    return [p.register_post_accumulate_grad_hook(step) for p in params]
'''),
    dict(exercise="03-ex3", name="default-argument-data", expect="pass", mistake=None, source='''
def sgd_in_backward(params, lr):
    handles = []
    for param in params:
        def step(_, param=param):
            param.data -= lr * param.grad.data
            param.grad = None
        handles.append(param.register_post_accumulate_grad_hook(step))
    return handles
'''),
    # -------------------------------- blind review (issue 32): the step keeps the storage
    dict(exercise="03-ex3", name="assigns-param-data", expect="fail", mistake="new storage",
         cell="got new storage", source='''
def sgd_in_backward(params, lr):
    def step(p):
        p.data = p.data - lr * p.grad
        p.grad = None
    return [p.register_post_accumulate_grad_hook(step) for p in params]
'''),
    # ------------------------------------------------ more slips of each exercise (issue 22)
    dict(exercise="03-ex1", name="keeps-masked-entries", expect="fail", mistake="wrong way round",
         source='''
def freeze_entries(param, mask):
    return param.register_hook(lambda grad: grad * mask.float())
'''),
    dict(exercise="03-ex1", name="zeroes-everything", expect="fail", mistake=None,
         relation="all zeros", source='''
def freeze_entries(param, mask):
    return param.register_hook(lambda grad: torch.zeros_like(grad))
'''),
    dict(exercise="03-ex1", name="multiplies-in-place", expect="fail", mistake="in place",
         source='''
def freeze_entries(param, mask):
    return param.register_hook(lambda grad: grad.mul_(~mask))
'''),
    dict(exercise="03-ex2", name="counts-after-clamping", expect="fail", mistake=None,
         relation="holds only zeros", source='''
def clip_and_count(tensor, low, high):
    calls = []
    def clip(grad):
        clipped = grad.clamp(low, high)
        calls.append(int(((clipped < low) | (clipped > high)).sum()))
        return clipped
    return tensor.register_hook(clip), calls
'''),
    dict(exercise="03-ex3", name="zeroes-grad-instead-of-none", expect="fail", mistake=None,
         cell="the hook should set param.grad = None", not_said="should be None", source='''
def sgd_in_backward(params, lr):
    def step(param):
        with torch.no_grad():
            param -= lr * param.grad
        param.grad.zero_()
    return [p.register_post_accumulate_grad_hook(step) for p in params]
'''),
    dict(exercise="03-ex3", name="no-grad-block", expect="pass", mistake=None, source='''
def sgd_in_backward(params, lr):
    handles = []
    for p in params:
        def step(param):
            with torch.no_grad():
                param -= lr * param.grad
            param.grad = None
        handles.append(p.register_post_accumulate_grad_hook(step))
    return handles
'''),
    dict(exercise="03-ex3", name="handles-reversed", expect="fail", mistake=None,
         relation="the right items in", source='''
def sgd_in_backward(params, lr):
    def step(param):
        param.add_(param.grad, alpha=-lr)
        param.grad = None
    handles = []
    for param in params:
        handles.insert(0, param.register_post_accumulate_grad_hook(step))
    return handles
'''),
    dict(exercise="03-ex2", name="calls-as-default-argument", cell="a list of its own", expect="fail", mistake=None,
         relation="depends on the order of calls", source='''
def clip_and_count(tensor, low, high, calls=[]):
    def clip(grad):
        calls.append(int(((grad < low) | (grad > high)).sum()))
        return grad.clamp(low, high)
    return tensor.register_hook(clip), calls
'''),
    # ---------------------------------------------- more valid alternatives (issue 32: 3 or more)
    dict(exercise="03-ex1", name="index-put-on-a-clone", expect="pass", mistake=None, source='''
def freeze_entries(param, mask):
    def hook(grad):
        frozen = grad.clone()
        frozen[mask] = 0
        return frozen
    return param.register_hook(hook)
'''),
    dict(exercise="03-ex2", name="where-and-count-nonzero", expect="pass", mistake=None, source='''
def clip_and_count(tensor, low, high):
    counts = []
    def hook(grad):
        outside = (grad < low).logical_or(grad > high)
        counts.append(int(torch.count_nonzero(outside)))
        return torch.where(grad < low, torch.full_like(grad, low),
                           torch.where(grad > high, torch.full_like(grad, high), grad))
    handle = tensor.register_hook(hook)
    return handle, counts
'''),
    dict(exercise="03-ex3", name="sub-under-no-grad-and-loop", expect="pass", mistake=None, source='''
def sgd_in_backward(params, lr):
    handles = []
    for param in params:
        def step(p):
            with torch.no_grad():
                p.sub_(lr * p.grad)
            p.grad = None
        handles.append(param.register_post_accumulate_grad_hook(step))
    return handles
'''),
    # ------------------------------------- issue 32, item 3: inputs from the whole domain
    # The learning rate kept in a module-level dict: right while one set of parameters is
    # registered, wrong for the first set once a second registers with another rate.
    dict(exercise="03-ex3", name="lr-in-a-module-level-dict", expect="fail", mistake=None,
         source='''
SETTINGS = {}


def sgd_in_backward(params, lr):
    SETTINGS["lr"] = lr

    def step(param):
        with torch.no_grad():
            param -= SETTINGS["lr"] * param.grad
        param.grad = None

    return [p.register_post_accumulate_grad_hook(step) for p in params]
'''),
    # Section 7's post-accumulate hook, taught just before: every leaf check passes, but an
    # intermediate tensor refuses it (the test cell said nothing of that until issue 33).
    dict(exercise="03-ex1", name="post-accumulate-grad-hook", cell="may be an intermediate tensor",
         expect="fail", mistake=None, source='''
def freeze_entries(param, mask):
    def zero_frozen(p):
        p.grad = p.grad.masked_fill(mask, 0.0)
    return param.register_post_accumulate_grad_hook(zero_frozen)
'''),
    # blind round: registers the hook on param.clone() 'so as not to touch param': the clone is
    # not in the graph, so the hook never runs
    dict(exercise='03-ex1', name='blind-hook-on-clone', expect='fail', mistake=None, not_named='does not return it', cell='no hook changed it', source='''
def freeze_entries(param, mask):
    shadow = param.clone()
    return shadow.register_hook(lambda g: g.masked_fill(mask, 0.0))
'''),
    # blind round: computes the keep-mask with mask.logical_not_(), which inverts the caller's
    # mask tensor in place
    dict(exercise='03-ex1', name='blind-mask-inverted-in-place', expect='fail', mistake=None, relation="caller's masks unchanged", source='''
def freeze_entries(param, mask):
    keep = mask.logical_not_()
    return param.register_hook(lambda g: g * keep)
'''),
    # blind round: iterates over set(params) to 'avoid duplicates', so the handles come back in
    # arbitrary order, not the order of params
    dict(exercise='03-ex3', name='blind-set-dedupe', expect='fail', mistake=None, relation='a later one is not', source='''
def sgd_in_backward(params, lr):
    def step(p):
        with torch.no_grad():
            p.add_(p.grad, alpha=-lr)
        p.grad = None
    return [p.register_post_accumulate_grad_hook(step) for p in set(params)]
'''),
    # blind round: writes the hook as a lambda whose tuple expression returns a value; a post-
    # accumulate-grad hook must return None
    dict(exercise='03-ex3', name='blind-lambda-returns-value', expect='fail', mistake=None, cell='a post-accumulate-grad hook must return None', cell_not='param.grad was None', source='''
def sgd_in_backward(params, lr):
    return [p.register_post_accumulate_grad_hook(
                lambda t: (t.detach().sub_(lr * t.grad), setattr(t, "grad", None)))
            for p in params]
'''),
    # blind round: steps inside register_hook (before accumulation) and writes `p -= ...` in a
    # nested def, which makes p a local name (UnboundLocalError)
    dict(exercise='03-ex3', name='blind-tensor-hook-step-unbound', expect='fail', mistake=None, cell='registered hooks with register_hook', source='''
def sgd_in_backward(params, lr):
    def make(p):
        def hook(g):
            with torch.no_grad():
                p -= lr * g
            p.grad = None
        return hook
    return [p.register_hook(make(p)) for p in params]
'''),
]
