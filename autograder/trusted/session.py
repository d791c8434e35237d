"""A grading worker's session: what it keeps from one notebook to the next.

A worker (the local pool's, the resident grader's, a cluster's) makes one `GradingSession` when it
starts (`autograder.dispatch.grade_task.warm_worker`) and hands it to each notebook's
`ForkedExecute`, as it hands each its `RunOutcome`: the runner host (started once), the sandbox's
policy it was started with, the lessons it has loaded, the reference outcomes computed so far,
and the students of the class whose reference outcomes are computed together. Nothing of it is
kept in a class attribute: two sessions in one process (the tests') share nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from autograder.sandbox.policy import SandboxPolicy
from autograder.trusted.executor import Host, References, host_config
from autograder.intake.digests import submission_digest
from autograder.trusted.sources import Lesson


class GradingSession:
    """One worker's runner host, lessons, reference outcomes and classmates."""

    def __init__(self, policy: SandboxPolicy, course_root: str | Path,
                 preload: list[str] | tuple[str, ...] = ()) -> None:
        self.policy = policy
        self.course_root = Path(course_root).resolve()
        self.preload = list(preload)
        self.references = References()
        self.lessons: dict[str, Lesson] = {}
        # lesson -> {student: submission digest}: reference outcomes are computed for them all
        self.classmates: dict[str, dict[str, str]] = {}
        self._host: Host | None = None

    @classmethod
    def for_options(cls, options, preload: list[str] | tuple[str, ...] = ()) -> "GradingSession":
        """The session of a worker grading with `options` (a `GradingOptions`)."""
        policy = SandboxPolicy.build(memory_limit=options.memory_limit, confined=options.sandbox,
                                     threads=options.threads, cell_seconds=options.timeout,
                                     notebook_seconds=options.notebook_timeout)
        return cls(policy, options.course_root, preload)

    def host(self) -> Host:
        """The runner host, started on first use (and again if it has died: `Host.run`)."""
        if self._host is None:
            self._host = Host(host_config(self.policy, self.preload))
            self._host.start()
        return self._host

    def lesson(self, name: str) -> Lesson:
        if name not in self.lessons:
            self.lessons[name] = Lesson.load(self.course_root, name)
        return self.lessons[name]

    def set_class(self, students: dict[str, dict[str, str]]) -> None:
        """The students of each lesson in this run, each with the digest of the submission
        graded (`submission_digest`): reference outcomes are computed for all of them at once.
        The student about to be graded is always among them."""
        self.classmates = {lesson: dict(ids) for lesson, ids in students.items()}

    def submission(self, lesson: str, student: str, cells: list[tuple[int, str]]) -> str:
        """The digest of the student's submission as the class run read it; graded outside
        one, that of the cells run."""
        known = self.classmates.get(lesson, {}).get(student)
        return known if known else submission_digest(json.dumps(cells).encode())

    def close(self) -> None:
        """Stop the runner host (its zygotes and sandboxes end with it)."""
        if self._host is not None:
            self._host.stop()
            self._host = None
