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


# The verdict's text is written by autograder.trusted.notes.verdict_outputs, which keeps the
# same verdict as data in the test cell's metadata (VERDICT_KEY): what withholding filters.
# Nothing of a student's file keeps that key: the sanitising pass drops every cell metadata
# field but Jupyter's and nbgrader's (nbgrader_glue.drop_free_metadata) before the grader's
# steps run, and only the grader's own step writes it.
VERDICT_KEY = "autograder_verdict"
# Before the deadline the points still count every check: said plainly (issue 30, item 11).
WITHHELD_NOTE = ("The hidden checks' results are shown after the deadline. This exercise's "
                 "points and your score count them already.")


def verdict_summary(number: str, passed: int, checks: int) -> str:
    """The first line of a test cell's verdict."""
    return (f"Exercise {number}: {passed} of {checks} checks passed (checked by the grader on "
            "inputs drawn for you).")


def verdict_record(cell: NotebookNode) -> dict | None:
    """The verdict kept in a test cell's metadata, when it holds one of the grader's shape:
    {"exercise": its number, "domain_line": a line above the first hidden check or None,
    "checks": [{"name", "visible", "passed", "text": its lines, "message": what the error
    under the verdict says when it is the first failed one, or None}]}."""
    record = cell.get("metadata", {}).get(VERDICT_KEY)
    if not isinstance(record, dict) or not isinstance(record.get("exercise"), str) or \
            not isinstance(record.get("checks"), list) or \
            not isinstance(record.get("domain_line"), (str, type(None))):
        return None
    for check in record["checks"]:
        if not (isinstance(check, dict) and isinstance(check.get("name"), str)
                and isinstance(check.get("visible"), bool)
                and isinstance(check.get("passed"), bool)
                and isinstance(check.get("text"), list)
                and all(isinstance(line, str) for line in check["text"])
                and isinstance(check.get("message"), (str, type(None)))):
            return None
    return record


def withhold_hidden_checks(cell: NotebookNode) -> None:
    """Remove the hidden checks from a test cell's verdict, its text and its record (both
    made from the record in the cell's metadata, never read back from the text), counting the
    visible examples only; its error names a failed visible example, or goes."""
    record = verdict_record(cell)
    if record is None:
        return
    number, checks = record["exercise"], record["checks"]
    summary = verdict_summary(number, sum(c["passed"] for c in checks), len(checks))
    stream = next((o for o in cell.get("outputs", []) if o.get("output_type") == "stream"
                   and o.get("text", "").split("\n", 1)[0] == summary), None)
    if stream is None:
        return
    first_hidden = next((i for i, c in enumerate(checks) if not c["visible"]), None)
    kept: list[str] = []
    for at, check in enumerate(checks):
        if check["visible"]:
            kept += check["text"]
            # The domain line stands above the first hidden check, under the check before it.
            if record["domain_line"] is not None and first_hidden == at + 1:
                kept.append(record["domain_line"])
    visible = [c for c in checks if c["visible"]]
    passed = sum(c["passed"] for c in visible)
    stream.text = (f"Exercise {number}: {passed} of {len(visible)} visible examples passed.\n"
                   f"{WITHHELD_NOTE}\n" + "".join(f"{line}\n" for line in kept))
    outputs = [o for o in cell.outputs if not (o.get("output_type") == "error"
                                              and o.get("ename") == CHECK_ENAME)]
    if passed < len(visible):
        failed = next(c for c in visible if not c["passed"])
        message = one_line(failed["message"] or "a visible example failed", 300)
        outputs.append(from_dict(error_output(
            CHECK_ENAME, message, f"Exercise {number} is not right yet: {message}")))
    cell.outputs = outputs
    cell.metadata[VERDICT_KEY] = {**record, "checks": visible, "withheld": True}
