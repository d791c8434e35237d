"""Checks for exercise test cells: each failure says what was expected, what was found and the likely mistake.

A failure names a "likely mistake" only when the found value is one the test cell listed for
that mistake (`mistakes=`); what a check reads from the values alone (twice the expected
value, all zeros, another shape: what was measured, never a guessed cause) and the test's own
advice (`hint=`) are labelled "hint".

A failing check raises `CheckFailed`, an AssertionError that IPython shows as its message alone
(the likely mistake right under the first line), without the frames of this module; nbgrader
and Validate still see an error. Importing this module in a Jupyter kernel also installs
`coursekit.notebook`'s messages for unanswered exercises and stale answers, and
`coursekit.figures`' alt text for figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from coursekit import figures as _figures
from coursekit.notebook import HINT_PREFIX, MISTAKE_PREFIX, CheckFailed, install
from coursekit.tolerance import fitted

__all__ = ["check_tensor", "check_equal", "check_true", "check_is_none", "diagnose",
           "tensor_said", "equal_said", "CheckFailed"]

# Multiples of the expected value, said as what was measured: the same factor has several
# causes (a second backward(), a mean, a missing factor), which a check cannot tell apart.
_SCALE_HINTS: tuple[tuple[float, str], ...] = (
    (2.0, "{name} is twice the expected value (×2)."),
    (3.0, "{name} is three times the expected value (×3)."),
    (-1.0, "{name} has the right size but the opposite sign (×−1)."),
    (0.5, "{name} is half the expected value (×1/2)."),
)


def _as_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach()
    return torch.as_tensor(value)


def _close(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> bool:
    """Whether `a` is `b` within the tolerances the grader uses too (`coursekit.tolerance`)."""
    if a.shape != b.shape:
        return False
    if b.is_floating_point():
        rtol, atol = fitted(str(b.dtype), b.detach().reshape(-1).tolist(), rtol, atol)
    return bool(torch.allclose(a.to(torch.float64), b.to(torch.float64), rtol=rtol, atol=atol))


def diagnose(name: str, found: Any, expected: Any, *, rtol: float = 1e-5,
             atol: float = 1e-6, mistakes: Mapping[str, Any] | None = None) -> str | None:
    """Return the likely mistake behind a wrong `found` (one of `mistakes`) or a hint read from
    the values, or None when nothing is recognised; `known_mistake` tells which it was."""
    if found is None:
        return (f"{name} is None. If it is a .grad: did backward() run, and is the tensor a leaf? "
                "A non-leaf keeps its gradient only after .retain_grad(), and a tensor "
                "needs requires_grad=True to get one at all.")
    try:
        found_t, expected_t = _as_tensor(found), _as_tensor(expected)
    except (TypeError, ValueError, RuntimeError):
        return None
    for message, wrong in (mistakes or {}).items():
        try:
            if _close(found_t, _as_tensor(wrong), rtol, atol):
                return message
        except (TypeError, ValueError, RuntimeError):
            continue
    if found_t.shape != expected_t.shape:
        if found_t.numel() == expected_t.numel():
            return (f"{name} has shape {tuple(found_t.shape)}, expected "
                    f"{tuple(expected_t.shape)}: the same number of entries, laid out in "
                    "another shape.")
        return (f"{name} has shape {tuple(found_t.shape)}, expected "
                f"{tuple(expected_t.shape)} ({found_t.numel()} entries, not "
                f"{expected_t.numel()}).")
    if not (found_t.is_floating_point() or expected_t.is_floating_point()):
        return None
    if torch.count_nonzero(expected_t) and not torch.count_nonzero(found_t):
        return f"{name} is all zeros, where the expected values are not."
    for factor, message in _SCALE_HINTS:
        if torch.count_nonzero(expected_t) and _close(found_t, expected_t * factor, rtol, atol):
            return message.format(name=name)
    return None


def known_mistake(diagnosis: str | None, mistakes: Mapping[str, Any] | None) -> bool:
    """Whether `diagnosis` (from `diagnose`) names one of the test's own `mistakes`."""
    return diagnosis is not None and diagnosis in (mistakes or {})


