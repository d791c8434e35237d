"""Trusted verdicts: compare a student's observations with the reference solution's.

This module runs only in the grader's own processes, never where student code ran. What a
sandbox reports is untrusted JSON: `read_report` validates its shape and size before anything
looks at it, and `compare` decides, observation by observation, whether the student's answer
behaved as the reference did on the same inputs. Tolerances come from the scenario (trusted
code), never from the report.

A scenario run travels as one of
    {"observations": {...}}                      the scenario returned these
    {"raised": "TypeError", "message": "...",    the scenario (the answer in it) raised, with
     "line": 4, "cell": 7}                       the line of the student's cell it raised from
    {"unreportable": "..."}                      the observations could not be encoded

What a check says in the feedback quotes no free text from the report. The answer under test
runs in the same process as the scenario module (hidden scenarios and mistakes included), and
can read every seed of the run from the stack, so a hostile answer can try to carry that out
in whatever the feedback echoes: an exception's message or class name, an unexpected key, a
string it returns, the reason its results could not be reported. Those are told by kind only
(an exception's type when it is one of Python's own, else "an exception of its own class"),
except a message that is one of torch's or Python's own (`quotable`: fixed words, small
numbers, type names), quoted on a visible check. Numbers are shown where they help (a visible
check's values, shapes, list lengths): a few numbers per check, which carry no expected value
of a hidden check, since none ever enters the sandbox.

When a check fails, `judge_exercise` names a known mistake only when the answer matched that
mistake on every scenario where the mistake differs from the reference; otherwise it measures
how the found values relate to the expected ones (twice as large, transposed, the first call
right and a later one wrong, ...) and says so in words that quote no hidden value.
"""

from __future__ import annotations

import json
import math
import re
import builtins
import functools
from dataclasses import dataclass, field
from typing import Any

from coursekit.scenarios import MAX_DEPTH, MAX_ELEMENTS, MAX_ITEMS, MAX_STRING, Mistake, Scenario

MAX_REPORT_BYTES = 64 << 20  # the whole observations report of one notebook
_DTYPES = {"float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
           "uint8", "bool"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,99}")


# The exception classes whose names the feedback may quote: Python's own, never a class the
# answer defined (whose name it chose).
_PYTHON_EXCEPTIONS = frozenset(
    name for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException))


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
    except Exception as err:  # noqa: BLE001 (a report shaped to break the reading)
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


