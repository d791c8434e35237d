"""Scenarios: how an exercise is graded, as observations compared with the reference solution's.

A scenario is a function of the answer under test (the names a student defines in the answer
cell: a function, a class) and of a random generator, that returns *observations*: a dict of
plain data (tensors, numbers, strings, booleans, None, and lists or dicts of them). The grader
runs each scenario twice with the same generator seed: in the sandbox against the student's
answer, and in a trusted process against the lesson's reference solution (the solution
notebook's answer cells). An exercise's test cell earns its points when every scenario of the
exercise gives the same observations both ways (floats within a tolerance). Nothing the
student's process reports decides anything by itself: it can only match or not match.

    @scenario("03-ex2", uses=["clip_and_count"], visible=True)
    def the_visible_example(clip_and_count, rng):
        ...
        return {"t.grad": t.grad, "calls": calls}

    @scenario("03-ex2", uses=["clip_and_count"])        # hidden: inputs drawn from `rng`
    def random_bounds(clip_and_count, rng):
        x = torch.randn(6, generator=rng, requires_grad=True)
        ...

    @mistake("03-ex2", "The hook clamps its argument in place (clamp_) ...")
    def clip_and_count(tensor, low, high):
        ...                                             # a typical wrong answer

`visible=True` marks the scenario that re-checks the visible test's own inputs (its seed is
fixed); the others are hidden, and their seed is drawn for each student from a course secret,
so each student sees other numbers. A mistake is a small wrong implementation of one answer
name: the trusted process runs it through the same scenarios, and when a student's
observations match a mistake's on a failing scenario, the feedback names that mistake.

Scenario files live in `scenarios/<lesson>.py` at the course root (instructors only: never
released to students). This module is imported on both sides, so it holds only what the
scenarios need: the decorators, the encoding of observations into JSON-able data, and spies
that count calls (for rules such as "without retain_grad") or record the gradients autograd
delivers (for rules such as "computed by autograd").
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

__all__ = ["scenario", "mistake", "collect", "Scenario", "Mistake", "encode", "count_calls",
           "gradients_delivered", "generator", "ObservationError", "AuthoringError",
           "cell_checks", "expect_tensor", "expect_equal", "expect_true", "expect_none",
           "expect_same",
           "CellChecks", "CellCheck"]

DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-6
MAX_ELEMENTS = 200_000      # tensor elements one scenario may report, all observations together
MAX_STRING = 2_000          # characters of one string observation
MAX_DEPTH = 8               # nesting of lists and dicts
MAX_ITEMS = 10_000          # items of all lists and dicts of one scenario
# Where the decorators record, in the namespace of the module that defines a function (its
# globals), every scenario and mistake in the order they were made: a later `def` of the same
# name replaces the earlier function in the namespace, never in this list.
_REGISTRY = "__course_scenarios__"


class AuthoringError(ValueError):
    """A scenario module that cannot be graded as written (a name used twice, ...)."""


@dataclass
class Scenario:
    exercise: str
    name: str
    func: Callable[..., dict]
    uses: tuple[str, ...]
    visible: bool = False
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    tolerance: dict[str, tuple[float, float]] = field(default_factory=dict)
    title: str = ""
    # A visible scenario's copy of its exercise's test cell checks (`cell_checks`), set by
    # `collect` from the scenario module; None for hidden scenarios and in a sandbox.
    cell: "CellChecks | None" = None

    def tolerance_for(self, key: str) -> tuple[float, float]:
        return self.tolerance.get(key, (self.rtol, self.atol))


@dataclass
class Mistake:
    exercise: str
    message: str
    func: Callable
    replaces: str


def scenario(exercise: str, *, uses: list[str] | tuple[str, ...], visible: bool = False,
             rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL,
             tolerance: dict[str, tuple[float, float]] | None = None,
             title: str = "") -> Callable:
    """Mark a function as one scenario of `exercise` (e.g. "03-ex2").

    `uses`: the names of the answer the scenario receives, as keyword arguments (besides
    `rng`, a seeded `torch.Generator`). `tolerance`: per observation key, (rtol, atol) for
    floating-point values; the others use `rtol`/`atol`. `title`: how feedback names the
    scenario (default: the function's name with spaces)."""
    def mark(func: Callable) -> Callable:
        func.__scenario__ = Scenario(exercise, func.__name__, func, tuple(uses), visible, rtol,
                                     atol, dict(tolerance or {}),
                                     title or func.__name__.replace("_", " "))
        _register(func, func.__scenario__)
        return func
    return mark


def mistake(exercise: str, message: str, *, replaces: str | None = None) -> Callable:
    """Mark a function as a typical wrong implementation of one answer name of `exercise`
    (by default the function's own name); `message` is what feedback says when a student's
    observations match it."""
    def mark(func: Callable) -> Callable:
        func.__mistake__ = Mistake(exercise, message, func, replaces or func.__name__)
        _register(func, func.__mistake__)
        return func
    return mark


def _register(func: Callable, item: Scenario | Mistake) -> None:
    space = getattr(func, "__globals__", None)
    if isinstance(space, dict):
        registered = space.setdefault(_REGISTRY, [])
        if isinstance(registered, list):
            registered.append(item)


def collect(namespace: dict) -> tuple[list[Scenario], list[Mistake]]:
    """The scenarios and mistakes defined in a scenario module's namespace, in source order.

    Raises AuthoringError, naming the module's file, when a scenario name is used twice in
    the module (the grader tells a lesson's scenario runs apart by name) or when two mistakes
    of one exercise have the same name (the second `def` would hide the first)."""
    found = list(namespace.get(_REGISTRY) or [])
    known = {id(item) for item in found}
    for value in list(namespace.values()):  # also what the module imported from elsewhere
        for attribute in ("__scenario__", "__mistake__"):
            item = getattr(value, attribute, None) if callable(value) else None
            if isinstance(item, (Scenario, Mistake)) and id(item) not in known:
                found.append(item)
                known.add(id(item))
    scenarios = [item for item in found if isinstance(item, Scenario)]
    mistakes = [item for item in found if isinstance(item, Mistake)]
    filename = str(namespace.get("__file__") or "<scenarios>")
    _check_names(scenarios, mistakes, filename)
    _attach_cells(scenarios, [v for v in list(namespace.values()) if isinstance(v, CellChecks)],
                  filename)
    return scenarios, mistakes


def _attach_cells(scenarios: list[Scenario], cells: list["CellChecks"], filename: str) -> None:
    """Give each exercise's visible scenario the test cell checks declared for it."""
    seen: set[str] = set()
    for cell in cells:
        visible = [s for s in scenarios if s.exercise == cell.exercise and s.visible]
        if cell.exercise in seen or len(visible) != 1:
            why = "twice" if cell.exercise in seen else \
                f"for an exercise with {len(visible)} visible scenarios (1 needed)"
            raise AuthoringError(f"{filename}: the test cell checks of {cell.exercise} are "
                                 f"declared {why}")
        seen.add(cell.exercise)
        visible[0].cell = cell


def _check_names(scenarios: list[Scenario], mistakes: list[Mistake], filename: str) -> None:
    problems = []
    by_name: dict[str, list[str]] = {}
    for item in scenarios:
        by_name.setdefault(item.name, []).append(item.exercise)
    for name, exercises in by_name.items():
        if len(exercises) > 1:
            problems.append(f"the scenario name {name!r} is used {len(exercises)} times "
                            f"(exercises {', '.join(exercises)}); give each scenario of a "
                            "lesson a function name of its own")
    by_exercise: dict[tuple[str, str], int] = {}
    for item in mistakes:
        key = (item.exercise, getattr(item.func, "__name__", "?"))
        by_exercise[key] = by_exercise.get(key, 0) + 1
    for (exercise, name), count in by_exercise.items():
        if count > 1:
            problems.append(f"{count} @mistake implementations of {exercise} are named {name!r}; "
                            "give each its own function name and say which answer name it "
                            "stands in for with replaces=\"...\"")
    if problems:
        raise AuthoringError(f"{filename}: " + "; ".join(problems))


# --------------------------------------------------------------------------------------------
# The test cell's checks, as the grader repeats them (the cell's own words on the graded page)

@dataclass(frozen=True)
class CellCheck:
    """One check of an exercise's test cell, restated on the observations of its visible
    scenario: `kind` is the `coursekit.checks` function ("tensor", "equal", "true", "none"),
    `key` the observation it reads (its expected value is the reference's observation), `name`
    what the cell calls it; `message` the hint (or, for "true", the message): a string, or a
    function of the observations (a dict of plain values and tensors) that returns one or None.
    `condition`, for "true": a function of the observations, true when the check passes.
    `read`: where the cell checks a value made from several observations (a stack of a list),
    a function that makes it from the observations, for the answer's and the reference's."""

    kind: str
    key: str = ""
    name: str = ""
    message: Any = None
    mistakes: tuple[tuple[str, Any], ...] = ()
    condition: Callable[[dict], bool] | None = None
    read: Callable[[dict], Any] | None = None
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL


@dataclass(frozen=True)
class CellChecks:
    """The checks of one exercise's test cell, in the cell's order."""

    exercise: str
    checks: tuple[CellCheck, ...]


def cell_checks(exercise: str, *checks: CellCheck) -> CellChecks:
    """Declare, in the order the test cell runs them, what the test cell of `exercise` checks and
    says; assign it to a module-level name of the scenario module. The grader runs the same
    `coursekit.checks` logic on what the visible scenario reported, stops at the first check
    that fails, as the cell does, and shows its message on the graded page."""
    return CellChecks(exercise, tuple(checks))


def expect_tensor(key: str, *, name: str = "", mistakes: dict | None = None, hint: Any = None,
                  read: Callable[[dict], Any] | None = None, rtol: float = DEFAULT_RTOL,
                  atol: float = DEFAULT_ATOL) -> CellCheck:
    """The cell's `check_tensor(name, ..., mistakes=..., hint=...)` on observation `key` (or on
    what `read` makes of the observations). A mistake's value may be a function of the
    reference's observations, where the cell computes it from the example's own values."""
    return CellCheck("tensor", key, name or key, hint, tuple((mistakes or {}).items()),
                     read=read, rtol=rtol, atol=atol)


def expect_equal(key: str, *, name: str = "", hint: Any = None,
                 read: Callable[[dict], Any] | None = None) -> CellCheck:
    """The cell's `check_equal(name, ..., hint=...)` on observation `key` (or on what `read`
    makes of the observations)."""
    return CellCheck("equal", key, name or key, hint, read=read)


def expect_none(key: str, *, name: str = "", hint: Any = None) -> CellCheck:
    """The cell's `check_is_none(name, ..., hint=...)` on observation `key`."""
    return CellCheck("none", key, name or key, hint)


def expect_same(key: str, message: Any, *, rtol: float = DEFAULT_RTOL,
                atol: float = DEFAULT_ATOL) -> CellCheck:
    """A cell's `check_true(<the value is the right one>, message)`, where the right one is the
    reference's observation `key` (compared as the grader compares it)."""
    return CellCheck("same", key, key, message, rtol=rtol, atol=atol)


def expect_true(condition: Callable[[dict], bool], message: Any) -> CellCheck:
    """The cell's `check_true(condition, message)`, the condition read from the observations."""
    return CellCheck("true", message=message, condition=condition)


def generator(seed: int):
    """The random generator a scenario receives."""
    import torch
    return torch.Generator().manual_seed(int(seed) % (1 << 63))


# --------------------------------------------------------------------------------------------
# Observations as JSON-able data

class ObservationError(ValueError):
    """An observation that cannot be reported (an unsupported type, too large, too deep)."""


class _Budget:
    def __init__(self) -> None:
        self.elements = 0
        self.items = 0


def encode(value: Any, *, _depth: int = 0, _budget: _Budget | None = None) -> Any:
    """`value` as plain JSON data: tensors become {"__tensor__": {dtype, shape, data}},
    non-finite floats {"__float__": "nan" | "inf" | "-inf"}, tuples {"__tuple__": [items]} (the
    grader reads them as lists that keep the name tuple, so a message says "tuple"). Anything else
    raises ObservationError, as do observations past the size limits."""
    budget = _budget or _Budget()
    if _depth > MAX_DEPTH:
        raise ObservationError("observations nest too deeply")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > 2 ** 62:
            raise ObservationError("an integer observation is too large")
        return int(value)
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            raise ObservationError("a string observation is too long")
        return str(value)
    import torch
    if isinstance(value, torch.Tensor):
        tensor = torch.Tensor.detach(value)
        if type(tensor) is not torch.Tensor:
            tensor = tensor.as_subclass(torch.Tensor)
        if tensor.is_complex() or tensor.layout != torch.strided:
            raise ObservationError("complex or sparse tensors are not observed")
        budget.elements += tensor.numel()
        if budget.elements > MAX_ELEMENTS:
            raise ObservationError("the observations hold too many tensor elements")
        flat = tensor.cpu().reshape(-1).tolist()
        if tensor.is_floating_point():
            flat = [_float(x) for x in flat]
        return {"__tensor__": {"dtype": str(tensor.dtype).replace("torch.", ""),
                               "shape": list(tensor.shape), "data": flat}}
    if isinstance(value, (list, tuple)):
        budget.items += len(value)
        if budget.items > MAX_ITEMS:
            raise ObservationError("the observations hold too many items")
        items = [encode(v, _depth=_depth + 1, _budget=budget) for v in value]
        return {"__tuple__": items} if isinstance(value, tuple) else items
    if isinstance(value, dict):
        budget.items += len(value)
        if budget.items > MAX_ITEMS:
            raise ObservationError("the observations hold too many items")
        out = {}
        for key, item in value.items():
            if not isinstance(key, str) or key.startswith("__"):
                raise ObservationError("observation keys must be strings not starting with __")
            out[str(key)] = encode(item, _depth=_depth + 1, _budget=budget)
        return out
    raise ObservationError(f"an observation of type {type(value).__name__} cannot be reported "
                           "(use tensors, numbers, strings, booleans, None, lists and dicts)")


def _float(x: float) -> Any:
    if math.isnan(x):
        return {"__float__": "nan"}
    if math.isinf(x):
        return {"__float__": "inf" if x > 0 else "-inf"}
    return x


# --------------------------------------------------------------------------------------------
# Spies, for exercises that state a rule ("without retain_grad", "without an optimizer")

class Calls:
    """How often a spied attribute was called while the `count_calls` block ran."""

    def __init__(self) -> None:
        self.count = 0
        self.receivers: list = []  # each call's first argument (for a method: its object)

    def on(self, value: Any) -> int:
        """How many of the calls had `value` itself as their first argument."""
        return sum(1 for receiver in self.receivers if receiver is value)


@contextlib.contextmanager
def count_calls(owner: Any, name: str) -> Iterator[Calls]:
    """Count the calls of `owner.name` (a function or method, e.g. `torch.Tensor`,
    "retain_grad") while the block runs; the original is restored afterwards."""
    calls = Calls()
    original = getattr(owner, name)

    def spy(*args, **kwargs):
        calls.count += 1
        calls.receivers.append(args[0] if args else None)
        return original(*args, **kwargs)

    setattr(owner, name, spy)
    try:
        yield calls
    finally:
        setattr(owner, name, original)


class Delivered:
    """The gradients autograd delivered to the tensors watched by `gradients_delivered`."""

    def __init__(self) -> None:
        self.gradients: list = []
        self.retaining = 0  # intermediates (not leaves) that retain their gradient at the end

    def holds(self, value: Any) -> bool:
        """Whether `value` is a tensor with the values, shape and dtype of one of them."""
        import torch
        if not isinstance(value, torch.Tensor):
            return False
        found = torch.Tensor.detach(value)
        return any(g.shape == found.shape and g.dtype == found.dtype and bool(torch.equal(g, found))
                   for g in self.gradients)


@contextlib.contextmanager
def gradients_delivered() -> Iterator[Delivered]:
    """Record, while the block runs and after, the gradient every backward pass (or
    torch.autograd.grad) delivers to each tensor that requires grad and that a torch operation
    in the block made or received: a rule such as "computed by autograd" is then observed by
    its effect (the answer's result is a gradient autograd delivered), not by a call."""
    import torch
    from torch.overrides import TorchFunctionMode

    delivered = Delivered()
    watched: dict[int, Any] = {}  # held until the block ends, so no id is reused meanwhile

    def record(gradient):
        delivered.gradients.append(gradient.detach().clone())

    def watch(value: Any) -> None:
        if isinstance(value, torch.Tensor) and value.requires_grad and id(value) not in watched:
            watched[id(value)] = value
            value.register_hook(record)

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for value in (*args, *(kwargs or {}).values(),
                          *(out if isinstance(out, (tuple, list)) else (out,))):
                watch(value)
            return out

    try:
        with Watch():
            yield delivered
    finally:
        delivered.retaining = sum(1 for t in watched.values() if not t.is_leaf and t.retains_grad)
        watched.clear()
