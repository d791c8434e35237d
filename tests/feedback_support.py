"""Run one exercise's visible test cell against an answer, in this process, and read the first
message it prints: for tests/test_lesson_feedback_<nn>.py.

The namespace is the solution notebook's, test cells left out (tests/scenario_support.py), with
the exercise's answer cell replaced by the answer under test; the test cell runs as a student
sees it (hidden tests removed). Its first failing check raises AssertionError, whose message
is what the student reads first.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io

import scenario_support as support
from notebook_support import grading, without_hidden_tests


def variant_source(lesson: str, exercise: str, name: str) -> str:
    """The source of variant `name` of `exercise` in tests/variants/<lesson>.py."""
    path = support.ROOT / "tests" / "variants" / f"{lesson}.py"
    spec = importlib.util.spec_from_file_location(f"variants_{lesson}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    [variant] = [v for v in module.VARIANTS if v["exercise"] == exercise and v["name"] == name]
    return variant["source"]


def visible_test(lesson: str, exercise: str) -> str:
    [cell] = [c for c in support.solution(lesson).cells
              if grading(c).get("grade_id") == f"{exercise}-test"]
    return without_hidden_tests(cell.source)


def first_message(lesson: str, exercise: str, answer: str) -> str | None:
    """The message of the visible test's first failing check for `answer` (None: it passes).
    An exception other than a failed check propagates."""
    namespace = support.variant_namespace(lesson, exercise, answer)
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            exec(compile(visible_test(lesson, exercise), f"<{exercise}-test>", "exec"),  # noqa: S102
                 namespace)
    except AssertionError as failure:
        return str(failure)
    return None

