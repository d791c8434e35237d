"""Run a lesson's scenarios in this process, for fast tests of scenarios and variants.

`reference_namespace(lesson)` executes the solution notebook's code cells, test cells left
out, once per test session; `variant_namespace` is a copy of it with one answer cell's source
replaced. `verdict(lesson, exercise, namespace, seeds)` runs every scenario of the exercise
against the namespace (from the part of the scenario module a sandbox receives) and against
the reference, with the mistakes, and returns the checks (`autograder.trusted.verdicts.Check`). The
grading command does the same across the sandbox; the tests in tests/test_scenarios.py (in
this process) and tests/test_misconceptions_grading.py (through the grading command) check
the variants both ways.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
from pathlib import Path

import nbformat

from autograder.sandbox.observe import load_module, run_fresh, run_scenarios
from autograder.trusted.outcomes import ScenarioRun, read_outcome
from autograder.trusted.verdicts import Check, judge_exercise
from coursekit.scenarios import collect

ROOT = Path(__file__).resolve().parent.parent


def scenario_path(lesson: str) -> Path:
    return ROOT / "scenarios" / f"{lesson}.py"


@functools.lru_cache(maxsize=None)
def scenario_module(lesson: str) -> dict:
    path = scenario_path(lesson)
    return load_module(path.read_text(), str(path))


@functools.lru_cache(maxsize=None)
def sandbox_module(lesson: str) -> dict:
    """What of the scenario module a student's sandbox receives (autograder.trusted.sources'
    `sandbox_source`): scenarios run against a student's answers run from it."""
    from autograder.trusted.sources import sandbox_source
    return load_module(sandbox_source(scenario_path(lesson).read_text()), "<scenarios>")


def solution(lesson: str):
    return nbformat.read(ROOT / "solutions" / lesson / f"{lesson}.ipynb", as_version=4)


def answer_cells(lesson: str) -> dict[str, str]:
    """grade_id of each answer cell -> its source (the reference solution)."""
    cells = {}
    for cell in solution(lesson).cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            cells[meta["grade_id"]] = cell.source
    return cells


