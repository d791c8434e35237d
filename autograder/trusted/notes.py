"""The notes the grader writes into a notebook that depend on its run or on a test cell's checks:
its own errors, and each test cell's verdict (the names and shape of these notes, and what the
feedback page reads back, are in `autograder.grader_notes`). Which note a notebook gets is
decided from the `Run` (`autograder.trusted.status`), never read back from the notebook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nbformat import NotebookNode, from_dict

from autograder.grader_notes import (CHECK_ENAME, DEAD_ENAME, NOT_RUN_ENAME, TIMEOUT_ENAME,
                                     VERDICT_KEY, error_output, verdict_summary)
from autograder.text import one_line
from autograder.trusted.verdicts import Check

if TYPE_CHECKING:
    from autograder.trusted.run import Run


def timeout_output(timeout: float) -> dict:
    return error_output(TIMEOUT_ENAME, "",
                        f"This cell ran past the time limit per cell ({timeout:g} s of "
                        "computing), and was stopped.")


def oom_output() -> dict:
    return error_output("MemoryError", "out of memory",
                        "The notebook's processes used more memory than the limit while this "
                        "cell ran, and were stopped.")


def died_output(run: Run) -> dict:
    return error_output(DEAD_ENAME, "the process running the notebook ended",
                        "The process running this notebook ended while this cell ran: "
                        + died_detail(run) + ".")


def died_detail(run: Run) -> str:
    """The first line of why the notebook's process ended (always the grader's words)."""
    return (run.detail.splitlines() or ["it ended"])[0]


def not_run_output(run: Run) -> dict:
    why = {"timeout": "an earlier cell ran past the time limit",
           "died": "the process running the notebook ended",
           "oom": "the notebook ran out of memory",
           "exit": "an earlier cell called exit()"}.get(run.outcome, "the run stopped")
    if run.budget_spent:
        why = "the notebook ran past its time budget"
    return error_output(NOT_RUN_ENAME, why, f"This cell was not run: {why}.")


def checks_stopped(run: Run) -> str | None:
    """The kind of stop (a key of CHECKS_STOPPED) when the run ended while the scenarios ran
    the notebook's answers, after every cell had ended: no cell is to blame, and no check
    could be decided."""
    if not run.observing or run.outcomes is not None or run.outcome == "ok":
        return None
    if run.outcome == "timeout":
        return "budget" if run.budget_spent else "timeout"
    return "oom" if run.outcome == "oom" else "died"



def verdict_outputs(cell: NotebookNode, exercise: str, checks: list[Check], run: Run) -> None:
    """Replace a test cell's outputs with the trusted verdict on its exercise, and keep the
    same verdict as data in the cell's metadata (grader_notes.verdict_record)."""
    number = exercise.rsplit("ex", 1)[-1]
    cell.metadata.pop(VERDICT_KEY, None)
    if not checks:
        cell.outputs = [from_dict(error_output(
            CHECK_ENAME, "no trusted checks",
            f"Exercise {number} has no checks the grader can run; your instructor will "
            "grade it by hand."))]
        return
    passed = [c for c in checks if c.passed]
    records = [{"name": check.scenario, "visible": check.visible, "passed": check.passed,
                "text": _check_lines(check),
                "message": None if check.passed else (
                    check.mistake or (check.problems[0] if check.problems else None))}
               for check in checks]
    lines = [line for record in records for line in record["text"]]
    summary = verdict_summary(number, len(passed), len(checks))
    stream = {"output_type": "stream", "name": "stdout",
              "text": summary + "\n" + "\n".join(lines) + "\n"}
    outputs = [from_dict(stream)]
    if len(passed) != len(checks):
        first = next(c for c in checks if not c.passed)
        message = first.mistake or first.said or (first.relations or first.problems or ["a check failed"])[0]
        outputs.append(from_dict(error_output(CHECK_ENAME, one_line(message, 300),
                                              f"Exercise {number} is not right yet: "
                                              + one_line(message, 300))))
    cell.outputs = outputs
    cell.metadata[VERDICT_KEY] = {"exercise": number, "domain_line": None, "checks": records}


def _check_lines(check: Check) -> list[str]:
    """One check's lines in the verdict: its mark, and what was found when it failed."""
    kind = "visible example" if check.visible else "hidden check"
    lines = [f"{'✓' if check.passed else '✗'} {kind}: {check.title}"]
    if not check.passed:
        if check.said:
            lines.append(f"    the test cell says: {check.said}")
        lines += [f"    - {problem}" for problem in check.problems[:4]]
        if check.mistake:
            lines.append(f"    likely mistake: {check.mistake}")
        lines += [f"    relation: {fact}" for fact in check.relations[:2]]
        lines += [f"    hint: {hint}" for hint in check.hints[:2]]
    return lines
