"""Hidden inputs drawn from the whole family an exercise allows, and the statement of that family.

A hidden scenario receives `rng`, a `torch.Generator` seeded for each student from the course
secret. `draw(strategy, rng)` turns it into one value of a Hypothesis strategy (lists of
floats of any length the task allows, values near the bounds, layer names, ...): the seed
comes from `rng`, so the reference process and the student's sandbox draw the same value, and
a re-grade draws it again. Only Hypothesis's public API is used (`given`, `settings`, `seed`),
with no example database: nothing is written to disk, which the sandbox forbids anyway.

`domain(exercise, text)` states, once per exercise in its scenario module, what the hidden
checks draw from; the statement cell of the exercise ends with the same "Graded on: ..."
line (tests/test_domains.py keeps the two in step) and the feedback page shows it above the
hidden checks (`autograder.trusted.domains`).

    domain("02-ex1", "lists of 1 to 12 floats between -1000 and 1000, zeros included")

    @scenario("02-ex1", uses=["intermediate_gradient"])
    def drawn(intermediate_gradient, rng):
        values = draw(float_lists(1, 12, 1e3), rng)
        ...
"""

from __future__ import annotations

from typing import Any

__all__ = ["draw", "domain", "domains", "float_lists", "module_names", "names", "warm_up",
           "GRADED_ON"]

GRADED_ON = "Graded on: "
# Where `domain` records, in the namespace of the module that calls it (like the scenarios'
# registry of coursekit.scenarios), exercise -> text.
_REGISTRY = "__course_domains__"
# Hypothesis also mixes in constants it finds in the source of the "local" modules loaded
# (coursekit, autograder, a student's files): those differ between the reference process and a
# sandbox, so the draws would too. The course's backend uses Hypothesis's own constants only
# (values near the bounds, 0, ±1, ...), the same in every process.
_BACKEND = "coursekit-drawing"
# Hypothesis tries the simplest value of a strategy first (an empty or all-zero draw); the
# second example is drawn at random from the seed. Explicit edge cases (zeros, a batch of one)
# are scenarios of their own.
_EXAMPLES = 2


def draw(strategy: Any, rng: Any) -> Any:
    """One value of the Hypothesis `strategy`, determined by the torch generator `rng` (which
    advances by one draw)."""
    import torch
    from hypothesis import HealthCheck, Phase, given, seed, settings

    chosen = int(torch.randint(0, 2 ** 31 - 1, (), generator=rng))
    found: list = []
    _register_backend()

    @settings(backend=_BACKEND, database=None, max_examples=_EXAMPLES,
              phases=[Phase.generate], deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @seed(chosen)
    @given(strategy)
    def record(value):
        found.append(value)

    record()
    return found[-1]


def _register_backend() -> None:
    """Hypothesis's provider, with constants drawn from its own list only (see _BACKEND);
    registered the way Hypothesis documents for alternative backends."""
    from hypothesis.internal.conjecture import providers

    if _BACKEND in providers.AVAILABLE_PROVIDERS:
        return

    class SameEverywhere(providers.HypothesisProvider):
        def _maybe_draw_constant(self, choice_type, constraints, *, p=0.05):
            if self._random.random() > p:
                return None
            allowed = tuple(choice for choice in
                            providers.GLOBAL_CONSTANTS.set_for_type(choice_type)
                            if providers.choice_permitted(choice, constraints))
            return self._random.choice(allowed) if allowed else None

    providers.AVAILABLE_PROVIDERS[_BACKEND] = SameEverywhere


def float_lists(min_size: int, max_size: int, bound: float, *, integers: bool = False) -> Any:
    """Lists of `min_size` to `max_size` floats in [-bound, bound] (float32-representable,
    no subnormals); with `integers`, Python ints in that range instead, as a caller may pass
    for "the given lists"."""
    from hypothesis import strategies as st
    if integers:
        element = st.integers(-int(bound), int(bound))
    else:
        element = st.floats(-bound, bound, allow_nan=False, allow_infinity=False,
                            allow_subnormal=False, width=32)
    return st.lists(element, min_size=min_size, max_size=max_size)


def names(min_size: int = 1, max_size: int = 12) -> Any:
    """Identifiers that are not Python keywords and do not start with two underscores: names
    a model's attributes may have (and that an observation may use as a key)."""
    import keyword

    from hypothesis import strategies as st
    # letters sampled, not st.text: text needs Hypothesis's Unicode table, which it caches on
    # disk (and the sandbox's disk is read-only)
    first = st.sampled_from("abcdefghijklmnopqrstuvwxyz_")
    rest = st.lists(st.sampled_from("abcdefghijklmnopqrstuvwxyz_0123456789"),
                    min_size=max(0, min_size - 1), max_size=max_size - 1)
    return st.builds(lambda a, b: a + "".join(b), first, rest).filter(
        lambda name: not keyword.iskeyword(name) and not name.startswith("__"))


def module_names(count: int, min_size: int = 1, max_size: int = 12) -> Any:
    """`count` distinct names (see `names`) that a submodule can be registered under: none is
    already an attribute of a module (forward, eval, training, ...), which add_module refuses."""
    from hypothesis import strategies as st
    from torch import nn
    taken = set(dir(nn.Sequential()))
    return st.lists(names(min_size, max_size).filter(lambda name: name not in taken),
                    min_size=count, max_size=count, unique=True)


def domain(exercise: str, text: str) -> None:
    """Declare what the hidden checks of `exercise` draw from (one sentence, no newline)."""
    import sys
    if not isinstance(text, str) or not text.strip() or "\n" in text:
        raise ValueError(f"the domain of {exercise} must be one line of text")
    space = sys._getframe(1).f_globals
    registry = space.setdefault(_REGISTRY, {})
    if exercise in registry:
        raise ValueError(f"the domain of {exercise} is declared twice")
    registry[exercise] = text.strip()


def domains(namespace: dict) -> dict[str, str]:
    """exercise -> declared domain, from a scenario module's namespace."""
    found = namespace.get(_REGISTRY)
    return dict(found) if isinstance(found, dict) else {}


def warm_up() -> None:
    """One draw: Hypothesis's first one in a process sets itself up (it registers numpy's
    random generator, with a full garbage collection: about 0.4 s). The grader's runner host
    calls it once before it forks notebooks (`autograder.sandbox.shell.prepare`), so that no
    notebook pays it; importing this module does not (a student's kernel, the grader's
    trusted process and the tests never draw, or draw once)."""
    import torch
    draw(float_lists(1, 1, 1.0), torch.Generator().manual_seed(0))
