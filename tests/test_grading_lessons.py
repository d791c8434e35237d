"""The course's own lessons through the grading command: whatever lessons solutions/ holds,
the solution notebook gets full marks, the student notebook 0, and no feedback page shows a
name that only the hidden tests use."""

from __future__ import annotations

import csv
import html
import io
import keyword
import os
import re
import shutil
import subprocess
import sys
import tokenize

import nbformat
import pytest

from autograder.demo import Lessons, _write
from autograder.release import COURSE_ROOT, lessons

pytestmark = pytest.mark.slow

LESSONS = lessons(COURSE_ROOT)


def _names(source: str) -> set[str]:
    names = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.NAME and not keyword.iskeyword(token.string):
                names.add(token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        names.update(re.findall(r"[A-Za-z_]\w*", source))
    return names


def hidden_only_names(lesson: str) -> set[str]:
    """Names that appear in the lesson's hidden tests and nowhere else in it."""
    nb = nbformat.read(COURSE_ROOT / "solutions" / lesson / f"{lesson}.ipynb", as_version=4)
    hidden, visible = [], []
    for cell in nb.cells:
        inside = False
        for line in cell.source.splitlines():
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END HIDDEN TESTS" in line:
                inside = False
            else:
                (hidden if inside else visible).append(line)
    import builtins
    seen = set(re.findall(r"[A-Za-z_]\w*", "\n".join(visible)))  # in code, strings, prose
    return {name for name in _names("\n".join(hidden)) - seen
            if len(name) > 3 and not hasattr(builtins, name)}


@pytest.mark.skipif(not LESSONS, reason="no lessons in solutions/ yet")
def test_correct_and_blank_notebooks_of_every_lesson(tmp_path):
    root = tmp_path / "course"
    root.mkdir()
    for name in ("solutions", "notebooks", "scenarios"):
        if (COURSE_ROOT / name).is_dir():
            shutil.copytree(COURSE_ROOT / name, root / name,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copy(COURSE_ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    course = Lessons(root)
    submissions = tmp_path / "class"
    for lesson in course.names:
        _write(course.correct(lesson), submissions / "correct" / f"{lesson}.ipynb")
        _write(course.blank(lesson), submissions / "blank" / f"{lesson}.ipynb")
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(submissions), "--out",
         str(tmp_path / "out"), "--course-root", str(root), "--jobs", "2"],
        capture_output=True, text=True, env=dict(os.environ, CI="true"), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(tmp_path / "out" / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = {(r["student_id"], r["lesson"]): r for r in csv.DictReader(handle)}
    for lesson in course.names:
        correct, blank = rows[("correct", lesson)], rows[("blank", lesson)]
        assert correct["status"] == "graded", correct
        assert float(correct["max_score"]) > 0
        assert correct["score"] == correct["max_score"], correct
        assert blank["status"] == "graded" and blank["score"] == "0", blank
        secrets = hidden_only_names(lesson)
        for student in ("correct", "blank"):
            page = (tmp_path / "out" / "feedback" / student / f"{lesson}.html").read_text()
            page = re.sub(r"(?s)<(style|script|head)\b.*?</\1>", "", page)
            text = html.unescape(re.sub(r"<[^>]+>", "", page))
            shown = {name for name in secrets if re.search(rf"\b{re.escape(name)}\b", text)}
            assert not shown, (lesson, student, shown)
