"""What happened when a notebook was run, as the grader established it (one record per run)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Run:
    """What happened when a notebook was run, as established by the grader."""

    outcome: str = "ok"  # ok | timeout | died | exit | oom
    detail: str = ""
    cell: int | None = None  # index of the cell that timed out or where the process ended
    seconds: float = 0.0
    cell_seconds: float = 0.0  # running time the notebook reported for the cells it ran
    shared_seconds: float = 0.0  # running time of the shared prologue
    observe_seconds: float = 0.0  # the scenarios' run on its answers (the grader's clock)
    executed: dict[int, dict] = field(default_factory=dict)
    outcomes: dict[str, Any] | None = None  # scenario runs, as reported (untrusted)
    finished: bool = False
    pid: int | None = None
    budget_spent: bool = False
    forged: bool = False  # it sent a cell's end twice: its reports after that are void
    observing: bool = False  # every cell had ended and the scenarios were running its answers
