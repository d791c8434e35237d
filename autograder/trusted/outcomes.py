"""What a sandbox reports of one scenario run, read as untrusted data, and how it differs from
the reference's.

This module runs only in the grader's own processes, never where student code ran. What a
sandbox reports is untrusted JSON: `read_report` and `read_outcome` validate its shape and size
before anything looks at it, and `outcome_problems` decides, observation by observation, whether
the student's answer behaved as the reference did on the same inputs. Tolerances come from the
scenario (trusted code), never from the report.

A scenario run travels as one of
    {"observations": {...}}                      the scenario returned these
    {"raised": "TypeError", "message": "...",    the scenario (the answer in it) raised, with
     "line": 4, "cell": 7}                       the line of the student's cell it raised from
    {"unreportable": "..."}                      the observations could not be encoded

What a check says in the feedback quotes little free text from the report. The answer under
test runs in the same process as the scenario module (hidden scenarios and mistakes included),
and can read every seed of the run from the stack, so a hostile answer can try to carry that
out in whatever the feedback echoes: an exception's message or class name, an unexpected key, a
string it returns, the reason its results could not be reported. Those are told by kind only
(an exception's type when it is one of Python's own, else "an exception of its own class"),
except an exception's message (`raised.shown_message`): one line in quotes, without any
stretch of the scenario module's code and, on a hidden check, without any number. Numbers are
shown where they help (a visible check's values, shapes, list lengths): a few numbers per
check, which carry no expected value of a hidden check, since none ever enters the sandbox.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from autograder.text import one_line
from autograder.trusted.wording import item, many_differ, returned
from autograder.trusted.raised import LEFT_OUT, PYTHON_EXCEPTIONS, shown_message, source_of
from coursekit.scenarios import MAX_DEPTH, MAX_ELEMENTS, MAX_ITEMS, MAX_STRING, Mistake, Scenario
from coursekit.tolerance import fitted

MAX_REPORT_BYTES = 64 << 20  # the whole observations report of one notebook
_DTYPES = {"float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
           "uint8", "bool"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,99}")


class ReportError(ValueError):
    """A report from a sandbox that is not of the expected shape."""


# --------------------------------------------------------------------------------------------
# Validation of untrusted data

@dataclass
class Tensor:
    dtype: str
    shape: tuple[int, ...]
    data: list


@dataclass
class _Count:
    elements: int = 0
    items: int = 0


def _value(raw: Any, depth: int, count: _Count) -> Any:
    """A validated observation value (Tensor, float, int, bool, str, None, list, dict)."""
    if depth > MAX_DEPTH + 1:
        raise ReportError("observations nest too deeply")
    if raw is None or isinstance(raw, bool):
        return raw
    if isinstance(raw, int):
        if abs(raw) > 2 ** 62:
            raise ReportError("an integer observation is too large")
        return raw
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise ReportError("a float observation is not finite")
        return raw
    if isinstance(raw, str):
        if len(raw) > MAX_STRING:
            raise ReportError("a string observation is too long")
        return raw
    if isinstance(raw, list):
        count.items += len(raw)
        if count.items > MAX_ITEMS:
            raise ReportError("the observations hold too many items")
        return [_value(v, depth + 1, count) for v in raw]
    if isinstance(raw, dict):
        if set(raw) == {"__float__"}:
            word = raw["__float__"]
            if word not in ("nan", "inf", "-inf"):
                raise ReportError("an unknown special float")
            return float(word)
        if set(raw) == {"__tensor__"}:
            return _tensor(raw["__tensor__"], count)
        if set(raw) == {"__tuple__"} and isinstance(raw["__tuple__"], list):
            return TupleItems(_value(raw["__tuple__"], depth, count))
        count.items += len(raw)
        if count.items > MAX_ITEMS:
            raise ReportError("the observations hold too many items")
        out = {}
        for key, item in raw.items():
            if not isinstance(key, str) or key.startswith("__") or len(key) > 200:
                raise ReportError("an observation key is not a plain name")
            out[key] = _value(item, depth + 1, count)
        return out
    raise ReportError(f"an observation of type {type(raw).__name__}")


class TupleItems(list):
    """A tuple the answer returned: compared as the list of its items, named as a tuple."""


TupleItems.__name__ = TupleItems.__qualname__ = "tuple"


def _tensor(raw: Any, count: _Count) -> Tensor:
    if not isinstance(raw, dict) or set(raw) != {"dtype", "shape", "data"}:
        raise ReportError("a tensor observation is malformed")
    dtype, shape, data = raw["dtype"], raw["shape"], raw["data"]
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise ReportError("a tensor observation has an unknown dtype")
    if not isinstance(shape, list) or len(shape) > 16 or not all(
            isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_ELEMENTS
            for n in shape):
        raise ReportError("a tensor observation has a malformed shape")
    size = math.prod(shape)
    count.elements += size
    if count.elements > MAX_ELEMENTS or not isinstance(data, list) or len(data) != size:
        raise ReportError("a tensor observation has the wrong number of elements")
    values = []
    for x in data:
        if isinstance(x, dict) and set(x) == {"__float__"} and x["__float__"] in (
                "nan", "inf", "-inf"):
            values.append(float(x["__float__"]))
        elif isinstance(x, float) and math.isfinite(x) or \
                isinstance(x, int) and not isinstance(x, bool) and abs(x) <= 2 ** 62:
            values.append(x)
        else:
            raise ReportError("a tensor observation holds something that is not a number")
    return Tensor(dtype, tuple(shape), values)


@dataclass
class Outcome:
    """One scenario run as reported: observations, or what went wrong."""

    observations: dict | None = None
    raised: str | None = None       # the exception's type name
    message: str = ""
    line: int | None = None         # the line of the student's cell it was raised from
    cell: int | None = None         # that cell's execution count
    unreportable: str | None = None
    # Set by the grader, never read from a report: why the run ended before this scenario's
    # outcome was reported (the answers ran past the time limit, out of memory, ...).
    stopped: str | None = None


def read_outcome(raw: Any) -> Outcome:
    """Validate one scenario run's report; a malformed one is a ReportError."""
    try:
        return _read_outcome(raw)
    except ReportError:
        raise
    except Exception as err:  # a report shaped to break the reading
        raise ReportError("a scenario report is malformed") from err


