"""Relations: how a failing answer's values relate to the expected ones.

Each relation is a fact (true of the values measured) and, where one helps, a hint: a guess at
the cause, which the feedback labels as a hint. On a hidden check a relation quotes no number
but a whole factor of at most _SMALL (or its inverse) or an offset of one, the answer's dtypes
and the reference's observation names: a few bits per check, like passing or failing, never a
hidden input or expected value.
"""

from __future__ import annotations

import math
import re
from typing import Any

from autograder.trusted.raised import Relation, raised_relations
from autograder.trusted.outcomes import Outcome, Tensor, close, differences, kind_of, member
from autograder.trusted.phrases import say
from autograder.trusted.wording import item
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
            return say("wrong_place", name=key, other=other)
    return None


def _floats(value: Tensor) -> list[float]:
    return [float(x) for x in value.data]


def _all_close(found: list[float], expected: list[float], rtol: float, atol: float) -> bool:
    return len(found) == len(expected) and all(
        close(f, e, rtol, atol) for f, e in zip(found, expected))


def _whole(x: float) -> int | None:
    """`x` as a whole number when it is one, to float32 precision (an infinite ratio, of a
    number past float's range, is none)."""
    if not math.isfinite(x):
        return None
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
        return say("sign", name=name, values=values)
    if n is not None and 2 <= abs(n) <= limit:
        sign = "" if n > 0 else ", with the sign flipped"
        word = {2: "twice", 3: "three times"}.get(abs(n), f"{abs(n)} times")
        return say("times", name=name, word=word, values=values, sign=sign, n=n)
    if m is not None and 2 <= abs(m) <= limit:
        sign = "" if m > 0 else ", with the sign flipped"
        word = "half" if abs(m) == 2 else f"1/{abs(m)} of"
        return say("fraction", name=name, word=word, values=values, sign=sign, m=abs(m))
    if reveal:
        return say("times_shown", name=name, values=values, k=f"{k:.4g}")
    return say("times_constant", name=name, values=values)


def _offset(d: float, reveal: bool, name: str) -> Relation:
    n = _whole(d)
    if n is not None and abs(n) == 1:
        return say("one_off", name=name, more="one more" if n > 0 else "one less")
    shown = (f" ({n:+d})" if n is not None else f" ({d:+.4g})") if reveal else ""
    return say("shifted", name=name, shown=shown)


def relate(expected: Any, found: Any, rtol: float, atol: float, name: str,
           reveal: bool) -> Relation | None:
    """How a wrong `found` relates to `expected`, as (fact, hint or None); None when no
    relation the grader knows holds. `reveal` False: no number of a hidden check is quoted
    but a small whole factor or offset."""
    if found is None and expected is not None:
        return say("none", name=name, kind=kind_of(expected))
    if expected is None and found is not None:
        return say("not_none", name=name, kind=kind_of(found))
    if isinstance(expected, dict):
        return _relate_dict(expected, found, rtol, atol, name, reveal)
    if isinstance(expected, list):
        return _relate_list(expected, found, rtol, atol, name, reveal)
    if isinstance(expected, Tensor):
        return _relate_tensor(expected, found, rtol, atol, name, reveal)
    if isinstance(expected, bool):
        # a tensor's own flag (y.requires_grad, "has a grad_fn"), not a parameter's: a frozen
        # parameter is no result cut from the graph
        if isinstance(found, bool) and found != expected and expected and \
                re.search(r"\.requires_grad\b|grad_fn", name) and "parameter" not in name:
            return say("detached", name=name)
        if isinstance(found, bool) and found != expected:
            return say("flag", name=name, found=found, expected=expected)
        return None
    if isinstance(expected, (int, float)):
        return _relate_number(expected, found, rtol, atol, name, reveal)
    return None


def _relate_number(expected: float, found: Any, rtol: float, atol: float, name: str,
                   reveal: bool) -> Relation | None:
    if isinstance(found, Tensor) and len(found.data) == 1:
        if close(float(found.data[0]), float(expected), rtol, atol):
            return say("one_element", name=name)
        return None
    if isinstance(found, bool) or not isinstance(found, (int, float)):
        return None
    if type(found) is not type(expected) and close(float(found), float(expected), rtol, atol):
        return say("number_kind", name=name, found=kind_of(found), expected=kind_of(expected))
    if isinstance(found, float) and math.isnan(found):
        return say("nan_number", name=name)
    if expected and found == 0:
        return say("zero_number", name=name)
    if expected and found:
        k = found / expected
        if _simple(k, reveal):
            return _factor(k, reveal, name, many=False)
    if isinstance(expected, int) and isinstance(found, int) and abs(found - expected) == 1:
        return _offset(found - expected, reveal, name)
    return None