def one_line(text: str, limit: int = 500) -> str:
    """`text` on one line, without control characters, at most `limit` characters."""
    text = re.sub(r"[\x00-\x1f\x7f\u2028\u2029\x85]+", " ", str(text)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------------------------
# Comparison

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

    def row(self, cell: str) -> dict:
        return {"exercise": self.exercise, "cell": cell, "scenario": self.scenario,
                "visible": self.visible, "passed": self.passed, "mistake": self.mistake}


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


def _kind(value: Any) -> str:
    if isinstance(value, Tensor):
        return f"a {value.dtype} tensor"
    if value is None:
        return "None"
    return {bool: "a bool", int: "an int", float: "a float", str: "a string",
            list: "a list", dict: "a dict"}.get(type(value), type(value).__name__)


def _close(a: float, b: float, rtol: float, atol: float) -> bool:
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
            return [f"{where}: expected a tensor, found {_kind(found)}"]
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
            same = found.data == expected.data
        else:
            same = all(_close(float(f), float(e), rtol, atol)
                       for f, e in zip(found.data, expected.data))
        return [] if same else unlike("the values differ")
    if isinstance(expected, bool) or expected is None or isinstance(expected, str):
        if type(found) is not type(expected):
            return [f"{where}: expected {_kind(expected)}, found {_kind(found)}"]
        return [] if found == expected else unlike("the value differs")
    if isinstance(expected, int):
        if type(found) is not int:
            return [f"{where}: expected {_kind(expected)}, found {_kind(found)}"]
        return [] if found == expected else unlike("the value differs")
    if isinstance(expected, float):
        if type(found) is not float:
            return [f"{where}: expected {_kind(expected)}, found {_kind(found)}"]
        return [] if _close(found, expected, rtol, atol) else unlike("the value differs")
    if isinstance(expected, list):
        if not isinstance(found, list):
            return [f"{where}: expected a list, found {_kind(found)}"]
        if len(found) != len(expected):
            if not reveal:  # neither length: as for a tensor's shape above
                return [f"{where}: a list of another length than expected"]
            return [f"{where}: a list of {len(found)} items, expected {len(expected)}"]
        problems = []
        for i, (e, f) in enumerate(zip(expected, found)):
            problems += differences(e, f, rtol, atol, f"{where}[{i}]", reveal)
        return problems
    if isinstance(expected, dict):
        if not isinstance(found, dict):
            return [f"{where}: expected a dict, found {_kind(found)}"]
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
                                        f"{where}[{key!r}]", reveal)
        return problems
    raise TypeError(f"unexpected reference value {type(expected).__name__}")  # pragma: no cover


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
        return [raised_text(student, scenario.visible and quote)]
    if student.observations is None:
        return ["its results could not be reported: every observation must be plain data "
                "(tensors, numbers, strings, booleans, None, lists and dicts of them) within "
                "the size limits"]
    problems = []
    expected, found = reference.observations, student.observations
    for key, value in expected.items():
        if key not in found:
            problems.append(f"{key}: not observed")
            continue
        rtol, atol = scenario.tolerance_for(key)
        problems += differences(value, found[key], rtol, atol, key, scenario.visible)
    extra = [key for key in found if key not in expected]
    if extra:  # the answer's text: counted, not quoted
        problems.append(f"{len(extra)} observation{'s' if len(extra) > 1 else ''} not expected")
    return problems


MAX_MESSAGE = 200  # characters of an exception's message that a visible check quotes

# The messages a visible check may quote: torch's and Python's own, as patterns whose variable
# parts are small numbers, shapes and type names. Anything else an answer raises (its own text,
# or text it found in its memory) matches none, and only its type is told.
_N = r"-?\d{1,6}"
_SHAPE = rf"\[(?:{_N}(?:, {_N}){{0,7}})?\]"
_TYPE = (r"(?:NoneType|int|float|complex|str|bool|tuple|list|dict|set|function|method|"
         r"builtin_function_or_method|Tensor|Parameter|module|generator|Size|type|"
         r"numpy\.ndarray|Module|Linear|Sequential)")
