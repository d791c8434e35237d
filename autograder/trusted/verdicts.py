"""Trusted verdicts: judge an exercise's scenarios from the student's, the reference's and the
known mistakes' outcomes.

When a check fails, `judge_exercise` names a known mistake only when the answer matched that
mistake on every scenario where the mistake differs from the reference; otherwise it says how
the found values relate to the expected ones (`relations`: twice as large, transposed, ...) and
what the exercise's other scenarios tell (the first call right and a later one wrong, the test
cell example's value whatever the inputs), in words that quote no hidden value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from autograder.records import CheckRow
from autograder.trusted.raised import Relation, message_kind
from autograder.trusted.outcomes import Outcome, ScenarioRun, differences, outcome_problems
from autograder.trusted.phrases import say
from autograder.trusted.relations import scenario_relations
from autograder.trusted.said import cell_says
from coursekit.scenarios import Mistake, Scenario


@dataclass
class Check:
    """The verdict on one scenario for one student."""

    exercise: str
    scenario: str
    title: str
    visible: bool
    passed: bool
    problems: list[str] = field(default_factory=list)
    mistake: str | None = None
    # What was measured of a failing check when no known mistake matched: relations of the
    # found values to the expected ones, and hints (guesses at a cause) that go with them.
    relations: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    # What the exercise's test cell says of the answer (autograder.trusted.said): on the
    # visible check, so that the page says at least what the student's own cell said.
    said: str | None = None

    def row(self, cell: str) -> CheckRow:
        return {"exercise": self.exercise, "cell": cell, "scenario": self.scenario,
                "visible": self.visible, "passed": self.passed, "mistake": self.mistake}


def judge(scenario: Scenario, reference: Outcome, student: Outcome,
          quote: bool = True, fresh: Outcome | None = None) -> Check:
    """The verdict on one scenario, with what was measured of a failure (no mistake named:
    that needs the exercise's other scenarios, see `judge_exercise`). `fresh`: the visible
    scenario's outcome on a fresh start, as the test cell's own call met the answer."""
    problems = outcome_problems(scenario, reference, student, quote)
    check = Check(scenario.exercise, scenario.name, scenario.title, scenario.visible,
                  not problems, problems)
    if problems:
        # What the test cell said comes from its own call (a fresh start), never from a later
        # call that state kept between calls may have changed.
        check.said = cell_says(scenario, reference, fresh if fresh is not None else student)
        if fresh is not None and fresh.observations is not None and \
                not outcome_problems(scenario, reference, fresh):
            fact, advice = say("fresh_only")
            check.relations.append(fact)
            check.hints.append(advice)
        for fact, hint in scenario_relations(scenario, reference, student):
            if fact not in check.relations and not _restates(fact, problems):
                check.relations.append(fact)
            if hint and hint not in check.hints:
                check.hints.append(hint)
    return check


def _restates(fact: str, problems: list[str]) -> bool:
    """Whether `fact` only says again what a line of `problems` says ("w.grad should be None,
    found a float32 tensor" after "w.grad: expected None, found a float32 tensor"). The reverse
    ("… is None where … was expected") stays: it is the measured relation that the named
    variants of 02, 06 and 08 are told."""
    match = re.fullmatch(r"(.+) should be None, found (.+)", fact)
    return bool(match) and f"{match[1]}: expected None, found {match[2]}" in problems


def judge_exercise(runs: list[ScenarioRun]) -> list[Check]:
    """The verdicts on every scenario of one exercise.

    A known mistake is named on a failing check only when the student's outcome matches the
    mistake's on every scenario where the mistake's differs from the reference's (a mistake
    that raised matches a run that raised the same type, with a message of the same known
    kind); otherwise each failing check says
    what was measured (`relations`). An exception's message is quoted once per exercise, on
    its first visible check that raised."""
    checks, quoted = [], False
    for run in runs:
        quote = not quoted and run.scenario.visible and run.student.raised is not None
        checks.append(judge(run.scenario, run.reference, run.student, quote, run.fresh))
        quoted = quoted or quote
    for mistake in _named_mistakes(runs):
        for run, check in zip(runs, checks):
            outcome = dict((id(m), o) for m, o in run.mistakes).get(id(mistake))
            if not check.passed and check.mistake is None and outcome is not None and \
                    _differs(run.scenario, run.reference, outcome):
                check.mistake = mistake.message
    visible_ok = any(c.visible for c in checks) and all(c.passed for c in checks if c.visible)
    example_measures = {_measure(key) for run in runs if run.scenario.visible
                        for key in (run.reference.observations or {})}
    orders = [_order_relations(run) if not check.passed else [] for run, check in
              zip(runs, checks)]
    stateful = any(orders)  # a call gave another result after other calls: state is kept
    for run, check, order in zip(runs, checks, orders):
        if check.passed or check.mistake:
            check.relations, check.hints = [], []
            continue
        found = order + _across_scenarios(run, runs)
        # A check that measured the answer right on its first call and wrong on a later one
        # says that alone: it is not an answer fitted to the example.
        first_call = any(FIRST_CALL in fact for fact, _ in order)
        # Not said where this check measured some things the example measured too, all of
        # them right, and is wrong only on what the example never measures (a flag, a count):
        # the values were right, so nothing says the answer was fitted to the example.
        wrong = _wrong_observations(run)
        shared = {_measure(key) for key in run.reference.observations or {}} & example_measures
        fitted = wrong is None or not shared or bool(wrong & shared)
        if visible_ok and not check.visible and run.student.stopped is None and not first_call \
                and fitted:
            found.append(say("example_first" if stateful else "example_only"))
        # What the other scenarios tell comes first: it says more than one value's relation.
        check.relations = list(dict.fromkeys([fact for fact, _ in found] + check.relations))
        check.hints = list(dict.fromkeys([hint for _, hint in found if hint] + check.hints))
    return checks


def _wrong_observations(run: ScenarioRun) -> set[str] | None:
    """The observations of the student's run that differ from the reference's (missing ones
    included); None when either reported none (it raised or stopped)."""
    expected, found = run.reference.observations, run.student.observations
    if expected is None or found is None:
        return None
    wrong = set()
    for key, value in expected.items():
        rtol, atol = run.scenario.tolerance_for(key)
        if key not in found or differences(value, found[key], rtol, atol, key, False):
            wrong.add(_measure(key))
    return wrong


def _measure(key: str) -> str:
    """What an observation measures: "y, call 2 (B)" measures what "y" does."""
    match = _ORDER_KEY.fullmatch(key)
    return match["what"] if match else key


def _matches(scenario: Scenario, wrong: Outcome, student: Outcome) -> bool:
    """Whether the student's run of `scenario` gave what the mistake `wrong` gave."""
    if wrong.raised is not None:
        return student.raised == wrong.raised and \
            message_kind(student.message) == message_kind(wrong.message)
    if wrong.observations is None or student.observations is None:
        return False
    return not outcome_problems(scenario, wrong, student)


# A mistake whose wrong formula means nothing on a scenario's inputs raises an exception of
# this name there (see docs/AUTHORING.md): it is judged on the other scenarios.
NOT_APPLICABLE = "NotApplicable"


def _differs(scenario: Scenario, reference: Outcome, wrong: Outcome) -> bool:
    """Whether the mistake `wrong` gives another outcome than the reference on `scenario`."""
    if wrong.raised == NOT_APPLICABLE:
        return False
    return wrong.raised is not None or wrong.observations is None or \
        bool(outcome_problems(scenario, reference, wrong))


def _named_mistakes(runs: list[ScenarioRun]) -> list[Mistake]:
    """The known mistakes the student's outcomes match wherever they differ from the
    reference's, in the order the lesson lists them."""
    order: list[Mistake] = []
    for run in runs:
        for mistake, _ in run.mistakes:
            if all(mistake is not m for m in order):
                order.append(mistake)
    named = []
    for mistake in order:
        differing, ok = 0, True
        for run in runs:
            outcomes = [o for m, o in run.mistakes if m is mistake]
            outcome = outcomes[0] if outcomes else None
            if outcome is None or outcome.observations is None and outcome.raised is None:
                ok = False  # unknown here: never named on part of the evidence
                break
            if _differs(run.scenario, run.reference, outcome):
                differing += 1
                if not _matches(run.scenario, outcome, run.student):
                    ok = False
                    break
        if ok and differing:
            named.append(mistake)
    return named


def _across_scenarios(run: ScenarioRun, runs: list[ScenarioRun]) -> list[Relation]:
    """Relations to the reference's outcomes on the exercise's other scenarios: a hidden
    check's value that is the visible example's, whatever the inputs."""
    student = run.student.observations
    if run.scenario.visible or student is None or run.reference.observations is None:
        return []
    out = []
    for other in runs:
        if not other.scenario.visible or other.reference.observations is None:
            continue
        for key, value in other.reference.observations.items():
            here = run.reference.observations.get(key)
            if key not in student or here is None:
                continue
            rtol, atol = run.scenario.tolerance_for(key)
            if differences(here, student[key], rtol, atol, key, True) and \
                    not differences(value, student[key], rtol, atol, key, True) and \
                    (not _small_count(value) or _again_elsewhere(run, runs, key, value)):
                out.append(say("example_value", name=key))
    return out[:2]


def _small_count(value) -> bool:
    """A count, a flag or a name (one of a model's few layers: 07-ex1 of a blind review): a
    wrong answer's may equal the example's by coincidence."""
    return isinstance(value, (bool, int, str))


def _again_elsewhere(run: ScenarioRun, runs: list[ScenarioRun], key: str, value) -> bool:
    """Whether another hidden run, whose expected `key` differs from `run`'s, also found the
    example's `value`: a count that equals the example's once may be chance, twice on
    different expectations it is what the answer gives whatever the inputs."""
    here = run.reference.observations.get(key)
    for other in runs:
        if other is run or other.scenario.visible:
            continue
        expected, found = other.reference.observations, other.student.observations
        if expected is None or found is None or key not in expected or key not in found:
            continue
        if expected[key] != here and expected[key] != value and found[key] == value:
            return True
    return False


# A scenario that calls the answer in two orders, A then B then B then A, each call on fresh
# inputs equal to those of the same letter, reports the results under the keys "<what>, call 1
# (A)", "<what>, call 2 (B)", "<what>, call 3 (B again)" and "<what>, call 4 (A again)"
# (docs/AUTHORING.md): a call's result must not depend on the calls made before it.
_ORDER_KEYS = ("call 1 (A)", "call 2 (B)", "call 3 (B again)", "call 4 (A again)")
_ORDER_KEY = re.compile(r"(?P<what>.+), (?:call 1 \(A\)|call 2 \(B\)|call 3 \(B again\)|"
                        r"call 4 \(A again\))")
FIRST_CALL = "right on the first call"


def _order_relations(run: ScenarioRun) -> list[Relation]:
    """Whether the answer's results in a scenario of two orders depend on the calls made before:
    the same call (on equal fresh inputs) gave another result the second time."""
    expected, found = run.reference.observations, run.student.observations
    if expected is None or found is None:
        return []
    out: list[Relation] = []
    for what in dict.fromkeys(m["what"] for m in map(_ORDER_KEY.fullmatch, expected) if m):
        keys = [f"{what}, {call}" for call in _ORDER_KEYS]
        if not set(keys) <= set(expected) & set(found):
            continue
        rtol, atol = run.scenario.tolerance_for(keys[0])
        right = [not differences(expected[k], found[k], rtol, atol, k, True) for k in keys]
        again = [bool(differences(found[keys[i]], found[keys[j]], rtol, atol, keys[j], True))
                 for i, j in ((0, 3), (1, 2))]
        if right[0] and not any(right[1:]):
            out.append(say("first_call_only", name=what))
        elif right[0] and not right[3]:
            out.append(say("first_call_again", name=what))
        elif any(again):
            out.append(say("order", name=what))
    return out
