"""Answers to lesson 08's exercises that the grader must fail (naming the mistake) or pass.

Each entry: the exercise, a short name, whether it must "pass" or "fail", for a failing one a
phrase that the feedback's named mistake must contain (None: any failure will do), and the
source that replaces the answer cell. tests/test_scenarios.py runs them in-process.
"""


def _monitor(*, forward_rms=False, divide="scaler.get_scale()", modules="named_modules()",
             guard="if not output.requires_grad:\n                return",
             rms="output.detach().pow(2).mean().sqrt()", grad="grad.detach().norm()",
             bind="name=name", handles="handles"):
    """A monitor written the solution's way, with one thing changed."""
    return f'''
def attach_grad_monitor(model, scaler):
    history, handles = {{}}, []
    for name, module in model.{modules}:
        if not isinstance(module, nn.Linear):
            continue
        history[name] = {{"output rms": [], "grad norm": []}}

        def forward_hook(module, args, output, {bind}):
            {guard}
            rms = {rms}
            {"history[name]['output rms'].append(rms)" if forward_rms else "pass"}

            def record(grad):
                {"pass" if forward_rms else "history[name]['output rms'].append(rms)"}
                history[name]["grad norm"].append({grad} / {divide})

            output.register_hook(record)

        handles.append(module.register_forward_hook(forward_hook))
    return history, {handles}
'''


def _bucket_hook(*, record="buffer.norm().item()", before=True, divide=True,
                 result="work.get_future().then(lambda future: future.value()[0])"):
    return f'''
def bucket_norm_hook(state, bucket):
    buffer = bucket.buffer()
    {"state['norms'].append(" + record + ")" if before else "pass"}
    {"buffer.div_(dist.get_world_size())" if divide else "pass"}
    work = dist.all_reduce(buffer, async_op=True)
    {"pass" if before else "work.wait(); state['norms'].append(" + record + ")"}
    return {result}
'''


def _hunter(*, bad="not torch.isfinite(t).all()", backward_tensors="grad_in",
            leaves="if list(module.children()):\n            continue", first="found[0]",
            step="step", remove=True, backward=True):
    return f'''
def first_nonfinite(model, batches, lr):
    found, current = [], {{"step": 0}}

    def check(tensors, phase, name):
        tensors = tensors if isinstance(tensors, tuple) else (tensors,)
        if any(t is not None and {bad} for t in tensors):
            found.append((current["step"], phase, name))

    handles = []
    for name, module in model.named_modules():
        {leaves}
        handles.append(module.register_forward_hook(
            lambda m, args, out, name=name: check(out, "forward", name)))
        if {backward}:
            handles.append(module.register_full_backward_hook(
                lambda m, grad_in, grad_out, name=name:
                    check({backward_tensors}, "backward", name)))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    try:
        for step, (inputs, targets) in enumerate(batches):
            current["step"] = {step}
            optimizer.zero_grad()
            F.mse_loss(model(inputs), targets).backward()
            if found:
                return {first}
            optimizer.step()
    finally:
        for handle in (handles if {remove} else []):
            handle.remove()
    return None
'''