_QUOTABLE_WHOLE = [re.compile(pattern) for pattern in (
    rf"The size of tensor a \({_N}\) must match the size of tensor b \({_N}\) at "
    rf"non-singleton dimension {_N}",
    rf"mat1 and mat2 shapes cannot be multiplied \({_N}x{_N} and {_N}x{_N}\)",
    rf"index {_N} is out of bounds for dimension {_N} with size {_N}",
    rf"shape '{_SHAPE}' is invalid for input of size {_N}",
    rf"Dimension out of range \(expected to be in range of \[{_N}, {_N}\], but got {_N}\)",
    rf"shape mismatch: value tensor of shape {_SHAPE} cannot be broadcast to indexing result "
    rf"of shape {_SHAPE}",
    rf"element {_N} of tensors does not require grad and does not have a grad_fn",
    r"grad can be implicitly created only for scalar outputs",
    r"a leaf Variable that requires grad is being used in an in-place operation\.",
    r"cannot register a hook on a tensor that doesn't require gradient",
    rf"Mismatch in shape: grad_output\[{_N}\] has a shape of torch\.Size\({_SHAPE}\) and "
    rf"output\[{_N}\] has a shape of torch\.Size\({_SHAPE}\)\.",
    rf"expected Variable, but hook returned '{_TYPE}'",
    rf"unsupported operand type\(s\) for [-+*/@%&|^<>=!]{{1,3}}: '{_TYPE}' and '{_TYPE}'",
    rf"'{_TYPE}' object is not (?:callable|iterable|subscriptable)",
    rf"(?P<function>[a-z_]{{1,30}})\(\): argument '(?:input|other|self|tensor|tensors|mask|"
    rf"value|size)' \(position {_N}\) must be {_TYPE}, not {_TYPE}",
    rf"expected scalar type [A-Za-z0-9]{{1,12}} but found [A-Za-z0-9]{{1,12}}",
    r"only one element tensors can be converted to Python scalars",
    r"Boolean value of Tensor with more than one value is ambiguous",
    r"Can't call numpy\(\) on Tensor that requires grad\. Use tensor\.detach\(\)\.numpy\(\) "
    r"instead\.",
    r"(?:list|tuple) index out of range", r"(?:float )?division by zero",
)]
# Long messages of torch that start with fixed text: only that text is quoted.
_QUOTABLE_START = [re.compile(pattern) for pattern in (
    r"Trying to backward through the graph a second time",
    r"one of the variables needed for gradient computation has been modified by an inplace "
    r"operation",
    r"Subtraction, the `-` operator, with (?:two bool tensors|a bool tensor) is not supported\. "
    r"(?:If you are trying to invert a mask, use|Use) the `[~^]` or `logical_(?:not|xor)\(\)` "
    r"operator instead\.",
    rf"The expanded size of the tensor \({_N}\) must match the existing size \({_N}\) at "
    rf"non-singleton dimension {_N}",
    r"Trying to set a forward gradient that has a different size than that of the original "
    r"Tensor",
    r"hook '[^']{0,100}' has changed the (?:size|type) of value",
)]


@functools.lru_cache(maxsize=1)
def _torch_names() -> frozenset[str]:
    """Names of torch's functions and tensor methods: the functions whose messages are quoted."""
    import torch
    return frozenset(dir(torch) + dir(torch.Tensor) + dir(torch.nn.functional))


def quotable(message: str) -> str | None:
    """The part of an exception's message a visible check may quote (one of torch's or
    Python's own messages), or None."""
    message = one_line(message, 400)
    for pattern in _QUOTABLE_WHOLE:
        found = pattern.fullmatch(message)
        if found and found.groupdict().get("function", "add") in _torch_names():
            return one_line(message, MAX_MESSAGE)
    for pattern in _QUOTABLE_START:
        found = pattern.match(message)
        if found:  # a hook's name is the answer's choice: not quoted
            return one_line(re.sub(r"^hook '[^']*'", "a hook", found.group(0)), MAX_MESSAGE)
    return None


def raised_text(student: Outcome, quote: bool) -> str:
    """What the feedback says of an exception the answer raised: its type (Python's own
    classes only), the line of the student's cell, and with `quote` its message when it is
    one of torch's or Python's own, on one line."""
    if student.raised == "NotImplementedError":
        return "the answer raised NotImplementedError: the exercise is not answered yet"
    kind = student.raised if student.raised in _PYTHON_EXCEPTIONS \
        else "an exception of its own class"
    text = f"your code raised {kind}"
    shown = quotable(student.message) if quote and kind == student.raised else None
    if shown:
        text += f": {shown}"
    if student.line is not None:
        cell = f" In [{student.cell}]" if student.cell is not None else ""
        text += f" (line {student.line} of your cell{cell})"
    return text


def judge(scenario: Scenario, reference: Outcome, student: Outcome,
          quote: bool = True) -> Check:
    """The verdict on one scenario, with what was measured of a failure (no mistake named:
    that needs the exercise's other scenarios, see `judge_exercise`)."""
    problems = outcome_problems(scenario, reference, student, quote)
    check = Check(scenario.exercise, scenario.name, scenario.title, scenario.visible,
                  not problems, problems)
    if problems:
        for fact, hint in _scenario_relations(scenario, reference, student):
            if fact not in check.relations:
                check.relations.append(fact)
            if hint and hint not in check.hints:
                check.hints.append(hint)
    return check