@functools.lru_cache(maxsize=None)
def reference_namespace(lesson: str) -> dict:
    """The namespace after running the solution notebook's code cells, test cells left out."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    namespace: dict = {"__name__": "__main__"}
    here = os.getcwd()
    os.chdir(ROOT / "solutions" / lesson)
    quiet = io.StringIO()  # the worked examples print; the tests need none of it
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            for cell in solution(lesson).cells:
                meta = cell.get("metadata", {}).get("nbgrader", {})
                if cell.cell_type != "code" or meta.get("grade"):
                    continue
                exec(compile(cell.source, f"<{lesson} cell>", "exec"), namespace)  # noqa: S102
                plt.close("all")
    finally:
        os.chdir(here)
    return namespace


def variant_namespace(lesson: str, exercise: str, source: str) -> dict:
    """The reference namespace with the answer cell of `exercise` replaced by `source`."""
    namespace = dict(reference_namespace(lesson))
    exec(compile(source, f"<{exercise} variant>", "exec"), namespace)  # noqa: S102
    return namespace


def verdict(lesson: str, exercise: str, namespace: dict, seeds=(11, 12),
            answer: str | None = None) -> list[Check]:
    """Every scenario of `exercise` judged on `namespace` against the reference (visible
    scenarios with seed 0, hidden ones with each of `seeds`); with `answer` (the answer cell's
    source), the visible ones also on a fresh start of it, as grading runs them."""
    scenarios, mistakes = collect(scenario_module(lesson))
    runs, reference = _reference_and_mistakes(lesson, exercise, tuple(seeds))
    student = run_scenarios(sandbox_module(lesson), namespace, runs)
    if answer is not None:
        student.update(run_fresh(sandbox_module(lesson), namespace, [
            (name, seed, answer) for name, seed in runs if by_name_visible(scenarios, name)]))
    known = [m for m in mistakes if m.exercise == exercise]
    by_name = {s.name: s for s in scenarios}
    runs_judged = []
    for name, seed in runs:
        key = f"{name}/{seed}"
        wrong = [(m, read_outcome(reference[f"{key}/mistake/{i}"])
                  if f"{key}/mistake/{i}" in reference else None)
                 for i, m in enumerate(mistakes) if m in known]
        fresh = student.get(f"{key}/fresh")
        runs_judged.append(ScenarioRun(by_name[name], read_outcome(reference[key]),
                                       read_outcome(student[key]), wrong,
                                       None if fresh is None else read_outcome(fresh)))
    return judge_exercise(runs_judged)


@functools.lru_cache(maxsize=8)
def _reference_and_mistakes(lesson: str, exercise: str, seeds: tuple[int, ...]):
    """The runs of `exercise` (visible scenarios with seed 0, hidden ones with each of
    `seeds`) and the reports of the reference and of each mistake on them: once for every
    answer judged against them (the reports are plain data, read and never changed)."""
    module = scenario_module(lesson)
    scenarios, _ = collect(module)
    runs = [(s.name, seed) for s in scenarios if s.exercise == exercise
            for seed in ((0,) if s.visible else seeds)]
    assert runs, f"no scenario for {exercise}"
    return runs, run_scenarios(module, reference_namespace(lesson), runs, mistakes=True)


def by_name_visible(scenarios, name: str) -> bool:
    return any(s.name == name and s.visible for s in scenarios)


@functools.lru_cache(maxsize=4)
def _reference_runs(lesson: str, exercise: str, seeds: tuple[int, ...]):
    """The scenarios of `exercise`, their runs and the reference's reports of them (once for
    all the valid answers of one exercise)."""
    module = scenario_module(lesson)
    scenarios, _ = collect(module)
    mine = [s for s in scenarios if s.exercise == exercise]
    runs = [(s.name, seed) for s in mine for seed in ((0,) if s.visible else seeds)]
    return mine, runs, run_scenarios(module, reference_namespace(lesson), runs)


def rejected(lesson: str, exercise: str, namespace: dict, seeds) -> list[str]:
    """The hidden scenario runs of `exercise` (each with each of `seeds`, visible ones with
    seed 0) where `namespace` does not match the reference: '<scenario>/<seed>: problems'."""
    from autograder.trusted.outcomes import outcome_problems

    mine, runs, reference = _reference_runs(lesson, exercise, tuple(seeds))
    student = run_scenarios(sandbox_module(lesson), namespace, runs)
    by_name = {s.name: s for s in mine}
    out = []
    for name, seed in runs:
        key = f"{name}/{seed}"
        problems = outcome_problems(by_name[name], read_outcome(reference[key]),
                                    read_outcome(student[key]))
        if problems:
            out.append(f"{key}: {problems[:2]}")
    return out


def test_cell(lesson: str, exercise: str) -> str:
    """The source of the test cell of `exercise` in the solution notebook."""
    for cell in solution(lesson).cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == f"{exercise}-test":
            return cell.source
    raise KeyError(f"no test cell {exercise}-test in {lesson}")


def run_test_cell(lesson: str, exercise: str, namespace: dict) -> tuple[bool, str]:
    """Run the test cell of `exercise` in `namespace` (as the student's kernel does after the
    answer cell; the cell's names stay there): (whether it ran to its end, what it printed or
    the error's message)."""
    import matplotlib.pyplot as plt
    here, out = os.getcwd(), io.StringIO()
    os.chdir(ROOT / "solutions" / lesson)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            # in the namespace itself, as a kernel runs the cell in the answer's globals (a
            # guard that patches globals() reaches the answer's functions)
            exec(compile(test_cell(lesson, exercise), f"<{exercise} test>", "exec"),  # noqa: S102
                 namespace)
        return True, out.getvalue()
    except Exception as err:  # noqa: BLE001 (a wrong answer may raise anything)
        return False, f"{type(err).__name__}: {err}"
    finally:
        plt.close("all")
        os.chdir(here)


# What the test cell said of an answer, and what the graded page says (one judge: the page
# says at least what the cell said)

_SAID_LINE = re.compile(r"^  (?:likely mistake|hint): (.*)$", re.M)


def cell_message(ran: bool, text: str) -> str | None:
    """The targeted message a test cell printed (`run_test_cell`'s result): the likely mistake
    or hint line of a failed `coursekit.checks` check, or a `check_true` message; None when the
    cell passed, raised something else, or its failed check said only what it expected."""
    if ran or not text.startswith("CheckFailed: "):
        return None
    body = text.removeprefix("CheckFailed: ")
    line = _SAID_LINE.search(body)
    if line:
        return line.group(1)
    return None if "is not what was expected" in body.split("\n", 1)[0] else body


def page_text(exercise: str, checks: list[Check]) -> str:
    """The text the graded page shows under the exercise's test cell (its verdict)."""
    from nbformat import from_dict

    from autograder.trusted.notes import verdict_outputs
    cell = from_dict({"cell_type": "code", "source": "", "metadata": {}, "outputs": [],
                      "execution_count": None})
    verdict_outputs(cell, exercise, checks, None)
    return "\n".join(output.get("text", "") + "\n".join(output.get("traceback", []))
                     for output in cell.outputs)


def normalised(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


# The wrong answers of lessons whose test cell checks are not declared yet in their scenario
# module (coursekit.scenarios.cell_checks): the graded page does not say their cell's message
# yet (measured when the declarations came: 208 of 229 messages missing, 134 of them in
# lessons 04-08). Each is expected to fail (strict): once its lesson declares its cell
# checks, it passes, and must leave this list.
CELL_WORDS_NOT_YET: dict[str, set[str]] = {}

# Where the cell quotes the answer's own values (their repr), the page, which echoes nothing an
# answer returned, describes them: it says the cell's message up to the quoted part.
CELL_QUOTES_VALUES = {("02-ex3", "leaf-first"):
                      "return a list with one gradient per factor (2 here), not",
                      # the cell quotes torch's error after its own sentence
                      ("03-ex1", "post-accumulate-grad-hook"):
                      "freeze_entries(middle, mask) raised RuntimeError: param may be an "
                      "intermediate tensor (here middle = leaf * 2), not only a leaf: use a "
                      "hook that intermediate tensors accept too, such as register_hook.",
                      # the cell quotes torch's internal assert after its own words
                      ("05-ex4", "sigma-cached-on-the-class"): "torch.func refused Softplus:"}
# Known gaps, each with its reason (expected to fail, strict, like the list above).
CELL_WORDS_GAPS = {
    ("05-ex1", "multiplies-grad-output-in-place"):
        "the cell stops at its first check; the visible scenario goes on to a later step where "
        "this answer raises, so it reports the exception (the page shows it and names the "
        "mistake) and no values to read (04-ex3's visible scenario returns what it has there)",
    ("05-ex4", "saves-the-inputs-tuple"):
        "the cell catches the answer's TypeError and quotes it in its own sentence; the page "
        "quotes the same torch message as the exception the answer raised",
    ("06-ex3", "zeros-for-none"): "as for 05-ex4 saves-the-inputs-tuple",
}


def cell_words_gap(exercise: str, name: str) -> str | None:
    """Why the graded page does not say yet what the test cell said of the wrong answer
    `name` of `exercise` (None: it must)."""
    return CELL_WORDS_GAPS.get((exercise, name)) or (
        "its lesson declares no cell checks yet"
        if name in CELL_WORDS_NOT_YET.get(exercise, ()) else None)


def visible_problems(lesson: str, exercise: str, namespace: dict, answer: str) -> list[str]:
    """What the visible scenario of `exercise` finds wrong on a fresh start of the answer cell
    `answer` (as the test cell's own call met it), compared with the reference's run."""
    from autograder.trusted.outcomes import outcome_problems

    scenarios, _ = collect(scenario_module(lesson))
    runs, reference = _reference_and_mistakes(lesson, exercise, (11, 12))
    out = []
    for scenario in scenarios:
        if scenario.exercise != exercise or not scenario.visible:
            continue
        key = f"{scenario.name}/0"
        fresh = run_fresh(sandbox_module(lesson), namespace, [(scenario.name, 0, answer)])
        found = fresh.get(f"{key}/fresh")
        if found is None:
            found = run_scenarios(sandbox_module(lesson), namespace, [(scenario.name, 0)])[key]
        out += [f"{scenario.name}: {problem}" for problem in outcome_problems(
            scenario, read_outcome(reference[key]), read_outcome(found))]
    return out
