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
import re
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
    if ratio >= 1 and _one_digit(ratio) == "1":  # not "about 1 times"
        return "about as large as the largest expected value"
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


# What a sandbox reports when an answer's results cannot be encoded (coursekit.scenarios.encode,
# autograder.sandbox.observe.run_one): untrusted text, read only against these fixed patterns;
# a type's name is said only when it is one of these well-known ones.
_KNOWN_TYPES = {
    "tuple": "a tuple", "set": "a set", "frozenset": "a frozenset", "complex": "a complex number",
    "bytes": "bytes", "bytearray": "a bytearray", "range": "a range", "generator": "a generator",
    "function": "a function (not called?)", "method": "a method (not called?)",
    "builtin_function_or_method": "a built-in function (not called?)", "type": "a class",
    "module": "a module", "map": "a map object", "filter": "a filter object", "zip": "a zip "
    "object", "ndarray": "a NumPy array", "float32": "a NumPy number", "float64": "a NumPy number",
    "int64": "a NumPy number", "Module": "a torch.nn.Module", "Linear": "a torch.nn.Linear",
    "Sequential": "a torch.nn.Sequential", "RemovableHandle": "a hook's RemovableHandle",
    "dict_keys": "a dict's keys view", "dict_values": "a dict's values view", "dict_items":
    "a dict's items view", "Size": "a torch.Size", "dtype": "a torch.dtype", "device":
    "a torch.device", "Generator": "a torch.Generator", "Node": "a grad_fn node",
}
_REASONS = (
    (re.compile(r"an observation of type (\w+) cannot be reported"), None),
    (re.compile(r"complex or sparse tensors are not observed"), "a complex or sparse tensor"),
    (re.compile(r"the observations hold too many tensor elements"),
     "tensors with more elements than the check reads"),
    (re.compile(r"the observations hold too many items"),
     "more list or dict items than the check reads"),
    (re.compile(r"observations nest too deeply"), "lists or dicts nested deeper than the check "
                                                  "reads"),
    (re.compile(r"a string observation is too long"), "a string longer than the check reads"),
    (re.compile(r"an integer observation is too large"), "an integer too large for the check"),
    (re.compile(r"observation keys must be strings"), "a dict with a key that is not a string "
                                                      "(or one starting with __)"),
    (re.compile(r"\w+ while reading the results"), "a value that raised an exception when the "
                                                    "check read it"),
)


def returned(reason: str | None) -> str:
    """What came back, in words, from the reason a sandbox gave for results it could not
    report (matched against fixed patterns; nothing of it is quoted but a well-known type)."""
    for pattern, words in _REASONS:
        found = pattern.match(reason or "")
        if found and words:
            return words
        if found:
            return _KNOWN_TYPES.get(found.group(1), "a value of a class of its own")
    return "a value the check cannot read"


def item(where: str, index: int) -> str:
    """How feedback names item `index` (from 0) of the list observation `where`: in words
    ("the 2nd item of grads"), not as an index a student never wrote (grads[1])."""
    n = index + 1
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"the {n}{suffix} item of {where}"
