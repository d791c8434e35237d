"""Scenarios of lesson 08 (hooks in a training stack): what the grader observes of each answer.

Instructors only: never released to students. See docs/AUTHORING.md, "Scenarios".
Networks are small (a few Linear layers of a few units), their weights and data drawn from
`rng`; the visible scenarios rebuild the test cells' own examples. Exercise 3 runs for real
in two processes joined by gloo over the sandbox's own loopback (`run_ddp`).
"""

import warnings
from collections import OrderedDict

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.amp import GradScaler
from torch.nn.parallel import DistributedDataParallel as DDP

from coursekit.drawing import domain, draw, names
from coursekit.scenarios import (CellCheck, cell_checks, expect_equal, expect_tensor, expect_true,
                                 mistake, scenario)
from coursekit.training_stack import Checkpointed, run_ddp, stack_net

domain("08-ex1", "models with Linear layers at any depth under any names, beside other modules "
                 "with weights, no, one or two checkpointed blocks (either use_reentrant), scales "
                 "that change or stay, batches of one or more")
domain("08-ex3", "networks whose gradients fill one or several buckets, run in two or three "
                 "processes for two or three passes, batches of one or more")
domain("08-ex2", "models with nested blocks, a NaN or an infinity in the forward or the backward "
                 "pass at the first step or a later one, runs that stay finite, huge finite "
                 "values included")


def _size(rng, low, high):
    """An integer in [low, high]."""
    return int(torch.randint(low, high + 1, (), generator=rng))


def _widths(rng, low_depth, high_depth):
    return [_size(rng, 2, 7)] + [_size(rng, 3, 12) for _ in range(_size(rng, low_depth,
                                                                        high_depth))] + [3]


# ------------------------------------------------------- 08-ex1: attach_grad_monitor

def _batch(rng, features, size):
    return (torch.randn(size, features, generator=rng),
            torch.randint(0, 3, (size,), generator=rng))


def _floats(entries):
    return [float(entry) for entry in entries]


_RETURNS = "(history, handles): a dict and a list"


def _module_hooks(model):
    return sum(len(m._forward_hooks) + len(m._backward_hooks) + len(m._forward_pre_hooks)
               + len(m._backward_pre_hooks) for m in model.modules())


_HOOKS_AFTER = "hooks left on the model's modules after its handles were removed"