def _numbers(values: list) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in values)


def _relate_dict(expected: dict, found: Any, rtol: float, atol: float, name: str,
                 reveal: bool) -> Relation | None:
    if isinstance(found, list):
        values = list(expected.values())
        if len(found) == len(values) and not differences(values, found, rtol, atol, name, True):
            return say("list_for_dict", name=name)
        return say("list_not_dict", name=name)
    if not isinstance(found, dict):
        return None
    if set(found) > set(expected) and all(
            not differences(value, found[key], rtol, atol, name, True)
            for key, value in expected.items()):
        return say("dict_more", name=name)
    values = [found[key] for key in expected if key in found]
    if len(values) >= 2 and len(values) == len(expected) and _numbers(values) and \
            not any(values) and _numbers(list(expected.values())) and any(expected.values()):
        return say("only_zeros", name=name)  # counts that stayed 0 (07-ex2, a blind review)
    if len(values) >= 2 and len(values) == len(expected) and all(
            not differences(values[0], v, rtol, atol, name, True) for v in values) and \
            not all(not differences(v, values[0], rtol, atol, name, True)
                    for v in expected.values()):
        return say("dict_same", name=name)
    for key, value in expected.items():
        if key in found and differences(value, found[key], rtol, atol, name, True):
            return relate(value, found[key], rtol, atol, member(name, key), reveal)
    return None


def _relate_list(expected: list, found: Any, rtol: float, atol: float, name: str,
                 reveal: bool) -> Relation | None:
    if not isinstance(found, list):
        return None

    def same(a: Any, b: Any) -> bool:
        return not differences(b, a, rtol, atol, name, True)

    n, m = len(expected), len(found)
    if m == 0 and n:
        return say("empty", name=name)
    if m > n and all(same(f, e) for f, e in zip(found, expected)):
        return say("more_after", name=name)
    if m > n and n and all(same(f, e) for f, e in zip(found[m - n:], expected)):
        return say("more_before", name=name)
    if m < n and m and all(same(f, e) for f, e in zip(found, expected)):
        return say("stops_early", name=name)
    if m != n:
        return None
    wrong = [i for i in range(n) if not same(found[i], expected[i])]
    if not wrong:
        return None
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool)
                  for x in expected + found)
    if numbers and not any(found) and any(expected):
        return say("only_zeros", name=name)
    if n >= 2 and all(same(f, found[0]) for f in found) and \
            not all(same(e, expected[0]) for e in expected):
        return say("items_same", name=name)
    if n >= 2 and all(same(found[i], expected[n - 1 - i]) for i in range(n)):
        return say("reverse_items", name=name)
    if n >= 2 and _permutation(found, expected, same):
        return say("other_order", name=name)
    if wrong[0] >= 1:
        running = _accumulated(expected, found, rtol, atol)
        return say("accumulated" if running else "first_right", name=name)
    return relate(expected[wrong[0]], found[wrong[0]], rtol, atol, item(name, wrong[0]),
                  reveal)


def _permutation(found: list, expected: list, same) -> bool:
    left = list(expected)
    for value in found:
        for j, candidate in enumerate(left):
            if same(value, candidate):
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


def _list_for_tensor(expected: Tensor, found: list, rtol: float, atol: float,
                     name: str) -> Relation | None:
    """A list (or tuple: both arrive as lists) where a tensor was expected. The advice follows
    what its items are: torch.stack only for tensors that stack into the expected one."""
    e = _floats(expected)
    if len(found) == 1 and isinstance(found[0], Tensor) and found[0].shape == expected.shape \
            and _all_close(_floats(found[0]), e, rtol, atol):
        return say("one_item_list", name=name)
    if not expected.shape or len(found) != expected.shape[0]:
        return None
    if all(isinstance(x, Tensor) and x.shape == expected.shape[1:] for x in found) and \
            _all_close([v for x in found for v in _floats(x)], e, rtol, atol):
        return say("list_for_tensor", name=name)
    if len(expected.shape) == 1 and _numbers(found) and \
            _all_close([float(x) for x in found], e, rtol, atol):
        return say("numbers_for_tensor", name=name)
    return say("list_where_tensor", name=name)


