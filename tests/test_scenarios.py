"""Every exercise is graded by scenarios: the reference passes them, a blank answer fails them,
and every listed variant (tests/variants/<lesson>.py) passes or fails as it should, naming its
mistake. These run in this process; tests/test_misconceptions_grading.py checks the same
through the grading command and the sandbox."""

from __future__ import annotations

import importlib.util
import re

import pytest

from autograder.release import lessons
from coursekit.scenarios import collect

import scenario_support as support

LESSONS = lessons()


def exercises(lesson: str) -> list[str]:
    return [gid.rsplit("-answer", 1)[0] for gid in support.answer_cells(lesson)]


def variants(lesson: str) -> list[dict]:
    path = support.ROOT / "tests" / "variants" / f"{lesson}.py"
    if not path.exists():
        return []
    spec = importlib.util.spec_from_file_location(f"variants_{lesson}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.VARIANTS


def blank(source: str) -> str:
    """The answer cell as students receive it (nbgrader's stub in place of the solution)."""
    return re.sub(r"( *)### BEGIN SOLUTION.*?### END SOLUTION",
                  lambda m: f"{m.group(1)}# YOUR CODE HERE\n{m.group(1)}raise NotImplementedError()",
                  source, flags=re.S)


ALL_EXERCISES = [(lesson, ex) for lesson in LESSONS
                 if support.scenario_path(lesson).exists() for ex in exercises(lesson)]


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_exercise_has_visible_and_hidden_scenarios(lesson):
    assert support.scenario_path(lesson).exists(), f"scenarios/{lesson}.py is missing"
    scenarios, mistakes = collect(support.scenario_module(lesson))
    for exercise in exercises(lesson):
        mine = [s for s in scenarios if s.exercise == exercise]
        assert any(s.visible for s in mine), f"{exercise} has no visible scenario"
        assert any(not s.visible for s in mine), f"{exercise} has no hidden scenario"
    known = set(exercises(lesson))
    assert {s.exercise for s in scenarios} <= known
    assert {m.exercise for m in mistakes} <= known


@pytest.mark.parametrize("lesson,exercise", ALL_EXERCISES)
def test_reference_passes_and_blank_fails(lesson, exercise):
    checks = support.verdict(lesson, exercise, support.reference_namespace(lesson))
    assert all(c.passed for c in checks), [c.problems for c in checks]
    source = support.answer_cells(lesson)[f"{exercise}-answer"]
    empty = support.variant_namespace(lesson, exercise, blank(source))
    checks = support.verdict(lesson, exercise, empty)
    assert checks and not any(c.passed for c in checks)


@pytest.mark.parametrize("lesson,exercise", ALL_EXERCISES)
def test_every_mistake_is_told_apart_from_the_reference(lesson, exercise):
    scenarios, mistakes = collect(support.scenario_module(lesson))
    for wrong in [m for m in mistakes if m.exercise == exercise]:
        namespace = dict(support.reference_namespace(lesson))
        namespace[wrong.replaces] = wrong.func
        checks = support.verdict(lesson, exercise, namespace)
        failed = [c for c in checks if not c.passed]
        assert failed, f"mistake {wrong.message!r} passes every scenario"
        assert any(c.mistake == wrong.message for c in failed), \
            f"mistake {wrong.message!r} is not named when made"


VARIANT_CASES = [(lesson, v) for lesson in LESSONS for v in variants(lesson)]


@pytest.mark.parametrize("lesson,variant", VARIANT_CASES,
                         ids=[f"{v['exercise']}-{v['name']}" for _, v in VARIANT_CASES])
def test_variant(lesson, variant):
    namespace = support.variant_namespace(lesson, variant["exercise"], variant["source"])
    checks = support.verdict(lesson, variant["exercise"], namespace)
    if variant["expect"] == "pass":
        assert all(c.passed for c in checks), [c.problems for c in checks]
        return
    failed = [c for c in checks if not c.passed]
    assert failed, "this wrong answer passes every scenario"
    if variant.get("mistake"):
        named = [c.mistake for c in failed if c.mistake]
        assert any(variant["mistake"].lower() in m.lower() for m in named), \
            f"expected a mistake naming {variant['mistake']!r}, got {named}"