def _monitor(attach_grad_monitor, model, scaler, batches, lr=0.1, count_hooks=True):
    """Run the scaled steps with the monitor attached; observe its records, then remove its
    handles and observe that one more step adds nothing (and, unless `count_hooks` is False,
    that no module hook is left: the test cell counts none)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    returned = attach_grad_monitor(model, scaler)
    if not (isinstance(returned, tuple) and len(returned) == 2 and isinstance(returned[0], dict)
            and isinstance(returned[1], (list, tuple))):
        return {_RETURNS: False}
    history, handles = returned
    for images, labels in batches:
        optimizer.zero_grad()
        scaler.scale(F.cross_entropy(model(images), labels)).backward()
        scaler.step(optimizer)
        scaler.update()
    observed = {_RETURNS: True, "layers": sorted(str(name) for name in history),
                "output rms": {str(n): _floats(h["output rms"]) for n, h in history.items()},
                "grad norm": {str(n): _floats(h["grad norm"]) for n, h in history.items()}}
    for handle in handles:
        handle.remove()
    if count_hooks:
        observed[_HOOKS_AFTER] = _module_hooks(model)
    images, labels = batches[0]
    scaler.scale(F.cross_entropy(model(images), labels)).backward()
    observed["entries after the handles were removed and one more step"] = {
        str(n): len(h["grad norm"]) for n, h in history.items()}
    return observed


_MONITOR_TOLERANCE = {"output rms": (1e-4, 1e-7), "grad norm": (1e-4, 1e-7)}


def _visible_monitor(attach_grad_monitor):
    """The test cell's first example: three steps of a checkpointed network, a scale that
    doubles at every step."""
    torch.manual_seed(7)
    monitored = stack_net([5, 12, 12, 12, 3], checkpointed=True)
    data = torch.Generator().manual_seed(8)
    batches = [(torch.randn(16, 5, generator=data), torch.randint(0, 3, (16,), generator=data))
               for _ in range(3)]
    scaler = GradScaler("cpu", init_scale=256.0, growth_interval=1)
    return _monitor(attach_grad_monitor, monitored, scaler, batches, count_hooks=False), batches


_REENTRANT_RAN = "one step through a reentrant checkpoint ran"
_NO_GRAD_HOOK = "that step raised: a tensor hook on an output that needs no gradient"
_REENTRANT_ENTRIES = "entries per layer with a reentrant checkpoint, after 1 step"


@scenario("08-ex1", uses=["attach_grad_monitor"], visible=True,
          title="the example of the test cell", tolerance=_MONITOR_TOLERANCE)
def monitor_visible(attach_grad_monitor, rng):
    observed, batches = _visible_monitor(attach_grad_monitor)
    if not observed[_RETURNS]:
        return observed
    # The test cell's second example: one step through a reentrant checkpoint
    torch.manual_seed(9)
    reentrant = stack_net([5, 6, 6, 3], checkpointed=True, use_reentrant=True)
    images = batches[0][0].clone().requires_grad_()
    try:
        optimizer, scaler = torch.optim.SGD(reentrant.parameters(), lr=0.1), GradScaler("cpu")
        history, _ = attach_grad_monitor(reentrant, scaler)
        optimizer.zero_grad()
        scaler.scale(F.cross_entropy(reentrant(images), batches[0][1])).backward()
        scaler.step(optimizer)
        scaler.update()
    except RuntimeError as err:
        observed[_REENTRANT_RAN] = False
        observed[_NO_GRAD_HOOK] = "require gradient" in str(err)
        return observed
    observed[_REENTRANT_RAN], observed[_NO_GRAD_HOOK] = True, False
    observed[_REENTRANT_ENTRIES] = {str(name): len(h["grad norm"]) for name, h in history.items()}
    return observed


@scenario("08-ex1", uses=["attach_grad_monitor"], tolerance=_MONITOR_TOLERANCE,
          title="a reentrant checkpoint, another scale, a batch of one or more")
def monitor_reentrant(attach_grad_monitor, rng):
    widths = _widths(rng, 2, 4)
    torch.manual_seed(_size(rng, 0, 10_000))
    model = stack_net(widths, checkpointed=True, use_reentrant=True)
    scaler = GradScaler("cpu", init_scale=2.0 ** _size(rng, 4, 16),
                        growth_interval=_size(rng, 1, 3))
    batches = [_batch(rng, widths[0], _size(rng, 1, 9)) for _ in range(_size(rng, 2, 4))]
    # A reentrant checkpoint passes gradients only to inputs that require them
    return _monitor(attach_grad_monitor, model, scaler,
                    [(images.requires_grad_(), labels) for images, labels in batches])


@scenario("08-ex1", uses=["attach_grad_monitor"], tolerance=_MONITOR_TOLERANCE,
          title="two checkpointed blocks between plain layers, nested names")
def monitor_nested(attach_grad_monitor, rng):
    features, width = _size(rng, 2, 6), _size(rng, 3, 10)
    torch.manual_seed(_size(rng, 0, 10_000))

    def block():
        return Checkpointed(nn.Sequential(nn.Linear(width, width), nn.Tanh(),
                                          nn.Linear(width, width), nn.Tanh()),
                            use_reentrant=bool(_size(rng, 0, 1)))

    model = nn.Sequential(OrderedDict(
        stem=nn.Linear(features, width), first=block(), second=block(),
        head=nn.Sequential(nn.Tanh(), nn.Linear(width, 3))))
    scaler = GradScaler("cpu", init_scale=2.0 ** _size(rng, 0, 12), growth_interval=1)
    return _monitor(attach_grad_monitor, model, scaler,
                    [_batch(rng, features, _size(rng, 2, 8)) for _ in range(3)])


@scenario("08-ex1", uses=["attach_grad_monitor"], tolerance=_MONITOR_TOLERANCE,
          title="Linear layers under drawn names beside a LayerNorm, a batch of one")
def monitor_drawn_names(attach_grad_monitor, rng):
    from hypothesis import strategies as st
    # names a module may have, drawn from all identifiers (none of Sequential's attributes)
    labels = draw(st.lists(names(1, 10).filter(lambda n: not hasattr(nn.Sequential(), n)),
                           min_size=5, max_size=5, unique=True), rng)
    features, width = _size(rng, 2, 6), _size(rng, 3, 10)
    torch.manual_seed(_size(rng, 0, 10_000))
    inner = nn.Sequential(OrderedDict([(labels[2], nn.Linear(width, width)),
                                       (labels[3], nn.LayerNorm(width)), ("tanh", nn.Tanh())]))
    model = nn.Sequential(OrderedDict([
        (labels[0], nn.Linear(features, width)),
        (labels[1], Checkpointed(inner, use_reentrant=bool(_size(rng, 0, 1)))),
        (labels[4], nn.Linear(width, 3))]))
    scaler = GradScaler("cpu", init_scale=2.0 ** _size(rng, 0, 12), growth_interval=1)
    return _monitor(attach_grad_monitor, model, scaler,
                    [_batch(rng, features, 1) for _ in range(_size(rng, 2, 3))])


@scenario("08-ex1", uses=["attach_grad_monitor"], tolerance=_MONITOR_TOLERANCE,
          title="no checkpoint, a scale that stays")
def monitor_plain(attach_grad_monitor, rng):
    widths = _widths(rng, 1, 3)
    torch.manual_seed(_size(rng, 0, 10_000))
    scaler = GradScaler("cpu", init_scale=2.0 ** _size(rng, 1, 16))
    return _monitor(attach_grad_monitor, stack_net(widths), scaler,
                    [_batch(rng, widths[0], _size(rng, 1, 8)) for _ in range(2)])


@mistake("08-ex1", "The forward hook appended the output's statistic, and it runs again in the "
                   "checkpoint's recomputation during backward: append it when the output's "
                   "gradient arrives, in the tensor hook.", replaces="attach_grad_monitor")
def monitor_appends_in_forward(model, scaler):
    return _monitor_variant(model, scaler, rms_in_forward=True)


@mistake("08-ex1", "These are the norms of the scaled gradients the backward pass carries: divide "
                   "by scaler.get_scale(), read when the gradient arrives.",
         replaces="attach_grad_monitor")
def monitor_scaled(model, scaler):
    return _monitor_variant(model, scaler, unscale=False)


@mistake("08-ex1", "The forward hook appended the output's statistic whenever gradients were "
                   "enabled, and they are in the non-reentrant checkpoint's recomputation during "
                   "backward: append it when the output's gradient arrives, in the tensor hook.",
         replaces="attach_grad_monitor")
def monitor_appends_when_grad_enabled(model, scaler):
    return _monitor_variant(model, scaler, rms_in_forward=True, grad_mode_only=True)


@mistake("08-ex1", "The scale was read once, when the hooks were attached, and update() changes "
                   "it between steps: read scaler.get_scale() when the gradient arrives.",
         replaces="attach_grad_monitor")
def monitor_scale_read_once(model, scaler):
    return _monitor_variant(model, scaler, scale_once=True)


@mistake("08-ex1", "The output's statistic is its mean square, without the root: the rms is "
                   "output.pow(2).mean().sqrt().", replaces="attach_grad_monitor")
def monitor_mean_square(model, scaler):
    return _monitor_variant(model, scaler, statistic=lambda output, args: output.pow(2).mean())


@mistake("08-ex1", "The output's statistic is its standard deviation, std(), which subtracts the "
                   "mean first: the rms is output.pow(2).mean().sqrt().",
         replaces="attach_grad_monitor")
def monitor_std(model, scaler):
    return _monitor_variant(model, scaler, statistic=lambda output, args: output.std())


@mistake("08-ex1", "The statistic is the rms of the layer's input, args[0]: the forward hook's "
                   "third argument is the output.", replaces="attach_grad_monitor")
def monitor_input_rms(model, scaler):
    return _monitor_variant(model, scaler,
                            statistic=lambda output, args: args[0].pow(2).mean().sqrt())


def _monitor_variant(model, scaler, rms_in_forward=False, unscale=True, grad_mode_only=False,
                     scale_once=False,
                     statistic=lambda output, args: output.pow(2).mean().sqrt()):
    history, handles = {}, []
    first_scale = scaler.get_scale()
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        history[name] = {"output rms": [], "grad norm": []}

        def forward_hook(module, args, output, name=name):
            if grad_mode_only and not torch.is_grad_enabled():
                return
            rms = statistic(output.detach(), tuple(a.detach() for a in args))
            if rms_in_forward:
                history[name]["output rms"].append(rms)
            if not output.requires_grad:
                return

            def record(grad):
                if not rms_in_forward:
                    history[name]["output rms"].append(rms)
                scale = first_scale if scale_once else scaler.get_scale()
                history[name]["grad norm"].append(grad.norm() / (scale if unscale else 1.0))

            output.register_hook(record)

        handles.append(module.register_forward_hook(forward_hook))
    return history, handles


# The test cell's checks, restated on what monitor_visible observes
_LINEARS = ("body.block.0", "body.block.2", "body.block.4", "head")


def _lengths(seen):
    return {name: (len(seen["output rms"][name]), len(seen["grad norm"][name]))
            for name in seen["layers"]}


def _recorded_twice(seen):
    """Whether only the checkpointed layers recorded more than one output rms per step."""
    lengths = _lengths(seen)
    doubled = [name for name in seen["layers"] if lengths[name][0] > 3]
    return bool(doubled) and all(name.startswith("body.") for name in doubled) and \
        lengths.get("head") == (3, 3)


def _recorded_twice_said(seen):
    lengths = _lengths(seen)
    doubled = [name for name in seen["layers"] if lengths[name][0] > 3]
    return (f"{doubled} recorded more than one output rms per step ({lengths}). Likely "
            "mistake: the forward hook runs again in the checkpoint's recomputation during "
            "backward; append the output's statistic when its gradient arrives, not in the "
            "forward hook")


_SCALED = "these are the scaled gradients' norms: divide by scaler.get_scale()"
_READ_ONCE = ("the scale was read once, before the first step, and it changes between steps: "
              "read scaler.get_scale() once per step, for instance in a forward pre-hook on the "
              "model")


def _visible_grad_norms(**wrong):
    """The grad norms that a monitor written with one of `_monitor_variant`'s mistakes records
    on the test cell's example (the values the cell's `mistakes` compute)."""
    observed, _ = _visible_monitor(lambda model, scaler: _monitor_variant(model, scaler, **wrong))
    return {name: torch.tensor(norms) for name, norms in observed["grad norm"].items()}


def _grad_norm_checks():
    scaled, read_once = _visible_grad_norms(unscale=False), _visible_grad_norms(scale_once=True)
    checks = []
    for name in _LINEARS:
        checks.append(expect_tensor("output rms", name=f"output rms of {name}", rtol=1e-4,
                                    read=lambda seen, name=name: torch.tensor(
                                        seen["output rms"][name])))
        checks.append(expect_tensor("grad norm", name=f"grad norm of {name}", rtol=1e-4,
                                    read=lambda seen, name=name: torch.tensor(
                                        seen["grad norm"][name]),
                                    mistakes={_SCALED: scaled[name],
                                              _READ_ONCE: read_once[name]}))
    return checks


CELL_08_EX1 = cell_checks(
    "08-ex1",
    expect_true(lambda seen: seen[_RETURNS],
                "attach_grad_monitor should return (history, handles): a dict and a list"),
    expect_equal("layers", name="the layers in history",
                 hint="every nn.Linear at any depth, named as model.named_modules() names it "
                      "(\"body.block.0\"), not only the children of the model"),
    expect_true(lambda seen: not _recorded_twice(seen), _recorded_twice_said),
    CellCheck("equal", "layers", "entries per layer (output rms, grad norm) after 3 steps",
              "one entry in each list per training step", read=_lengths),
    *_grad_norm_checks(),
    expect_equal("entries after the handles were removed and one more step",
                 hint="return the handles of every hook you registered"),
    expect_true(lambda seen: seen[_REENTRANT_RAN], lambda seen: (
        "with use_reentrant=True: RuntimeError: cannot register a hook on a tensor that "
        "doesn't require gradient. The first forward pass of a reentrant checkpoint runs "
        "without gradients: register the tensor hook only when output.requires_grad")
        if seen[_NO_GRAD_HOOK] else None),
    expect_equal(_REENTRANT_ENTRIES))


# ------------------------------------------------------- 08-ex3: bucket_norm_hook

def _bucket_run(bucket_norm_hook, widths, bucket_cap_mb, seed, data_seed, steps, batch,
                world_size=2):
    """Backward passes (no optimizer step) in two processes with the hook registered:
    per process, the norm it recorded at each call, the parameters of each call's bucket (by
    their index in model.parameters()) and the gradients after the last pass."""
    def worker(rank, world_size):
        torch.manual_seed(seed)
        model = stack_net(widths)
        ddp = DDP(model, bucket_cap_mb=bucket_cap_mb)
        index = {id(p): k for k, p in enumerate(model.parameters())}
        state, buckets, current = {"norms": []}, [], {"step": 0}

        def spy(state, bucket):
            buckets.append([current["step"], [index[id(p)] for p in bucket.parameters()]])
            return bucket_norm_hook(state, bucket)

        ddp.register_comm_hook(state, spy)
        data = torch.Generator().manual_seed(data_seed + rank)
        for step in range(steps):
            current["step"] = step
            ddp.zero_grad()
            ddp(torch.randn(batch, widths[0], generator=data)).pow(2).mean().backward()
        return {"norms": [float(norm) for norm in state["norms"]],
                "types": sorted({type(norm).__name__ for norm in state["norms"]}),
                "buckets": buckets,
                "grads": torch.cat([p.grad.flatten() for p in model.parameters()]).tolist()}

    observed = {}
    for rank, result in enumerate(run_ddp(worker, world_size)):
        observed[f"bucket norms recorded by process {rank}"] = result["norms"]
        observed[f"types of the norms of process {rank}"] = result["types"]
        observed[f"buckets of process {rank} (step, parameters)"] = result["buckets"]
        observed[f"gradients of process {rank} after the last pass"] = torch.tensor(
            result["grads"])
    return observed


_BUCKET_TOLERANCE = {key.format(rank): (1e-4, 1e-7) for rank in range(3) for key in (
    "bucket norms recorded by process {}", "gradients of process {} after the last pass")}


_PROCESS_FAILED = "a process failed"
_VISIBLE_BUCKETS = {"widths": [6, 40, 40, 3], "seed": 5, "data_seed": 50, "steps": 2, "batch": 8}


@scenario("08-ex3", uses=["bucket_norm_hook"], visible=True,
          title="the example of the test cell", tolerance=_BUCKET_TOLERANCE)
def buckets_visible(bucket_norm_hook, rng):
    try:
        observed = _bucket_run(bucket_norm_hook, bucket_cap_mb=0.004, **_VISIBLE_BUCKETS)
    except RuntimeError as err:  # what the test cell tells apart: a hook that returns no future
        # torch's words when the hook returns no Future, a Future that never completes, or
        # one whose value is not the bucket's tensor (a list: an internal assert, isPyObject)
        future = any(words in str(err) for words in ("Future", "without a result",
                                                     "isPyObject"))
        return {_PROCESS_FAILED: "over the hook's result" if future else "another error"}
    return {_PROCESS_FAILED: None, **observed}


# The test cell's checks, restated on what buckets_visible observes

def _local_gradients():
    """Each process's own gradients at each pass of the test cell's example, without DDP
    (the cell's `local_gradients`): [rank][step][parameter]."""
    runs = []
    for rank in range(2):
        torch.manual_seed(_VISIBLE_BUCKETS["seed"])
        model = stack_net(_VISIBLE_BUCKETS["widths"])
        data = torch.Generator().manual_seed(_VISIBLE_BUCKETS["data_seed"] + rank)
        steps = []
        for _ in range(_VISIBLE_BUCKETS["steps"]):
            model.zero_grad()
            model(torch.randn(_VISIBLE_BUCKETS["batch"], _VISIBLE_BUCKETS["widths"][0],
                              generator=data)).pow(2).mean().backward()
            steps.append([p.grad.flatten().clone() for p in model.parameters()])
        runs.append(steps)
    return runs


def _averaged_norms(rank, factor=1.0):
    """The norms of the averaged buckets (times `factor`), for the buckets the reference's run
    of process `rank` was handed."""
    local = _local_gradients()

    def norms(seen):
        return torch.tensor([
            torch.cat([(local[0][step][k] + local[1][step][k]) / 2 for k in bucket]).norm().item()
            for step, bucket in seen[f"buckets of process {rank} (step, parameters)"]]) * factor
    return norms


_FUTURE = ("a comm hook must return a torch.futures.Future whose value is the bucket's tensor "
           "(all_reduce(..., async_op=True).get_future().then(lambda fut: fut.value()[0]))")


def _bucket_process_checks(rank):
    norms, gradients = (f"bucket norms recorded by process {rank}",
                        f"gradients of process {rank} after the last pass")
    return (
        CellCheck("equal", norms, f"number of norms recorded by process {rank}",
                  "append one norm per call of the hook", read=lambda seen: len(seen[norms])),
        expect_equal(f"types of the norms of process {rank}",
                     hint="append Python floats: buffer.norm().item()"),
        expect_tensor(norms, rtol=1e-4, read=lambda seen: torch.tensor(seen[norms]), mistakes={
            "these are the norms after averaging: read the norm before all_reduce, which "
            "changes the buffer in place": _averaged_norms(rank),
            "these are the norms after all_reduce's sum: read the norm before communicating":
                _averaged_norms(rank, 2.0)}),
        expect_tensor(gradients, name=f"gradients of process {rank} after the second step",
                      rtol=1e-4, mistakes={
                          "the gradients are summed, not averaged: divide the bucket by "
                          "dist.get_world_size() before (or after) all_reduce":
                              lambda seen: 2 * seen[gradients]}))


CELL_08_EX3 = cell_checks(
    "08-ex3",
    expect_true(lambda seen: seen[_PROCESS_FAILED] != "over the hook's result",
                f"a process failed over the hook's result. Likely mistake: {_FUTURE}"),
    expect_true(lambda seen: seen[_PROCESS_FAILED] is None, None),
    *_bucket_process_checks(0), *_bucket_process_checks(1))


@scenario("08-ex3", uses=["bucket_norm_hook"], tolerance=_BUCKET_TOLERANCE,
          title="another network, several buckets, three passes")
def buckets_random(bucket_norm_hook, rng):
    widths = [_size(rng, 2, 12)] + [_size(rng, 16, 48) for _ in range(_size(rng, 1, 3))] + [
        _size(rng, 1, 4)]
    return _bucket_run(bucket_norm_hook, widths, 0.001 * _size(rng, 1, 6),
                       seed=_size(rng, 0, 10_000), data_seed=_size(rng, 0, 10_000), steps=3,
                       batch=_size(rng, 1, 10))


@scenario("08-ex3", uses=["bucket_norm_hook"], tolerance=_BUCKET_TOLERANCE,
          title="three processes, a batch of one")
def buckets_three_processes(bucket_norm_hook, rng):
    widths = [_size(rng, 2, 8), _size(rng, 16, 40), _size(rng, 1, 4)]
    return _bucket_run(bucket_norm_hook, widths, 0.001 * _size(rng, 1, 4),
                       seed=_size(rng, 0, 10_000), data_seed=_size(rng, 0, 10_000),
                       steps=_size(rng, 2, 3), batch=1, world_size=3)


@mistake("08-ex3", "These are the norms after averaging: all_reduce works in place, so read the "
                   "norm of the buffer before communicating.", replaces="bucket_norm_hook")
def bucket_norm_after_average(state, bucket):
    # The norm is read once all_reduce is done, in the order of the calls (a norm read in the
    # future's callback is appended in the order the buckets finish, which varies)
    buffer = bucket.buffer().div_(dist.get_world_size())
    work = dist.all_reduce(buffer, async_op=True)
    work.wait()
    state["norms"].append(buffer.norm().item())
    return work.get_future().then(lambda future: future.value()[0])


@mistake("08-ex3", "The gradients are summed over the processes, not averaged: divide the "
                   "bucket by dist.get_world_size().", replaces="bucket_norm_hook")
def bucket_summed(state, bucket):
    state["norms"].append(bucket.buffer().norm().item())
    work = dist.all_reduce(bucket.buffer(), async_op=True)
    return work.get_future().then(lambda future: future.value()[0])


def _bucket_variant(state, bucket, record):
    buffer = bucket.buffer()
    record(state, bucket)
    buffer.div_(dist.get_world_size())
    work = dist.all_reduce(buffer, async_op=True)
    return work.get_future().then(lambda future: future.value()[0])


@mistake("08-ex3", "The recorded value is the squared norm, the sum of squares: the norm is its "
                   "square root, buffer.norm().", replaces="bucket_norm_hook")
def bucket_squared_norm(state, bucket):
    return _bucket_variant(state, bucket, lambda state, bucket: state["norms"].append(
        bucket.buffer().pow(2).sum().item()))


@mistake("08-ex3", "The norms are recorded as tensors: record plain numbers, with .item().",
         replaces="bucket_norm_hook")
def bucket_norm_tensor(state, bucket):
    return _bucket_variant(state, bucket, lambda state, bucket: state["norms"].append(
        bucket.buffer().norm().clone()))


@mistake("08-ex3", "state['norms'] is replaced at each call, so only the last bucket's norm is "
                   "left: append to the list.", replaces="bucket_norm_hook")
def bucket_norms_replaced(state, bucket):
    return _bucket_variant(state, bucket, lambda state, bucket: state.__setitem__(
        "norms", [bucket.buffer().norm().item()]))


@mistake("08-ex3", "The norm is of the bucket's first gradient only: bucket.buffer() holds all "
                   "of the bucket's gradients, flattened; take its norm.",
         replaces="bucket_norm_hook")
def bucket_first_gradient(state, bucket):
    return _bucket_variant(state, bucket, lambda state, bucket: state["norms"].append(
        bucket.gradients()[0].norm().item()))


# ------------------------------------------------------- 08-ex2: first_nonfinite

class ShiftedRoot(nn.Module):
    """sqrt(x + shift) where x > -shift, else 0: finite forward, NaN gradient below -shift."""

    def __init__(self, shift=1.0):
        super().__init__()
        self.shift = shift

    def forward(self, x):
        return torch.where(x > -self.shift, (x + self.shift).sqrt(), torch.zeros_like(x))


class LogAbs(nn.Module):
    """log|x|: minus infinity in the forward pass where x is exactly 0."""

    def forward(self, x):
        return x.abs().log()


def _hunt(first_nonfinite, model, batches, lr):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        found = first_nonfinite(model, batches, lr)
    hooks = sum(len(m._forward_hooks) + len(m._backward_hooks) + len(m._forward_pre_hooks)
                + len(m._backward_pre_hooks) for m in model.modules())
    observed = {"hooks left on the model": hooks}
    if found is None or not isinstance(found, tuple) or len(found) != 3:
        observed["the result"] = None if found is None else repr(found)[:200]
        return observed
    step, phase, name = found
    observed["the result"] = "a (step, phase, name) tuple"
    observed["step"] = int(step)
    observed["phase"] = str(phase)
    observed["module"] = str(name)
    return observed


def _root_net(seed, features=4, width=8):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(features, width), ShiftedRoot(), nn.Linear(width, 1))


