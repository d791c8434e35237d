"""What one grading run passes around: its options, each notebook's task, each row's result
(`autograder.records.Result`, re-exported here).

All three are plain data: options and tasks travel to the grading workers (the local pool's
as JSON and dicts, a cluster's as dicts that Dask pickles on the way to the workers), and
results come back as dicts of plain values (from a cluster, the bytes of JSON, checked before
they are recorded), made by the grader's code from what a sandbox reported as size-capped
JSON. Nothing a sandbox or a cluster's worker sent is ever unpickled.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from autograder.records import Result
from autograder.sandbox.policy import DEFAULT_MEMORY_LIMIT  # the CLI's --memory-limit 4G

__all__ = ["ENGINES", "GradingOptions", "Result", "Task"]
ENGINES = ("fork", "nbgrader")


@dataclass(frozen=True)
class GradingOptions:
    """How a run grades: what the command line chose, and what the run derived from it."""

    course_root: str
    out: str = ""
    engine: str = "fork"  # fork | nbgrader
    timeout: int = 0  # seconds of computing a cell may take; 0: the course's (grade_class)
    memory_limit: int = DEFAULT_MEMORY_LIMIT  # bytes each notebook may use; 0: no limit
    notebook_timeout: int = 600  # seconds the whole notebook may run (engine fork)
    share_prologue: bool = True  # run a lesson's cells before its first exercise once
    sandbox: bool = True  # confine every notebook (engine fork); False: --no-sandbox
    withhold_hidden: bool = False  # feedback without the hidden checks' results
    jobs: int = 0  # grading workers; 0: one per core
    lessons: tuple[str, ...] = ()  # lessons to grade; empty: every lesson found
    cluster: str = ""  # a Dask scheduler's address, whose workers grade the notebooks
    cluster_tls: tuple[str, ...] = ()  # the cluster's CA, this client's certificate and key
    insecure_cluster: bool = False  # allow tcp:// (no TLS): for a cluster no one else reaches
    threads: int = 0  # torch threads per notebook (engine fork); 0: torch's default
    lock_path: str = ""  # the gradebook's lock file, in the run's scratch folder

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "GradingOptions":
        data = dict(data)
        data["lessons"] = tuple(data.get("lessons") or ())
        data["cluster_tls"] = tuple(data.get("cluster_tls") or ())
        return cls(**data)


@dataclass(frozen=True)
class Task:
    """One notebook to grade. `path` and `timestamp` (nbgrader's timestamp.txt beside it) are
    files on the command's machine; `classmates` is set when a worker is handed the task:
    the students whose reference outcomes it computes with it, each with their digest."""

    student: str
    lesson: str
    digest: str = ""  # submission_digest of the notebook's bytes: its hidden inputs' seed
    path: str = ""
    timestamp: str | None = None
    notes: tuple[str, ...] = ()  # said after the reason of its row
    classmates: dict[str, str] = field(default_factory=dict, hash=False)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Task":
        """A task from plain data (JSON, a Connection): unknown keys are refused."""
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise ValueError(f"not a task: unknown keys {sorted(unknown)}")
        data = dict(data)
        data["notes"] = tuple(data.get("notes") or ())
        data["classmates"] = dict(data.get("classmates") or {})
        return cls(**data)
