"""What the class report counts: per check (an item) and per exercise, over the graded results."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class Item:
    lesson: str
    exercise: str
    cell: str
    check: str
    visibility: str  # visible | hidden | cell
    attempts: int = 0
    passed: int = 0
    mistakes: Counter = field(default_factory=Counter)

    @property
    def pass_rate(self) -> float:
        return self.passed / self.attempts if self.attempts else 0.0


@dataclass
class Exercise:
    lesson: str
    exercise: str
    students: set = field(default_factory=set)
    failing: set = field(default_factory=set)
    visible: list = field(default_factory=lambda: [0, 0])  # passed, attempts
    hidden: list = field(default_factory=lambda: [0, 0])
    cell: list = field(default_factory=lambda: [0, 0])  # whole test cells (no checks known)
    mistakes: Counter = field(default_factory=Counter)  # mistake -> students who made it

    def rate(self, kind: str) -> float | None:
        passed, attempts = getattr(self, kind)
        return passed / attempts if attempts else None

    @property
    def fail_share(self) -> float:
        return len(self.failing) / len(self.students) if self.students else 0.0