VARIANTS = [
    # ------------------------------------------------------------------ 08-ex1
    dict(exercise="08-ex1", name="rms-appended-in-forward", expect="fail",
         mistake="recomputation", source=_monitor(forward_rms=True).replace(
             "            if not output.requires_grad:\n                return\n", "").replace(
             "\n\n            def record", "\n            if not output.requires_grad:\n"
             "                return\n\n            def record")),
    dict(exercise="08-ex1", name="scaled-norms", expect="fail", mistake="scaled gradients",
         source=_monitor(divide="1.0")),
    dict(exercise="08-ex1", name="scale-read-once", expect="fail", mistake="read once",
         source=_monitor(divide="first_scale").replace(
             "    history, handles = {}, []",
             "    history, handles = {}, []\n    first_scale = scaler.get_scale()")),
    dict(exercise="08-ex1", name="children-only", expect="fail", mistake=None,
         source=_monitor(modules="named_children()")),
    dict(exercise="08-ex1", name="no-requires-grad-test", expect="fail", mistake=None,
         relation="one step through a reentrant checkpoint ran is False, not True",
         source=_monitor(guard="pass")),
    dict(exercise="08-ex1", name="mean-square-not-rms", expect="fail", mistake="mean square",
         source=_monitor(rms="output.detach().pow(2).mean()")),
    dict(exercise="08-ex1", name="divides-by-the-square", expect="fail", mistake=None,
         relation="of the expected value (×1/",
         source=_monitor(divide="scaler.get_scale() ** 2")),
    dict(exercise="08-ex1", name="late-binding", expect="fail", mistake=None, relation="is empty",
         source=_monitor(bind="name_unused=None")),
    dict(exercise="08-ex1", name="no-handles", expect="fail", mistake=None,
         relation="every entry is the same, where the expected ones differ",
         source=_monitor(handles="[]")),
    dict(exercise="08-ex1", name="weight-gradients", expect="fail", mistake=None, source='''
def attach_grad_monitor(model, scaler):
    history, handles = {}, []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            history[name] = {"output rms": [], "grad norm": []}
            handles.append(module.register_forward_hook(
                lambda m, args, out, name=name: history[name]["output rms"].append(
                    out.detach().pow(2).mean().sqrt()) if out.requires_grad else None))
            handles.append(module.weight.register_hook(
                lambda grad, name=name: history[name]["grad norm"].append(
                    grad.norm() / scaler.get_scale())))
    return history, handles
'''),
    # a Linear found by its weight: a LayerNorm has one too
    dict(exercise="08-ex1", name="modules-with-weight", expect="fail", mistake=None,
         source=_monitor().replace("not isinstance(module, nn.Linear)",
                                   "not hasattr(module, 'weight')")),
    dict(exercise="08-ex1", name="pending-flag-and-floats", expect="pass", source='''
def attach_grad_monitor(model, scaler):
    history, pending, handles = {}, {}, []

    def watch(name):
        def forward_hook(module, args, output):
            if name not in pending:  # the recomputation finds this step's value pending
                pending[name] = output.detach().pow(2).mean().sqrt().item()
            if output.requires_grad:
                def record(grad):
                    history[name]["output rms"].append(pending.pop(name))
                    history[name]["grad norm"].append(
                        (grad / scaler.get_scale()).norm().item())
                output.register_hook(record)
        return forward_hook

    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            history[name] = {"output rms": [], "grad norm": []}
            handles.append(module.register_forward_hook(watch(name)))
    return history, handles
'''),
    dict(exercise="08-ex1", name="rms-from-norm", expect="pass", source=_monitor(
        rms="output.detach().norm() / output.numel() ** 0.5",
        grad="torch.linalg.vector_norm(grad)")),
    # ------------------------------------------------------------------ 08-ex3
    dict(exercise="08-ex3", name="norm-after-average", expect="fail", mistake="after averaging",
         source=_bucket_hook(before=False)),
    dict(exercise="08-ex3", name="summed", expect="fail", mistake="summed",
         source=_bucket_hook(divide=False)),
    dict(exercise="08-ex3", name="returns-the-tensor", expect="fail", mistake=None,
         source=_bucket_hook(result="(work.wait(), buffer)[1]")),
    dict(exercise="08-ex3", name="norm-squared", expect="fail", mistake="squared norm",
         source=_bucket_hook(record="buffer.pow(2).sum().item()")),
    dict(exercise="08-ex3", name="rank-zero-only", expect="fail", mistake=None,
         relation="process 1 is empty",
         source=_bucket_hook(record="buffer.norm().item()) if dist.get_rank() == 0 else None"
                                    " #")),
    dict(exercise="08-ex3", name="first-parameter-only", expect="fail", mistake="first gradient only",
         source=_bucket_hook(record="bucket.gradients()[0].norm().item()")),
    dict(exercise="08-ex3", name="multiplies-by-world-size", expect="fail", mistake=None,
         relation="4 times the expected values",
         source=_bucket_hook(divide=False).replace(
             "    work = dist.all_reduce", "    buffer.mul_(dist.get_world_size())\n"
                                          "    work = dist.all_reduce")),
    dict(exercise="08-ex3", name="norm-as-tensor", expect="fail", mistake="as tensors",
         source=_bucket_hook(record="buffer.norm().clone()")),
    dict(exercise="08-ex3", name="returns-none", expect="fail", mistake=None,
         source=_bucket_hook(result="None")),
    dict(exercise="08-ex3", name="divides-twice", expect="fail", mistake=None,
         relation="half the expected values", source=_bucket_hook(
             result="work.get_future().then(\n"
                    "        lambda future: future.value()[0] / dist.get_world_size())")),
    # the work's Future returned as it is: its value is a list of tensors, and torch fails an
    # internal assert ("isPyObject") rather than naming the Future (a blind reviewer's answer)
    dict(exercise="08-ex3", name="future-of-a-list", expect="fail",
         cell="a process failed over the hook's result",
         source=_bucket_hook(result="work.get_future()")),
    # two processes in the test cell, any number in a real run
    dict(exercise="08-ex3", name="divides-by-two", expect="fail", mistake=None,
         source=_bucket_hook().replace("dist.get_world_size()", "2")),
    dict(exercise="08-ex3", name="divide-in-then", expect="pass", source='''
def bucket_norm_hook(state, bucket):
    state["norms"].append(float(torch.linalg.vector_norm(bucket.buffer())))
    future = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    return future.then(lambda fut: fut.value()[0] / dist.get_world_size())
'''),
    dict(exercise="08-ex3", name="torch-default-hook", expect="pass", source='''
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks


def bucket_norm_hook(state, bucket):
    state["norms"].append(bucket.buffer().norm().item())
    return default_hooks.allreduce_hook(None, bucket)
'''),
    # ------------------------------------------------------------------ 08-ex2
    dict(exercise="08-ex2", name="isnan-only", expect="fail", mistake="isnan",
         source=_hunter(bad="bool(torch.isnan(t).any())")),
    dict(exercise="08-ex2", name="grad-output", expect="fail", mistake="grad_output",
         source=_hunter(backward_tensors="grad_out")),
    dict(exercise="08-ex2", name="forward-only", expect="fail", mistake="Only outputs",
         source=_hunter(backward=False)),
    dict(exercise="08-ex2", name="steps-from-one", expect="fail", mistake="from 1",
         source=_hunter(step="step + 1")),
    dict(exercise="08-ex2", name="last-found", expect="fail", mistake=None,
         source=_hunter(first="found[-1]")),
    dict(exercise="08-ex2", name="isinf-only", expect="fail", mistake=None,
         relation="the result is None where a string was expected",
         source=_hunter(bad="bool(torch.isinf(t).any())")),
    dict(exercise="08-ex2", name="hooks-left", expect="fail", mistake=None,
         source=_hunter(remove=False)),
    dict(exercise="08-ex2", name="children-names", expect="fail", mistake=None,
         relation="right on the test cell's example, wrong on these inputs",
         source=_hunter().replace("model.named_modules()", "model.named_children()")),
    dict(exercise="08-ex2", name="loss-only", expect="fail", mistake=None,
         relation="the result is None where a string was expected", source='''
def first_nonfinite(model, batches, lr):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    for step, (inputs, targets) in enumerate(batches):
        optimizer.zero_grad()
        loss = F.mse_loss(model(inputs), targets)
        if not torch.isfinite(loss):
            return step, "forward", "loss"
        loss.backward()
        optimizer.step()
    return None
'''),
    # the sum (or the norm) of huge finite values overflows where no entry does
    dict(exercise="08-ex2", name="isfinite-of-the-sum", expect="fail", mistake=None,
         source=_hunter(bad="not torch.isfinite(t.sum())")),
    dict(exercise="08-ex2", name="isfinite-of-the-norm", expect="fail", mistake=None,
         source=_hunter(bad="not torch.isfinite(t.norm())")),
    dict(exercise="08-ex2", name="nan-or-inf", expect="pass",
         source=_hunter(bad="bool(torch.isnan(t).any() or torch.isinf(t).any())")),
    dict(exercise="08-ex2", name="watch-class", expect="pass", source='''
class Hunter:
    def __init__(self, model):
        self.step, self.first, self.handles = 0, None, []
        for name, module in model.named_modules():
            if next(module.children(), None) is None:
                self.handles.append(module.register_forward_hook(self.forward(name)))
                self.handles.append(module.register_full_backward_hook(self.backward(name)))

    def note(self, tensors, phase, name):
        if self.first is None and any(
                t is not None and not bool(torch.isfinite(t).all()) for t in tensors):
            self.first = (self.step, phase, name)

    def forward(self, name):
        return lambda module, args, output: self.note((output,), "forward", name)

    def backward(self, name):
        return lambda module, grad_in, grad_out: self.note(grad_in, "backward", name)


def first_nonfinite(model, batches, lr):
    hunter = Hunter(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    try:
        for step, (inputs, targets) in enumerate(batches):
            hunter.step = step
            optimizer.zero_grad()
            F.mse_loss(model(inputs), targets).backward()
            if hunter.first is not None:
                return hunter.first
            optimizer.step()
        return None
    finally:
        for handle in hunter.handles:
            handle.remove()
'''),
]