def _relate_tensor(expected: Tensor, found: Any, rtol: float, atol: float, name: str,
                   reveal: bool) -> Relation | None:
    if not isinstance(found, Tensor):
        if isinstance(found, list):
            return _list_for_tensor(expected, found, rtol, atol, name)
        if isinstance(found, (int, float)) and not isinstance(found, bool) and \
                len(expected.data) == 1 and close(float(found), float(expected.data[0]),
                                                   rtol, atol):
            return say("number_for_tensor", name=name)
        return None
    e, f = _floats(expected), _floats(found)
    if found.shape != expected.shape:
        return _relate_shape(expected, found, e, f, rtol, atol, name)
    if found.dtype != expected.dtype:
        if _all_close(f, e, rtol, atol):
            return say("dtype_values", name=name, found=found.dtype, expected=expected.dtype)
        relation = _relate_values(expected, e, f, rtol, atol, name, reveal)
        if relation is None:
            return None
        return say("and_dtype", fact=relation[0], found=found.dtype,
                   expected=expected.dtype)[0], relation[1]
    return _relate_values(expected, e, f, rtol, atol, name, reveal)


def _relate_shape(expected: Tensor, found: Tensor, e: list[float], f: list[float],
                  rtol: float, atol: float, name: str) -> Relation | None:
    es, fs = expected.shape, found.shape
    if len(e) == len(f):
        if len(es) == 2 and fs == (es[1], es[0]) and _all_close(
                f, _transpose(e, es), rtol, atol):
            return say("transposed", name=name)
        if [d for d in es if d != 1] == [d for d in fs if d != 1] and _all_close(f, e, rtol, atol):
            return say("size_one", name=name)
        if _all_close(f, e, rtol, atol):
            return say("reshaped", name=name)
        return None
    if len(f) > len(e) and _broadcasts(es, fs):
        return say("broadcast", name=name)
    if len(f) < len(e) and _broadcasts(fs, es):
        return say("dimension_missing", name=name)
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
        return say("nan", name=name)
    if any(math.isinf(x) for x in f) and not any(math.isinf(x) for x in e):
        return say("inf", name=name)
    if any(math.isnan(x) or math.isinf(x) for x in e + f):
        return None
    if expected.dtype == "bool":
        if all((a != 0) != (b != 0) for a, b in zip(f, e)):
            return say("opposite", name=name)
        return None
    if any(e) and not any(f):
        return say("zeros", name=name)
    if not any(e):
        # Every expected value is zero: no mask, factor or offset can be told from that.
        return say("should_be_zeros", name=name, count=sum(1 for x in f if x), total=n)
    nonzero = sum(1 for x in e if x)
    energy = sum(b * b for b in e)  # 0.0 where the expected values' squares underflow
    if energy and (nonzero >= 2 or n == 1 and nonzero):
        k = sum(a * b for a, b in zip(f, e)) / energy
        if math.isfinite(k) and not close(k, 1.0, rtol, atol) and _all_close(f, [k * x for x in e], rtol, atol) \
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
        return say("transposed", name=name)
    rows = shape[0] if shape else 1
    width = n // rows if rows else 0
    as_rows = [e[i * width:(i + 1) * width] for i in range(rows)]
    if rows >= 2 and _all_close(f, [x for row in reversed(as_rows) for x in row], rtol, atol):
        return say("reversed", name=name)
    if rows >= 3:
        for step in (1, -1):
            rolled = as_rows[-step:] + as_rows[:-step]
            flat = [x for row in rolled for x in row]
            if step == 1:
                fits = _all_close(f[width:], flat[width:], rtol, atol)
            else:
                fits = _all_close(f[:-width], flat[:-width], rtol, atol)
            if fits:
                return say("rolled", name=name)
    if sorted(f) == sorted(e) or n > 1 and _all_close(sorted(f), sorted(e), rtol, atol):
        return say("permuted", name=name)
    zero_where_not = [i for i in range(n) if e[i] and not f[i]]
    extra = [i for i in range(n) if f[i] and not e[i]]
    agree = all(close(f[i], e[i], rtol, atol) for i in range(n) if e[i] and f[i])
    if agree and zero_where_not and extra:
        return say("mask_swapped", name=name)
    if agree and zero_where_not:
        return say("mask_more", name=name)
    if agree and extra:
        return say("mask_less", name=name)
    return None
