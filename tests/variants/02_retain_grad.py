"""Answers to lesson 02's exercises that the grader must fail (naming the mistake) or pass.

Each entry: the exercise, a short name, whether it must "pass" or "fail", for a failing one a
phrase that the feedback's named mistake must contain (None: any failure will do), and the
source that replaces the answer cell. tests/test_scenarios.py runs them in-process.
"""

VARIANTS = [
    # ------------------------------------------------------------ 02-ex1 intermediate_gradient
    dict(exercise="02-ex1", name="returns-x-grad", expect="fail", mistake="x.grad", source='''
def intermediate_gradient(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    h.retain_grad()
    (h ** 3).sum().backward()
    return x.grad
'''),
    dict(exercise="02-ex1", name="no-retain-grad", expect="fail", mistake="h is not a leaf",
         source='''
def intermediate_gradient(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    loss = (h ** 3).sum()
    loss.backward()
    return h.grad
'''),
    dict(exercise="02-ex1", name="retain-after-backward", expect="fail", mistake="call it before backward()",
         source='''
def intermediate_gradient(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    (h ** 3).sum().backward()
    h.retain_grad()
    return h.grad
'''),
    dict(exercise="02-ex1", name="mean", cell="L is a mean of h**3, not a sum", expect="fail", mistake="not a mean", source='''
def intermediate_gradient(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    h.retain_grad()
    (h ** 3).mean().backward()
    return h.grad
'''),
    dict(exercise="02-ex1", name="by-hand", expect="fail", mistake="by hand", source='''
def intermediate_gradient(values):
    x = torch.tensor(values)
    h = x * x
    return 3 * h ** 2
'''),
    dict(exercise="02-ex1", name="hard-coded-visible", expect="fail", mistake=None,
         relation="the test cell example's value", source='''
def intermediate_gradient(values):
    return torch.tensor([3.0, 48.0, 0.1875])
'''),
    # The rule is judged by its effect: a retain_grad() call that keeps nothing earns nothing.
    dict(exercise="02-ex1", name="by-hand-with-no-op-retain-grad", expect="fail",
         mistake="by hand", source='''
def intermediate_gradient(values):
    x = torch.tensor(values, requires_grad=True)
    x.retain_grad()
    h = x.detach() * x.detach()
    return 3 * h ** 2
'''),
    dict(exercise="02-ex1", name="float64-pow", expect="pass", mistake=None, source='''
def intermediate_gradient(values):
    x = torch.tensor(values, dtype=torch.float64).requires_grad_()
    h = x.pow(2)
    h.retain_grad()
    torch.sum(h.pow(3)).backward()
    return h.grad
'''),

    # -------------------------------- blind review (issue 32): state kept between calls
    dict(exercise="02-ex1", name="caches-the-first-result", expect="fail", mistake=None,
         source='''
_RESULT = []
def intermediate_gradient(values):
    if _RESULT:
        return _RESULT[0]
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    h.retain_grad()
    (h**3).sum().backward()
    _RESULT.append(h.grad)
    return h.grad
'''),
    # ------------------------------------------------------------ 02-ex2 collect_gradients
    dict(exercise="02-ex2", name="late-binding-lambda", expect="fail", mistake="one name",
         source='''
def collect_gradients(named, loss):
    grads, handles = {}, []
    for name, tensor in named.items():
        handles.append(tensor.register_hook(lambda grad: grads.update({name: grad})))
    loss.backward()
    for handle in handles:
        handle.remove()
    return grads
'''),
    # the same late binding with a def: the lesson names the closure, not the lambda
    dict(exercise="02-ex2", name="late-binding-def", expect="fail",
         mistake="a hook defined in a loop (a lambda or a def)",
         cell="a hook defined in a loop (a lambda or a def)", source='''
def collect_gradients(named, loss):
    grads, handles = {}, []
    for name, tensor in named.items():
        def hook(grad):
            grads[name] = grad
        handles.append(tensor.register_hook(hook))
    loss.backward()
    for handle in handles:
        handle.remove()
    return grads
'''),
    dict(exercise="02-ex2", name="retain-grad", expect="fail", mistake="retain_grad() was used",
         source='''
def collect_gradients(named, loss):
    for tensor in named.values():
        tensor.retain_grad()
    loss.backward()
    return {name: tensor.grad for name, tensor in named.items()}
'''),
    dict(exercise="02-ex2", name="autograd-grad", expect="fail", mistake="torch.autograd.grad",
         source='''
def collect_gradients(named, loss):
    names = list(named)
    grads = torch.autograd.grad(loss, [named[n] for n in names])
    return dict(zip(names, grads))
'''),
    dict(exercise="02-ex2", name="autograd-grad-then-backward", expect="fail",
         mistake="torch.autograd.grad", source='''
def collect_gradients(named, loss):
    grads = dict(zip(named, torch.autograd.grad(loss, list(named.values()),
                                                retain_graph=True)))
    loss.backward()
    return grads
'''),
    dict(exercise="02-ex2", name="hooks-not-removed", expect="fail", mistake="not removed",
         source='''
def collect_gradients(named, loss):
    grads = {}
    for name, tensor in named.items():
        tensor.register_hook(save_into(grads, name))
    loss.backward()
    return grads
'''),
    dict(exercise="02-ex2", name="shared-dict", cell="a dict of its own", expect="fail", mistake=None, relation="expected entries, and more",
         source='''
GRADS = {}

def collect_gradients(named, loss):
    handles = [t.register_hook(save_into(GRADS, n)) for n, t in named.items()]
    loss.backward()
    for h in handles:
        h.remove()
    return GRADS
'''),
    dict(exercise="02-ex2", name="hard-coded-visible", expect="fail", mistake=None,
         relation="a hook registered on every tensor is False", source='''
def collect_gradients(named, loss):
    loss.backward()
    return {"act": torch.tensor([4.0, 2.0]), "pre": torch.tensor([4.0, 0.0])}
'''),
    dict(exercise="02-ex2", name="default-argument-clone", expect="pass", mistake=None,
         source='''
def collect_gradients(named, loss):
    grads = {}
    handles = []
    for name, tensor in named.items():
        def keep(grad, name=name):
            grads[name] = grad.clone()
        handles.append(tensor.register_hook(keep))
    try:
        loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    return grads
'''),
    dict(exercise="02-ex2", name="partial-with-blocks", expect="pass", mistake=None, source='''
import functools

def collect_gradients(named, loss):
    grads = {}
    def store(name, grad):
        grads[name] = grad
    handles = [t.register_hook(functools.partial(store, n)) for n, t in named.items()]
    loss.backward()
    for handle in handles:
        handle.remove()
    return grads
'''),

    # ------------------------------------------------------------ 02-ex3 chain_gradients
    dict(exercise="02-ex3", name="reversed", expect="fail", mistake="reverse order", source='''
def chain_gradients(values, factors):
    h = torch.tensor(values, requires_grad=True)
    steps = []
    for f in factors:
        h = h * f + 1
        h.retain_grad()
        steps.insert(0, h)
    (h ** 2).sum().backward()
    return [s.grad for s in steps]
'''),
    dict(exercise="02-ex3", name="all-last", expect="fail", mistake="last step's gradient",
         source='''
def chain_gradients(values, factors):
    h = torch.tensor(values, requires_grad=True)
    for f in factors:
        h = h * f + 1
        h.retain_grad()
    (h ** 2).sum().backward()
    return [h.grad for f in factors]
'''),
    dict(exercise="02-ex3", name="shifted", expect="fail", mistake="shifted by one", source='''
def chain_gradients(values, factors):
    h = torch.tensor(values, requires_grad=True)
    kept = []
    for f in factors:
        kept.append(h)
        h = h * f + 1
        h.retain_grad()
    (h ** 2).sum().backward()
    return [k.grad for k in kept]
'''),
    dict(exercise="02-ex3", name="only-last-retained", expect="fail", mistake="Only the last",
         source='''
def chain_gradients(values, factors):
    h = torch.tensor(values, requires_grad=True)
    steps = []
    for f in factors:
        h = h * f + 1
        steps.append(h)
    h.retain_grad()
    (h ** 2).sum().backward()
    return [s.grad for s in steps]
'''),
    dict(exercise="02-ex3", name="loss-of-every-step", expect="fail", mistake="every step's",
         source='''
def chain_gradients(values, factors):
    h = torch.tensor(values, requires_grad=True)
    steps, loss = [], 0
    for f in factors:
        h = h * f + 1
        h.retain_grad()
        steps.append(h)
        loss = loss + (h ** 2).sum()
    loss.backward()
    return [s.grad for s in steps]
'''),
    dict(exercise="02-ex3", name="hard-coded-visible", expect="fail", mistake=None,
         relation="retain_grad() called for every step is False", source='''
def chain_gradients(values, factors):
    return [torch.tensor([60.0, -12.0]), torch.tensor([20.0, -4.0])]
'''),
    dict(exercise="02-ex3", name="tuple-float64", expect="pass", mistake=None, source='''
def chain_gradients(values, factors):
    h = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    steps = []
    for f in factors:
        h = torch.add(h * f, 1.0)
        h.retain_grad()
        steps.append(h)
    loss = h.pow(2).sum()
    loss.backward()
    return [s.grad for s in steps]
'''),

    # ------------------------------------------------ more slips of each exercise (issue 22)
    dict(exercise="02-ex1", name="h-made-a-leaf", expect="fail", mistake=None,
         relation="an intermediate tensor retains its gradient is False", source='''
def intermediate_gradient(values):
    x = torch.tensor(values)
    h = (x * x).requires_grad_()
    (h ** 3).sum().backward()
    return h.grad
'''),
    dict(exercise="02-ex1", name="returns-a-list", expect="fail", mistake=None,
         relation="a list (or tuple) of the right numbers", not_said="torch.stack", source='''
def intermediate_gradient(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    h.retain_grad()
    (h ** 3).sum().backward()
    return h.grad.tolist()
'''),
    dict(exercise="02-ex1", name="backward-twice", expect="fail", mistake=None,
         relation="×2", source='''
def intermediate_gradient(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    h.retain_grad()
    L = (h ** 3).sum()
    L.backward(retain_graph=True)
    L.backward()
    return h.grad
'''),
    dict(exercise="02-ex1", name="autograd-backward", expect="pass", mistake=None, source='''
def intermediate_gradient(values):
    x = torch.tensor(values).requires_grad_()
    h = x.pow(2)
    h.retain_grad()
    torch.autograd.backward(h.pow(3).sum())
    return h.grad
'''),
    dict(exercise="02-ex2", name="removed-before-backward", cell="the dict is empty", expect="fail",
         mistake="removed before loss.backward()", source='''
def collect_gradients(named, loss):
    grads = {}
    for name, t in named.items():
        handle = t.register_hook(lambda g, name=name: grads.__setitem__(name, g))
        handle.remove()
    loss.backward()
    return grads
'''),
    dict(exercise="02-ex2", name="returns-a-list", expect="fail", mistake=None,
         relation="a list where a dict", source='''
def collect_gradients(named, loss):
    grads, handles = {}, []
    for name, t in named.items():
        handles.append(t.register_hook(lambda g, name=name: grads.__setitem__(name, g)))
    loss.backward()
    for h in handles:
        h.remove()
    return [grads[name] for name in named]
'''),
    dict(exercise="02-ex3", name="mean", expect="fail", mistake="divided by the number",
         source='''
def chain_gradients(values, factors):
    h = torch.tensor(values, requires_grad=True)
    steps = []
    for f in factors:
        h = h * f + 1
        h.retain_grad()
        steps.append(h)
    (h ** 2).mean().backward()
    return [s.grad for s in steps]
'''),
    dict(exercise="02-ex3", name="leaf-first", expect="fail", mistake=None,
         relation="more items before the expected ones", source='''
def chain_gradients(values, factors):
    x = torch.tensor(values, requires_grad=True)
    h, steps = x, []
    for f in factors:
        h = h * f + 1
        h.retain_grad()
        steps.append(h)
    (h ** 2).sum().backward()
    return [x.grad] + [s.grad for s in steps]
'''),
    dict(exercise="02-ex3", name="without-plus-one", expect="fail", mistake=None,
         relation="shifted by one constant", source='''
def chain_gradients(values, factors):
    h = torch.tensor(values, requires_grad=True)
    steps = []
    for f in factors:
        h = h * f
        h.retain_grad()
        steps.append(h)
    (h ** 2).sum().backward()
    return [s.grad for s in steps]
'''),
    dict(exercise="02-ex3", name="list-comprehension-of-grads", expect="pass", mistake=None,
         source='''
def chain_gradients(values, factors):
    steps = [torch.tensor(values, requires_grad=True)]
    for f in factors:
        steps.append(steps[-1] * f + 1)
        steps[-1].retain_grad()
    steps[-1].pow(2).sum().backward()
    return [step.grad for step in steps[1:]]
'''),
    # A dict kept between calls (a default argument): the two-orders scenario says so.
    dict(exercise="02-ex2", name="dict-as-default-argument", cell="a dict of its own", expect="fail", mistake=None,
         relation="depends on the order of calls", source='''
def collect_gradients(named, loss, grads={}):
    handles = [t.register_hook(save_into(grads, n)) for n, t in named.items()]
    loss.backward()
    for h in handles:
        h.remove()
    return grads
'''),
    # Issue 32: the test cell printed "passed" and grading gave 0 (retain_grad() is the rule).
    dict(exercise="02-ex1", name="autograd-grad", expect="fail", mistake=None,
         cell="h did not keep them", source='''
def intermediate_gradient(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    return torch.autograd.grad((h ** 3).sum(), h)[0]
'''),
    # Issue 33: each step made from x, not from the step before: every step retains its
    # gradient, and the test cell says so instead of asking for retain_grad().
    dict(exercise="02-ex3", name="steps-not-chained", expect="fail", mistake=None,
         relation="is None where a float32 tensor was expected",
         cell="L does not depend on that step", source='''
def chain_gradients(values, factors):
    x = torch.tensor(values, requires_grad=True)
    steps = []
    for factor in factors:
        h = x * factor + 1
        h.retain_grad()
        steps.append(h)
    (steps[-1] ** 2).sum().backward()
    return [step.grad for step in steps]
'''),
    # ---------------------------------------------- more valid alternatives (issue 32: 3 or more)
    dict(exercise="02-ex1", name="loss-as-einsum", expect="pass", mistake=None, source='''
def intermediate_gradient(values):
    x = torch.tensor(values, dtype=torch.float32, requires_grad=True)
    h = x.pow(2)
    h.retain_grad()
    torch.einsum("i,i->", h ** 2, h).backward()
    return h.grad
'''),
    dict(exercise="02-ex2", name="handles-in-a-dict", expect="pass", mistake=None, source='''
def collect_gradients(named, loss):
    grads = {}
    handles = {name: t.register_hook(save_into(grads, name)) for name, t in named.items()}
    loss.backward()
    for handle in handles.values():
        handle.remove()
    return dict(grads)
'''),
    dict(exercise="02-ex3", name="steps-in-a-while-loop", expect="pass", mistake=None, source='''
def chain_gradients(values, factors):
    h = torch.tensor(values, requires_grad=True)
    steps, k = [], 0
    while k < len(factors):
        h = torch.add(torch.mul(h, factors[k]), 1.0)
        h.retain_grad()
        steps.append(h)
        k += 1
    h.pow(2).sum().backward()
    return [s.grad for s in steps]
'''),
    # ------------------------------------- issue 32, item 3: inputs from the whole domain
    # h³ written as exp(3 log h): right for h > 0 (every value the old draws made), NaN where
    # an entry is zero, which the task allows.
    dict(exercise="02-ex1", name="cube-through-log", expect="fail", mistake=None, source='''
def intermediate_gradient(values):
    x = torch.tensor(values, requires_grad=True)
    h = x * x
    h.retain_grad()
    torch.exp(3 * torch.log(h)).sum().backward()
    return h.grad
'''),
    # blind round: returns h.grad.tolist(), a list of Python floats, instead of the tensor
    dict(exercise='02-ex1', name='blind-returns-list', expect='fail', mistake=None, relation='right numbers', not_said='torch.stack', source='''
def intermediate_gradient(values):
    x = torch.tensor(values, dtype=torch.float32, requires_grad=True)
    h = x * x
    h.retain_grad()
    (h ** 3).sum().backward()
    return h.grad.tolist()
'''),
    # blind round: registers each hook on t.clone() (not in loss's graph), so no hook runs and
    # the dict stays empty; handles are removed after backward
    dict(exercise='02-ex2', name='blind-hooks-on-clones', expect='fail', mistake=None, not_named='removed before', source='''
def collect_gradients(named, loss):
    grads, handles = {}, []
    for name, t in named.items():
        handles.append(t.clone().register_hook(lambda g, name=name: grads.__setitem__(name, g)))
    loss.backward()
    for h in handles:
        h.remove()
    return grads
'''),
    # blind round: hooks only the intermediates and reads a leaf's gradient from .grad, which
    # holds what earlier passes accumulated (caught only when the leaf was drawn into named)
    dict(exercise='02-ex2', name='blind-leaf-reads-grad', expect='fail', mistake=None, source='''
def collect_gradients(named, loss):
    grads, handles = {}, []
    for name, t in named.items():
        if not t.is_leaf:
            handles.append(t.register_hook(lambda g, name=name: grads.__setitem__(name, g)))
    loss.backward()
    for h in handles:
        h.remove()
    for name, t in named.items():
        if t.is_leaf:
            grads[name] = t.grad
    return grads
'''),
]
