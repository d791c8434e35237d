"""Answers to lesson 07's exercises that the grader must fail (naming the mistake) or pass.

Each entry: the exercise, a short name, whether it must "pass" or "fail", for a failing one a
phrase that the feedback's named mistake must contain (None: any failure will do), and the
source that replaces the answer cell. tests/test_scenarios.py runs them in-process.
"""

_STEEPEST = '''

def steepest_drop(norms):
    names = list(norms)
    ratios = {name: norms[name] / norms[after] for name, after in zip(names, names[1:])}
    return min(ratios, key=ratios.get)
'''

_NORMS = '''
def output_grad_norms(model, images, labels):
    names = [name for name, child in model.named_children()
             if isinstance(child, nn.Linear)]
    norms = {}
    handles = []
    for name in names:
        def forward_hook(module, inputs, output, name=name):
            output.register_hook(
                lambda grad: norms.__setitem__(name, grad.norm().item()))
        handles.append(model.get_submodule(name).register_forward_hook(forward_hook))
    try:
        F.cross_entropy(model(images), labels).backward()
    finally:
        for handle in handles:
            handle.remove()
    return {name: norms[name] for name in names}
'''

VARIANTS = [
    # ------------------------------------------------------------------ 07-ex1
    dict(exercise="07-ex1", name="retain-grad", expect="fail", mistake="retain_grad",
         source='''
def output_grad_norms(model, images, labels):
    kept = {}
    def keep(name):
        def hook(module, inputs, output):
            output.retain_grad()
            kept[name] = output
        return hook
    handles = [child.register_forward_hook(keep(name))
               for name, child in model.named_children() if isinstance(child, nn.Linear)]
    F.cross_entropy(model(images), labels).backward()
    for handle in handles:
        handle.remove()
    return {name: output.grad.norm().item() for name, output in kept.items()}
''' + _STEEPEST),
    dict(exercise="07-ex1", name="autograd-grad-on-kept-outputs", expect="fail",
         mistake="torch.autograd.grad", source='''
def output_grad_norms(model, images, labels):
    outputs = {}
    handles = []
    for name, child in model.named_children():
        if isinstance(child, nn.Linear):
            handles.append(child.register_forward_hook(
                lambda module, inputs, output, name=name: outputs.update({name: output})))
    loss = F.cross_entropy(model(images), labels)
    for handle in handles:
        handle.remove()
    grads = torch.autograd.grad(loss, list(outputs.values()))
    return {name: g.norm().item() for name, g in zip(outputs, grads)}
''' + _STEEPEST),
    dict(exercise="07-ex1", name="weight-gradients", expect="fail",
         mistake="weights' gradients", source='''
def output_grad_norms(model, images, labels):
    F.cross_entropy(model(images), labels).backward()
    return {name: child.weight.grad.norm().item() for name, child in model.named_children()
            if isinstance(child, nn.Linear)}
''' + _STEEPEST),
    dict(exercise="07-ex1", name="backward-order", expect="fail", mistake="backward order",
         source='''
def output_grad_norms(model, images, labels):
    norms = {}
    handles = []
    for name, child in model.named_children():
        if isinstance(child, nn.Linear):
            def hook(module, inputs, output, name=name):
                output.register_hook(lambda g: norms.update({name: g.norm().item()}))
            handles.append(child.register_forward_hook(hook))
    F.cross_entropy(model(images), labels).backward()
    for handle in handles:
        handle.remove()
    return norms
''' + _STEEPEST),
    dict(exercise="07-ex1", name="late-binding-closure", expect="fail", mistake="loop variable",
         source='''
def output_grad_norms(model, images, labels):
    names = [name for name, child in model.named_children() if isinstance(child, nn.Linear)]
    norms = {}
    handles = []
    for name in names:
        def forward_hook(module, inputs, output):
            output.register_hook(lambda grad: norms.__setitem__(name, grad.norm().item()))
        handles.append(model.get_submodule(name).register_forward_hook(forward_hook))
    F.cross_entropy(model(images), labels).backward()
    for handle in handles:
        handle.remove()
    return {name: norms[name] for name in names}
''' + _STEEPEST),
    dict(exercise="07-ex1", name="hooks-left", expect="fail", mistake="remove every handle",
         source='''
def output_grad_norms(model, images, labels):
    names = [name for name, child in model.named_children() if isinstance(child, nn.Linear)]
    norms = {}
    for name in names:
        def forward_hook(module, inputs, output, name=name):
            output.register_hook(lambda grad: norms.__setitem__(name, grad.norm().item()))
        model.get_submodule(name).register_forward_hook(forward_hook)
    F.cross_entropy(model(images), labels).backward()
    return {name: norms[name] for name in names}
''' + _STEEPEST),
    dict(exercise="07-ex1", name="norms-as-tensors", expect="fail", mistake="Python float",
         source=_NORMS.replace("grad.norm().item()", "grad.norm()") + _STEEPEST),
    dict(exercise="07-ex1", name="smallest-norm", expect="fail", mistake="smallest norm",
         source=_NORMS + '''

def steepest_drop(norms):
    return min(norms, key=norms.get)
'''),
    dict(exercise="07-ex1", name="ratio-inverted", expect="fail", mistake="upside down",
         source=_NORMS + '''

def steepest_drop(norms):
    names = list(norms)
    ratios = {a: norms[b] / norms[a] for a, b in zip(names, names[1:])}
    return min(ratios, key=ratios.get)
'''),
    dict(exercise="07-ex1", name="max-ratio", expect="fail", mistake="largest ratio",
         source=_NORMS + '''

def steepest_drop(norms):
    names = list(norms)
    ratios = [norms[a] / norms[b] for a, b in zip(names, names[1:])]
    return names[ratios.index(max(ratios))]
'''),
    dict(exercise="07-ex1", name="names-next-layer", expect="fail", mistake="first layer k",
         source=_NORMS + '''

def steepest_drop(norms):
    names = list(norms)
    ratios = [norms[a] / norms[b] for a, b in zip(names, names[1:])]
    return names[1 + ratios.index(min(ratios))]
'''),
    dict(exercise="07-ex1", name="sorted-names", expect="fail", mistake="sorted by name",
         source=_NORMS + '''

def steepest_drop(norms):
    names = sorted(norms)
    best, best_ratio = None, float("inf")
    for a, b in zip(names, names[1:]):
        if norms[a] / norms[b] < best_ratio:
            best, best_ratio = a, norms[a] / norms[b]
    return best
'''),
    dict(exercise="07-ex1", name="reversed-as-backward-order", expect="fail",
         mistake="read backwards", source=_NORMS + '''

def steepest_drop(norms):
    names = list(reversed(norms))  # the hooks fired from the output back
    ratios = {a: norms[a] / norms[b] for a, b in zip(names, names[1:])}
    return min(ratios, key=ratios.get)
'''),
    dict(exercise="07-ex1", name="difference-not-ratio", expect="fail",
         mistake="differences of norms", source=_NORMS + '''

def steepest_drop(norms):
    names = list(norms)
    drops = {a: norms[b] - norms[a] for a, b in zip(names, names[1:])}
    return max(drops, key=drops.get)
'''),
    dict(exercise="07-ex1", name="returns-the-ratio", expect="fail", mistake="returned the ratio",
         source=_NORMS + '''

def steepest_drop(norms):
    values = list(norms.values())
    return min(a / b for a, b in zip(values, values[1:]))
'''),
    dict(exercise="07-ex1", name="hard-coded-visible-values", expect="fail", mistake=None,
         relation="the test cell example's value, whatever the inputs",
         source=_NORMS.replace("    return {name: norms[name] for name in names}",
                               "    return {'fc1': 0.05, 'fc2': 0.1, 'fc3': 0.2, 'fc4': 0.3, "
                               "'fc5': 0.4, 'fc6': 0.5}") + '''

def steepest_drop(norms):
    return "fc3"
'''),
    dict(exercise="07-ex1", name="hook-factory-and-sorted", expect="pass", mistake=None,
         source='''
def output_grad_norms(model, images, labels):
    order = []
    recorded = {}

    def on_forward(name):
        def forward_hook(module, inputs, output):
            order.append(name)
            def on_grad(grad):
                recorded[name] = float(grad.norm())
            output.register_hook(on_grad)
        return forward_hook

    handles = [child.register_forward_hook(on_forward(name))
               for name, child in model.named_children() if isinstance(child, nn.Linear)]
    try:
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    return {name: recorded[name] for name in order}


def steepest_drop(norms):
    layers = list(norms.items())
    ratios = [(here / there, name) for (name, here), (_, there) in zip(layers, layers[1:])]
    return min(ratios)[1]
'''),
    dict(exercise="07-ex1", name="default-argument-and-ratios-dict", expect="pass", mistake=None,
         source='''
def output_grad_norms(model, images, labels):
    names = [name for name, child in model.named_children() if isinstance(child, nn.Linear)]
    norms = {}
    handles = []
    for name in names:
        def forward_hook(module, inputs, output, name=name):
            output.register_hook(lambda grad, name=name: norms.__setitem__(name, grad.norm().item()))
        handles.append(getattr(model, name).register_forward_hook(forward_hook))
    F.cross_entropy(model(images), labels).backward()
    for handle in handles:
        handle.remove()
    return {name: norms[name] for name in names}


def steepest_drop(norms):
    names = list(norms)
    ratios = {names[k]: norms[names[k]] / norms[names[k + 1]] for k in range(len(names) - 1)}
    return min(ratios, key=ratios.get)
'''),
    # ------------------------------------------------------------------ 07-ex2
    dict(exercise="07-ex2", name="ignores-threshold", expect="fail",
         mistake="Every floating-point tensor was converted", source='''
def float16_hooks(min_elements):
    counts = {"received": 0, "stored": 0}
    def pack(tensor):
        stored = tensor.to(torch.float16) if tensor.is_floating_point() else tensor
        counts["received"] += tensor_bytes(tensor)
        counts["stored"] += tensor_bytes(stored)
        return tensor.dtype, stored
    def unpack(packed):
        return packed[1].to(packed[0])
    return pack, unpack, counts
'''),
    dict(exercise="07-ex2", name="strict-threshold", expect="fail", mistake=">=, not >",
         source='''
def float16_hooks(min_elements):
    counts = {"received": 0, "stored": 0}
    def pack(tensor):
        stored = tensor
        if tensor.is_floating_point() and tensor.numel() > min_elements:
            stored = tensor.half()
        counts["received"] += tensor_bytes(tensor)
        counts["stored"] += tensor_bytes(stored)
        return tensor.dtype, stored
    def unpack(packed):
        return packed[1].to(packed[0])
    return pack, unpack, counts
'''),
    dict(exercise="07-ex2", name="counts-received-as-stored", expect="fail",
         mistake="bytes of the tensor pack received", source='''
def float16_hooks(min_elements):
    counts = {"received": 0, "stored": 0}
    def pack(tensor):
        counts["received"] += tensor_bytes(tensor)
        counts["stored"] += tensor_bytes(tensor)
        if tensor.is_floating_point() and tensor.numel() >= min_elements:
            return tensor.dtype, tensor.to(torch.float16)
        return tensor.dtype, tensor
    def unpack(packed):
        return packed[1].to(packed[0])
    return pack, unpack, counts
'''),
    dict(exercise="07-ex2", name="counts-elements", expect="fail", mistake="numbers of elements",
         source='''
def float16_hooks(min_elements):
    counts = {"received": 0, "stored": 0}
    def pack(tensor):
        stored = tensor
        if tensor.is_floating_point() and tensor.numel() >= min_elements:
            stored = tensor.to(torch.float16)
        counts["received"] += tensor.numel()
        counts["stored"] += stored.numel()
        return tensor.dtype, stored
    def unpack(packed):
        return packed[1].to(packed[0])
    return pack, unpack, counts
'''),
    dict(exercise="07-ex2", name="unpack-keeps-float16", expect="fail",
         mistake="unpack gives back float16", source='''
def float16_hooks(min_elements):
    counts = {"received": 0, "stored": 0}
    def pack(tensor):
        stored = tensor
        if tensor.is_floating_point() and tensor.numel() >= min_elements:
            stored = tensor.to(torch.float16)
        counts["received"] += tensor_bytes(tensor)
        counts["stored"] += tensor_bytes(stored)
        return tensor.dtype, stored
    def unpack(packed):
        return packed[1]
    return pack, unpack, counts
'''),
    # its test cell passed it, while the visible check (which calls unpack on an int64
    # tensor too) failed it: the cell now checks what unpack gives back for that tensor
    dict(exercise="07-ex2", name="unpack-always-float32", expect="fail",
         mistake="a float64 tensor must come back as float64",
         cell="not always float32", source='''
def float16_hooks(min_elements):
    counts = {"received": 0, "stored": 0}
    def pack(tensor):
        stored = tensor
        if tensor.is_floating_point() and tensor.numel() >= min_elements:
            stored = tensor.to(torch.float16)
        counts["received"] += tensor_bytes(tensor)
        counts["stored"] += tensor_bytes(stored)
        return tensor.dtype, stored
    def unpack(packed):
        return packed[1].float()
    return pack, unpack, counts
'''),
    dict(exercise="07-ex2", name="converts-integers", expect="fail", mistake="Integer tensors",
         source='''
def float16_hooks(min_elements):
    counts = {"received": 0, "stored": 0}
    def pack(tensor):
        stored = tensor.to(torch.float16) if tensor.numel() >= min_elements else tensor
        counts["received"] += tensor_bytes(tensor)
        counts["stored"] += tensor_bytes(stored)
        return tensor.dtype, stored
    def unpack(packed):
        return packed[1].to(packed[0])
    return pack, unpack, counts
'''),
    dict(exercise="07-ex2", name="counts-shared-between-calls", expect="fail",
         mistake=None, relation="counts start at 0", source='''
counts = {"received": 0, "stored": 0}

def float16_hooks(min_elements):
    def pack(tensor):
        stored = tensor
        if tensor.is_floating_point() and tensor.numel() >= min_elements:
            stored = tensor.to(torch.float16)
        counts["received"] += tensor_bytes(tensor)
        counts["stored"] += tensor_bytes(stored)
        return tensor.dtype, stored
    def unpack(packed):
        return packed[1].to(packed[0])
    return pack, unpack, counts
'''),
    dict(exercise="07-ex2", name="hard-coded-visible-values", expect="fail", mistake=None,
         relation="right on the test cell's example",
         source='''
def float16_hooks(min_elements):
    counts = {"received": 0, "stored": 0}
    def pack(tensor):
        counts["received"], counts["stored"] = 3800, 2600
        stored = tensor.half() if tensor.is_floating_point() and tensor.numel() >= 200 else tensor
        return tensor.dtype, stored
    def unpack(packed):
        return packed[1].to(packed[0])
    return pack, unpack, counts
'''),
    dict(exercise="07-ex2", name="half-and-nbytes", expect="pass", mistake=None, source='''
def float16_hooks(min_elements):
    counts = dict(received=0, stored=0)

    def pack(tensor):
        big_float = tensor.dtype.is_floating_point and tensor.numel() >= min_elements
        stored = tensor.half() if big_float else tensor
        counts["received"] += tensor.nbytes
        counts["stored"] += stored.nbytes
        return (tensor.dtype, stored)

    def unpack(packed):
        dtype, stored = packed
        return stored if stored.dtype == dtype else stored.to(dtype=dtype)

    return pack, unpack, counts
'''),
    dict(exercise="07-ex2", name="clones-small-tensors", expect="fail", mistake="copied", source='''
def float16_hooks(min_elements):
    counts = {"received": 0, "stored": 0}

    def pack(tensor):
        if tensor.is_floating_point() and tensor.numel() >= min_elements:
            stored = tensor.to(torch.float16)
        else:
            stored = tensor.clone()
        counts["received"] += tensor_bytes(tensor)
        counts["stored"] += tensor_bytes(stored)
        return tensor.dtype, stored

    def unpack(packed):
        dtype, stored = packed
        return stored.to(dtype)

    return pack, unpack, counts
'''),
    dict(exercise="07-ex2", name="detached-copy-for-small", expect="fail", mistake="copied", source='''
def float16_hooks(min_elements):
    counts = {"received": 0, "stored": 0}

    def pack(tensor):
        big = tensor.is_floating_point() and tensor.numel() >= min_elements
        stored = tensor.to(torch.float16) if big else tensor.detach().clone()
        counts["received"] += tensor.numel() * tensor.element_size()
        counts["stored"] += stored.numel() * stored.element_size()
        return (tensor.dtype, stored)

    def unpack(packed):
        return packed[1].to(packed[0])

    return pack, unpack, counts
'''),
    dict(exercise="07-ex2", name="half-when-floating", expect="pass", mistake=None, source='''
def float16_hooks(min_elements):
    counts = {"received": 0, "stored": 0}

    def pack(tensor):
        stored = tensor
        if torch.is_floating_point(tensor) and tensor.numel() >= min_elements:
            stored = tensor.half()
        counts["received"] = counts["received"] + tensor_bytes(tensor)
        counts["stored"] = counts["stored"] + tensor_bytes(stored)
        return tensor.dtype, stored

    def unpack(packed):
        original, stored = packed
        return stored.to(original)

    return pack, unpack, counts
'''),
    # The threshold kept where the next call of float16_hooks overwrites it (a blind
    # reviewer's answer): every check that used one set before making the next passed it.
    dict(exercise="07-ex2", name="threshold-in-a-module-level-list", expect="fail",
         mistake=None, source='''
_MIN = [0]


def float16_hooks(min_elements):
    _MIN[0] = min_elements
    counts = {"received": 0, "stored": 0}

    def pack(tensor):
        stored = tensor
        if tensor.is_floating_point() and tensor.numel() >= _MIN[0]:
            stored = tensor.to(torch.float16)
        counts["received"] += tensor_bytes(tensor)
        counts["stored"] += tensor_bytes(stored)
        return tensor.dtype, stored

    def unpack(packed):
        dtype, stored = packed
        return stored.to(dtype)

    return pack, unpack, counts
'''),
    # ------------------------------------------------------------------ 07-ex3
    dict(exercise="07-ex3", name="sgd-objects", expect="fail", mistake="optimizer object",
         source='''
def attach_sgd_hooks(model, lr, weight_decay):
    optimizers = {p: torch.optim.SGD([p], lr=lr, weight_decay=weight_decay)
                  for p in model.parameters()}
    def step(param):
        optimizers[param].step()
        optimizers[param].zero_grad()
    return [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]
'''),
    dict(exercise="07-ex3", name="no-weight-decay", expect="fail", mistake="weight-decay term",
         source='''
def attach_sgd_hooks(model, lr, weight_decay):
    def step(param):
        with torch.no_grad():
            param.sub_(lr * param.grad)
        param.grad = None
    return [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]
'''),
    dict(exercise="07-ex3", name="uphill", expect="fail", mistake="uphill", source='''
def attach_sgd_hooks(model, lr, weight_decay):
    def step(param):
        with torch.no_grad():
            param.add_(lr * (param.grad + weight_decay * param))
        param.grad = None
    return [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]
'''),
    dict(exercise="07-ex3", name="grad-kept", expect="fail", mistake="set param.grad = None",
         source='''
def attach_sgd_hooks(model, lr, weight_decay):
    def step(param):
        with torch.no_grad():
            param.sub_(lr * (param.grad + weight_decay * param))
    return [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]
'''),
    dict(exercise="07-ex3", name="grad-zeroed", expect="fail", mistake="instead of set to None",
         source='''
def attach_sgd_hooks(model, lr, weight_decay):
    def step(param):
        with torch.no_grad():
            param.sub_(lr * (param.grad + weight_decay * param))
        param.grad.zero_()
    return [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]
'''),
    dict(exercise="07-ex3", name="tensor-hooks", expect="fail",
         mistake="register_post_accumulate_grad_hook", source='''
def attach_sgd_hooks(model, lr, weight_decay):
    handles = []
    for param in model.parameters():
        def hook(grad, param=param):
            with torch.no_grad():
                param.sub_(lr * (grad + weight_decay * param))
        handles.append(param.register_hook(hook))
    return handles
'''),
    dict(exercise="07-ex3", name="rebinds-param", expect="fail", mistake="did not move",
         source='''
def attach_sgd_hooks(model, lr, weight_decay):
    def step(param):
        with torch.no_grad():
            param = param - lr * (param.grad + weight_decay * param)
    return [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]
'''),
    dict(exercise="07-ex3", name="data-update-and-loop", expect="pass", mistake=None, source='''
def attach_sgd_hooks(model, lr, weight_decay):
    def sgd(param):
        param.data.mul_(1 - lr * weight_decay).sub_(lr * param.grad)
        param.grad = None

    handles = []
    for param in model.parameters():
        handles.append(param.register_post_accumulate_grad_hook(sgd))
    return handles
'''),
    dict(exercise="07-ex3", name="no-no-grad", expect="fail", mistake="outside torch.no_grad",
         cell="backward(create_graph=True) raised RuntimeError", source='''
def attach_sgd_hooks(model, lr, weight_decay):
    def step(param):
        param.sub_(lr * (param.grad + weight_decay * param))
        param.grad = None
    return [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]
'''),
    dict(exercise="07-ex3", name="minus-equals-no-no-grad", expect="fail", mistake="outside torch.no_grad",
         cell="backward(create_graph=True) raised RuntimeError", source='''
def attach_sgd_hooks(model, lr, weight_decay):
    handles = []
    for p in model.parameters():
        def update(param):
            param -= lr * param.grad + lr * weight_decay * param
            param.grad = None
        handles.append(p.register_post_accumulate_grad_hook(update))
    return handles
'''),
    dict(exercise="07-ex3", name="decay-added-to-grad-first", expect="pass", mistake=None, source='''
def attach_sgd_hooks(model, lr, weight_decay):
    def step(param):
        with torch.no_grad():
            grad = param.grad.add(param, alpha=weight_decay)
            param.add_(grad, alpha=-lr)
        param.grad = None
    return [param.register_post_accumulate_grad_hook(step) for param in model.parameters()]
'''),
    # A valid answer that lost its points under one course secret of two (issue 32): the
    # update rounds differently from the reference's in float32, well within what the
    # computation allows.
    dict(exercise="07-ex3", name="copy-of-the-whole-update", expect="pass", mistake=None,
         source='''
def attach_sgd_hooks(model, lr, weight_decay):
    def step(p):
        with torch.no_grad():
            p.copy_(p - lr * (p.grad + weight_decay * p))
        p.grad = None
    return [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]
'''),
    dict(exercise="07-ex3", name="decay-not-scaled-by-lr", expect="fail", mistake="without the factor lr", source='''
def attach_sgd_hooks(model, lr, weight_decay):
    def step(param):
        with torch.no_grad():
            param.sub_(lr * param.grad + weight_decay * param)
        param.grad = None
    return [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]
'''),
    dict(exercise="07-ex3", name="weights-only", expect="fail", mistake=None,
         relation="post-accumulate-grad hooks per parameter: the first item is right", source='''
def attach_sgd_hooks(model, lr, weight_decay):
    def step(param):
        with torch.no_grad():
            param.sub_(lr * (param.grad + weight_decay * param))
        param.grad = None
    return [p.register_post_accumulate_grad_hook(step) for name, p in model.named_parameters() if name.endswith("weight")]
'''),
    dict(exercise="07-ex3", name="returns-no-handles", expect="fail", mistake=None,
         relation="the result is a list is False", source='''
def attach_sgd_hooks(model, lr, weight_decay):
    def step(param):
        with torch.no_grad():
            param.sub_(lr * (param.grad + weight_decay * param))
        param.grad = None
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(step)
'''),
    dict(exercise="07-ex2", name="counts-as-default-argument", expect="fail", mistake=None,
         relation="depends on the order of calls", source='''
def float16_hooks(min_elements, counts={"received": 0, "stored": 0}):
    def pack(tensor):
        stored = tensor
        if tensor.is_floating_point() and tensor.numel() >= min_elements:
            stored = tensor.to(torch.float16)
        counts["received"] += tensor_bytes(tensor)
        counts["stored"] += tensor_bytes(stored)
        return tensor.dtype, stored
    def unpack(packed):
        return packed[1].to(packed[0])
    return pack, unpack, counts
'''),
    dict(exercise="07-ex2", name="numel-times-four", expect="fail", mistake="numel × 4",
         source='''
def float16_hooks(min_elements):
    counts = {"received": 0, "stored": 0}
    def pack(tensor):
        if tensor.is_floating_point() and tensor.numel() >= min_elements:
            stored = tensor.to(torch.float16)
        else:
            stored = tensor
        counts["received"] += tensor.numel() * 4
        counts["stored"] += stored.numel() * 4
        return tensor.dtype, stored
    def unpack(packed):
        dtype, stored = packed
        return stored.to(dtype)
    return pack, unpack, counts
'''),
    # Issue 33: a lambda forward hook returns the handle register_hook gives, which replaces the
    # layer's output; the test cell explains instead of showing a raw TypeError.
    dict(exercise="07-ex1", name="lambda-forward-hook-returns-a-handle", expect="fail",
         mistake=None, cell="a lambda returns its expression's value", source='''
def output_grad_norms(model, images, labels):
    norms, handles = {}, []
    for name, child in model.named_children():
        if isinstance(child, nn.Linear):
            handles.append(child.register_forward_hook(
                lambda module, inputs, output, name=name: output.register_hook(
                    lambda grad: norms.__setitem__(name, grad.norm().item()))))
    try:
        F.cross_entropy(model(images), labels).backward()
    finally:
        for handle in handles:
            handle.remove()
    return norms
''' + _STEEPEST),
    # Issue 33: a forward hook that returns another tensor than its output (here a detached
    # copy, "so that nothing is kept") replaces the output; the test cell says so in words.
    dict(exercise="07-ex1", name="forward-hook-returns-a-detached-output", expect="fail",
         mistake=None, cell="returned a value other than None or its output", source='''
def output_grad_norms(model, images, labels):
    norms = {}

    def watch(name):
        def forward_hook(module, inputs, output):
            output.register_hook(lambda grad: norms.__setitem__(name, grad.norm().item()))
            return output.detach()
        return forward_hook

    handles = [child.register_forward_hook(watch(name))
               for name, child in model.named_children() if isinstance(child, nn.Linear)]
    loss = F.cross_entropy(model(images), labels)
    for handle in handles:
        handle.remove()
    loss.backward()
    return norms
''' + _STEEPEST),
    # ---------------------------------------------- more valid alternatives (issue 32: 3 or more)
    dict(exercise="07-ex1", name="hooks-on-modules-by-isinstance", expect="pass", mistake=None, source='''
def output_grad_norms(model, images, labels):
    norms, handles = {}, []
    order = [name for name, child in model.named_children() if isinstance(child, nn.Linear)]

    def make(name):
        def forward_hook(module, inputs, output):
            def tensor_hook(grad):
                norms[name] = float(grad.norm())
            output.register_hook(tensor_hook)
        return forward_hook

    for name in order:
        handles.append(getattr(model, name).register_forward_hook(make(name)))
    try:
        F.cross_entropy(model(images), labels).backward()
    finally:
        for handle in handles:
            handle.remove()
    return {name: norms[name] for name in order}


def steepest_drop(norms):
    names = list(norms)
    return min(names[:-1], key=lambda name: norms[name] / norms[names[names.index(name) + 1]])
'''),
    dict(exercise="07-ex2", name="half-with-element-size", expect="pass", mistake=None, source='''
def float16_hooks(min_elements):
    counts = {"received": 0, "stored": 0}

    def pack(tensor):
        small = not tensor.is_floating_point() or tensor.numel() < min_elements
        stored = tensor if small else tensor.half()
        counts["received"] += tensor.numel() * tensor.element_size()
        counts["stored"] += stored.numel() * stored.element_size()
        return tensor.dtype, stored

    def unpack(packed):
        dtype, stored = packed
        return stored.to(dtype)

    return pack, unpack, counts
'''),
    # ------------------------------------- issue 32, item 3: inputs from the whole domain
    # Layers chosen by their name (fc…) instead of their type: right on every model whose Linear
    # children are called fc1, fc2, … (deep_mlp, shape_cnn's "fc"), wrong on other names.
    dict(exercise="07-ex1", name="linear-layers-by-name", expect="fail", mistake=None,
         source='''
def output_grad_norms(model, images, labels):
    norms, handles = {}, []
    order = [name for name, _ in model.named_children() if name.startswith("fc")]

    def make(name):
        def forward_hook(module, inputs, output):
            def tensor_hook(grad):
                norms[name] = grad.norm().item()
            output.register_hook(tensor_hook)
        return forward_hook

    for name in order:
        handles.append(model.get_submodule(name).register_forward_hook(make(name)))
    F.cross_entropy(model(images), labels).backward()
    for handle in handles:
        handle.remove()
    return {name: norms[name] for name in order}


def steepest_drop(norms):
    names = list(norms)
    ratios = {names[k]: norms[names[k]] / norms[names[k + 1]] for k in range(len(names) - 1)}
    return min(ratios, key=ratios.get)
'''),
    # The settings kept in a module-level dict: right for one model, wrong for the first model
    # once a second one is attached with other settings.
    dict(exercise="07-ex3", name="settings-in-a-module-level-dict", expect="fail", mistake=None,
         source='''
SETTINGS = {}


def attach_sgd_hooks(model, lr, weight_decay):
    SETTINGS.update(lr=lr, weight_decay=weight_decay)

    def step(p):
        with torch.no_grad():
            p -= SETTINGS["lr"] * (p.grad + SETTINGS["weight_decay"] * p)
        p.grad = None

    return [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]
'''),
    # A blind reviewer's answer: the page measured only that the parameters differ; the
    # grader now names the order of the two terms
    dict(exercise="07-ex3", name="decay-after-the-step", expect="fail",
         mistake="after the gradient step", source='''
def attach_sgd_hooks(model, lr, weight_decay):
    def step(param):
        with torch.no_grad():
            param.sub_(lr * param.grad)
            param.sub_(lr * weight_decay * param)
        param.grad = None

    return [p.register_post_accumulate_grad_hook(step) for p in model.parameters()]
'''),
    # a blind review's answer (07-ex2/w_counts_copy.py)
    dict(exercise="07-ex2", name="returns-a-copy-of-counts", expect="fail",
         mistake=None, cell="the dict float16_hooks returned still holds 0",
         source='''
def float16_hooks(min_elements):
    counts = {"received": 0, "stored": 0}

    def pack(tensor):
        stored = tensor
        if tensor.is_floating_point() and tensor.numel() >= min_elements:
            stored = tensor.to(torch.float16)
        counts["received"] += tensor_bytes(tensor)
        counts["stored"] += tensor_bytes(stored)
        return tensor.dtype, stored

    def unpack(packed):
        dtype, stored = packed
        return stored.to(dtype)

    return pack, unpack, dict(counts)
'''),
    # a blind review's answer (07-ex3/w_weights_only.py)
    dict(exercise="07-ex3", name="hooks-on-weights-only", expect="fail",
         mistake=None, cell="parameters have no post-accumulate-grad hook",
         source='''
def attach_sgd_hooks(model, lr, weight_decay):
    def step(param):
        with torch.no_grad():
            param.sub_(lr * (param.grad + weight_decay * param))
        param.grad = None

    return [p.register_post_accumulate_grad_hook(step)
            for name, p in model.named_parameters() if name.endswith("weight")]
'''),
]