def _visible_root_batches():
    data = torch.Generator().manual_seed(3)
    return [(torch.randn(8, 4, generator=data), torch.randn(8, 1, generator=data) * 4)
            for _ in range(12)]


@scenario("08-ex2", uses=["first_nonfinite"], visible=True,
          title="the examples of the test cell")
def hunt_visible(first_nonfinite, rng):
    root_batches = _visible_root_batches()
    torch.manual_seed(1)
    blowing_up = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                               nn.Linear(16, 1))
    diverging = [(torch.randn(32, 6), torch.randn(32, 1))] * 20
    return {"root_net(11)": _hunt(first_nonfinite, _root_net(11), root_batches, 0.3),
            "the diverging run": _hunt(first_nonfinite, blowing_up, diverging, 1.0),
            "a run that stays finite": _hunt(first_nonfinite, _root_net(11), root_batches[:1],
                                             0.3)}


@scenario("08-ex2", uses=["first_nonfinite"],
          title="a NaN gradient inside a nested block")
def hunt_nested_root(first_nonfinite, rng):
    features, width = _size(rng, 2, 6), _size(rng, 3, 10)
    torch.manual_seed(_size(rng, 0, 10_000))
    model = nn.Sequential(OrderedDict(
        stem=nn.Linear(features, width),
        block=nn.Sequential(nn.Tanh(), nn.Linear(width, width), ShiftedRoot(0.5)),
        head=nn.Linear(width, 1)))
    batches = [(torch.randn(_size(rng, 1, 8), features, generator=rng) * 2,
                torch.randn(1, 1, generator=rng) * 5) for _ in range(_size(rng, 3, 10))]
    batches = [(x, y.expand(x.shape[0], 1)) for x, y in batches]
    return _hunt(first_nonfinite, model, batches, 0.05 * _size(rng, 1, 8))


