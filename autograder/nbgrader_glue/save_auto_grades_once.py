"""`SaveAutoGradesOnce`, the course's step in place of nbgrader's SaveAutoGrades in the autograde
pass: a notebook's grades written in one transaction."""

from __future__ import annotations

from nbgrader.api import Gradebook
from nbgrader.preprocessors import SaveAutoGrades


class _CommitAtEnd:
    """A gradebook session whose `commit` only flushes; `commit_now` commits."""

    def __init__(self, session) -> None:
        self._session = session

    def commit(self) -> None:
        self._session.flush()

    def commit_now(self) -> None:
        self._session.commit()

    def __getattr__(self, name: str):
        return getattr(self._session, name)


class SaveAutoGradesOnce(SaveAutoGrades):
    """nbgrader's SaveAutoGrades with one commit per notebook instead of one per cell's grade
    and comment: each commit writes (and syncs) the gradebook file, most of this step's time,
    and nothing reads the gradebook before the step ends (the same grades are written)."""

    def preprocess(self, nb, resources):
        self.notebook_id = resources["nbgrader"]["notebook"]
        self.assignment_id = resources["nbgrader"]["assignment"]
        self.student_id = resources["nbgrader"]["student"]
        self.db_url = resources["nbgrader"]["db_url"]
        self.gradebook = Gradebook(self.db_url)
        with self.gradebook:
            session = self.gradebook.db = _CommitAtEnd(self.gradebook.db)
            nb, resources = super(SaveAutoGrades, self).preprocess(nb, resources)
            session.commit_now()
        return nb, resources
