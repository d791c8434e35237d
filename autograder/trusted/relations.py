"""Relations: how a failing answer's values relate to the expected ones.

Each relation is a fact (true of the values measured) and, where one helps, a hint: a guess at
the cause, which the feedback labels as a hint. On a hidden check a relation quotes no number
but a whole factor of at most _SMALL (or its inverse) or an offset of one, the answer's dtypes
and the reference's observation names: a few bits per check, like passing or failing, never a
hidden input or expected value.
"""

from __future__ import annotations

import math
from typing import Any

from autograder.trusted.raised import Relation, raised_relations
from autograder.trusted.outcomes import Outcome, Tensor, close, differences, kind_of
from coursekit.scenarios import Scenario

_SMALL = 10


def scenario_relations(scenario: Scenario, reference: Outcome, student: Outcome
                       ) -> list[Relation]:
    """What was measured of a failing scenario run: the relation of each wrong observation to
    its expected value (at most three), or the grader's sentence for what it raised."""
    if student.raised is not None:
        return raised_relations(student.message)
    if reference.observations is None or student.observations is None:
        return []
    out: list[Relation] = []
    expected, found = reference.observations, student.observations
    for key, value in expected.items():
        if key not in found:
            continue
        rtol, atol = scenario.tolerance_for(key)
        if not differences(value, found[key], rtol, atol, key, True):
            continue
        relation = relate(value, found[key], rtol, atol, key, scenario.visible)
        if relation is None:
            relation = _other_key(key, found[key], expected, scenario)
        if relation is not None:
            out.append(relation)
    return out[:3]


def _other_key(key: str, found: Any, expected: dict, scenario: Scenario) -> Relation | None:
    """`found` is what another observation of the same scenario should be. A plain number,
    bool or one-element tensor is left out: two counts that agree are most often a coincidence
    (reverse passes where forward-mode passes were expected), not a value put in the wrong
    place."""
    for other, value in expected.items():
        if other == key or not differences(value, expected[key], 0.0, 0.0, other, True):
            continue
        if value is None or isinstance(value, (bool, int, float)) or \
                isinstance(value, Tensor) and len(value.data) <= 1:
            continue
        rtol, atol = scenario.tolerance_for(other)
        if not differences(value, found, rtol, atol, other, True):
            return (f"{key} holds what {other} should be",
                    "the right value returned or stored in the wrong place?")
    return None


def _floats(value: Tensor) -> list[float]:
    return [float(x) for x in value.data]


def _all_close(found: list[float], expected: list[float], rtol: float, atol: float) -> bool:
    return len(found) == len(expected) and all(
        close(f, e, rtol, atol) for f, e in zip(found, expected))


def _whole(x: float) -> int | None:
    """`x` as a whole number when it is one, to float32 precision."""
    n = round(x)
    return n if n != 0 and abs(x - n) <= 1e-4 * max(1.0, abs(x)) else None


def _simple(k: float, reveal: bool) -> bool:
    """Whether `k` is a factor the feedback names: −1, or a whole number or its inverse."""
    limit = 1000 if reveal else _SMALL
    n, m = _whole(k), (_whole(1 / k) if k else None)
    return n == -1 or any(x is not None and 2 <= abs(x) <= limit for x in (n, m))