@scenario("08-ex2", uses=["first_nonfinite"],
          title="a network that diverges: an infinity in the forward pass")
def hunt_diverging(first_nonfinite, rng):
    features = _size(rng, 3, 8)
    torch.manual_seed(_size(rng, 0, 10_000))
    first, second = _size(rng, 8, 16), _size(rng, 8, 16)
    model = nn.Sequential(nn.Linear(features, first), nn.ReLU(), nn.Linear(first, second),
                          nn.ReLU(), nn.Linear(second, 1))
    x = torch.randn(_size(rng, 8, 32), features, generator=rng)
    y = torch.randn(x.shape[0], 1, generator=rng)
    return _hunt(first_nonfinite, model, [(x, y)] * 25, 1.0 + _size(rng, 0, 10) / 10)


@scenario("08-ex2", uses=["first_nonfinite"],
          title="minus infinity from a log, at a step after the first")
def hunt_log(first_nonfinite, rng):
    features = _size(rng, 2, 5)
    torch.manual_seed(_size(rng, 0, 10_000))
    model = nn.Sequential(nn.Linear(features, 4), LogAbs(), nn.Linear(4, 1))
    steps = _size(rng, 2, 6)
    batches = [(torch.randn(_size(rng, 1, 6), features, generator=rng), None)
               for _ in range(steps)]
    zero_at = _size(rng, 1, steps - 1)
    batches = [(x if k != zero_at else torch.zeros_like(x), torch.zeros(x.shape[0], 1))
               for k, (x, _) in enumerate(batches)]
    with torch.no_grad():
        model[0].bias.zero_()
    return _hunt(first_nonfinite, model, batches, 0.0)


