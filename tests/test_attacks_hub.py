"""A hostile student on the class hub attacks what the hub's instructors run (red team).

Each test is an attack that worked before its fix."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hub" / "lib"))


def test_export_in_a_submission_folder_takes_the_course_not_the_students_files(tmp_path):
    """A student submits a folder with its own nbgrader_config.py (Python, run by whoever
    loads it) and gradebook.db (grades of their choosing); collect and autograde copy it to
    the course's submitted/<student>/<lesson>/ and autograded/<student>/<lesson>/. An
    instructor who types export there (looking at that student's work) must get the course,
    not the student's folder."""
    from autograder.nbgrader_glue.export import find_course_root

    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    (course / "gradebook.db").write_bytes(b"")
    for part in ("submitted", "autograded", "feedback"):
        lesson = course / part / "mallory" / "ps1"
        lesson.mkdir(parents=True)
        (lesson / "nbgrader_config.py").write_text("import os; os.system('id')\n")
        (lesson / "gradebook.db").write_bytes(b"SQLite format 3\0")
        assert find_course_root(lesson) == course, part
        assert find_course_root(lesson / ".." ) == course, part
    # The exchange: a student's folder in inbound is no course either.
    inbound = tmp_path / "exchange" / "c" / "inbound" / "mallory+ps1+2030-01-01+ab12"
    inbound.mkdir(parents=True)
    (inbound / "gradebook.db").write_bytes(b"")
    with pytest.raises(FileNotFoundError):
        find_course_root(inbound)
    # An ordinary course is still found from below it.
    (course / "source" / "ps1").mkdir(parents=True)
    assert find_course_root(course / "source" / "ps1") == course