def _factor(k: float, reveal: bool, name: str, many: bool = True) -> Relation:
    """`name` is k times the expected values (`many`) or value; a hint goes only with a
    factor measured on several values (for one number it could be a coincidence)."""
    n, m = _whole(k), (_whole(1 / k) if k else None)
    limit = 1000 if reveal else _SMALL
    values = "values" if many else "value"
    if n == -1:
        return (f"{name} has the sign flipped (−1 × the expected {values})",
                "a minus sign too many or missing, or a step up the gradient instead of down?"
                if many else None)
    if n is not None and 2 <= abs(n) <= limit:
        sign = "" if n > 0 else ", with the sign flipped"
        word = {2: "twice", 3: "three times"}.get(abs(n), f"{abs(n)} times")
        hint = ("accumulated over two passes or calls, or a term counted twice?" if abs(n) == 2
                else f"accumulated over {abs(n)} passes or calls, or summed over {abs(n)} "
                     "items where one was meant?")
        return f"{name} is {word} the expected {values}{sign} (×{n})", hint if many else None
    if m is not None and 2 <= abs(m) <= limit:
        sign = "" if m > 0 else ", with the sign flipped"
        word = "half" if abs(m) == 2 else f"1/{abs(m)} of"
        return (f"{name} is {word} the expected {values}{sign} (×1/{abs(m)})",
                "a mean where a sum was meant, a division by the number of items, or a factor "
                "missing (d/dx x² = 2x)?" if many else None)
    if reveal:
        return f"{name} is the expected {values} times {k:.4g}", None
    return f"{name} is the expected {values} times one constant factor", None


def _offset(d: float, reveal: bool, name: str) -> Relation:
    n = _whole(d)
    if n is not None and abs(n) == 1:
        more = "one more" if n > 0 else "one less"
        return f"{name} is {more} than expected (off by one)", None
    shown = (f" ({n:+d})" if n is not None else f" ({d:+.4g})") if reveal else ""
    return f"{name} is the expected values shifted by one constant{shown}", None


def relate(expected: Any, found: Any, rtol: float, atol: float, name: str,
           reveal: bool) -> Relation | None:
    """How a wrong `found` relates to `expected`, as (fact, hint or None); None when no
    relation the grader knows holds. `reveal` False: no number of a hidden check is quoted
    but a small whole factor or offset."""
    if found is None and expected is not None:
        return (f"{name} is None where {kind_of(expected)} was expected",
                "a function that returns nothing, or a .grad that no gradient reached "
                "(detached, made under torch.no_grad(), not a leaf)?")
    if expected is None and found is not None:
        hint = "a .grad that was not cleared (set it to None)?" if "grad" in name else None
        return f"{name} should be None, found {kind_of(found)}", hint
    if isinstance(expected, dict):
        return _relate_dict(expected, found, rtol, atol, name, reveal)
    if isinstance(expected, list):
        return _relate_list(expected, found, rtol, atol, name, reveal)
    if isinstance(expected, Tensor):
        return _relate_tensor(expected, found, rtol, atol, name, reveal)
    if isinstance(expected, bool):
        if isinstance(found, bool) and found != expected and (
                "requires_grad" in name or "grad_fn" in name) and expected:
            return (f"{name} is False: the result is detached from the graph",
                    "detach(), .data, torch.no_grad(), .item() or a NumPy round trip?")
        if isinstance(found, bool) and found != expected:
            return f"{name} is {found}, not {expected}", None
        return None
    if isinstance(expected, (int, float)):
        return _relate_number(expected, found, rtol, atol, name, reveal)
    return None


def _relate_number(expected: float, found: Any, rtol: float, atol: float, name: str,
                   reveal: bool) -> Relation | None:
    if isinstance(found, Tensor) and len(found.data) == 1:
        if close(float(found.data[0]), float(expected), rtol, atol):
            return (f"{name} is a one-element tensor where a plain number was expected",
                    "use .item() or int(...)")
        return None
    if isinstance(found, bool) or not isinstance(found, (int, float)):
        return None
    if type(found) is not type(expected) and close(float(found), float(expected), rtol, atol):
        return (f"{name} is the right value as {kind_of(found)}, {kind_of(expected)} was expected",
                None)
    if isinstance(found, float) and math.isnan(found):
        return f"{name} is NaN", "a 0/0, or a log or square root of a negative number?"
    if expected and found == 0:
        return f"{name} is 0", None
    if expected and found:
        k = found / expected
        if _simple(k, reveal):
            return _factor(k, reveal, name, many=False)
    if isinstance(expected, int) and isinstance(found, int) and abs(found - expected) == 1:
        return _offset(found - expected, reveal, name)
    return None


