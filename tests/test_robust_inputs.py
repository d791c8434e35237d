"""Robust inputs, on the reading side: whatever a file is (JSON nested 100,000
deep, 10,000 cells, 100 MB of output, bytes that are not UTF-8, lone surrogates, a FIFO), it
becomes its row's `invalid` with a reason and the rest of the class is graded; a symbolic link
in SUBMISSIONS (to /etc/passwd, to solutions/) is never followed, nor a zip's link or path out;
every reason is one line, so no file name forges a CSV row or a log line."""

from __future__ import annotations

import csv
import json
import os
import stat
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.demo import Lessons, _write
from autograder.intake.collect import collect
from autograder.intake.files import MAX_NOTEBOOK_BYTES
from autograder.intake.validate import read_notebook
from autograder.text import one_line

A, B = fixture_course.LESSONS
LESSONS = list(fixture_course.LESSONS)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = fixture_course.build_course(tmp_path_factory.mktemp("robust") / "course")
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    return root, Lessons(root)


# --------------------------------------------------------------------------------------------
# Files that are not what they claim: written here, each as a lesson notebook would be named

def deep_json(path: Path, depth: int = 100_000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"cells": [' + "[" * depth + "]" * depth + '], "metadata": {}, '
                    '"nbformat": 4, "nbformat_minor": 5}', encoding="utf-8")
    return path


def many_cells(path: Path, lessons: Lessons, count: int = 10_000) -> Path:
    nb = lessons.correct(A)
    nb.cells += [new_code_cell("") for _ in range(count)]
    return _write(nb, path)


def huge_output(path: Path, lessons: Lessons) -> Path:
    """The correct notebook with over 100 MB of printed output stored in a cell."""
    text = nbformat.writes(lessons.correct(A))
    data = json.loads(text)
    data["cells"][2]["outputs"] = [{"output_type": "stream", "name": "stdout",
                                    "text": "PLACEHOLDER"}]
    head, tail = json.dumps(data).split("PLACEHOLDER")
    path.parent.mkdir(parents=True, exist_ok=True)
    line = "spam " * 200 + "\\n"
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(head)
        for _ in range(MAX_NOTEBOOK_BYTES // len(line) + 1000):
            handle.write(line)
        handle.write(tail)
    return path


def not_utf8(path: Path, lessons: Lessons) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = nbformat.writes(lessons.correct(A)).replace("Fixture lesson A", "Le\u00e7on A")
    path.write_bytes(text.encode("latin-1"))
    return path


def lone_surrogate(path: Path, lessons: Lessons) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = nbformat.writes(lessons.correct(A)).replace("Fixture lesson A", "\\ud800 lesson A")
    path.write_text(text, encoding="utf-8")
    return path


def long_markdown(path: Path, lessons: Lessons) -> Path:
    """A markdown cell of 1 MB of highlighted code: a red-team review found that rendering a
    5 MB one for the feedback page took the grader 275 s and 6 GB."""
    nb = lessons.correct(A)
    nb.cells.append(new_markdown_cell("```python\n" + "a+" * 500_000 + "a\n```"))
    return _write(nb, path)


def long_notebook(path: Path, lessons: Lessons) -> Path:
    """Cells each under the limit of one, 5 MB of them in all (red team, round 3: every cell is
    highlighted into the feedback, run or not)."""
    nb = lessons.correct(A)
    nb.cells += [new_code_cell("a+a\n" * 60_000) for _ in range(20)]
    return _write(nb, path)


@pytest.mark.parametrize("make, words", [
    (lambda p, _lessons: deep_json(p), "nested"),
    (long_markdown, "characters of text"),
    (long_notebook, "characters of text in all"),
    (many_cells, "10010 cells"),
    (not_utf8, "not text"),
    (lone_surrogate, "lone surrogates"),
])
def test_bad_files_are_a_reason_not_an_exception(course, tmp_path, make, words):
    _, lessons = course
    path = make(tmp_path / f"{A}.ipynb", lessons)
    nb, reason = read_notebook(path)
    assert nb is None and words in reason
    assert reason == one_line(reason)


def test_a_notebook_larger_than_the_limit(course, tmp_path):
    _, lessons = course
    path = huge_output(tmp_path / f"{A}.ipynb", lessons)
    assert path.stat().st_size > MAX_NOTEBOOK_BYTES
    nb, reason = read_notebook(path)
    assert nb is None and "larger than 100 MB" in reason and "Clear" in reason


def test_a_link_or_a_fifo_is_not_read(course, tmp_path):
    root, _ = course
    link = tmp_path / "link.ipynb"
    link.symlink_to(root / "solutions" / A / f"{A}.ipynb")
    nb, reason = read_notebook(link)
    assert nb is None and "symbolic link" in reason
    fifo = tmp_path / "fifo.ipynb"
    os.mkfifo(fifo)
    answer = []
    reader = threading.Thread(target=lambda: answer.append(read_notebook(fifo)), daemon=True)
    reader.start()
    reader.join(30)
    assert answer, "reading a FIFO named like a notebook blocked"
    assert answer[0][0] is None and "not a regular file" in answer[0][1]


@pytest.mark.parametrize("text", [
    "one\ntwo", "one\r\ntwo", "esc \x1b[31mred\x1b[0m", "nul\x00byte", "sep\u2028line",
    "bidi \u202egnp.exe", "tab\there", "del\x7fc1\x85",
])
def test_one_line(text):
    line = one_line(text)
    assert "\n" not in line and "\r" not in line and line.isprintable() and line.strip() == line
    assert len(one_line("x" * 5000)) == 2000


def test_a_zip_holds_no_links_and_nothing_outside(course, tmp_path):
    _, lessons = course
    archive = tmp_path / "class.zip"
    text = nbformat.writes(lessons.correct(A))
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(f"alice/{A}.ipynb", text)
        link = zipfile.ZipInfo(f"mallory/{A}.ipynb")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, str(course[0] / "solutions" / A / f"{A}.ipynb"))
        zf.writestr(f"/tmp/absolute/{A}.ipynb", text)
        zf.writestr(f"../escape/{A}.ipynb", text)
        zf.writestr("bob/na\nme\x1b[2J.txt", "x")
    found, skipped = collect(archive, LESSONS, tmp_path / "work")
    assert [(s.student, s.lesson) for s in found] == [("alice", A)]
    assert any("mallory" in item and "symbolic link" in item for item in skipped)
    assert sum("outside the archive" in item for item in skipped) == 2
    assert all(item == one_line(item) for item in skipped)
    assert any("na\\nme\\x1b[2J.txt" in item for item in skipped)
    extracted = tmp_path / "work" / "extracted"
    assert not any(p.is_symlink() for p in extracted.rglob("*"))
    assert not (tmp_path / "escape").exists()