# Written blind (without the scenarios) in a review of the lesson
VARIANTS += [
    dict(exercise='08-ex1', name='grad-enabled-dedupe', expect='fail', mistake='recomputation', source='''
def attach_grad_monitor(model, scaler):
    # dedupe by skipping forward calls made while a backward is running... by grad mode
    history, handles = {}, []
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        history[name] = {"output rms": [], "grad norm": []}
        def forward_hook(module, args, output, name=name):
            if not torch.is_grad_enabled():
                return
            history[name]["output rms"].append(output.detach().pow(2).mean().sqrt().item())
            output.register_hook(lambda g: history[name]["grad norm"].append(
                g.norm().item() / scaler.get_scale()))
        handles.append(module.register_forward_hook(forward_hook))
    return history, handles
'''),
    dict(exercise='08-ex1', name='std-not-rms', expect='fail', mistake='standard deviation', source='''
def attach_grad_monitor(model, scaler):
    history, handles = {}, []
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        history[name] = {"output rms": [], "grad norm": []}

        def forward_hook(module, args, output, name=name):
            if not output.requires_grad:
                return
            rms = output.detach().std()

            def record(grad):
                history[name]["output rms"].append(rms)
                history[name]["grad norm"].append(grad.detach().norm() / scaler.get_scale())

            output.register_hook(record)

        handles.append(module.register_forward_hook(forward_hook))
    return history, handles
'''),
    dict(exercise='08-ex1', name='input-rms', expect='fail', mistake='args[0]', source='''
def attach_grad_monitor(model, scaler):
    history, handles = {}, []
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        history[name] = {"output rms": [], "grad norm": []}

        def forward_hook(module, args, output, name=name):
            if not output.requires_grad:
                return
            rms = args[0].detach().pow(2).mean().sqrt()

            def record(grad):
                history[name]["output rms"].append(rms)
                history[name]["grad norm"].append(grad.detach().norm() / scaler.get_scale())

            output.register_hook(record)

        handles.append(module.register_forward_hook(forward_hook))
    return history, handles
'''),
    dict(exercise='08-ex1', name='full-backward-hook-grad-output', expect='pass', source='''
def attach_grad_monitor(model, scaler):
    # rms in forward, gradient of the output from a full backward hook's grad_output
    history, handles, last = {}, [], {}
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        history[name] = {"output rms": [], "grad norm": []}
        def fwd(module, args, output, name=name):
            last[name] = output.detach().pow(2).mean().sqrt().item()
        def bwd(module, grad_input, grad_output, name=name):
            history[name]["output rms"].append(last[name])
            history[name]["grad norm"].append(grad_output[0].norm().item() / scaler.get_scale())
        handles.append(module.register_forward_hook(fwd))
        handles.append(module.register_full_backward_hook(bwd))
    return history, handles
'''),
    dict(exercise='08-ex3', name='norm-after-division', expect='fail', mistake=None,
         relation='half the expected value', source='''
def bucket_norm_hook(state, bucket):
    buffer = bucket.buffer()
    buffer.div_(dist.get_world_size())
    state["norms"].append(buffer.norm().item())
    work = dist.all_reduce(buffer, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])
'''),
    dict(exercise='08-ex3', name='overwrites-norms', expect='fail', mistake='replaced at each call', source='''
def bucket_norm_hook(state, bucket):
    buffer = bucket.buffer()
    state["norms"] = [buffer.norm().item()]
    buffer.div_(dist.get_world_size())
    return dist.all_reduce(buffer, async_op=True).get_future().then(lambda fut: fut.value()[0])
'''),
    dict(exercise='08-ex3', name='gloo-reduce-op-avg', expect='pass', source='''
def bucket_norm_hook(state, bucket):
    buffer = bucket.buffer()
    state["norms"].append(buffer.norm().item())
    work = dist.all_reduce(buffer, op=dist.ReduceOp.AVG, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])
'''),
    dict(exercise='08-ex3', name='blocking-all-reduce-completed-future', expect='pass', source='''
def bucket_norm_hook(state, bucket):
    tensor = bucket.buffer()
    state["norms"].append(tensor.norm().item())
    dist.all_reduce(tensor)
    tensor /= dist.get_world_size()
    fut = torch.futures.Future()
    fut.set_result(tensor)
    return fut
'''),
    dict(exercise='08-ex2', name='any-not-all', expect='fail', mistake=None,
         relation='the result is None where a string was expected', source='''
def first_nonfinite(model, batches, lr):
    found, current = [], {"step": 0}

    def bad(t):
        return not torch.isfinite(t).any()

    def check(tensors, phase, name):
        tensors = tensors if isinstance(tensors, tuple) else (tensors,)
        if any(t is not None and bad(t) for t in tensors):
            found.append((current["step"], phase, name))

    handles = []
    for name, module in model.named_modules():
        if list(module.children()):
            continue
        handles.append(module.register_forward_hook(
            lambda m, args, out, name=name: check(out, "forward", name)))
        handles.append(module.register_full_backward_hook(
            lambda m, grad_in, grad_out, name=name: check(grad_in, "backward", name)))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    try:
        for step, (inputs, targets) in enumerate(batches):
            current["step"] = step
            optimizer.zero_grad()
            F.mse_loss(model(inputs), targets).backward()
            
            if found:
                return found[0]
            optimizer.step()
    finally:
        for handle in handles:
            handle.remove()
    return None
'''),
    # No relation declared: what it measures depends on the run drawn (a string where None was
    # expected on one run, None where a string was on another).
    dict(exercise='08-ex2', name='no-zero-grad', expect='fail', mistake=None, source='''
def first_nonfinite(model, batches, lr):
    found, current = [], {"step": 0}

    def bad(t):
        return not torch.isfinite(t).all()

    def check(tensors, phase, name):
        tensors = tensors if isinstance(tensors, tuple) else (tensors,)
        if any(t is not None and bad(t) for t in tensors):
            found.append((current["step"], phase, name))

    handles = []
    for name, module in model.named_modules():
        if list(module.children()):
            continue
        handles.append(module.register_forward_hook(
            lambda m, args, out, name=name: check(out, "forward", name)))
        handles.append(module.register_full_backward_hook(
            lambda m, grad_in, grad_out, name=name: check(grad_in, "backward", name)))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    try:
        for step, (inputs, targets) in enumerate(batches):
            current["step"] = step
            pass
            F.mse_loss(model(inputs), targets).backward()
            
            if found:
                return found[0]
            optimizer.step()
    finally:
        for handle in handles:
            handle.remove()
    return None
'''),
    dict(exercise='08-ex2', name='linear-layers-only', expect='fail', mistake=None,
         relation='twice the expected value (×2)', source='''
def first_nonfinite(model, batches, lr):
    found, current = [], {"step": 0}

    def bad(t):
        return not torch.isfinite(t).all()

    def check(tensors, phase, name):
        tensors = tensors if isinstance(tensors, tuple) else (tensors,)
        if any(t is not None and bad(t) for t in tensors):
            found.append((current["step"], phase, name))

    handles = []
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        handles.append(module.register_forward_hook(
            lambda m, args, out, name=name: check(out, "forward", name)))
        handles.append(module.register_full_backward_hook(
            lambda m, grad_in, grad_out, name=name: check(grad_in, "backward", name)))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    try:
        for step, (inputs, targets) in enumerate(batches):
            current["step"] = step
            optimizer.zero_grad()
            F.mse_loss(model(inputs), targets).backward()
            
            if found:
                return found[0]
            optimizer.step()
    finally:
        for handle in handles:
            handle.remove()
    return None
'''),
    dict(exercise='08-ex2', name='first-hit-in-state', expect='pass', source='''
class _Found(Exception):
    pass


def first_nonfinite(model, batches, lr):
    state = {"step": 0, "hit": None}

    def check(tensors, phase, name):
        if not isinstance(tensors, (tuple, list)):
            tensors = [tensors]
        for t in tensors:
            if t is not None and (torch.isnan(t).any() or torch.isinf(t).any()):
                if state["hit"] is None:
                    state["hit"] = (state["step"], phase, name)

    handles = []
    for name, module in model.named_modules():
        if next(module.children(), None) is not None:
            continue
        handles.append(module.register_forward_hook(
            lambda m, a, o, name=name: check(o, "forward", name)))
        handles.append(module.register_full_backward_hook(
            lambda m, gi, go, name=name: check(gi, "backward", name)))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    try:
        for step, (x, y) in enumerate(batches):
            state["step"] = step
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            if state["hit"] is not None:
                return state["hit"]
            opt.step()
        return None
    finally:
        for h in handles:
            h.remove()
'''),
    dict(exercise="08-ex2", name="old-backward-hook", expect="fail",
         mistake="register_backward_hook",
         source=_hunter().replace("register_full_backward_hook", "register_backward_hook")),
    # a blind review's answer (08-ex1/w_prehook_handle_missing.py)
    dict(exercise="08-ex1", name="pre-hook-handle-not-returned", expect="fail",
         mistake=None,
         source='''
def attach_grad_monitor(model, scaler):
    history, handles = {}, []
    step = {"scale": 1.0}
    model.register_forward_pre_hook(lambda m, a: step.__setitem__("scale", scaler.get_scale()))
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        history[name] = {"output rms": [], "grad norm": []}

        def forward_hook(mod, args, output, name=name):
            if not output.requires_grad:
                return
            rms = output.detach().pow(2).mean().sqrt().item()
            scale = step["scale"]

            def on_grad(grad):
                history[name]["output rms"].append(rms)
                history[name]["grad norm"].append(grad.norm().item() / scale)
            output.register_hook(on_grad)
        handles.append(module.register_forward_hook(forward_hook))
    return history, handles
'''),
]
