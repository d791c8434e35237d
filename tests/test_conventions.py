"""One parser of the exercise cells' grade ids, one `one_line`, and no import circle between the
student tooling's modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from autograder.text import one_line
from coursekit.notebook import CellId, exercise_number, exercise_of, parse_cell_id

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("grade_id, parsed", [
    ("01-ex2-test", CellId("01", 2, "test")),
    ("07-ex12-answer", CellId("07", 12, "answer")),
    ("01-ex2-tests", None), ("01-ex-test", None), ("ex2-test", None), ("01-ex2_test", None),
    ("01-ex2-test\n", None), ("", None), (None, None), ("summary", None),
])
def test_a_grade_id_is_parsed_into_lesson_number_and_role(grade_id, parsed):
    assert parse_cell_id(grade_id) == parsed
    assert exercise_number(grade_id) == (parsed.number if parsed else None)
    assert exercise_of(grade_id) == (f"{parsed.lesson}-ex{parsed.number}" if parsed else None)


def test_the_release_and_progress_use_the_one_parser():
    """No other module of the course parses "<lesson>-ex<N>-..." by hand."""
    for path in ("autograder/release.py", "coursekit/progress.py"):
        source = (ROOT / path).read_text()
        assert "-ex(" not in source and 'rsplit("-"' not in source, path
        assert "parse_cell_id" in source or "exercise_of" in source, path


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_coursekit_notebook_does_not_import_checks():
    """coursekit.checks imports coursekit.notebook; the other way round would be a circle."""
    assert "coursekit.notebook" in _imported(ROOT / "coursekit" / "checks.py")
    assert not {"coursekit.checks", "coursekit"} & _imported(ROOT / "coursekit" / "notebook.py")


@pytest.mark.parametrize("text, line", [
    ("one\ntwo", "one two"), ("tab\t\there", "tab here"), ("  a   b  ", "a b"),
    ("esc \x1b[31mred", "esc [31mred"), ("bidi \u202egnp.exe", "bidi gnp.exe"),
    ("zero\u200bwidth", "zero width"), ("sep\u2028line\x85next", "sep line next"),
    ("no-break\u00a0space", "no-break space"),
])
def test_one_line_leaves_one_line_of_printable_text(text, line):
    assert one_line(text) == line


def test_one_line_caps_its_length():
    assert one_line("x" * 50, 10) == "xxxxxxx..."
    assert one_line("word " * 10, 12) == "word word..."
    assert one_line("short", 10) == "short"


def test_there_is_one_one_line():
    """The grader, intake and the class hub share autograder.text.one_line."""
    for path in [*ROOT.joinpath("autograder").rglob("*.py"), *ROOT.joinpath("hub").rglob("*.py")]:
        if path.name != "text.py":
            assert "def one_line" not in path.read_text(), path
