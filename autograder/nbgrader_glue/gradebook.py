"""The one way this project opens nbgrader's gradebook, and its lock across grading processes.

Gradebook access is serialised across the grading processes with an exclusive lock taken while
an `nbgrader.api.Gradebook` is open (nbgrader opens one per step and closes it with `with`), so
concurrent workers never meet SQLite's "database is locked".
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from typing import TYPE_CHECKING, Iterator

from autograder.nbgrader_glue.patches import lock_gradebooks, quick_gradebook_creation

if TYPE_CHECKING:
    from nbgrader.api import Gradebook
    from traitlets.config import Config


class _GradebookLock:
    """An flock on a file, held by one thread of this process at a time, re-entrant."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.fd: int | None = None
        self.depth = 0
        self.mutex = threading.RLock()
        self.timeout = 600.0

    def acquire(self) -> None:
        self.mutex.acquire()
        self.depth += 1
        if self.depth > 1 or self.path is None:
            return
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            deadline = time.monotonic() + self.timeout
            while True:
                try:
                    fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the gradebook stayed locked for {self.timeout:.0f} s")
                    time.sleep(0.005)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        try:
            self.depth -= 1
            if self.depth == 0 and self.fd is not None:
                os.close(self.fd)  # closing the descriptor drops the flock
                self.fd = None
        finally:
            self.mutex.release()


_LOCK = _GradebookLock()


def install_gradebook_lock(lock_path: str | os.PathLike) -> None:
    """Make every nbgrader Gradebook in this process hold the lock at `lock_path` while open
    (nbgrader's own steps included), with one SQLAlchemy engine per database."""
    quick_gradebook_creation()
    _LOCK.path = str(lock_path)
    lock_gradebooks(_LOCK)


def forget_gradebook_lock() -> None:
    """Stop locking (the run that owned the lock file is over and its folder is gone);
    Gradebooks opened later in this process work as plain nbgrader's do."""
    _LOCK.path = None


@contextlib.contextmanager
def gradebook(config: Config | None = None, *, db_url: str = "",
              course_id: str = "") -> Iterator[Gradebook]:
    """nbgrader's Gradebook of the course `config` names (or at `db_url`, of `course_id`),
    closed on leaving; a new one is stamped in this process."""
    from nbgrader.api import Gradebook

    quick_gradebook_creation()
    if config is not None:
        db_url = db_url or config.CourseDirectory.db_url
        course_id = course_id or config.CourseDirectory.course_id
    with Gradebook(db_url, course_id) as gb:
        yield gb


# --------------------------------------------------------------------------------------------
# The queries grading makes of the gradebook

def zero_grades(config: Config, student: str, lesson: str) -> None:
    """Autograder scores 0, flagged for manual review, for a run that went wrong."""
    from nbgrader.api import MissingEntry

    with gradebook(config) as gb:
        try:
            submission = gb.find_submission_notebook(lesson, lesson, student)
        except MissingEntry:
            return
        for grade in submission.grades:
            grade.auto_score = 0
            grade.needs_manual_grade = True
        gb.db.commit()


def scores(config: Config, student: str, lesson: str) -> tuple[float, float]:
    """The submission's score and the lesson's points (0 and the points when there is none)."""
    from nbgrader.api import MissingEntry

    with gradebook(config) as gb:
        try:
            submission = gb.find_submission(lesson, student)
            return float(submission.score), float(submission.max_score)
        except MissingEntry:
            return 0.0, float(gb.find_assignment(lesson).max_score)


def submissions(config: Config) -> set[tuple[str, str]]:
    """(student, lesson) of every submission in the gradebook."""
    from nbgrader.api import SubmittedAssignment

    with gradebook(config) as gb:
        return {(s.student.id, s.assignment.name) for s in gb.db.query(SubmittedAssignment)}


def due_dates(config: Config, lessons: set[str]) -> dict[str, str | None]:
    """Each lesson's due date in the gradebook, ISO 8601 (None: none)."""
    with gradebook(config) as gb:
        dates = {name: gb.find_assignment(name).duedate for name in lessons}
    return {name: date.isoformat() if date else None for name, date in dates.items()}


def fresh_submission(config: Config, lesson: str, student: str,
                     duedate: str | None = None) -> None:
    """Ready the gradebook for grading `student`'s `lesson` again: the lesson's due date set
    (when given), the student known, an earlier submission of it removed."""
    from nbgrader.api import MissingEntry

    with gradebook(config) as gb:
        if duedate:
            gb.update_or_create_assignment(lesson, duedate=duedate)
        gb.update_or_create_student(student)
        try:
            gb.remove_submission(lesson, student)
        except MissingEntry:
            pass


def submission_record(config: Config, student: str, lesson: str) -> dict | None:
    """The gradebook's rows for a submission, as plain data (None when there is none): what a
    cluster's worker sends back, read by `autograder.dispatch.cluster_checks`."""
    from nbgrader.api import MissingEntry

    with gradebook(config) as gb:
        try:
            submission = gb.find_submission(lesson, student)
        except MissingEntry:
            return None
        return {"timestamp": submission.timestamp.isoformat() if submission.timestamp else None,
                "notebooks": {nb.name: {
                    "late_penalty": nb.late_submission_penalty,
                    "grades": {g.name: [g.auto_score, bool(g.needs_manual_grade)]
                               for g in nb.grades},
                    "comments": {c.name: c.auto_comment for c in nb.comments}}
                    for nb in submission.notebooks}}
