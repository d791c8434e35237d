"""What an exercise's test cell said of an answer, found again by the grader: the graded page
says at least what the student's own test cell said.

A scenario module restates each test cell's checks as data (`coursekit.scenarios.cell_checks`):
which observation of the visible scenario each check reads, and the cell's mistakes, hints and
messages. `cell_says` runs the same `coursekit.checks` logic on the values the sandbox reported
for the visible scenario (validated plain data, never text the notebook printed), with the
reference's observation as the expected value, and stops at the first check that fails, as the
cell does. What it returns is the cell's own text, or None where the cell named nothing.

This runs only in the grader's processes. The messages are the scenario module's (trusted);
a message written as a function of the observations must quote no key and no string the answer
returned, and where one quotes such a string (one the reference did not report, other than the name of
one of Python's types), its message is not shown: a hostile answer could have put any text
there. (A message written as a string is the module's own, shown as it is.)
"""

from __future__ import annotations

from typing import Any

from autograder.trusted.outcomes import Outcome, Tensor, differences
from coursekit.scenarios import CellCheck, Scenario


def cell_says(scenario: Scenario, reference: Outcome, student: Outcome) -> str | None:
    """The message the test cell prints for the student's answer, read from the visible
    scenario's observations; None when the cell's checks pass, when the failing check names
    nothing, or when what it reads was not reported (the answer raised, a key is missing)."""
    cell = scenario.cell
    if cell is None or student.observations is None or reference.observations is None:
        return None
    try:
        found, expected = _plain(student.observations), _plain(reference.observations)
    except Exception:  # noqa: BLE001 (a reported tensor no tensor of its dtype holds, such as
        return None    # nan among int64s: the cell's checks could not read it either)
    for check in cell.checks:
        try:
            said = _same(check, reference.observations, student.observations) \
                if check.kind == "same" else _said(check, found, expected)
        except Exception:  # noqa: BLE001 (what the check cannot read, the cell would not say)
            return None
        if said is not None:
            text = said[0]
            if not isinstance(text, str) or not text.strip() or callable(check.message) and \
                    _quotes_answer(text, student.observations, reference.observations):
                return None
            return text
    return None


# Names of Python's and torch's own types, which a message may quote (`type(x).__name__`).
TYPE_NAMES = frozenset({"list", "tuple", "set", "dict", "str", "int", "float", "bool",
                        "NoneType", "Tensor"})


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, list):
        return set().union(*map(_strings, value)) if value else set()
    if isinstance(value, dict):  # the values: a message function quotes no key
        return set().union(*map(_strings, value.values())) if value else set()
    return set()


def _quotes_answer(text: str, found: dict, expected: dict) -> bool:
    """Whether `text` holds a string of the answer's report that the reference's has not."""
    own = _strings(found) - _strings(expected) - TYPE_NAMES
    return any(piece in text for piece in own if len(piece) >= 3)


def _same(check: CellCheck, expected: dict, found: dict):
    """The "same" check: None when the answer's observation is the reference's."""
    if check.key not in found or check.key not in expected:
        raise KeyError(check.key)
    if not differences(expected[check.key], found[check.key], check.rtol, check.atol,
                       check.key, False):
        return None
    return _text(check.message, _plain(found)), False


def _said(check: CellCheck, found: dict, expected: dict):
    """None when `check` passes on `found`; else (message or None, named)."""
    from coursekit.checks import equal_said, tensor_said

    if check.kind == "true":
        if check.condition(found):
            return None
        return _text(check.message, found), False
    # a mistake's value may be a function of the reference's observations (what a wrong answer
    # gives on this example, made from what the reference reported of it)
    mistakes = {message: wrong(expected) if callable(wrong) else wrong
                for message, wrong in check.mistakes}
    if check.read is not None:
        found, expected = {check.key: check.read(found)}, {check.key: check.read(expected)}
    if check.key not in found or check.key not in expected:
        raise KeyError(check.key)
    value, hint = found[check.key], _text(check.message, found)
    if check.kind == "tensor":
        return tensor_said(check.name, value, expected[check.key], rtol=check.rtol,
                           atol=check.atol, mistakes=mistakes, hint=hint)
    if check.kind == "equal":
        return equal_said(check.name, value, expected[check.key], hint=hint)
    if check.kind == "none":
        return None if value is None else (hint, False)
    raise ValueError(f"unknown cell check {check.kind!r}")


def _text(message: Any, found: dict) -> str | None:
    return message(found) if callable(message) else message


def _plain(value: Any) -> Any:
    """Validated observations with their tensors as torch tensors (what the cell's checks read)."""
    if isinstance(value, Tensor):
        import torch
        return torch.tensor(value.data, dtype=getattr(torch, value.dtype)).reshape(value.shape)
    if isinstance(value, list):  # a tuple the answer gave stays named a tuple (TupleItems)
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
