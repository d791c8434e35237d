"""Attacks on what the refactor that made the trust boundary a folder layout moved: intake,
the text cleaner, the parser, the pages and the exports. Each test was seen to fail on the
code before its fix."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from autograder.demo import Lessons, _write
from autograder.intake.collect import collect
from autograder.trusted.outputs import clean_done

A = fixture_course.LESSON_A


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = fixture_course.build_course(tmp_path_factory.mktemp("refactor") / "course")
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    return root, Lessons(root)


def grade(folder: Path, out: Path, root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(folder), "--out", str(out),
         "--course-root", str(root), "--jobs", "1", "--timeout", "20", "--no-progress",
         "--lessons", A],
        capture_output=True, text=True, timeout=900, env=dict(os.environ, CI="true"))


def rows(out: Path) -> list[dict]:
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


# A folder name whose bytes are not UTF-8 (a student names their folder so in the exchange, or
# an archive tool writes raw bytes): Python reads it with lone surrogates, which neither the
# gradebook nor grades.csv can store. Before the fix it became a student id (or, in a Moodle
# export, a student's name), and the gradebook's insert stopped the whole class run
# ("error: 'utf-8' codec can't encode ...", exit 2).
BAD_FOLDER = os.fsdecode(b"bad\xffname")


def test_a_folder_name_that_is_not_utf8_is_refused_not_a_student(course, tmp_path):
    root, lessons = course
    folder = tmp_path / "class"
    _write(lessons.correct(A), folder / BAD_FOLDER / f"{A}.ipynb")
    found, _ = collect(folder, list(fixture_course.LESSONS), tmp_path / "work")
    assert [s.student for s in found] == [""]
    assert "not UTF-8" in found[0].problem and "\\udcff" in found[0].problem


@pytest.mark.slow
def test_names_that_are_not_utf8_stop_no_one_elses_grading(course, tmp_path):
    root, lessons = course
    folder = tmp_path / "class"
    _write(lessons.correct(A), folder / "honest" / f"{A}.ipynb")
    _write(lessons.correct(A), folder / BAD_FOLDER / f"{A}.ipynb")
    _write(lessons.correct(A), folder / "other" / os.fsdecode(b"01_fixture_basics\xfe.ipynb"))
    # A Moodle export's folder: the full name it carries goes into the gradebook.
    moodle = os.fsdecode(b"J\xf6rg Smith_77_assignsubmission_file_")
    _write(lessons.correct(A), folder / moodle / f"{A}.ipynb")
    out = tmp_path / "out"
    done = grade(folder, out, root)
    assert done.returncode == 0, done.stdout + done.stderr
    table = {(r["student_id"], r["lesson"]): r for r in rows(out)}
    assert table[("honest", A)]["score"] == "3"
    assert table[("other", A)]["score"] == "3"
    assert table[("j_rg_smith", A)]["score"] == "3"
    refused = [r for r in table.values() if not r["student_id"]]
    assert len(refused) == 1 and "bad\\udcffname" in refused[0]["reason"]


# An execution count is the notebook's to set (`get_ipython().execution_count = True`), and the
# cell's end carries it. Before the fix a bool passed the parser's check (a bool is an int) and
# an execute_result's count had none: the autograded notebook was then invalid, and a correct
# notebook became "error: The notebook could not be graded", a status the run never had.
@pytest.mark.parametrize("count", [True, False, -1, 10 ** 30])
def test_an_execution_count_nbformat_cannot_write_is_dropped(count):
    kept = clean_done({"index": 0, "execution_count": count, "outputs": [
        {"output_type": "execute_result", "data": {"text/plain": "2"}, "metadata": {},
         "execution_count": count}]})
    assert kept["execution_count"] is None
    assert kept["outputs"][0]["execution_count"] is None
    cell = new_code_cell("1 + 1", execution_count=kept["execution_count"],
                         outputs=[nbformat.from_dict(o) for o in kept["outputs"]])
    nbformat.validate(new_notebook(cells=[cell]))


@pytest.mark.slow
def test_a_notebook_that_sets_its_execution_count_is_graded(course, tmp_path):
    root, lessons = course
    nb = lessons.correct(A)
    nb.cells += [new_code_cell("get_ipython().execution_count = True"), new_code_cell("1 + 1")]
    _write(nb, tmp_path / "class" / "counter" / f"{A}.ipynb")
    done = grade(tmp_path / "class", tmp_path / "out", root)
    assert done.returncode == 0, done.stdout + done.stderr
    [row] = rows(tmp_path / "out")
    assert (row["status"], row["score"]) == ("graded", "3"), row


# In nbgrader's layout (<student>/<lesson>/) a timestamp.txt beside the notebook is copied
# for nbgrader's late penalty; in a folder collected by hand the student wrote it. Before the
# fix any text went to nbgrader, whose parse failed the submission ("could not be graded", a
# status the run never had) or, for a large file, took minutes (dateutil: about 4 s a MB).
@pytest.mark.slow
def test_a_timestamp_that_is_no_time_is_ignored_with_a_note(course, tmp_path):
    root, lessons = course
    folder = tmp_path / "class"
    _write(lessons.correct(A), folder / "stamped" / A / f"{A}.ipynb")
    (folder / "stamped" / A / "timestamp.txt").write_text("not a time " * 100)
    _write(lessons.correct(A), folder / "ontime" / A / f"{A}.ipynb")
    (folder / "ontime" / A / "timestamp.txt").write_text("2020-01-01 10:00:00.000000 UTC")
    done = grade(folder, tmp_path / "out", root)
    assert done.returncode == 0, done.stdout + done.stderr
    table = {r["student_id"]: r for r in rows(tmp_path / "out")}
    assert (table["stamped"]["status"], table["stamped"]["score"]) == ("graded", "3")
    assert "timestamp.txt" in table["stamped"]["reason"]
    assert (table["ontime"]["status"], table["ontime"]["score"]) == ("graded", "3")
    assert "timestamp.txt" not in table["ontime"]["reason"]
    copied = root / "submitted" / "ontime" / A / "timestamp.txt"
    assert copied.read_text() == "2020-01-01 10:00:00.000000 UTC"
    assert not (root / "submitted" / "stamped" / A / "timestamp.txt").exists()


# The names of the grader's own errors, reported by a notebook with an invisible character or
# white space in them (`E.__name__ = "CellTimeoutError\u200b"`): before the fix only the exact
# name was marked as the notebook's, so the note looked like the grader's in its pages.
@pytest.mark.parametrize("ename", ["CellTimeoutError\u200b", "Dead\u200bKernelError",
                                   " CheckFailed", "ChecksStopped\n", "CellNotRun\u2060Error"])
def test_a_graders_error_name_with_invisible_characters_is_the_notebooks(ename):
    from autograder.trusted.outputs import clean_output

    kept = clean_output({"output_type": "error", "ename": ename, "evalue": "", "traceback": []})
    assert kept["ename"].endswith(" (raised by the notebook)")


# A zip whose central directory marks a member's name as UTF-8 when its bytes are not: Python
# reads every name on opening the archive. Before the fix the class run stopped with only
# "error: 'utf-8' codec can't decode byte 0xff ...", which says neither which file nor what to do.
def test_a_zip_with_a_name_that_is_not_utf8_says_what_to_do(tmp_path):
    import io
    import struct
    import zipfile

    from autograder.intake.archives import extract_zip

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"alice/{A}.ipynb", "{}")
        archive.writestr("bob/XXX.ipynb", "{}")
    data = bytearray(buffer.getvalue().replace(b"XXX", b"\xff\xfe\xfd"))  # as long
    at = 0
    while (at := data.find(b"PK\x01\x02", at)) != -1:  # each central directory entry
        struct.pack_into("<H", data, at + 8, struct.unpack_from("<H", data, at + 8)[0] | 0x800)
        at += 4
    (tmp_path / "class.zip").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="marked as UTF-8 but is not.*grade the folder"):
        extract_zip(tmp_path / "class.zip", tmp_path / "into")