@dataclass
class ScenarioRun:
    """One scenario of an exercise as the grader has it: the reference's outcome, the
    student's, and each known mistake's (None where the reference run has none)."""

    scenario: Scenario
    reference: Outcome
    student: Outcome
    mistakes: list[tuple[Mistake, Outcome | None]] = field(default_factory=list)


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
        checks.append(judge(run.scenario, run.reference, run.student, quote))
        quoted = quoted or quote
    for mistake in _named_mistakes(runs):
        for run, check in zip(runs, checks):
            outcome = dict((id(m), o) for m, o in run.mistakes).get(id(mistake))
            if not check.passed and check.mistake is None and outcome is not None and \
                    _differs(run.scenario, run.reference, outcome):
                check.mistake = mistake.message
    visible_ok = any(c.visible for c in checks) and all(c.passed for c in checks if c.visible)
    for run, check in zip(runs, checks):
        if check.passed or check.mistake:
            check.relations, check.hints = [], []
            continue
        found = _across_scenarios(run, runs)
        if visible_ok and not check.visible and run.student.stopped is None:
            found.append(("right on the test cell's example, wrong on these inputs",
                          "does the answer rely on the example's values, shape or size (a "
                          "hard-coded or special-cased result), or on state an earlier call "
                          "left behind (the example runs first)?"))
        # What the other scenarios tell comes first: it says more than one value's relation.
        check.relations = list(dict.fromkeys([fact for fact, _ in found] + check.relations))
        check.hints = list(dict.fromkeys([hint for _, hint in found if hint] + check.hints))
    return checks


def _matches(scenario: Scenario, wrong: Outcome, student: Outcome) -> bool:
    """Whether the student's run of `scenario` gave what the mistake `wrong` gave."""
    if wrong.raised is not None:
        return student.raised == wrong.raised and \
            _message_kind(student.message) == _message_kind(wrong.message)
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


# --------------------------------------------------------------------------------------------
# Relations: how a failing answer's values relate to the expected ones
#
# Each relation is a fact (true of the values measured) and, where one helps, a hint: a guess
# at the cause, which the feedback labels as a hint. On a hidden check a relation quotes no
# number but a whole factor of at most _SMALL (or its inverse) or an offset of one, the
# answer's dtypes and the reference's observation names: a few bits per check, like passing or
# failing, never a hidden input or expected value.

_SMALL = 10
Relation = tuple[str, "str | None"]


def _scenario_relations(scenario: Scenario, reference: Outcome, student: Outcome
                        ) -> list[Relation]:
    if student.raised is not None:
        return _raised_relations(student)
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
    """`found` is what another observation of the same scenario should be."""
    for other, value in expected.items():
        if other == key or not differences(value, expected[key], 0.0, 0.0, other, True):
            continue
        rtol, atol = scenario.tolerance_for(other)
        if not differences(value, found, rtol, atol, other, True):
            return (f"{key} holds what {other} should be",
                    "the right value returned or stored in the wrong place?")
    return None


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
                    not differences(value, student[key], rtol, atol, key, True):
                out.append((f"{key} is the test cell example's value, whatever the inputs",
                            "is the result hard-coded, or computed from the example's values?"))
    return out[:2]