def _relate_dict(expected: dict, found: Any, rtol: float, atol: float, name: str,
                 reveal: bool) -> Relation | None:
    if isinstance(found, list):
        values = list(expected.values())
        if len(found) == len(values) and not differences(values, found, rtol, atol, name, True):
            return (f"{name} is a list of the right values where a dict (name → value) was "
                    "asked", "build a dict keyed by name")
        return f"{name} is a list where a dict (name → value) was asked", None
    if not isinstance(found, dict):
        return None
    if set(found) > set(expected) and all(
            not differences(value, found[key], rtol, atol, name, True)
            for key, value in expected.items()):
        return (f"{name} holds the expected entries, and more",
                "entries kept from an earlier call (a dict made outside the function)?")
    values = [found[key] for key in expected if key in found]
    if len(values) >= 2 and len(values) == len(expected) and all(
            not differences(values[0], v, rtol, atol, name, True) for v in values) and \
            not all(not differences(v, values[0], rtol, atol, name, True)
                    for v in expected.values()):
        return (f"{name}: every entry is the same, where the expected ones differ",
                "the same value stored or counted for every name?")
    for key, value in expected.items():
        if key in found and differences(value, found[key], rtol, atol, name, True):
            return relate(value, found[key], rtol, atol, f"{name}[{key!r}]", reveal)
    return None


def _relate_list(expected: list, found: Any, rtol: float, atol: float, name: str,
                 reveal: bool) -> Relation | None:
    if not isinstance(found, list):
        return None

    def same(a: Any, b: Any) -> bool:
        return not differences(b, a, rtol, atol, name, True)

    n, m = len(expected), len(found)
    if m == 0 and n:
        return f"{name} is empty", "the hook or step never ran, or another list was filled?"
    if m > n and all(same(f, e) for f, e in zip(found, expected)):
        return (f"{name} holds the expected items, then more after them",
                "items kept from an earlier call, or a hook that was not removed?")
    if m > n and n and all(same(f, e) for f, e in zip(found[m - n:], expected)):
        return (f"{name} holds more items before the expected ones",
                "a list or state kept between calls (made outside the function)?")
    if m < n and m and all(same(f, e) for f, e in zip(found, expected)):
        return f"{name} stops early: the first items are right, the rest are missing", None
    if m != n:
        return None
    wrong = [i for i in range(n) if not same(found[i], expected[i])]
    if not wrong:
        return None
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool)
                  for x in expected + found)
    if numbers and not any(found) and any(expected):
        return f"{name} holds only zeros", None
    if n >= 2 and all(same(f, found[0]) for f in found) and \
            not all(same(e, expected[0]) for e in expected):
        return (f"{name}: every item is the same, where the expected ones differ",
                "the result ignores the argument (an index, an input) that changes between "
                "them?")
    if n >= 2 and all(same(found[i], expected[n - 1 - i]) for i in range(n)):
        return f"{name} holds the right items in reverse order", None
    if n >= 2 and _permutation(found, expected, same):
        return f"{name} holds the right items in another order", None
    if wrong[0] >= 1:
        running = _accumulated(expected, found, rtol, atol)
        fact = (f"{name}: each item adds up the expected ones so far (accumulated)" if running
                else f"{name}: the first item is right, a later one is not")
        return fact, ("state kept between calls or passes: a .grad not cleared, a hook not "
                      "removed, a list or tensor made once and reused?")
    return relate(expected[wrong[0]], found[wrong[0]], rtol, atol, f"{name}[{wrong[0]}]",
                  reveal)


def _permutation(found: list, expected: list, same) -> bool:
    left = list(expected)
    for item in found:
        for j, candidate in enumerate(left):
            if same(item, candidate):
                del left[j]
                break
        else:
            return False
    return True


