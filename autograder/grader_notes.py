"""The grader's own notes in a notebook, as the grading steps and the feedback page both read
them: the names of the errors the grader writes, their shape, why checking a notebook's answers
stopped, and the withholding of a test cell's hidden checks before the deadline.

An error the grader writes carries one of the names below; the same name reported by a
notebook (an exception class it named so) is renamed when its outputs are cleaned
(`autograder.trusted.outputs`), so that the notebook's words are never shown as the grader's.
The notes that depend on a run or on a verdict's checks are written by `autograder.trusted.notes`.
This module is on the ground floor: it imports nothing of the grader's but `autograder.text`.
"""

from __future__ import annotations

import re

from nbformat import NotebookNode, from_dict

from autograder.text import one_line

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


def not_graded_output() -> dict:
    """The note on a lesson cell the grader left out: it comes after the last exercise."""
    return {"output_type": "stream", "name": "stdout",
            "text": "(Not run by the grader: this part of the lesson comes after its last\n"
                    "exercise and decides no grade. Run it in the lesson to see its output.)\n"}


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


def checks_stopped_text(kind: str) -> str:
    """The grader's words for a stop of that kind (a key of CHECKS_STOPPED)."""
    return f"Every cell ran, then checking the answers stopped: {CHECKS_STOPPED[kind]}."


def checks_stopped_output(kind: str) -> dict:
    return error_output(CHECKS_STOPPED_ENAME, kind, checks_stopped_text(kind))


# The verdict's text is written by autograder.trusted.notes.verdict_outputs.
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