@scenario("08-ex2", uses=["first_nonfinite"],
          title="huge but finite values: sums and norms of them overflow, no entry does")
def hunt_huge_finite(first_nonfinite, rng):
    features, width, batch = _size(rng, 2, 6), _size(rng, 16, 32), _size(rng, 8, 16)
    torch.manual_seed(_size(rng, 0, 10_000))
    model = nn.Sequential(nn.Linear(features, width), nn.Tanh(), nn.Linear(width, 1))
    with torch.no_grad():  # positive weights: every output of the first layer is about 1e37
        model[0].weight.uniform_(0.5 / features, 1.0 / features, generator=rng)
        model[0].bias.zero_()
    batches = [((1 + torch.rand(batch, features, generator=rng)) * 1e37,
                torch.randn(batch, 1, generator=rng)) for _ in range(_size(rng, 1, 3))]
    return _hunt(first_nonfinite, model, batches, 0.1)


@scenario("08-ex2", uses=["first_nonfinite"], title="a run that stays finite")
def hunt_calm(first_nonfinite, rng):
    widths = _widths(rng, 1, 3)
    torch.manual_seed(_size(rng, 0, 10_000))
    model = stack_net(widths[:-1] + [1])
    batches = [(torch.randn(_size(rng, 1, 8), widths[0], generator=rng), None)
               for _ in range(3)]
    batches = [(x, torch.randn(x.shape[0], 1, generator=rng)) for x, _ in batches]
    return _hunt(first_nonfinite, model, batches, 0.01)


