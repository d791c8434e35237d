"""A notebook's status (graded, timeout, error) and the reason given for it.

With the fork engine the status comes from the grader's own record of the run: the notes it
wrote into the notebook, each kept as data beside the note (`Stop`), and handed back in a
`RunOutcome`; nothing is read back from the notebook's text, where a notebook could have
written anything. (Only `--engine nbgrader`, which has no such record, reads the status from
the autograded notebook: `autograder.dispatch.nbgrader_engine.verdict`.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nbformat import NotebookNode

from autograder.grader_notes import CHECKS_STOPPED, checks_stopped_text
from autograder.nbgrader_glue import cells
from autograder.records import CheckRow, Status
from autograder.units import GiB

REVIEW = " The notebook scores 0; your instructor can review it."


@dataclass
class RunOutcome:
    """What the fork engine established about one notebook, for whoever asked it to grade."""

    decided: bool = False  # the notebook was run and judged (the fields below are set)
    status: Status = "graded"  # graded | timeout | error
    reason: str = ""  # why, when the status is not "graded"
    cell_seconds: float = 0.0  # running time of the cells run for it
    shared_seconds: float = 0.0  # running time of its prologue, run once for many
    observe_seconds: float = 0.0  # the scenarios' run on its answers
    checks: list[CheckRow] = field(default_factory=list)  # the trusted verdicts' rows
    # the grader's own fault, when it could not judge the notebook (its reference run failed)
    grader_fault: str = ""


@dataclass(frozen=True)
class Stop:
    """A note of the grader's that decides a status, where it stands in the notebook.

    kind: "timeout", "oom", "died" (at the cell where the run stopped), "exit" (a cell not run
    after exit()), or "checks" (in the first test cell: checking the answers stopped, `why`
    being a key of CHECKS_STOPPED)."""

    index: int
    first_in_cell: bool = False  # it stands before the cell's other outputs
    kind: str = ""
    why: str = ""


def where(nb: NotebookNode, index: int) -> str:
    """The cell at `index`, as a reason names it: its number among code cells, and its grade
    id or its first line."""
    number = sum(1 for cell in nb.cells[: index + 1] if cell.cell_type == "code")
    cell = nb.cells[index]
    grade_id = cells.labels(cell).get("grade_id")
    if grade_id:
        return f"Code cell {number} ({grade_id})"
    first = next((line.strip() for line in cell.source.splitlines() if line.strip()), "")
    if len(first) > 50:
        first = first[:47] + "..."
    return f"Code cell {number} (`{first}`)" if first else f"Code cell {number}"


def timed_out(nb: NotebookNode, index: int, timeout: float) -> tuple[Status, str]:
    return "timeout", (f"{where(nb, index)} ran past the time limit per cell ({timeout:g} s of "
                       "computing) and was stopped (an endless loop?)." + REVIEW)


def out_of_memory(nb: NotebookNode, index: int, memory_limit: int) -> tuple[Status, str]:
    return "error", (f"{where(nb, index)} ran out of memory: a notebook may use "
                     f"{memory_limit / GiB:g} GiB." + REVIEW)


def died(nb: NotebookNode, index: int, detail: str) -> tuple[Status, str]:
    return "error", (f"The Python process running the notebook ended in "
                     f"{where(nb, index).lower()}: {detail.rstrip('.')}." + REVIEW)


def exited(nb: NotebookNode, index: int) -> tuple[Status, str]:
    return "error", (f"The notebook called exit() before {where(nb, index).lower()}, which "
                     "ended it before it finished." + REVIEW)


def checks_stopped(kind: str) -> tuple[Status, str]:
    status = "timeout" if kind in ("timeout", "budget") else "error"
    return status, checks_stopped_text(kind) + REVIEW


def run_status(nb: NotebookNode, stops: list[Stop], detail: str, timeout: float,
               memory_limit: int) -> tuple[Status, str] | None:
    """(status, reason) from the first of the grader's stops in the notebook's order; None
    when the run went to its end. `detail`: why the notebook's process ended, if it did."""
    if not stops:
        return None
    stop = min(stops, key=lambda s: (s.index, not s.first_in_cell))
    if stop.kind == "checks" and stop.why in CHECKS_STOPPED:
        return checks_stopped(stop.why)
    if stop.kind == "timeout":
        return timed_out(nb, stop.index, timeout)
    if stop.kind == "died":
        return died(nb, stop.index, detail)
    if stop.kind == "oom":
        return out_of_memory(nb, stop.index, memory_limit)
    return exited(nb, stop.index)
