"""Inside the sandbox (and in the reference process): run scenarios, report observations.

`run_scenarios` calls each requested scenario with the answer names taken from a namespace
(the student's notebook, or the reference solution's) and a generator seeded as the grader
asked, and returns each run's outcome as plain JSON-able data. It decides nothing: the grader
compares these outcomes with the reference's in its own process (`autograder.trusted.verdicts`).
"""

from __future__ import annotations

import sys
from typing import Any

from coursekit.scenarios import ObservationError, collect, encode, generator

_MISSING = object()


def load_module(source: str, filename: str = "<scenarios>") -> dict:
    """Execute a scenario module's source in a fresh namespace and return the namespace."""
    namespace: dict[str, Any] = {"__name__": "course_scenarios", "__file__": filename}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 (the course's own code)
    return namespace


def run_one(func, uses: tuple[str, ...], namespace: dict, seed: int,
            replace: tuple[str, Any] | None = None) -> dict:
    """One scenario run as {"observations": ...}, {"raised": ..., "message": ...} or
    {"unreportable": ...}."""
    kwargs = {}
    for name in uses:
        value = namespace.get(name, _MISSING)
        if replace is not None and name == replace[0]:
            value = replace[1]
        if value is _MISSING:
            return {"raised": "NameError", "message": f"name {name!r} is not defined"}
        kwargs[name] = value
    try:
        result = func(**kwargs, rng=generator(seed))
    except (Exception, SystemExit) as err:  # noqa: BLE001 (any failure of the answer is an outcome)
        name, where = type(err).__name__, _cell_line(sys.exc_info()[2])
        try:
            message = str(err)[:300]
        except BaseException:  # noqa: BLE001 (a student's exception whose str() raises)
            message = ""
        return {"raised": name if name.isidentifier() else "Exception", "message": message,
                **where}
    if not isinstance(result, dict):
        return {"unreportable": f"the scenario returned {type(result).__name__}, not a dict"}
    try:
        return {"observations": encode(result)}
    except ObservationError as err:
        return {"unreportable": str(err)}
    except BaseException as err:  # noqa: BLE001 (a tensor subclass that breaks tolist, ...)
        return {"unreportable": f"{type(err).__name__} while reading the results"}


def _cell_line(tb) -> dict:
    """{"line": n, "cell": k}: the innermost frame of a notebook cell (IPython names its code
    <ipython-input-k-...>) in a traceback; {} when none is."""
    found: dict = {}
    while tb is not None:
        parts = tb.tb_frame.f_code.co_filename.split("-")
        if parts[0] == "<ipython" and len(parts) > 2 and parts[2].isdigit():
            found = {"line": tb.tb_lineno, "cell": int(parts[2])}
        tb = tb.tb_next
    return found


def run_scenarios(module: dict, namespace: dict, runs: list[tuple[str, int]],
                  mistakes: bool = False) -> dict:
    """Run `runs` (scenario name, seed) against `namespace`; with `mistakes`, also run each
    of the scenario's exercise's mistakes in place of the answer name it replaces.

    Returns {"<scenario>/<seed>": outcome, "<scenario>/<seed>/mistake/<i>": outcome, ...}."""
    scenarios, known = collect(module)
    by_name = {s.name: s for s in scenarios}
    out: dict[str, dict] = {}
    for name, seed in runs:
        scenario = by_name.get(name)
        if scenario is None:
            out[f"{name}/{seed}"] = {"unreportable": "no such scenario"}
            continue
        out[f"{name}/{seed}"] = run_one(scenario.func, scenario.uses, namespace, seed)
        if mistakes:
            for i, wrong in enumerate(known):
                if wrong.exercise == scenario.exercise:
                    out[f"{name}/{seed}/mistake/{i}"] = run_one(
                        scenario.func, scenario.uses, namespace, seed,
                        replace=(wrong.replaces, wrong.func))
    return out
