"""The records a grading run keeps of each notebook, typed once for every stage: its `Status`,
the per-check rows of its verdict (`CheckRow`), and its `Result` (a row of grades.csv).

They are plain data: a result comes back from a grading worker as a dict of plain values (from
a cluster, the bytes of JSON, checked before they are recorded), made by the grader's code from
what a sandbox reported as size-capped JSON; nothing a sandbox or a worker sent is unpickled.
This module is on the ground floor: it imports nothing of the grader's but `autograder.text`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Literal, TypedDict, get_args

from autograder.text import one_line

# What became of a notebook: graded; missing (nothing submitted for the lesson); invalid (not
# gradable as submitted: decided before grading); timeout and error (its run stopped, or the
# grader could not judge it: a score of 0 an instructor can review).
Status = Literal["graded", "missing", "invalid", "timeout", "error"]
STATUSES: tuple[Status, ...] = get_args(Status)
# The statuses whose notebook was graded and whose grades the gradebook keeps.
KEPT_IN_GRADEBOOK: tuple[Status, ...] = ("graded", "timeout", "error")


class CheckRow(TypedDict):
    """One check of a verdict as the run records it (grades' per-check rows, checks.json, the
    class report's items): the exercise, its test cell, the scenario, and how it went."""

    exercise: str
    cell: str
    scenario: str
    visible: bool
    passed: bool
    mistake: str | None


CHECK_KEYS = tuple(CheckRow.__annotations__)


def check_row(data) -> CheckRow | None:
    """A check row from plain data (a Result's checks, checks.json): its fields as their types,
    the mistake one line; None when it names no exercise."""
    def get(key: str):
        return data.get(key) if isinstance(data, dict) else getattr(data, key, None)

    if not get("exercise"):
        return None
    mistake = get("mistake")
    return CheckRow(exercise=str(get("exercise")), cell=str(get("cell") or ""),
                    scenario=str(get("scenario") or ""), visible=bool(get("visible")),
                    passed=bool(get("passed")),
                    mistake=one_line(mistake, 200) if mistake else None)


@dataclass
class Result:
    """One row of grades.csv, and what the log and the report show of it."""

    student_id: str
    lesson: str
    score: float = 0.0
    max_score: float = 0.0
    status: Status = "graded"
    reason: str = ""
    seconds: float = 0.0  # the whole grading of this notebook
    run_seconds: float = 0.0  # running time of the cells run for it (engine fork)
    shared_seconds: float = 0.0  # running time of its prologue, run once for many
    observe_seconds: float = 0.0  # the scenarios' run on its answers
    log: str = ""
    notes: list[str] = field(default_factory=list)
    checks: list[CheckRow] = field(default_factory=list)  # the trusted verdicts' rows

    def row(self) -> dict:
        data = asdict(self)
        return {key: data[key] for key in
                ("student_id", "lesson", "score", "max_score", "status", "reason")}

    @classmethod
    def from_dict(cls, data) -> "Result | None":
        """A result from plain data a worker returned; None when it is not one."""
        names = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or set(data) - names:
            return None
        try:
            return cls(**data)
        except TypeError:
            return None

    @classmethod
    def failed(cls, task, reason: str, log: str = "") -> "Result":
        """An `error` row for a task (an autograder.tasks.Task) no worker could grade."""
        return cls(student_id=task.student, lesson=task.lesson, status="error", reason=reason,
                   log=log, notes=list(task.notes))

    @classmethod
    def of_row(cls, row) -> "Result":
        """A result from a row of grades.csv as read back (a dict of text, `checks` beside it)
        or a Result: its fields as their types (what the class report counts)."""
        if isinstance(row, Result):
            return row
        return cls(student_id=str(row.get("student_id", "") or ""),
                   lesson=str(row.get("lesson", "") or ""),
                   score=float(row.get("score", 0.0) or 0.0),
                   max_score=float(row.get("max_score", 0.0) or 0.0),
                   status=str(row.get("status", "") or ""),  # type: ignore[arg-type]
                   reason=str(row.get("reason", "") or ""),
                   checks=list(row.get("checks") or []))