def _accumulated(expected: list, found: list, rtol: float, atol: float) -> bool:
    """found[i] is the sum of expected[0..i] (numbers, or tensors of one shape)."""
    def flat(x: Any) -> list[float] | None:
        if isinstance(x, Tensor) and not x.dtype == "bool":
            return _floats(x)
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            return [float(x)]
        return None

    rows = [flat(x) for x in expected]
    got = [flat(x) for x in found]
    if any(r is None for r in rows + got) or len({len(r) for r in rows + got}) != 1:
        return False
    total = [0.0] * len(rows[0])
    for row, have in zip(rows, got):
        total = [t + r for t, r in zip(total, row)]
        if not _all_close(have, total, rtol, atol):
            return False
    return True


def _relate_tensor(expected: Tensor, found: Any, rtol: float, atol: float, name: str,
                   reveal: bool) -> Relation | None:
    if not isinstance(found, Tensor):
        if isinstance(found, list) and expected.shape and len(found) == expected.shape[0]:
            return f"{name} is a list where a tensor was expected", "torch.stack the items?"
        if isinstance(found, (int, float)) and not isinstance(found, bool) and \
                len(expected.data) == 1 and close(float(found), float(expected.data[0]),
                                                   rtol, atol):
            return f"{name} is a plain number where a tensor was expected", None
        return None
    e, f = _floats(expected), _floats(found)
    if found.shape != expected.shape:
        return _relate_shape(expected, found, e, f, rtol, atol, name)
    if found.dtype != expected.dtype:
        if _all_close(f, e, rtol, atol):
            hint = ("a NumPy array or dtype=torch.float64 on the way?"
                    if found.dtype == "float64" else
                    "torch.tensor of whole numbers is int64 and a comparison gives bool: "
                    "convert with .float() or keep the input's dtype" if not
                    found.dtype.startswith(("float", "bfloat")) else None)
            return (f"{name} has the right values as {found.dtype}, {expected.dtype} was "
                    "expected", hint)
        relation = _relate_values(expected, e, f, rtol, atol, name, reveal)
        if relation is None:
            return None
        return f"{relation[0]} (and its dtype is {found.dtype}, not {expected.dtype})", \
            relation[1]
    return _relate_values(expected, e, f, rtol, atol, name, reveal)


def _relate_shape(expected: Tensor, found: Tensor, e: list[float], f: list[float],
                  rtol: float, atol: float, name: str) -> Relation | None:
    es, fs = expected.shape, found.shape
    if len(e) == len(f):
        if len(es) == 2 and fs == (es[1], es[0]) and _all_close(
                f, _transpose(e, es), rtol, atol):
            return f"{name} is the expected values transposed", "a .T or a swapped dimension?"
        if [d for d in es if d != 1] == [d for d in fs if d != 1] and _all_close(f, e, rtol, atol):
            return (f"{name} has the right values with a dimension of size 1 added or missing",
                    "unsqueeze, squeeze, keepdim= or a view?")
        if _all_close(f, e, rtol, atol):
            return f"{name} has the right values, laid out in another shape", "a reshape or view?"
        return None
    if len(f) > len(e) and _broadcasts(es, fs):
        return (f"{name} is larger than expected, in a shape that broadcasting makes from the "
                "expected one", "a (n,) tensor combined with a (n, 1) one broadcasts to (n, n)")
    if len(f) < len(e) and _broadcasts(fs, es):
        return (f"{name} is smaller than expected: a dimension is missing",
                "a dimension summed or averaged away (sum(), mean(), keepdim=)?")
    return None


def _broadcasts(small: tuple[int, ...], large: tuple[int, ...]) -> bool:
    """Whether broadcasting `small` with some shape can give `large` (and not only `small`)."""
    if len(small) > len(large):
        return False
    padded = (1,) * (len(large) - len(small)) + tuple(small)
    return all(a == b or a == 1 for a, b in zip(padded, large)) and padded != tuple(large)


def _transpose(data: list[float], shape: tuple[int, ...]) -> list[float]:
    rows, cols = shape
    return [data[r * cols + c] for c in range(cols) for r in range(rows)]


