"""Which exercises of a lesson pass, read from a notebook's saved test-cell outputs.

Used by the start page (progress in each lesson) and by Validate, whose result this module
summarises: `validation_started` and `validation_cell_started` are nbclient's `on_notebook_start`
and `on_cell_start` hooks for the students' Validate button (set in
jupyter/student/nbgrader_config.py). nbconvert's executor calls no hook after the last cell has
run; the hook for the start of the last cell (the release ends every lesson with a markdown
cell) comes after every code cell's outputs are in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from coursekit.notebook import STUB_RAISE, exercise_number, exercise_of

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FAILED_NAMES = ("CheckFailed", "AssertionError")
# A SyntaxError's "(3877796108.py, line 1)": the kernel's file name for the cell means nothing.
_CELL_FILE = re.compile(r"\((?:[^\s(),]+\.py|<[^>]+>), (line \d+)\)")


@dataclass
class ExerciseResult:
    """One exercise's test cell: "passed", "failed", "unanswered" or "not run"."""
    number: int
    grade_id: str
    points: float
    status: str
    message: str = ""
    cell: Any = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def _nbgrader(cell) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def _failure_message(output) -> tuple[str, str]:
    """(status, one line) for an error output of a test cell."""
    traceback = _ANSI.sub("", "\n".join(output.get("traceback", []) or []))
    ename, evalue = output.get("ename", ""), str(output.get("evalue", ""))
    if "is not answered yet" in traceback or "is not written yet" in traceback or (
            ename == "NotImplementedError" and STUB_RAISE in traceback):
        return "unanswered", "not answered yet"
    first = evalue.strip().splitlines()[0] if evalue.strip() else ""
    first = _CELL_FILE.sub(r"(\1)", first)
    if ename in _FAILED_NAMES and first:
        return "failed", first
    return "failed", f"{ename}: {first}" if first else ename or "an error"


def exercise_results(notebook) -> list[ExerciseResult]:
    """The result of every test cell of `notebook` (a dict or nbformat node), in order."""
    results = []
    answer_errors: dict[str, dict] = {}
    for cell in notebook.get("cells", []):
        meta = _nbgrader(cell)
        if cell.get("cell_type") != "code" or not meta:
            continue
        grade_id = str(meta.get("grade_id", ""))
        outputs = cell.get("outputs", []) or []
        errors = [o for o in outputs if o.get("output_type") == "error"]
        if meta.get("solution") and errors:
            answer_errors[grade_id] = errors[0]
        if not meta.get("grade") or grade_id == SUMMARY_ID:
            continue
        number = exercise_number(grade_id) or len(results) + 1
        points = float(meta.get("points", 0) or 0)
        answer_error = answer_errors.get(f"{exercise_of(grade_id)}-answer")
        if errors and answer_error is not None and errors[0].get("ename") == "NameError":
            status, message = "failed", (
                "its answer cell fails: " + _failure_message(answer_error)[1])
        elif errors:
            status, message = _failure_message(errors[0])
        elif cell.get("execution_count") is None and not outputs:
            status, message = "not run", ""
        else:
            status, message = "passed", ""
        results.append(ExerciseResult(number, grade_id, points, status, message, cell))
    return results


def _points(value: float) -> str:
    return f"{value:g} point" + ("" if value == 1 else "s")


def summary_line(results: list[ExerciseResult]) -> str:
    """"2 of 4 exercises pass (4 of 9 points)"."""
    passed = [r for r in results if r.passed]
    total = sum(r.points for r in results)
    earned = sum(r.points for r in passed)
    noun = "exercise passes" if len(passed) == 1 and len(results) == 1 else "exercises pass"
    return f"{len(passed)} of {len(results)} {noun} ({earned:g} of {_points(total)})"


def progress_line(results: list[ExerciseResult]) -> str:
    """A lesson's progress on the start page: not started, or how many exercises pass (with
    a tick when all do)."""
    if all(r.status == "not run" for r in results):
        return f"not started ({len(results)} exercises)"
    text = summary_line(results)
    return f"✓ {text}" if all(r.passed for r in results) else text


# What Validate is not: the hidden checks run only where a notebook is graded (the grader, its
# reference solutions and the course's secret never come into a student's server), so Validate
# says so whatever it found (jupyter/student/labextensions/coursekit-validate adds the same words
# under nbgrader's "Success!").
HIDDEN_CHECKS_NOTE = (
    "Validate runs the test cells' visible examples only, here in your own server. The hidden "
    "checks (your code on other inputs) run only when the lesson is graded: on the class hub "
    "when you Submit it, otherwise when your instructor grades it.")


def validation_summary(results: list[ExerciseResult]) -> str:
    """What Validate found, exercise by exercise, in a few lines."""
    lines = ["Validate ran this notebook from the top in a fresh kernel and checked the visible "
             "tests.",
             f"Result: {summary_line(results)}."]
    for result in results:
        if result.passed:
            state = "its example passes"
        elif result.status == "unanswered":
            state = "not answered yet"
        elif result.status == "not run":
            state = "did not run"
        else:
            state = f"fails: {result.message}"
        lines.append(f"  Exercise {result.number} ({_points(result.points)}): {state}")
    lines += ["Below: each failing test cell and its message.", HIDDEN_CHECKS_NOTE]
    return "\n".join(lines) + "\n"



_VALIDATING: dict[str, Any] = {}
SUMMARY_ID = "validate-summary"


def validation_started(notebook=None, **_: Any) -> None:
    """nbclient's on_notebook_start hook: remember the notebook being validated, and give it an
    empty first cell (skipped while running) where the summary will go."""
    from nbformat.v4 import new_code_cell

    _VALIDATING["notebook"] = notebook
    if notebook is not None:
        notebook.cells.insert(0, new_code_cell("", id=SUMMARY_ID))


def validation_cell_started(cell=None, cell_index: int | None = None, **_: Any) -> None:
    """nbclient's on_cell_start hook: at the last cell, summarise the run so far."""
    notebook = _VALIDATING.get("notebook")
    if notebook is not None and cell_index == len(notebook.cells) - 1:
        _VALIDATING.clear()
        summarise_validation(notebook)


def summarise_validation(notebook) -> None:
    """Fill the summary cell (the notebook's first, from `validation_started`) when exercises
    fail. Validate's dialog lists the failing graded cells in order, each as "The following
    cell failed:", its source and its error: made a failing graded cell worth no points, the
    summary comes first (jupyter/student/labextensions/coursekit-validate gives it a heading of
    its own). The notebook is not saved; when everything passes, the empty cell without
    nbgrader metadata is not listed."""
    summary = next((c for c in notebook.cells[:1] if c.get("id") == SUMMARY_ID), None)
    results = exercise_results(notebook)
    if summary is None or all(r.passed for r in results):
        return
    from nbformat.v4 import new_output

    summary.source = validation_summary(results).rstrip()
    summary.metadata["nbgrader"] = {"grade": True, "grade_id": SUMMARY_ID, "points": 0,
                                    "solution": False, "locked": False, "schema_version": 3}
    summary.outputs = [new_output("error", ename="Summary", evalue="",
                                  traceback=["(This is a summary, not a cell of your notebook.)"])]