# An exception's message is untrusted text, never quoted on a hidden check; these patterns only
# choose one of the grader's own sentences.
_MESSAGES: tuple[tuple[str, str, str], ...] = (
    ("does not require grad and does not have a grad_fn",
     "backward() met a tensor with no grad_fn: a result was cut from the graph (detached)",
     "detach(), .data, torch.no_grad(), .item() or a new tensor made from values?"),
    ("a leaf Variable that requires grad is being used in an in-place operation",
     "an in-place change of a leaf tensor that requires grad",
     "change parameters in place under torch.no_grad()"),
    ("modified by an inplace operation",
     "a tensor that backward() needs was changed in place", "compute a new tensor instead"),
    ("backward through the graph a second time",
     "backward() ran a second time through a graph that was already freed",
     "retain_graph=True on the first backward(), or build the graph again"),
    ("has changed the size of value",
     "a hook returned a gradient of another shape than the one it received",
     "a tensor built from fixed values, or one of another tensor's shape?"),
    ("has changed the type of value",
     "a hook returned a gradient of another dtype than the one it received",
     "return a tensor computed from the gradient it receives"),
    ("Mismatch in shape: grad_output",
     "the vector given to backward() has another shape than the output",
     "backward(v) takes one v of the output's shape (made like the output, not the input)"),
    ("forward gradient that has a different size",
     "the tangent given to jvp has another shape than the input",
     "make it like the input x (torch.zeros_like(x)), not like the output"),
    ("but hook returned", "a hook returned a value of a kind it may not return",
     "a hook that acts in place must return None (a lambda returns its expression's value)"),
    ("NoneType", "None was used as a value",
     "a .grad that was never filled, or a function that returns nothing?"),
    ("must match the size of tensor", "the shapes of two tensors do not fit together",
     "a transposed tensor, or a dimension missing or kept?"),
    ("cannot be multiplied", "the shapes of a matrix product do not fit together",
     "a transposed tensor, or a dimension missing or kept?"),
    ("expected scalar type", "two tensors of different dtypes met",
     "a float64 or integer tensor where float32 was meant?"),
    ("grad can be implicitly created only for scalar outputs",
     "backward() was called on a tensor with more than one element without a gradient for it",
     "pass gradient= (a vector) to backward(), or reduce to a scalar first"),
)


def _message_kind(message: str) -> int | None:
    """Which of the messages the grader knows `message` is (an index of _MESSAGES), if any."""
    return next((i for i, (pattern, _, _) in enumerate(_MESSAGES) if pattern in message), None)


def _raised_relations(student: Outcome) -> list[Relation]:
    for pattern, fact, hint in _MESSAGES:
        if pattern in student.message:
            return [(fact, hint)]
    return []


def _floats(value: Tensor) -> list[float]:
    return [float(x) for x in value.data]


def _all_close(found: list[float], expected: list[float], rtol: float, atol: float) -> bool:
    return len(found) == len(expected) and all(
        _close(f, e, rtol, atol) for f, e in zip(found, expected))


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
        return (f"{name} is None where {_kind(expected)} was expected",
                "a function that returns nothing, or a .grad that no gradient reached "
                "(detached, made under torch.no_grad(), not a leaf)?")
    if expected is None and found is not None:
        hint = "a .grad that was not cleared (set it to None)?" if "grad" in name else None
        return f"{name} should be None, found {_kind(found)}", hint
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
        if _close(float(found.data[0]), float(expected), rtol, atol):
            return (f"{name} is a one-element tensor where a plain number was expected",
                    "use .item() or int(...)")
        return None
    if isinstance(found, bool) or not isinstance(found, (int, float)):
        return None
    if type(found) is not type(expected) and _close(float(found), float(expected), rtol, atol):
        return (f"{name} is the right value as {_kind(found)}, {_kind(expected)} was expected",
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
                len(expected.data) == 1 and _close(float(found), float(expected.data[0]),
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
        if not _close(k, 1.0, rtol, atol) and _all_close(f, [k * x for x in e], rtol, atol) \
                and (n > 1 or _simple(k, reveal)):
            return _factor(k, reveal, name, many=nonzero > 1)
    if n > 1:
        d = f[0] - e[0]
        if not _close(d, 0.0, 0.0, atol) and _all_close(f, [x + d for x in e], rtol, atol):
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
    agree = all(_close(f[i], e[i], rtol, atol) for i in range(n) if e[i] and f[i])
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