def _relate_values(expected: Tensor, e: list[float], f: list[float], rtol: float,
                   atol: float, name: str, reveal: bool) -> Relation | None:
    """Relations between two tensors of one shape (floats, ints or bools)."""
    n = len(e)
    if not n:
        return None
    if any(math.isnan(x) for x in f) and not any(math.isnan(x) for x in e):
        return (f"{name} holds NaN", "a 0/0, a log or square root of a negative number, or "
                                     "inf - inf?")
    if any(math.isinf(x) for x in f) and not any(math.isinf(x) for x in e):
        return f"{name} holds inf", "a division by zero, or a value that overflowed?"
    if any(math.isnan(x) or math.isinf(x) for x in e + f):
        return None
    if expected.dtype == "bool":
        if all((a != 0) != (b != 0) for a, b in zip(f, e)):
            return f"{name} is the opposite in every entry", "a mask the wrong way round?"
        return None
    if any(e) and not any(f):
        return (f"{name} is all zeros",
                "the gradient stopped somewhere (detach(), torch.no_grad(), a hook that returns "
                "zeros), or it was zeroed after use?")
    nonzero = sum(1 for x in e if x)
    if nonzero >= 2 or n == 1 and nonzero:
        k = sum(a * b for a, b in zip(f, e)) / sum(b * b for b in e)
        if not close(k, 1.0, rtol, atol) and _all_close(f, [k * x for x in e], rtol, atol) \
                and (n > 1 or _simple(k, reveal)):
            return _factor(k, reveal, name, many=nonzero > 1)
    if n > 1:
        d = f[0] - e[0]
        if not close(d, 0.0, 0.0, atol) and _all_close(f, [x + d for x in e], rtol, atol):
            return _offset(d, reveal, name)
    elif expected.dtype.startswith(("int", "uint")) and abs(f[0] - e[0]) == 1:
        return _offset(f[0] - e[0], reveal, name)
    shape = expected.shape
    if len(shape) == 2 and shape[0] == shape[1] > 1 and _all_close(
            f, _transpose(e, shape), rtol, atol):
        return f"{name} is the expected values transposed", "a .T or a swapped dimension?"
    rows = shape[0] if shape else 1
    width = n // rows if rows else 0
    as_rows = [e[i * width:(i + 1) * width] for i in range(rows)]
    if rows >= 2 and _all_close(f, [x for row in reversed(as_rows) for x in row], rtol, atol):
        return f"{name} holds the expected values in reverse order", "a flip or a reversed loop?"
    if rows >= 3:
        for step in (1, -1):
            rolled = as_rows[-step:] + as_rows[:-step]
            flat = [x for row in rolled for x in row]
            if step == 1:
                fits = _all_close(f[width:], flat[width:], rtol, atol)
            else:
                fits = _all_close(f[:-width], flat[:-width], rtol, atol)
            if fits:
                return (f"{name} holds the expected values shifted by one position",
                        "an index one off (i + 1 or i - 1), or a range that starts one late?")
    if sorted(f) == sorted(e) or n > 1 and _all_close(sorted(f), sorted(e), rtol, atol):
        return (f"{name} holds the right values in another order",
                "an index, a permutation or a dimension mixed up?")
    zero_where_not = [i for i in range(n) if e[i] and not f[i]]
    extra = [i for i in range(n) if f[i] and not e[i]]
    agree = all(close(f[i], e[i], rtol, atol) for i in range(n) if e[i] and f[i])
    if agree and zero_where_not and extra:
        return (f"{name} is zero where the expected values are not, and not zero where they "
                "are", "a mask the wrong way round?")
    if agree and zero_where_not:
        return (f"{name} is right where it is not zero, but zero in some entries that should "
                "not be", "a mask or condition that zeroes too much?")
    if agree and extra:
        return (f"{name} is right where the expected values are not zero, but not zero in some "
                "entries that should be", "a mask or condition that is not applied everywhere?")
    return None