# The test cell's checks, restated on what hunt_visible observes

def _anomaly_stop(model, batches, lr):
    """The step at which anomaly mode stops the same training, and the backward it names."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autograd.detect_anomaly():
            for step, (inputs, targets) in enumerate(batches):
                optimizer.zero_grad()
                try:
                    F.mse_loss(model(inputs), targets).backward()
                except RuntimeError as err:
                    return step, str(err).split("'")[1]
                optimizer.step()
    raise AssertionError("anomaly mode does not stop the test cell's example")


def _result(run):
    return lambda seen: (seen[run]["step"], seen[run]["phase"], seen[run]["module"])


def _hunt_cell_checks():
    step, operation = _anomaly_stop(_root_net(11), _visible_root_batches(), 0.3)
    hints = {(step + 1, "backward", "1"): "count the steps from 0, as enumerate does",
             (step, "backward", "0"): "this is the module whose grad_output holds the NaN; "
                                      "the module that produced it has it in grad_input"}
    return cell_checks(
        "08-ex2",
        # a function: the cell's words with the step and the operation anomaly mode names
        expect_true(lambda seen: seen["root_net(11)"]["the result"] is not None, lambda seen:
                    f"first_nonfinite(root_net(11), ...) returned None, but anomaly mode stops "
                    f"at step {step} ({operation}): the NaN appears only in the backward pass, "
                    "check grad_input in a full backward hook"),
        CellCheck("equal", "root_net(11)", "the result for root_net(11)",
                  lambda seen: hints.get(seen["root_net(11)"],  # what `read` made of it
                                         "the first failed check: step, phase and module, as "
                                         "anomaly mode finds them"),
                  read=_result("root_net(11)")),
        expect_true(lambda seen: seen["the diverging run"]["the result"] is not None,
                    "the diverging run returned None: its first failure is an infinity, and "
                    "torch.isnan does not see infinities; test torch.isfinite(t).all()"),
        CellCheck("equal", "the diverging run", "the result for the diverging run",
                  "the first failed check of the run, before any later one in the same step",
                  read=_result("the diverging run")),
        CellCheck("none", "a run that stays finite", "the result of a run that stays finite",
                  read=lambda seen: seen["a run that stays finite"]["the result"]),
        CellCheck("equal", "hooks left on the models", "hooks left on the models",
                  "remove every handle before returning (try/finally)",
                  read=lambda seen: sum(run["hooks left on the model"] for run in seen.values())))


CELL_08_EX2 = _hunt_cell_checks()


@mistake("08-ex2", "torch.isnan does not see infinities, and an infinity usually comes first: "
                   "test torch.isfinite(t).all().", replaces="first_nonfinite")
def hunt_isnan(model, batches, lr):
    return _hunt_variant(model, batches, lr, bad=lambda t: bool(torch.isnan(t).any()))


@mistake("08-ex2", "The backward check reads grad_output, the gradient that arrives at the "
                   "module (or the grad_input of the old register_backward_hook, which for a "
                   "module of several operations belongs to its last one); the module whose "
                   "backward produced a NaN has it in the grad_input of "
                   "register_full_backward_hook.",
         replaces="first_nonfinite")
def hunt_grad_output(model, batches, lr):
    return _hunt_variant(model, batches, lr, use_grad_output=True)


@mistake("08-ex2", "Only outputs were checked: a NaN that appears in the backward pass alone is "
                   "missed; check grad_input in a full backward hook too.",
         replaces="first_nonfinite")
def hunt_forward_only(model, batches, lr):
    return _hunt_variant(model, batches, lr, backward=False)


@mistake("08-ex2", "The steps are counted from 1: count them from 0, as enumerate does.",
         replaces="first_nonfinite")
def hunt_from_one(model, batches, lr):
    found = _hunt_variant(model, batches, lr)
    return None if found is None else (found[0] + 1, found[1], found[2])


def _hunt_variant(model, batches, lr, bad=lambda t: not bool(torch.isfinite(t).all()),
                  use_grad_output=False, backward=True):
    found, current = [], {"step": 0}

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
        if backward:
            handles.append(module.register_full_backward_hook(
                lambda m, grad_in, grad_out, name=name:
                    check(grad_out if use_grad_output else grad_in, "backward", name)))
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