def _read_outcome(raw: Any) -> Outcome:
    if not isinstance(raw, dict) or len(raw) != 1 and not (
            "raised" in raw and set(raw) <= {"raised", "message", "line", "cell"}):
        raise ReportError("a scenario report is malformed")
    if "observations" in raw:
        observations = raw["observations"]
        if not isinstance(observations, dict):
            raise ReportError("observations must be a dict")
        value = _value(observations, 0, _Count())
        return Outcome(observations=value)
    if "raised" in raw:
        name = raw["raised"]
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ReportError("a scenario report names no exception")
        message = raw.get("message", "")
        return Outcome(raised=name, message=one_line(message if isinstance(message, str)
                                                     else "", 300),
                       line=_small(raw.get("line")), cell=_small(raw.get("cell")))
    if "unreportable" in raw:
        why = raw["unreportable"]
        return Outcome(unreportable=one_line(why if isinstance(why, str) else "", 300))
    raise ReportError("a scenario report is malformed")


def _small(value: Any) -> int | None:
    """A line or cell number of a report, when it is one (1 to 9999); else None."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10_000
    return value if ok else None


def read_report(text: bytes | str) -> Any:
    """Parse a JSON report of at most MAX_REPORT_BYTES; ReportError when it cannot be read."""
    if len(text) > MAX_REPORT_BYTES:
        raise ReportError("the report is too large")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as err:
        raise ReportError(f"the report is not JSON ({type(err).__name__})") from None


# --------------------------------------------------------------------------------------------
# Comparison

def _number(x: Any) -> str:
    """A number as the feedback shows it: six significant digits (a found value is the
    answer's choice: it carries no more than a value's worth of digits)."""
    return f"{x:.6g}" if isinstance(x, float) else str(x)


def _short(value: Any, limit: int = 120) -> str:
    if isinstance(value, str):
        return "a string" if len(value) > 40 or not _PLAIN_STRING.fullmatch(value) \
            else repr(value)
    if isinstance(value, Tensor):
        shown = ", ".join(_number(x) for x in value.data[:8])
        text = f"tensor[{shown}{', …' if len(value.data) > 8 else ''}] shape {list(value.shape)}"
    elif isinstance(value, float):
        text = _number(value)
    else:
        text = repr(value)
    return one_line(text, limit)


# A string observation is quoted only when it is short and made of words (a name, "ok"): a
# found string can be any text the answer chose (see the module's docstring).
_PLAIN_STRING = re.compile(r"[A-Za-z0-9_ .,'-]*")


def member(where: str, key: str) -> str:
    """How feedback names the entry `key` of the observation `where`: as code (grads['pre'])
    when the key is a name, else in words ("the packed tensor: stored dtype")."""
    # a subscript only on code ("grads", "the packed tensor: grads"), never on words
    # ("after one step['w']" reads as code nobody wrote)
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", key) and \
            re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*(\[[^\]]*\])*", where.rsplit(": ", 1)[-1]):
        return f"{where}[{key!r}]"
    return f"{where}: {key}"


def kind_of(value: Any) -> str:
    if isinstance(value, Tensor):
        return f"a {value.dtype} tensor"
    if value is None:
        return "None"
    if isinstance(value, TupleItems):
        return "a tuple"
    return {bool: "a bool", int: "an int", float: "a float", str: "a string",
            list: "a list", dict: "a dict"}.get(type(value), type(value).__name__)


def close(a: float, b: float, rtol: float, atol: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= atol + rtol * abs(b)


def differences(expected: Any, found: Any, rtol: float, atol: float, where: str,
                reveal: bool) -> list[str]:
    """Where `found` differs from `expected` ([] when they agree). With `reveal` False
    (hidden inputs), no message quotes the expected value."""
    def unlike(detail: str) -> list[str]:
        if reveal:
            return [f"{where}: expected {_short(expected)}, found {_short(found)}"]
        return [f"{where}: {detail}"]

    if isinstance(expected, Tensor):
        if not isinstance(found, Tensor):
            return [f"{where}: expected a tensor, found {kind_of(found)}"]
        if found.shape != expected.shape:
            # A hidden check quotes neither shape: the found one could carry any numbers the
            # answer chose, the expected one tells the size of a hidden input. A visible check
            # quotes the found shape only when it is plain (a few dimensions, some elements).
            if not reveal:
                return [f"{where}: a tensor of another shape than expected"]
            plain = len(found.shape) <= 4 and len(found.data) > 0
            shown = f"shape {list(found.shape)}" if plain else "another shape"
            return [f"{where}: a tensor of {shown}, expected shape {list(expected.shape)}"]
        if found.dtype != expected.dtype:
            return [f"{where}: dtype {found.dtype}, expected {expected.dtype}"]
        if expected.dtype in ("bool",) or expected.dtype.startswith(("int", "uint")):
            wrong = [i for i, (f, e) in enumerate(zip(found.data, expected.data)) if f != e]
        else:
            rtol, atol = fitted(expected.dtype, expected.data, rtol, atol)
            wrong = [i for i, (f, e) in enumerate(zip(found.data, expected.data))
                     if not close(float(f), float(e), rtol, atol)]
        if not wrong:
            return []
        if len(expected.data) <= 8:
            return unlike("the values differ")
        return [many_differ(where, expected.data, found.data, expected.shape, wrong, reveal)]
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        if type(found) is not type(expected):
            return [f"{where}: expected {kind_of(expected)}, found {kind_of(found)}"]
        return [] if found == expected else unlike("the value differs")
    if isinstance(expected, int):
        if type(found) is not int:
            return [f"{where}: expected {kind_of(expected)}, found {kind_of(found)}"]
        return [] if found == expected else unlike("the value differs")
    if isinstance(expected, float):
        if type(found) is not float:
            return [f"{where}: expected {kind_of(expected)}, found {kind_of(found)}"]
        return [] if close(found, expected, rtol, atol) else unlike("the value differs")
    if isinstance(expected, list):
        if not isinstance(found, list):
            return [f"{where}: expected a list, found {kind_of(found)}"]
        if len(found) != len(expected):
            if not reveal:  # neither length: as for a tensor's shape above
                return [f"{where}: a list of another length than expected"]
            return [f"{where}: a list of {len(found)} items, expected {len(expected)}"]
        if len(expected) > 8 and all(_plain_number(x) for x in expected + found):
            # A long list of numbers is told as a long tensor is (not item by item)
            wrong = [i for i, (e, f) in enumerate(zip(expected, found))
                     if differences(e, f, rtol, atol, where, False)]
            return [many_differ(where, expected, found, (len(expected),), wrong, reveal,
                                "items")] if wrong else []
        problems = []
        for i, (e, f) in enumerate(zip(expected, found)):
            problems += differences(e, f, rtol, atol, item(where, i), reveal)
        return problems
    if isinstance(expected, dict):
        if not isinstance(found, dict):
            return [f"{where}: expected a dict, found {kind_of(found)}"]
        problems = []
        missing = [k for k in expected if k not in found]
        extra = [k for k in found if k not in expected]
        if missing:
            problems.append(f"{where}: missing {', '.join(map(repr, missing[:5]))}")
        if extra:  # their names are the answer's text: counted, not quoted
            problems.append(f"{where}: {len(extra)} unexpected "
                            f"{'entry' if len(extra) == 1 else 'entries'}")
        for key in expected:
            if key in found:
                problems += differences(expected[key], found[key], rtol, atol,
                                        member(where, key), reveal)
        return problems
    raise TypeError(f"unexpected reference value {type(expected).__name__}")  # pragma: no cover


def _plain_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class ScenarioBroken(RuntimeError):
    """The reference solution itself fails a scenario: a fault of the course, not the student."""


def outcome_problems(scenario: Scenario, reference: Outcome, student: Outcome,
                     quote: bool = True) -> list[str]:
    """Why the student's run of `scenario` does not match the reference's ([] if it does).
    `quote`: a visible check may quote the message of an exception the answer raised."""
    if reference.observations is None:
        raise ScenarioBroken(f"the reference solution fails scenario {scenario.name} of "
                             f"{scenario.exercise}: {reference.raised or ''} "
                             f"{reference.message or reference.unreportable or ''}")
    if student.stopped:
        return [student.stopped]
    if student.raised:
        return [raised_text(student, scenario.visible and quote, scenario)]
    if student.observations is None:
        # What came back (`wording.returned`), and what was expected: on a visible check its
        # short form, on a hidden one its kind
        expected = "; ".join(f"{key}: {kind_of(value)}" + (
            f", {_short(value)}" if scenario.visible else "") for key, value in
            list(reference.observations.items())[:3])
        return [f"the answer gave {returned(student.unreportable)}, which the check cannot read "
                f"(it reads tensors, numbers, strings, bools, None, and lists, tuples and dicts "
                f"of them); expected {expected}"]
    problems = []
    expected, found = reference.observations, student.observations
    for key, value in expected.items():
        if key not in found:
            problems.append(f"{key}: not observed")
            continue
        rtol, atol = scenario.tolerance_for(key)
        problems += differences(value, found[key], rtol, atol, key, scenario.visible)
    extra = [key for key in found if key not in expected]
    if extra and not problems:  # the answer's text: counted, not quoted. Where a difference is
        # named already, an extra entry is a scenario's flag for failing answers: not repeated
        problems.append(f"the check reported {len(extra)} "
                        f"{'entries' if len(extra) > 1 else 'entry'} that the reference's "
                        "run does not report")
    return problems


def raised_text(student: Outcome, quote: bool, scenario: Scenario | None = None) -> str:
    """What the feedback says of an exception the answer raised: its type (Python's own
    classes only), the line of the student's cell, and its message (`raised.shown_message`):
    on a visible check with `quote`, on a hidden check always, with every number left out."""
    if student.raised == "NotImplementedError":
        return "the answer raised NotImplementedError: the exercise is not answered yet"
    if student.raised == "FullJacobianBuilt" and student.message in _guard_messages():
        # the lesson's own guard stopped the answer: its message is the course's text
        text = f"the lesson's guard stopped your code: “{student.message}”"
        if student.line is not None:
            cell = f" In [{student.cell}]" if student.cell is not None else ""
            text += f" (line {student.line} of your cell{cell})"
        return text
    kind = student.raised if student.raised in PYTHON_EXCEPTIONS \
        else "an exception of its own class"
    text = f"your code raised {kind}"
    hidden = scenario is not None and not scenario.visible
    shown = None
    if quote or hidden:
        shown = shown_message(student.message, hidden=hidden,
                              source=source_of(scenario.func) if scenario else None)
    if shown:
        text += f": {shown}"
    if student.line is not None:
        cell = f" In [{student.cell}]" if student.cell is not None else ""
        text += f" (line {student.line} of your cell{cell})"
    if shown and LEFT_OUT in shown:
        text += f"; “{LEFT_OUT}” marks what the grader leaves out"
    return text


def _guard_messages() -> frozenset[str]:
    from coursekit.jacobian_guard import refusals
    return refusals()


@dataclass
class ScenarioRun:
    """One scenario of an exercise as the grader has it: the reference's outcome, the
    student's, and each known mistake's (None where the reference run has none)."""

    scenario: Scenario
    reference: Outcome
    student: Outcome
    mistakes: list[tuple[Mistake, Outcome | None]] = field(default_factory=list)
    # A visible scenario's outcome on a fresh start, as the test cell's own call met the
    # answer (None: not run); what the page says the test cell said is read from it.
    fresh: Outcome | None = None
