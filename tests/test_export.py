"""Grades out: `python -m autograder export --to canvas|moodle|csv` from nbgrader's gradebook,
manual grades and late penalties included, checked column by column.

The gradebook is filled with nbgrader's own API (lessons registered as grading registers
them, submissions with automatic scores, a manual override, a late penalty), without grading.
"""

from __future__ import annotations

import csv
import datetime
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.nbgrader_glue.export import (CANVAS_HEADER, CSV_HEADER, MOODLE_HEADER, export,
                               number, parse_columns)
from autograder.intake.roster import read_roster

A, B = fixture_course.LESSONS  # 3 and 4 points


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A gradebook: ann (full marks in A, late by 1 point; B by hand), bob (A partly right,
    nothing in B), cyd (only B, 0), and dee without submissions."""
    from nbgrader.api import Gradebook

    from autograder.nbgrader_glue.inproc import course_config, register_lessons

    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    root = fixture_course.build_course(tmp_path_factory.mktemp("export") / "course")
    register_lessons(course_config(root), [A, B])
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "autograd-hooks") as gb:
        gb.update_or_create_student("ann", first_name="Ann", last_name="Arbor",
                                    email="ann@example.org", lms_user_id="1001")
        gb.update_or_create_student("bob", first_name="Bob", last_name="Bay",
                                    email="bob@example.org")
        gb.update_or_create_student("cyd")
        gb.update_or_create_student("dee", first_name="Dee", lms_user_id="bb_user")

        def submit(lesson, student, autos, manual=None, penalty=0.0):
            submission = gb.update_or_create_submission(lesson, student)
            notebook = submission.notebooks[0]
            for grade in notebook.grades:
                grade.auto_score = autos.get(grade.name, 0.0)
                grade.manual_score = (manual or {}).get(grade.name)
                grade.needs_manual_grade = False  # autograded, or graded by hand
            notebook.late_submission_penalty = penalty
            submission.timestamp = datetime.datetime(2030, 1, 2, 3, 4, 5)
            gb.db.commit()

        submit(A, "ann", {"01-ex1-test": 2, "01-ex2-test": 1}, penalty=1.0)
        submit(B, "ann", {"02-ex1-test": 0, "02-ex2-test": 1}, manual={"02-ex1-test": 2.5})
        submit(A, "bob", {"01-ex1-test": 0, "01-ex2-test": 1})
        submit(B, "cyd", {}, penalty=2.0)  # a penalty never makes a score negative
        for grade in gb.find_submission_notebook(B, B, "cyd").grades:
            grade.needs_manual_grade = True
        gb.db.commit()
    return root


def read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def test_number_format():
    assert [number(v) for v in (3.0, 2.5, 0.0, 1 / 3, 10.0)] == ["3", "2.5", "0", "0.33", "10"]


def test_canvas_gradebook_import(course, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email,section,sis_user_id,sis_login_id\n"
                      "bob,Bob Bay,bob@example.org,Tuesday,S0002,bbay\n"
                      "eve,\"Late, Eve\",eve@example.org,Monday,,\n", encoding="utf-8")
    done = export("canvas", tmp_path / "canvas.csv", course, roster=read_roster(roster),
                  columns={A: "Lesson 1 (12345)"})
    rows = read_csv(done.path)
    assert rows[0] == CANVAS_HEADER + ["Lesson 1 (12345)", B]
    assert rows[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert rows[1] == ["    Points Possible", "", "", "", "", "3", "4"]
    body = {row[0]: row for row in rows[2:]}
    # Student: "Last, First"; ID: the Canvas user id (numbers only); then each lesson.
    assert body["Arbor, Ann"] == ["Arbor, Ann", "1001", "", "", "", "2", "3.5"]
    assert body["Bay, Bob"] == ["Bay, Bob", "", "S0002", "bbay", "Tuesday", "1", ""]
    assert body["cyd"] == ["cyd", "", "", "cyd", "", "", "0"]
    assert body["Dee"] == ["Dee", "", "", "dee", "", "", ""]  # a Blackboard id is no Canvas ID
    assert body["Late, Eve"] == ["Late, Eve", "", "", "eve", "Monday", "", ""]
    assert len(rows) == 2 + 5 and done.students == 5 and done.lessons == 2
    assert any("manual grading" in w and "cyd/" in w for w in done.warnings)


def test_missing_as_zero_and_chosen_lessons(course, tmp_path):
    done = export("canvas", tmp_path / "c.csv", course, lessons=[B], missing="zero")
    rows = read_csv(done.path)
    assert rows[0] == CANVAS_HEADER + [B] and rows[1][5:] == ["4"]
    assert {row[0]: row[5] for row in rows[2:]} == {"Arbor, Ann": "3.5", "Bay, Bob": "0",
                                                    "cyd": "0", "Dee": "0"}


def test_moodle_grade_import(course, tmp_path):
    done = export("moodle", tmp_path / "moodle.csv", course)
    rows = read_csv(done.path)
    assert rows[0] == MOODLE_HEADER + [A, B]
    assert rows[0][:4] == ["First name", "Last name", "ID number", "Email address"]
    body = {row[2]: row for row in rows[1:]}
    assert body["ann"] == ["Ann", "Arbor", "ann", "ann@example.org", "2", "3.5"]
    assert body["bob"] == ["Bob", "Bay", "bob", "bob@example.org", "1", ""]
    assert body["cyd"] == ["", "", "cyd", "", "", "0"]
    assert any("no email" in w and "cyd" in w for w in done.warnings)


def test_csv_one_row_per_student_and_lesson(course, tmp_path):
    rows = read_csv(export("csv", tmp_path / "grades.csv", course).path)
    assert rows[0] == CSV_HEADER
    body = {(row[0], row[5]): dict(zip(CSV_HEADER, row)) for row in rows[1:]}
    assert len(body) == 4 * 2
    ann = body[("ann", A)]
    assert (ann["raw_score"], ann["late_penalty"], ann["score"], ann["max_score"]) == \
        ("3", "1", "2", "3")
    assert ann["lms_user_id"] == "1001" and ann["timestamp"].startswith("2030-01-02")
    assert body[("ann", B)]["score"] == "3.5" and body[("ann", B)]["needs_manual_grade"] == "no"
    assert body[("cyd", B)]["score"] == "0" and body[("cyd", B)]["needs_manual_grade"] == "yes"
    assert body[("bob", B)]["score"] == "" and body[("bob", B)]["max_score"] == "4"


def test_bad_requests_say_what_to_do(course, tmp_path):
    with pytest.raises(ValueError, match="LESSON=HEADER"):
        parse_columns(["no-equals-sign"])
    with pytest.raises(ValueError, match="no lesson 09_x"):
        export("csv", tmp_path / "x.csv", course, lessons=["09_x"])
    with pytest.raises(FileNotFoundError, match="grade a class first"):
        export("csv", tmp_path / "x.csv", tmp_path)


def test_export_command(course, tmp_path):
    command = [sys.executable, "-m", "autograder", "export", "--course-root", str(course)]
    done = subprocess.run(command + ["--to", "moodle", "--out", str(tmp_path / "m.csv")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "4 students, 2 lessons" in done.stdout and "no email" in done.stderr
    assert read_csv(tmp_path / "m.csv")[0][:4] == MOODLE_HEADER
    # Without --out: grading/ of the course root, which git ignores, never the current folder.
    done = subprocess.run(command + ["--to", "canvas"], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    default = course / "grading" / "export-canvas.csv"
    assert done.returncode == 0 and default.is_file() and str(default) in done.stdout
    assert not list(tmp_path.glob("export-*"))
    done = subprocess.run(command + ["--to", "csv", "--column", "x"], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 2 and "LESSON=HEADER" in done.stderr


def test_export_finds_the_course_it_is_typed_in(course, tmp_path):
    """Typed in a course folder (the class hub's, not this repository) or a folder within it,
    the command exports that course's gradebook; typed outside any course, it says so and
    what to do, and writes nothing."""
    command = [sys.executable, "-m", "autograder", "export", "--to", "canvas"]
    inside = course / "submitted"
    inside.mkdir(exist_ok=True)
    written = course / "grading" / "export-canvas.csv"
    written.unlink(missing_ok=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=inside)
    assert done.returncode == 0, done.stderr
    assert "4 students, 2 lessons" in done.stdout and str(written) in done.stdout
    assert read_csv(written)[2][:2] == ["Arbor, Ann", "1001"]
    nowhere = tmp_path / "no-course"
    nowhere.mkdir()
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=nowhere)
    assert done.returncode == 2
    assert f"{nowhere} is in no course" in done.stderr and "--course-root" in done.stderr
    assert not list(tmp_path.rglob("export-*"))


def test_nbgraders_own_export_command_takes_the_formats_as_plugins(course, tmp_path):
    """`nbgrader export --exporter ...CanvasExport` (nbgrader's ExportApp, its own gradebook)
    writes what `python -m autograder export --to canvas` writes."""
    from autograder.release import nbgrader_command, nbgrader_env

    for to, plugin in (("canvas", "CanvasExport"), ("moodle", "MoodleExport"),
                       ("csv", "CsvExport")):
        ours = export(to, tmp_path / f"ours-{to}.csv", course_root=course)
        theirs = tmp_path / f"nbgrader-{to}.csv"
        done = subprocess.run(nbgrader_command(
            "export", f"--exporter=autograder.nbgrader_glue.export.{plugin}", f"--to={theirs}"),
            cwd=course, env=nbgrader_env(), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert read_csv(theirs) == read_csv(ours.path)
        if to == "moodle":
            assert "no email" in done.stderr  # the warnings reach nbgrader's log


def test_exports_go_where_git_ignores_them():
    """In this repository, the default export lands in grading/, which .gitignore covers."""
    repo = Path(__file__).resolve().parent.parent
    for name in ("canvas", "moodle", "csv"):
        ignored = subprocess.run(["git", "-C", str(repo), "check-ignore", "-q",
                                  f"grading/export-{name}.csv"])
        assert ignored.returncode == 0, f"grading/export-{name}.csv is not git-ignored"


@pytest.fixture
def twice(course, tmp_path):
    """The course's gradebook plus ann and bob graded a second time under roster ids (s001,
    s002): the same Canvas user (1001) and the same email (bob@example.org)."""
    import shutil

    from nbgrader.api import Gradebook

    root = tmp_path / "course"
    shutil.copytree(course, root)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "autograd-hooks") as gb:
        gb.update_or_create_student("s001", first_name="Ann", last_name="Arbor",
                                    lms_user_id="1001")
        gb.update_or_create_student("s002", first_name="Bob", last_name="Bay",
                                    email="Bob@Example.org")
        for student, score, when in (("s001", 3, 2031), ("s002", 0, 2020)):
            submission = gb.update_or_create_submission(A, student)
            for grade in submission.notebooks[0].grades:
                grade.auto_score = score / 2
                grade.needs_manual_grade = False
            submission.timestamp = datetime.datetime(when, 1, 1)
            gb.db.commit()
    return root


def test_one_canvas_user_twice_is_refused_with_the_rows_named(twice, tmp_path):
    out = tmp_path / "canvas.csv"
    with pytest.raises(ValueError) as refused:
        export("canvas", out, twice)
    message = str(refused.value)
    assert "Canvas user id 1001: ann and s001" in message
    assert "--replace-ids" in message and "--merge" in message
    assert not out.exists()
    with pytest.raises(ValueError, match="email bob@example.org: bob and s002"):
        export("moodle", out, twice)
    # csv is one row per gradebook id and LMS-neutral: nothing to refuse.
    assert export("csv", out, twice).students == 6


def test_merge_writes_one_row_per_lms_user_with_the_latest_submission(twice, tmp_path):
    done = export("canvas", tmp_path / "canvas.csv", twice, merge=True)
    rows = read_csv(done.path)[2:]
    ann = [row for row in rows if row[1] == "1001"]
    # s001's lesson A (2031) is later than ann's (2030); B only ann has.
    assert ann == [["Arbor, Ann", "1001", "", "", "", "3", "3.5"]]
    assert len(rows) == 5 and any("ann and s001" in w for w in done.warnings)
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email\ns002,Bob Bay,bob@example.org\n", encoding="utf-8")
    done = export("moodle", tmp_path / "moodle.csv", twice, merge=True,
                  roster=read_roster(roster))
    bob = [row for row in read_csv(done.path)[1:] if row[3].lower() == "bob@example.org"]
    # The roster's id is kept; bob's own lesson A (2030) is later than s002's (2020).
    assert bob == [["Bob", "Bay", "s002", "bob@example.org", "1", ""]]


def test_export_command_refuses_or_merges(twice, tmp_path):
    command = [sys.executable, "-m", "autograder", "export", "--course-root", str(twice),
               "--to", "canvas", "--out", str(tmp_path / "c.csv")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "ann and s001" in done.stderr, done.stderr
    done = subprocess.run(command + ["--merge"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "merged" in done.stderr, done.stderr


def test_a_new_gradebook_is_stamped_with_nbgraders_newest_schema(course):
    """The grading commands stamp a new gradebook in-process (nbgrader runs `alembic heads`
    for it): the stamp is the revision that no migration of nbgrader's builds on, so that
    `nbgrader db upgrade` finds the gradebook current."""
    import re
    import sqlite3

    import nbgrader

    versions = Path(nbgrader.__file__).parent / "alembic" / "versions"
    revisions, parents = set(), set()
    for script in versions.glob("*.py"):
        text = script.read_text()
        revisions.add(re.search(r"^revision = '(\w+)'", text, re.M).group(1))
        parent = re.search(r"^down_revision = '(\w+)'", text, re.M)
        if parent:
            parents.add(parent.group(1))
    (newest,) = revisions - parents
    with sqlite3.connect(course / "gradebook.db") as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(newest,)]
