"""The notes the grader writes into a notebook: its own errors, and each test cell's verdict.

An error the grader writes carries one of the names below; the same name reported by a
notebook (an exception class it named so) is renamed when its outputs are cleaned
(`autograder.trusted.outputs`), so that the notebook's words are never shown as the grader's.
Which note a notebook gets is decided from the `Run` (`autograder.trusted.status`), never read
back from the notebook.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from nbformat import NotebookNode, from_dict

from autograder.text import one_line
from autograder.trusted.verdicts import Check

if TYPE_CHECKING:
    from autograder.trusted.run import Run

TIMEOUT_ENAME = "CellTimeoutError"
DEAD_ENAME = "DeadKernelError"
NOT_RUN_ENAME = "CellNotRunError"
CHECK_ENAME = "CheckFailed"
CHECKS_STOPPED_ENAME = "ChecksStopped"  # the run stopped while the scenarios ran its answers
GRADER_ENAMES = frozenset({TIMEOUT_ENAME, DEAD_ENAME, NOT_RUN_ENAME, CHECK_ENAME,
                           CHECKS_STOPPED_ENAME})


def ansi_red(text: str) -> str:
    return f"\x1b[0;31m{text}\x1b[0m"


def error_output(ename: str, evalue: str, message: str | None = None) -> dict:
    """An error output of the grader's, in nbformat's shape, its message as its traceback."""
    line = f"{ansi_red(ename)}: {message or evalue}"
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": [line]}


def timeout_output(timeout: float) -> dict:
    return error_output(TIMEOUT_ENAME, "",
                        f"This cell ran past the time limit per cell ({timeout:g} s of "
                        "computing), and was stopped.")


def not_graded_output() -> dict:
    """The note on a lesson cell the grader left out: it comes after the last exercise."""
    return {"output_type": "stream", "name": "stdout",
            "text": "(Not run by the grader: this part of the lesson comes after its last\n"
                    "exercise and decides no grade. Run it in the lesson to see its output.)\n"}


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


# Why checking a notebook's answers stopped, by kind (the kind is what the autograded notebook
# records; the text is looked up, never read back from the notebook).
CHECKS_STOPPED = {
    "timeout": "its answers were still running on the grader's inputs when the time limit ran "
               "out (an endless loop on some input?)",
    "budget": "the notebook's time budget ran out while its answers ran on the grader's inputs",
    "oom": "its answers ran out of memory on the grader's inputs",
    "died": "the process running the notebook ended while its answers ran on the grader's "
            "inputs",
}


def checks_stopped(run: Run) -> str | None:
    """The kind of stop (a key of CHECKS_STOPPED) when the run ended while the scenarios ran
    the notebook's answers, after every cell had ended: no cell is to blame, and no check
    could be decided."""
    if not run.observing or run.outcomes is not None or run.outcome == "ok":
        return None
    if run.outcome == "timeout":
        return "budget" if run.budget_spent else "timeout"
    return "oom" if run.outcome == "oom" else "died"


def checks_stopped_text(kind: str) -> str:
    """The grader's words for a stop of that kind (a key of CHECKS_STOPPED)."""
    return f"Every cell ran, then checking the answers stopped: {CHECKS_STOPPED[kind]}."


def checks_stopped_output(kind: str) -> dict:
    return error_output(CHECKS_STOPPED_ENAME, kind, checks_stopped_text(kind))



def verdict_outputs(cell: NotebookNode, exercise: str, checks: list[Check], run: Run) -> None:
    """Replace a test cell's outputs with the trusted verdict on its exercise."""
    number = exercise.rsplit("ex", 1)[-1]
    if not checks:
        cell.outputs = [from_dict(error_output(
            CHECK_ENAME, "no trusted checks",
            f"Exercise {number} has no checks the grader can run; your instructor will "
            "grade it by hand."))]
        return
    passed = [c for c in checks if c.passed]
    lines = []
    for check in checks:
        kind = "visible example" if check.visible else "hidden check"
        mark = "✓" if check.passed else "✗"
        lines.append(f"{mark} {kind}: {check.title}")
        if not check.passed:
            if check.said:
                lines.append(f"    the test cell says: {check.said}")
            for problem in check.problems[:4]:
                lines.append(f"    - {problem}")
            if check.mistake:
                lines.append(f"    likely mistake: {check.mistake}")
            lines += [f"    relation: {fact}" for fact in check.relations[:2]]
            lines += [f"    hint: {hint}" for hint in check.hints[:2]]
    summary = (f"Exercise {number}: {len(passed)} of {len(checks)} checks passed "
               "(checked by the grader on inputs drawn for you).")
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


_VERDICT_SUMMARY = re.compile(r"^Exercise (\S+): \d+ of \d+ checks passed \(checked by the "
                              r"grader on inputs drawn for you\)\.$")
_CHECK_LINE = re.compile(r"^([✓✗]) (visible example|hidden check): ")
# Before the deadline the points still count every check: said plainly (issue 30, item 11).
WITHHELD_NOTE = ("The hidden checks' results are shown after the deadline. This exercise's "
                 "points and your score count them already.")


def withhold_hidden_checks(cell: NotebookNode) -> None:
    """Remove the hidden checks' lines from a test cell's verdict (verdict_outputs' text),
    counting the visible examples only; its error names a failed visible example, or goes."""
    stream = next((o for o in cell.get("outputs", []) if o.get("output_type") == "stream"
                   and _VERDICT_SUMMARY.match(o.get("text", "").split("\n", 1)[0])), None)
    if stream is None:
        return
    summary, *lines = stream.text.rstrip("\n").split("\n")
    number = _VERDICT_SUMMARY.match(summary).group(1)
    kept, keep, counts = [], False, [0, 0]
    failed: list[list[str]] = []  # per failed visible example: its mistake, then its problems
    for line in lines:
        check = _CHECK_LINE.match(line)
        if check:
            keep = check.group(2) == "visible example"
            if keep:
                counts[1] += 1
                counts[0] += check.group(1) == "✓"
                if check.group(1) == "✗":
                    failed.append([])
        elif keep and failed and line.startswith("    likely mistake: "):
            failed[-1].insert(0, line.removeprefix("    likely mistake: "))
        elif keep and failed and line.startswith("    - "):
            failed[-1].append(line.removeprefix("    - "))
        if keep:
            kept.append(line)
    failed_message = failed[0][0] if failed and failed[0] else None
    stream.text = (f"Exercise {number}: {counts[0]} of {counts[1]} visible examples passed.\n"
                   f"{WITHHELD_NOTE}\n" + "".join(f"{line}\n" for line in kept))
    outputs = [o for o in cell.outputs if not (o.get("output_type") == "error"
                                              and o.get("ename") == CHECK_ENAME)]
    if counts[0] < counts[1]:
        message = one_line(failed_message or "a visible example failed", 300)
        outputs.append(from_dict(error_output(
            CHECK_ENAME, message, f"Exercise {number} is not right yet: {message}")))
    cell.outputs = outputs

