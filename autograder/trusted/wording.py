"""How a failing check words what it measured of many values: a long tensor or list that differs
is told by how many entries differ, where the largest difference is and its size, never by its
first values (which are often the same in both).

On a visible check the size is the two values there (the student knows the example's inputs).
On a hidden check no value of the check is quoted: the size is the largest difference relative
to the largest expected value, to one significant digit (a few bits, like a relation's factor),
and the position is an index into the answer's own result.
"""

from __future__ import annotations

import math
from typing import Sequence


def number(x: object) -> str:
    """A number as the feedback shows it: six significant digits."""
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def _gap(found: object, expected: object) -> float:
    d = abs(float(found) - float(expected))  # type: ignore[arg-type]
    return math.inf if math.isnan(d) else d


def position(flat: int, shape: Sequence[int]) -> str:
    """The index, as [i, j, ...], of entry `flat` of a row-major tensor of `shape`."""
    index, rest = [], flat
    for size in reversed(shape or (1,)):
        index.append(rest % size if size else 0)
        rest //= size if size else 1
    return "[" + ", ".join(str(i) for i in reversed(index)) + "]"


def _one_digit(x: float) -> str:
    return f"{float(f'{x:.1g}'):g}"


def relative_size(gap: float, expected: Sequence[object]) -> str:
    """The size of a difference without a value of the check: relative to the largest
    expected value, to one significant digit."""
    if math.isinf(gap):
        return "where the answer's value is not a finite number"
    scale = max((abs(float(x)) for x in expected  # type: ignore[arg-type]
                 if math.isfinite(float(x))), default=0.0)  # type: ignore[arg-type]
    if scale == 0:
        return "where every expected value is 0"
    ratio = gap / scale
    if ratio >= 1:
        return f"about {_one_digit(ratio)} times the largest expected value in size"
    return f"about {_one_digit(ratio * 100)}% of the largest expected value in size"


def many_differ(where: str, expected: Sequence[object], found: Sequence[object],
                shape: Sequence[int], wrong: list[int], reveal: bool,
                entries: str = "entries") -> str:
    """A long tensor (or list, `entries`="items") that differs at the flat indices `wrong`:
    how many differ, where the largest difference is, and its size (see the module)."""
    worst = max(wrong, key=lambda i: _gap(found[i], expected[i]))
    text = (f"{where}: {len(wrong)} of {len(expected)} {entries} differ; the largest "
            f"difference is at {position(worst, shape)}")
    if reveal:
        return f"{text}: expected {number(expected[worst])}, found {number(found[worst])}"
    return f"{text}, {relative_size(_gap(found[worst], expected[worst]), expected)}"
