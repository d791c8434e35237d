"""Two things of the instructor's that reached a sandbox, and must not: the docstrings of
the scenario helpers (some explain how a hidden check judges), and the grading machine's
/etc/passwd and /etc/group (on the class hub, the class's account names)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from autograder.trusted.sources import sandbox_source

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((REPO / "scenarios").glob("[0-9]*.py"))


def _docstrings(source: str) -> list[str]:
    tree = ast.parse(source)
    return [ast.get_docstring(node) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and ast.get_docstring(node)]


def test_no_docstring_goes_into_the_sandbox():
    source = '''"""How the hidden check judges."""
import math

def helper(x):
    """Judged against the reference within 1e-6."""
    return math.sqrt(x)

class Probe:
    """Only a docstring."""

@scenario("a")
def run(answer, rng):
    """Calls helper."""
    return {"v": helper(answer(Probe()))}
'''
    sent = sandbox_source(source)
    assert _docstrings(sent) == [] and "judge" not in sent.lower() and "Calls" not in sent
    assert "def helper" in sent and "class Probe" in sent and "sqrt" in sent
    compile(sent, "<scenarios>", "exec")


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_no_lessons_scenario_docstring_goes_into_the_sandbox(path):
    source = path.read_text(encoding="utf-8")
    sent = sandbox_source(source)
    assert _docstrings(sent) == []
    compile(sent, str(path), "exec")
