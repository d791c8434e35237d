"""Answers to lesson 06's exercises that the grader must fail (naming the mistake) or pass.

Each entry: the exercise, a short name, whether it must "pass" or "fail", for a failing one a
phrase that the feedback's named mistake must contain (None: any failure will do) or a phrase
of the relation it must state (`relation=`), and the source that replaces the answer cell.
tests/test_scenarios.py runs them in-process.
"""

VARIANTS = [
    # ------------------------------------------------------------------ 06-ex1
    dict(exercise="06-ex1", name="keeps-detached-reference", expect="fail",
         mistake="in-place ReLU's change", source='''
def capture_activation(model, layer, x):
    captured = {}
    def hook(module, args, output):
        captured["output"] = output.detach()
    handle = layer.register_forward_hook(hook)
    try:
        model(x)
    finally:
        handle.remove()
    return captured["output"]
'''),
    dict(exercise="06-ex1", name="clones-after-the-pass", expect="fail",
         mistake="copied it only after model(x) returned", source='''
def capture_activation(model, layer, x):
    captured = {}
    handle = layer.register_forward_hook(
        lambda module, args, output: captured.update(output=output))
    try:
        model(x)
    finally:
        handle.remove()
    return captured["output"].detach().clone()
'''),
    dict(exercise="06-ex1", name="keeps-the-output", expect="fail",
         mistake="kept the output tensor itself", source='''
def capture_activation(model, layer, x):
    captured = []
    handle = layer.register_forward_hook(lambda m, a, out: captured.append(out))
    try:
        model(x)
    finally:
        handle.remove()
    return captured[-1]
'''),
    dict(exercise="06-ex1", name="clone-without-detach", expect="fail",
         mistake="still requires grad", source='''
def capture_activation(model, layer, x):
    captured = {}
    def hook(module, args, output):
        captured["output"] = output.clone()
    handle = layer.register_forward_hook(hook)
    try:
        model(x)
    finally:
        handle.remove()
    return captured["output"]
'''),
    dict(exercise="06-ex1", name="hook-never-removed", expect="fail",
         mistake="remove it with the handle", source='''
def capture_activation(model, layer, x):
    captured = {}
    def hook(module, args, output):
        captured["output"] = output.detach().clone()
    layer.register_forward_hook(hook)
    model(x)
    return captured["output"]
'''),
    dict(exercise="06-ex1", name="no-finally", expect="fail", mistake="finally", source='''
def capture_activation(model, layer, x):
    captured = {}
    def hook(module, args, output):
        captured["output"] = output.detach().clone()
    handle = layer.register_forward_hook(hook)
    model(x)
    handle.remove()
    return captured["output"]
'''),
    dict(exercise="06-ex1", name="captures-the-input", expect="fail",
         mistake="go into the layer", source='''
def capture_activation(model, layer, x):
    captured = {}
    def hook(module, args, output):
        captured["input"] = args[0].detach().clone()
    handle = layer.register_forward_hook(hook)
    try:
        model(x)
    finally:
        handle.remove()
    return captured["input"]
'''),
    dict(exercise="06-ex1", name="hard-coded-visible-values", expect="fail", mistake=None,
         relation="the ValueError model(x) raised reached the caller is False, not True",
         source='''
def capture_activation(model, layer, x):
    return torch.tensor([[-1., 2., -2.5], [-1., -3., 1.5]])
'''),
    dict(exercise="06-ex1", name="handle-as-context-manager", expect="pass", mistake=None,
         source='''
def capture_activation(model, layer, x):
    kept = []
    with layer.register_forward_hook(
            lambda module, args, output: kept.append(output.clone().detach())):
        model(x)
    return kept[-1]
'''),
    dict(exercise="06-ex1", name="no-grad-copy", expect="pass", mistake=None, source='''
def capture_activation(model, layer, x):
    store = {}
    def keep(module, args, output):
        with torch.no_grad():
            store["value"] = output.clone()
    handle = layer.register_forward_hook(keep)
    try:
        model(x)
    finally:
        handle.remove()
    return store["value"]
'''),
    # ------------------------------------------------------------------ 06-ex2
    dict(exercise="06-ex2", name="named-children", drawn="nested modules", expect="fail", mistake="named_children",
         source='''
def count_calls(model, x):
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
'''),
    dict(exercise="06-ex2", name="late-binding-closure", expect="fail",
         mistake="reads the loop variable when it runs", source='''
def count_calls(model, x):
    counts = {}
    handles = []
    for name, module in model.named_modules():
        if name == "":
            continue
        counts[name] = 0
        handles.append(module.register_forward_hook(
            lambda module, args, output: counts.__setitem__(name, counts[name] + 1)))
    model(x)
    for handle in handles:
        handle.remove()
    return counts
'''),
    dict(exercise="06-ex2", name="hooks-left-behind", expect="fail",
         mistake="counts every module twice", source='''
def count_calls(model, x):
    counts = {name: 0 for name, _ in model.named_modules() if name}
    def make_hook(name):
        def hook(module, args, output):
            counts[name] += 1
        return hook
    for name, module in model.named_modules():
        if name:
            module.register_forward_hook(make_hook(name))
    model(x)
    return counts
'''),
    dict(exercise="06-ex2", name="includes-the-model", expect="fail", mistake="the name ''",
         source='''
def count_calls(model, x):
    counts = {name: 0 for name, _ in model.named_modules()}
    def make_hook(name):
        def hook(module, args, output):
            counts[name] += 1
        return hook
    handles = [m.register_forward_hook(make_hook(n)) for n, m in model.named_modules()]
    model(x)
    for handle in handles:
        handle.remove()
    return counts
'''),
    dict(exercise="06-ex2", name="defaultdict-skips-unused", expect="fail",
         mistake="never ran are missing", source='''
from collections import defaultdict

def count_calls(model, x):
    counts = defaultdict(int)
    def make_hook(name):
        def hook(module, args, output):
            counts[name] += 1
        return hook
    handles = [m.register_forward_hook(make_hook(n)) for n, m in model.named_modules() if n]
    model(x)
    for handle in handles:
        handle.remove()
    return dict(counts)
'''),
    dict(exercise="06-ex2", name="hard-coded-visible-values", expect="fail", mistake=None,
         relation="the test cell example's value",
         source='''
def count_calls(model, x):
    return {"inp": 1, "act": 2, "block": 3, "block.0": 3, "block.1": 3, "head": 1,
            "spare": 0}
'''),
    dict(exercise="06-ex2", name="forward-pre-hooks", expect="pass", mistake=None, source='''
def count_calls(model, x):
    counts = {}
    handles = []
    for name, module in model.named_modules():
        if not name:
            continue
        counts[name] = 0
        def count(module, args, name=name):
            counts[name] += 1
        handles.append(module.register_forward_pre_hook(count))
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return counts
'''),
    dict(exercise="06-ex2", name="global-hook-with-name-map", expect="pass", mistake=None,
         source='''
def count_calls(model, x):
    names = {module: name for name, module in model.named_modules() if name}
    counts = dict.fromkeys(names.values(), 0)
    def count(module, args, output):
        if module in names:
            counts[names[module]] += 1
    handle = torch.nn.modules.module.register_module_forward_hook(count)
    try:
        model(x)
    finally:
        handle.remove()
    return counts
'''),
    # Counts every call twice by itself (a pre-hook and a forward hook), hooks removed: the
    # test cell fails at its first look at the counts without a hint, so the page must not
    # say that the cell blamed hooks left behind.
    dict(exercise="06-ex2", name="pre-and-forward-hook-both-count", expect="fail",
         mistake=None, relation="twice the expected value", source='''
def count_calls(model, x):
    counts = {name: 0 for name, _ in model.named_modules() if name}
    handles = []
    for name, module in model.named_modules():
        if not name:
            continue
        def bump(*args, name=name):
            counts[name] += 1
        handles.append(module.register_forward_pre_hook(bump))
        handles.append(module.register_forward_hook(bump))
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return counts
'''),
    # Keeps its counts in a module-level dict across calls, hooks removed: the test cell told it
    # to remove its hooks, a mistake it did not make; it now says where the counts must start.
    dict(exercise="06-ex2", name="module-level-counts-kept-across-calls", drawn="second instance", expect="fail",
         mistake=None, cell="each call must count from zero", source='''
from collections import defaultdict
_COUNTS = defaultdict(int)
def count_calls(model, x):
    names = [name for name, _ in model.named_modules() if name]
    handles = [module.register_forward_hook(
                   lambda m, a, o, name=name: _COUNTS.__setitem__(name, _COUNTS[name] + 1))
               for name, module in model.named_modules() if name]
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return {name: _COUNTS[name] for name in names}
'''),
    # ------------------------------------------------------------------ 06-ex3
    dict(exercise="06-ex3", name="returns-none", expect="fail", mistake="changes nothing",
         source='''
def block_gradient(module):
    def hook(module, grad_input, grad_output):
        grad_input = tuple(None if g is None else torch.zeros_like(g) for g in grad_input)
    return module.register_full_backward_hook(hook)
'''),
    dict(exercise="06-ex3", name="zeroes-in-place", drawn="upstream gradient after a hook", expect="fail", mistake="in place",
         source='''
def block_gradient(module):
    def hook(module, grad_input, grad_output):
        for g in grad_input:
            if g is not None:
                g.zero_()
    return module.register_full_backward_hook(hook)
'''),
    dict(exercise="06-ex3", name="legacy-backward-hook", expect="fail", mistake="legacy hook",
         source='''
def block_gradient(module):
    def hook(module, grad_input, grad_output):
        return tuple(None if g is None else torch.zeros_like(g) for g in grad_input)
    return module.register_backward_hook(hook)
'''),
    dict(exercise="06-ex3", name="zeroes-grad-output", expect="fail", mistake="not grad_output",
         source='''
def block_gradient(module):
    def hook(module, grad_output):
        return tuple(torch.zeros_like(g) for g in grad_output)
    return module.register_full_backward_pre_hook(hook)
'''),
    dict(exercise="06-ex3", name="zeros-for-none", drawn="upstream gradient after a hook", expect="fail", mistake="Keep None entries",
         source='''
def block_gradient(module):
    def hook(module, grad_input, grad_output):
        return tuple(torch.zeros_like(g) for g in grad_input)
    return module.register_full_backward_hook(hook)
'''),
    dict(exercise="06-ex3", name="no-handle", expect="fail", mistake="returns no handle",
         source='''
def block_gradient(module):
    def hook(module, grad_input, grad_output):
        return tuple(None if g is None else torch.zeros_like(g) for g in grad_input)
    module.register_full_backward_hook(hook)
'''),
    dict(exercise="06-ex3", name="only-the-first-input", expect="fail", mistake=None,
         relation="should be all zeros",
         source='''
def block_gradient(module):
    def hook(module, grad_input, grad_output):
        first = grad_input[0]
        return (None if first is None else torch.zeros_like(first),) + grad_input[1:]
    return module.register_full_backward_hook(hook)
'''),
    dict(exercise="06-ex3", name="new-zeros", expect="pass", mistake=None, source='''
def block_gradient(module):
    def stop(module, grad_input, grad_output):
        return tuple(g if g is None else g.new_zeros(g.shape) for g in grad_input)
    return module.register_full_backward_hook(stop)
'''),
    dict(exercise="06-ex3", name="multiply-by-zero", expect="pass", mistake=None, source='''
def block_gradient(module):
    def stop(module, grad_input, grad_output):
        blocked = []
        for grad in grad_input:
            blocked.append(None if grad is None else grad * 0.0)
        return tuple(blocked)
    return module.register_full_backward_hook(stop)
'''),
    # ------------------------------------------------ more slips of each exercise (issue 22)
    dict(exercise="06-ex2", name="sets-one-instead-of-adding", expect="fail", mistake=None,
         relation="half the expected value", source='''
def count_calls(model, x):
    counts = {name: 0 for name, _ in model.named_modules() if name}
    def make_hook(name):
        def hook(module, args, output):
            counts[name] = 1
        return hook
    handles = [module.register_forward_hook(make_hook(name))
               for name, module in model.named_modules() if name]
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return counts
'''),
    dict(exercise="06-ex2", name="counts-the-whole-model", expect="fail", mistake=None,
         relation="every entry is the same", source='''
def count_calls(model, x):
    counts = {name: 0 for name, _ in model.named_modules() if name}
    def hook(module, args, output):
        for name in counts:
            counts[name] += 1
    handle = model.register_forward_hook(hook)
    try:
        model(x)
    finally:
        handle.remove()
    return counts
'''),
    dict(exercise="06-ex3", name="zeros-like-grad-output", expect="fail", mistake=None,
         relation="another shape than the one it received", source='''
def block_gradient(module):
    def hook(module, grad_input, grad_output):
        return tuple(torch.zeros_like(grad) for grad in grad_output)
    return module.register_full_backward_hook(hook)
'''),
    dict(exercise="06-ex1", name="hook-removes-itself", expect="fail", mistake=None,
         relation="hooks left after the forward pass raised is one more", source='''
def capture_activation(model, layer, x):
    captured = {}
    def hook(module, args, output):
        captured["output"] = output.detach().clone()
        handle.remove()
    handle = layer.register_forward_hook(hook)
    model(x)
    return captured["output"]
'''),
    dict(exercise="06-ex2", name="clears-every-forward-hook", expect="fail", mistake=None,
         relation="and still runs after it is False", source='''
def count_calls(model, x):
    counts = {name: 0 for name, _ in model.named_modules() if name}
    def make_hook(name):
        def hook(module, args, output):
            counts[name] += 1
        return hook
    for name, module in model.named_modules():
        if name:
            module.register_forward_hook(make_hook(name))
    model(x)
    for module in model.modules():
        module._forward_hooks.clear()
    return counts
'''),
    dict(exercise="06-ex2", name="counts-made-once", drawn="second instance", expect="fail", mistake=None,
         relation="depends on the order of calls", source='''
COUNTS = {}

def count_calls(model, x):
    names = [name for name, _ in model.named_modules() if name]
    handles = []
    for name, module in model.named_modules():
        if name:
            COUNTS.setdefault(name, 0)
            def hook(module, args, output, name=name):
                COUNTS[name] += 1
            handles.append(module.register_forward_hook(hook))
    model(x)
    for handle in handles:
        handle.remove()
    return {name: COUNTS[name] for name in names}
'''),
    # ---------------------------------------------- more valid alternatives (issue 32: 3 or more)
    dict(exercise="06-ex1", name="list-and-clone", expect="pass", mistake=None, source='''
def capture_activation(model, layer, x):
    seen = []
    handle = layer.register_forward_hook(lambda m, a, out: seen.append(out.clone().detach()))
    try:
        model(x)
    finally:
        handle.remove()
    return seen[0]
'''),
    dict(exercise="06-ex2", name="defaultdict-and-modules", expect="pass", mistake=None, source='''
import collections

def count_calls(model, x):
    counts = collections.Counter({name: 0 for name, _ in model.named_modules() if name})
    handles = []
    for name, module in model.named_modules():
        if name:
            def hook(module, args, output, name=name):
                counts[name] += 1
            handles.append(module.register_forward_hook(hook))
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return dict(counts)
'''),
    dict(exercise="06-ex3", name="zeros-for-every-input", expect="pass", mistake=None, source='''
def block_gradient(module):
    zeros = lambda g: None if g is None else torch.zeros(g.shape, dtype=g.dtype)  # noqa: E731
    return module.register_full_backward_hook(
        lambda module, grad_input, grad_output: tuple(map(zeros, grad_input)))
'''),
    # ---------------------------------------------- more wrong answers (issue 32: 10 or more)
    dict(exercise="06-ex1", name="finds-the-layer-among-direct-children", drawn="nested modules", expect="fail", mistake=None,
         relation="is None where a float32 tensor was expected", source='''
def capture_activation(model, layer, x):
    captured = {}
    handles = [child.register_forward_hook(
                   lambda m, a, out: captured.__setitem__("out", out.detach().clone()))
               for child in model.children() if child is layer]
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return captured.get("out")
'''),
    dict(exercise="06-ex3", name="zeroes-grad-output-before-the-module", expect="fail",
         mistake="own weights lost their gradient", source='''
def block_gradient(module):
    def hook(module, grad_output):
        return tuple(None if g is None else torch.zeros_like(g) for g in grad_output)
    return module.register_full_backward_pre_hook(hook)
'''),
    dict(exercise="06-ex3", name="blocks-only-in-training-mode", expect="fail", mistake=None,
         relation="should be all zeros", source='''
def block_gradient(module):
    def hook(module, grad_input, grad_output):
        if not module.training:
            return None
        return tuple(None if g is None else torch.zeros_like(g) for g in grad_input)
    return module.register_full_backward_hook(hook)
'''),
    # Clears every forward hook after its pass: the test cell said "the example passes"
    # although the statement asks to leave the model's own hooks alone (issue 33).
    dict(exercise="06-ex2", name="clears-forward-hooks-after-lambda-counts",
         cell="a hook the model already had",
         expect="fail", mistake=None, source='''
def count_calls(model, x):
    counts = {name: 0 for name, _ in model.named_modules() if name}
    for name, module in model.named_modules():
        if name:
            module.register_forward_hook(lambda m, a, o, name=name: counts.__setitem__(name, counts[name] + 1))
    model(x)
    for module in model.modules():
        module._forward_hooks.clear()
    return counts
'''),
    # ------------------------------------- issue 32, item 3: inputs from the whole domain
    # Names as named_modules() gives them: a module registered under two names is listed once,
    # under the first; a walk of named_children() lists it twice and hooks it twice.
    dict(exercise="06-ex2", name="names-built-by-recursion", expect="fail", mistake=None,
         relation="holds the expected entries, and more", drawn="nested modules", source='''
def count_calls(model, x):
    counts, handles = {}, []

    def visit(module, prefix):
        for name, child in module.named_children():
            full = prefix + name
            counts[full] = 0
            def hook(m, args, output, full=full):
                counts[full] += 1
            handles.append(child.register_forward_hook(hook))
            visit(child, full + ".")

    visit(model, "")
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return counts
'''),
    dict(exercise="06-ex2", name="name-of-each-module-looked-up", expect="fail", mistake=None,
         relation="right on the test cell's example", drawn="nested modules", source='''
def count_calls(model, x):
    names = {module: name for name, module in model.named_modules(remove_duplicate=False) if name}
    counts = {name: 0 for name in names.values()}
    def hook(module, args, output):
        counts[names[module]] += 1
    handles = [m.register_forward_hook(hook) for m in names]
    try:
        model(x)
    finally:
        for h in handles:
            h.remove()
    return counts
'''),
    dict(exercise="06-ex2", name="pre-hooks-keyed-by-module", expect="pass", mistake=None,
         drawn="nested modules", source='''
def count_calls(model, x):
    named = [(name, m) for name, m in model.named_modules() if name]
    seen = {id(m): 0 for _, m in named}
    def hook(module, args):
        seen[id(module)] += 1
    handles = [m.register_forward_pre_hook(hook) for _, m in named]
    try:
        model(x)
    finally:
        for h in handles:
            h.remove()
    return {name: seen[id(m)] for name, m in named}
'''),
    # A second block in the same network: each call adds a block of its own.
    dict(exercise="06-ex3", name="one-block-at-a-time", expect="fail", mistake=None,
         relation="should be all zeros", drawn="second instance", source='''
_BLOCKS = []

def block_gradient(module):
    while _BLOCKS:
        _BLOCKS.pop().remove()

    def hook(module, grad_input, grad_output):
        return tuple(None if g is None else torch.zeros_like(g) for g in grad_input)

    handle = module.register_full_backward_hook(hook)
    _BLOCKS.append(handle)
    return handle
'''),
    dict(exercise="06-ex3", name="handles-kept-in-a-list", expect="pass", mistake=None,
         drawn="second instance", source='''
_BLOCKS = []

def block_gradient(module):
    def hook(module, grad_input, grad_output):
        return tuple(None if g is None else g.new_zeros(g.shape) for g in grad_input)

    _BLOCKS.append(module.register_full_backward_hook(hook))
    return _BLOCKS[-1]
'''),
    # The block registered on every module inside the blocked one too (a blind reviewer's
    # answer): the same as the reference on a single layer, not on a block of several.
    dict(exercise="06-ex3", name="blocks-every-submodule", expect="fail", mistake=None,
         source='''
def block_gradient(module):
    def hook(m, grad_input, grad_output):
        return tuple(None if g is None else torch.zeros_like(g) for g in grad_input)
    handles = [m.register_full_backward_hook(hook) for m in module.modules()]
    return handles[0]
'''),
    # a blind review's answer (06-ex1/w_clear_all_hooks.py)
    dict(exercise="06-ex1", name="clears-every-forward-hook", expect="fail",
         mistake="hooks the layer already had were deleted too",
         source='''
def capture_activation(model: nn.Module, layer: nn.Module,
                       x: torch.Tensor) -> torch.Tensor:
    captured = []
    layer.register_forward_hook(lambda m, a, out: captured.append(out.detach().clone()))
    try:
        model(x)
    finally:
        layer._forward_hooks.clear()
    return captured[0]
'''),
    # a blind review's answer (06-ex3/w_drop_none.py)
    dict(exercise="06-ex3", name="drops-the-none-entries", expect="fail",
         mistake=None,
         source='''
def block_gradient(module: nn.Module):
    def hook(module, grad_input, grad_output):
        return tuple(torch.zeros_like(g) for g in grad_input if g is not None)

    return module.register_full_backward_hook(hook)
'''),
    # a blind review's answer (06-ex3/w_input_tensor_hook.py)
    dict(exercise="06-ex3", name="tensor-hook-on-the-input", expect="fail",
         mistake=None, cell="the block also reached the gradient of the tensor the gate shares",
         source='''
def block_gradient(module: nn.Module):
    def pre_hook(mod, args):
        for a in args:
            if isinstance(a, torch.Tensor) and a.requires_grad:
                a.register_hook(lambda g: torch.zeros_like(g))

    return module.register_forward_pre_hook(pre_hook)
'''),
    # a blind review's answer (06-ex3/w_zero_inplace.py)
    dict(exercise="06-ex3", name="zeroes-in-place-returns-them", expect="fail",
         mistake="zeroes the tensors of grad_input in place (zero_()). Where",
         source='''
def block_gradient(module: nn.Module):
    def hook(module, grad_input, grad_output):
        for g in grad_input:
            if g is not None:
                g.zero_()
        return grad_input

    return module.register_full_backward_hook(hook)
'''),
    # a blind review's answer (06-ex3/w_one_shot.py)
    dict(exercise="06-ex3", name="removes-itself-after-one-pass", expect="fail",
         mistake=None,
         source='''
def block_gradient(module: nn.Module):
    box = {}

    def hook(mod, grad_input, grad_output):
        box["handle"].remove()
        return tuple(None if g is None else torch.zeros_like(g) for g in grad_input)

    box["handle"] = module.register_full_backward_hook(hook)
    return box["handle"]
'''),
    # a blind review's answer (06-ex2/w_global_counts.py): it returns the module-level dict
    # itself, so both calls of a check showed the same (last) counts
    dict(exercise="06-ex2", name="returns-the-module-level-dict", expect="fail", mistake=None,
         cell="The second call counted more", source='''
COUNTS = {}


def count_calls(model: nn.Module, x: torch.Tensor) -> dict[str, int]:
    handles = []
    for name, module in model.named_modules():
        if name:
            COUNTS.setdefault(name, 0)
            handles.append(module.register_forward_hook(
                lambda m, a, o, name=name: COUNTS.__setitem__(name, COUNTS[name] + 1)))
    model(x)
    for handle in handles:
        handle.remove()
    return COUNTS
'''),
    # a blind review's answer (06-ex1/w_swallow_error.py): the page said "expected a string,
    # found None" of the error that reached the caller
    dict(exercise="06-ex1", name="swallows-the-error", expect="fail", mistake=None,
         relation="the ValueError model(x) raised reached the caller is False, not True",
         source='''
def capture_activation(model: nn.Module, layer: nn.Module,
                       x: torch.Tensor) -> torch.Tensor:
    captured = []
    handle = layer.register_forward_hook(
        lambda m, a, out: captured.append(out.detach().clone()))
    try:
        model(x)
    except Exception as err:
        print("forward pass failed:", err)
        return None
    finally:
        handle.remove()
    return captured[0]
'''),
]
