"""Inside the sandbox (and in the reference process): run scenarios, report observations.

`run_scenarios` calls each requested scenario with the answer names taken from a namespace
(the student's notebook, or the reference solution's) and a generator seeded as the grader
asked, and returns each run's outcome as plain JSON-able data. It decides nothing: the grader
compares these outcomes with the reference's in its own process (`autograder.trusted.verdicts`).
"""

from __future__ import annotations

import signal
import sys
import time
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


def run_fresh(module: dict, namespace: dict, fresh: list[tuple[str, int, str]]) -> dict:
    """The visible scenarios as the test cell's own call met the answer: for each (scenario,
    seed, answer cell's source), the answer cell run again in a copy of `namespace` (so what
    it keeps at module level starts anew there, and `namespace` keeps its own), then the
    scenario in that copy. Returns {"<scenario>/<seed>/fresh": outcome}; a scenario whose
    answer cell, or whose run, raises anything but the time limit when run again has no
    entry (the grader then reads the later call). Run after every scored run: what the cell
    changes outside the copy (a module-level registration, run twice) reaches no verdict."""
    from autograder.sandbox.shell import CellTimeout

    scenarios, _ = collect(module)
    by_name = {s.name: s for s in scenarios}
    out: dict[str, dict] = {}
    for name, seed, source in fresh:
        scenario = by_name.get(name)
        if scenario is None or not isinstance(source, str):
            continue
        copy = dict(namespace)
        try:
            # the student's own cell, again, in its own sandbox
            exec(compile(source, "<fresh answer cell>", "exec"), copy)  # noqa: S102
            out[f"{name}/{seed}/fresh"] = run_one(scenario.func, scenario.uses, copy, seed)
        except CellTimeout:
            raise
        except BaseException:  # noqa: BLE001 (a cell that fails, even by KeyboardInterrupt or
            continue           # GeneratorExit, has no fresh start: it decides no score)
    return out


FRESH_SHARE = 0.25  # of the observing time left, what the fresh runs may take


def fresh_within_time(module: dict, namespace: dict, fresh, sources: dict) -> dict:
    """The visible scenarios run again on a fresh start (`observe.run_fresh`): [scenario,
    seed, answer cell index] each, within a share of the time left; {} past it."""
    from IPython.core.interactiveshell import InteractiveShell

    from autograder.sandbox.shell import CellTimeout

    if not isinstance(fresh, list):
        return {}
    ipython = InteractiveShell.instance()
    runs = []
    for name, seed, index in (r for r in fresh if isinstance(r, list) and len(r) == 3):
        if index in sources:
            try:
                runs.append((name, seed, ipython.transform_cell(sources[index])))
            except Exception:  # noqa: BLE001 (a cell IPython cannot transform: no fresh run)
                pass
    left = signal.getitimer(signal.ITIMER_PROF)[0]
    if not runs or left <= 0:
        return {}
    signal.setitimer(signal.ITIMER_PROF, left * FRESH_SHARE)
    began = time.process_time()
    try:
        return run_fresh(module, namespace, runs)
    except CellTimeout:
        return {}
    finally:
        signal.setitimer(signal.ITIMER_PROF, max(left - (time.process_time() - began), 1e-3))
