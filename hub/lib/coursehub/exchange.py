"""nbgrader's collect, refusing submissions filed under another student's name.

A submission's folder in the exchange's inbound is named `<student>+<lesson>+<time>+<random>`
by the student's own nbgrader, so anyone can file a folder under someone else's name. nbgrader
only warns when the folder's owner is not that student. Here such a folder is left out of the
collection, with an error in the log. Who submitted a folder is known in one of two ways
(`OwnerCheckedCollect.inbound_layout`):

- "flat" (the class hub on one machine): inbound holds the folders; every student is a system
  account of their own, and the folder's owner is the student;
- "per-student" (Kubernetes, docs/HUB.md): inbound holds one folder per student, which the hub
  mounts as that student's inbound and nowhere else; the folder's name is the student.
"""

from __future__ import annotations

import glob
import os
import pwd
from itertools import groupby

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import check_mode
from traitlets import Enum


def owner(path: str) -> str:
    try:
        return pwd.getpwuid(os.stat(path).st_uid).pw_name
    except KeyError:
        return f"uid {os.stat(path).st_uid}"


class OwnerCheckedCollect(ExchangeCollect):
    """nbgrader's ExchangeCollect (0.9.6) with the owner check made a rule."""

    inbound_layout = Enum(["flat", "per-student"], default_value="flat", config=True,
                          help="flat: the owner of a submission's folder is the student; "
                               "per-student: the name of the folder that holds it is")

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not check_mode(self.inbound_path, read=True, execute=True):
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        student_id = self.coursedir.student_id or "*"
        name = f"{student_id}+{self.coursedir.assignment_id}+*"
        per_student = self.inbound_layout == "per-student"
        if per_student:  # every pod runs as one uid: nbgrader's owner warning would be noise
            self.check_owner = False
        pattern = os.path.join(self.inbound_path, "*", name) if per_student else \
            os.path.join(self.inbound_path, name)
        records = []
        for path in sorted(glob.glob(pattern)):
            record = self._path_to_record(path)
            if per_student:
                found = os.path.basename(os.path.dirname(path))
                record["filename"] = os.path.join(found, record["filename"])
            else:
                found = owner(path)
            if found != record["username"]:
                self.log.error("Not collected: %s is filed under %s but belongs to %s",
                               path, record["username"], found)
                continue
            records.append(record)
        records.sort(key=lambda record: record["username"])
        by_student = [list(group) for _, group in groupby(records, lambda r: r["username"])]
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None
        self.src_records = []
        for group in by_student:
            newest_first = self._sort_by_timestamp(group)
            if self.duedate is not None and self.before_duedate:
                on_time = [r for r in newest_first if r["timestamp"] <= self.duedate]
                newest_first = on_time or newest_first
            self.src_records.append(newest_first[0])