def test_links_in_a_folder_are_not_followed(course, tmp_path):
    root, lessons = course
    folder = tmp_path / "class"
    _write(lessons.correct(A), folder / "alice" / f"{A}.ipynb")
    (folder / "cheater").mkdir()
    (folder / "cheater" / f"{A}.ipynb").symlink_to(root / "solutions" / A / f"{A}.ipynb")
    (folder / "etc").symlink_to("/etc")
    (folder / "alice" / "notes.txt").symlink_to("/etc/passwd")
    found, skipped = collect(folder, LESSONS, tmp_path / "work")
    assert sorted(s.student for s in found) == ["alice", "cheater"]
    assert "etc/: a symbolic link, not followed" in skipped
    assert "alice/notes.txt: a symbolic link, not followed" in skipped


# --------------------------------------------------------------------------------------------
# A class of all of them, graded: the honest student keeps full marks

@pytest.mark.slow
def test_a_class_of_bad_files_is_graded_around_them(course, tmp_path):
    root, lessons = course
    folder = tmp_path / "class"
    _write(lessons.correct(A), folder / "honest" / f"{A}.ipynb")
    deep_json(folder / "deep" / f"{A}.ipynb")
    many_cells(folder / "manycells" / f"{A}.ipynb", lessons)
    huge_output(folder / "bigoutput" / f"{A}.ipynb", lessons)
    # 40 MiB of displayed '&', within the output caps of the sandbox's channel: the feedback
    # keeps 16 MiB of it (escaping grows it five times over; a red-team notebook printing
    # 92 MiB made the grader use 6 GB while writing its feedback).
    # Thousands of tiny outputs, far under the budget's bytes (red team, round 3: 950,000
    # of them cost the grader 5 GB): each output counts for at least 8 KiB of it.
    chatty = lessons.correct(A)
    chatty.cells += [new_code_cell("import sys\nfor _ in range(300):\n    print('o')\n"
                                   "    print('e', file=sys.stderr)") for _ in range(6)]
    _write(chatty, folder / "chatty" / f"{A}.ipynb")
    _write(lessons.with_answers(A, {"01-ex1-answer": (
               "from IPython.display import display\nfor _ in range(10):\n"
               "    display({'text/plain': '&' * (4 << 20)}, raw=True)")}),
           folder / "ampersands" / f"{A}.ipynb")
    not_utf8(folder / "latin1" / f"{A}.ipynb", lessons)
    lone_surrogate(folder / "surrogate" / f"{A}.ipynb", lessons)
    (folder / "passwd").mkdir()
    (folder / "passwd" / f"{A}.ipynb").symlink_to("/etc/passwd")
    (folder / "cheater").mkdir()
    (folder / "cheater" / f"{A}.ipynb").symlink_to(root / "solutions" / A / f"{A}.ipynb")
    (folder / "etc").symlink_to("/etc")
    forged = "homework\nforged,02_lesson,3,3,graded,\n== forged: graded.ipynb"
    _write(lessons.correct(A), folder / "forger" / forged)
    _write(lessons.correct(A), folder / "forger" / f"{A}.ipynb")
    _write(lessons.correct(A), folder / "evil\nname" / f"{A}.ipynb")
    # A folder name a spreadsheet would read as a formula (red team, round 2).
    _write(lessons.correct(A), folder / "=HYPERLINK(1)" / f"{A}.ipynb")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(folder), "--out", str(out),
         "--course-root", str(root), "--jobs", "1", "--timeout", "20", "--no-progress",
         "--lessons", A],
        capture_output=True, text=True, timeout=900, env=dict(os.environ, CI="true"))
    assert done.returncode == 0, done.stdout + done.stderr
    text = (out / "grades.csv").read_text(encoding="utf-8")
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(text.splitlines()) == len(rows) + 1  # no row spans two lines
    table = {(r["student_id"], r["lesson"]): r for r in rows}
    assert not any(r["student_id"].startswith("forged") for r in rows)
    assert table[("honest", A)]["status"] == "graded" and table[("honest", A)]["score"] == "3"
    assert table[("forger", A)]["score"] == "3"
    assert table[("'=HYPERLINK(1)", A)]["score"] == "3"  # written as text, not a formula
    assert not any(r["student_id"].startswith(("=", "+", "-", "@")) for r in rows)
    assert table[("ampersands", A)]["status"] == "graded", table[("ampersands", A)]
    feedback = out / "feedback" / "ampersands" / f"{A}.html"
    assert "output cut: the grader keeps 16 MiB" in feedback.read_text(encoding="utf-8")
    assert feedback.stat().st_size < 120 << 20
    assert table[("chatty", A)]["status"] == "graded", table[("chatty", A)]
    kept = nbformat.read(root / "autograded" / "chatty" / A / f"{A}.ipynb", as_version=4)
    outputs = [o for c in kept.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert len(outputs) <= (16 << 20) // (8 << 10) + 50, len(outputs)
    assert any("output cut" in o.get("text", "") for o in outputs)
    expected = {"deep": "nested", "manycells": "cells", "bigoutput": "larger than 100 MB",
                "latin1": "not text", "surrogate": "lone surrogates",
                "passwd": "symbolic link", "cheater": "symbolic link"}
    for student, words in expected.items():
        row = table[(student, A)]
        assert row["status"] == "invalid" and row["score"] == "0", row
        assert words in row["reason"], row
    assert "forged" in table[("forger", "")]["reason"]
    assert "\\n" in table[("forger", "")]["reason"]  # the name's newline, written as \n
    stray = [r for r in rows if not r["student_id"]]
    assert len(stray) == 1 and "evil\\nname" in stray[0]["reason"]
    assert not any(key[0] in ("etc", "evil") for key in table)
    assert all(r["reason"] == one_line(r["reason"]) for r in rows)
    log = (out / "grading.log").read_text(encoding="utf-8").splitlines()
    assert not any(line.startswith("== forged") or line.startswith("forged,") for line in log)
    assert "root:" not in (out / "grading.log").read_text()
    # Nothing of the links' targets was copied into the course.
    assert not (root / "submitted" / "cheater").exists()
    assert not (root / "submitted" / "passwd").exists()