def _report(name: str, found: Any, expected: Any, hint: str | None,
            mistake: bool = False) -> str:
    lines = [f"{name} is not what was expected.",
             f"  expected: {expected!r}",
             f"  found:    {found!r}"]
    if isinstance(found, torch.Tensor) and found.shape == _as_tensor(expected).shape:
        difference = (found.detach().to(torch.float64)
                      - _as_tensor(expected).to(torch.float64)).abs().max().item()
        lines.append(f"  largest difference: {difference:.4g}")
    if hint:
        lines.append(f"{MISTAKE_PREFIX if mistake else HINT_PREFIX}{hint}")
    return "\n".join(lines)


# What a failing check says, decided apart from raising: (the message or None, whether it names
# one of the check's own `mistakes`). The grader calls the same functions on the values a visible
# scenario reported (autograder.trusted.said), so that the graded page says what the cell said.
Said = tuple[str | None, bool]


def tensor_said(name: str, found: Any, expected: Any, *, rtol: float = 1e-5,
                atol: float = 1e-6, mistakes: Mapping[str, Any] | None = None,
                hint: str | None = None) -> Said | None:
    """None when `found` passes `check_tensor`; else what its failure says."""
    if not isinstance(found, torch.Tensor):
        diagnosis = diagnose(name, found, expected, rtol=rtol, atol=atol, mistakes=mistakes)
        named = known_mistake(diagnosis, mistakes)
        if diagnosis is None:
            diagnosis = (f"{name} should be a torch.Tensor, not {type(found).__name__}. "
                         f"{hint or ''}").strip()
        return diagnosis, named
    if _close(found.detach(), _as_tensor(expected), rtol, atol):
        return None
    diagnosis = diagnose(name, found, expected, rtol=rtol, atol=atol, mistakes=mistakes)
    if known_mistake(diagnosis, mistakes):
        return diagnosis, True
    # what the values show, then the check's own advice
    return " ".join(text for text in (diagnosis, hint) if text) or None, False


def equal_said(name: str, found: Any, expected: Any, *, hint: str | None = None
               ) -> Said | None:
    """None when `found` passes `check_equal`; else what its failure says."""
    if found == expected and type(found) is type(expected):
        return None
    if found == expected:
        hint = (f"{name} equals the expected value but is a {type(found).__name__}, "
                f"not a {type(expected).__name__}.")
    return hint, False


def check_tensor(name: str, found: Any, expected: Any, *, rtol: float = 1e-5,
                 atol: float = 1e-6, mistakes: Mapping[str, Any] | None = None,
                 hint: str | None = None) -> None:
    """Assert that `found` is a tensor with the shape and values of `expected`.

    `mistakes` maps a message to the value a typical wrong answer produces; `hint` is
    shown when no known mistake is recognised.
    """
    said = tensor_said(name, found, expected, rtol=rtol, atol=atol, mistakes=mistakes,
                       hint=hint)
    if said is not None:
        raise CheckFailed(_report(name, found, expected, *said))


def check_equal(name: str, found: Any, expected: Any, *, hint: str | None = None) -> None:
    """Assert that a plain value (number, string, tuple, bool, type) equals `expected`."""
    said = equal_said(name, found, expected, hint=hint)
    if said is not None:
        raise CheckFailed(_report(name, found, expected, *said))


def check_is_none(name: str, found: Any, *, hint: str | None = None) -> None:
    """Assert that `found` is None (for example the .grad of a non-leaf tensor)."""
    if found is not None:
        raise CheckFailed(_report(name, found, None, hint))


def check_true(condition: bool, message: str) -> None:
    """Assert a condition; `message` says what was expected and what the likely mistake is."""
    if not condition:
        raise CheckFailed(message)


install()
_figures.install()
