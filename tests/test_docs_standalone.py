"""The maintainers' docs stand alone in a clone: docs/EXAMPLES.md lists every
worked example of every lesson with the values the tests check, and no doc sends the reader to
a file the repository does not have."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import COURSE_ROOT

pytestmark = pytest.mark.fast

FIXTURES = Path(__file__).parent / "fixtures"
DOCS = COURSE_ROOT / "docs"


def _sections() -> dict[str, str]:
    """docs/EXAMPLES.md's text under each lesson heading, keyed by the lesson's folder name."""
    text = (DOCS / "EXAMPLES.md").read_text(encoding="utf-8")
    found = {}
    for match in re.finditer(r"^## [^\n]*\(`([0-9]{2}_[a-z_]+)`\)\n(.*?)(?=^## |\Z)", text,
                             re.M | re.S):
        found[match.group(1)] = match.group(2)
    return found


def test_every_example_is_listed_under_its_lesson():
    examples = json.loads((FIXTURES / "spec_examples.json").read_text())
    sections = _sections()
    for lesson, ids in examples.items():
        if lesson.startswith("_"):
            continue
        assert lesson in sections, f"docs/EXAMPLES.md has no section for {lesson}"
        listed = re.findall(r"^\| (\d{3}\.\d+) \|", sections[lesson], re.M)
        assert sorted(listed) == sorted(ids), lesson


def test_the_documented_values_the_tests_check_are_in_the_doc():
    documented = json.loads((FIXTURES / "documented_values.json").read_text())
    sections = _sections()
    for lesson, values in documented.items():
        if lesson.startswith("_"):
            continue
        for example, strings in values.items():
            if not re.fullmatch(r"\d{3}\.\d+", example):
                continue
            assert re.search(rf"^\| {re.escape(example)} \|", sections[lesson], re.M), example
            # The numbers of each checked value appear in the lesson's section (the example's
            # row, or the "Then and now" text after the table).
            shown = {abs(float(n)) for n in re.findall(r"\d+(?:\.\d+)?(?:e-?\d+)?",
                                                       sections[lesson])}
            for string in strings:
                for number in re.findall(r"\d+(?:\.\d+)?(?:e-?\d+)?", string)[:4]:
                    assert abs(float(number)) in shown, (lesson, example, string, number)


def test_docs_name_only_files_a_clone_has():
    for doc in [COURSE_ROOT / "README.md", *DOCS.glob("*.md")]:
        text = doc.read_text(encoding="utf-8")
        assert "COURSE-SPEC" not in text, doc
        for target in re.findall(r"\]\(([^)#]+\.md)\)", text):
            assert (doc.parent / target).is_file(), (doc, target)
