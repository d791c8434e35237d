"""What the feedback may say of an exception an answer raised: its type when it is one of
Python's own, its message (`quotable` for torch's and Python's own messages, `shown_message` for
any other, with what it must not carry left out), and which of the grader's own sentences fits
it (`raised_relations`).

A message is untrusted text: the answer that raised it runs beside the scenario module and the
hidden inputs. What is quoted of it is one line of at most MAX_QUOTE characters, in quotes,
without what it could carry out: on a hidden check every number (a hidden input's value, its
size or a value computed from them: printed with fewer digits or in a tensor's repr, it is still
a number), nan and inf, and every quoted string but a type's name (a name a hidden input
holds, as a KeyError prints it); and on any check every stretch of three words or signs that
the scenario module's source holds (the checks' own code)."""

from __future__ import annotations

import builtins
import functools
import os
import re

from autograder.text import one_line

Relation = tuple[str, "str | None"]

# The exception classes whose names the feedback may quote: Python's own, never a class the
# answer defined (whose name it chose).
PYTHON_EXCEPTIONS = frozenset(
    name for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException))


MAX_MESSAGE = 200  # characters of an exception's message that a visible check quotes

# The messages a visible check may quote: torch's and Python's own, as patterns whose variable
# parts are small numbers, shapes and type names. Anything else an answer raises (its own text,
# or text it found in its memory) matches none, and only its type is told.
_N = r"-?\d{1,6}"
_SHAPE = rf"\[(?:{_N}(?:, {_N}){{0,7}})?\]"
_TYPE = (r"(?:NoneType|int|float|complex|str|bool|tuple|list|dict|set|function|method|"
         r"builtin_function_or_method|Tensor|Parameter|module|generator|Size|type|"
         r"numpy\.ndarray|Module|Linear|Sequential|RemovableHandle)")
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
    r"expected scalar type [A-Za-z0-9]{1,12} but found [A-Za-z0-9]{1,12}",
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


# An exception's message is untrusted text, never quoted on a hidden check; these patterns only
# choose one of the grader's own sentences (part of the list of phrases, see `phrases`): a fact
# the message decides and, where the message decides it too, what to do.
MESSAGES: tuple[tuple[str, str, str | None], ...] = (
    ("does not require grad and does not have a grad_fn",
     "backward() met a tensor with no grad_fn: no tensor that requires grad led to it",
     None),
    # No advice: the message does not tell whose tensor it was. A parameter changed outside
    # torch.no_grad() fits one fix; a backward that edits grad_output in place (05-ex4 of a
    # blind review: mul_ on the caller's gradient) needs the opposite, a new tensor.
    ("a leaf Variable that requires grad is being used in an in-place operation",
     "an in-place change of a leaf tensor that requires grad", None),
    ("modified by an inplace operation",
     "a tensor that backward() needs was changed in place", "compute a new tensor instead"),
    # No advice: the message does not tell which of its two causes it was. retain_graph=True
    # fits one graph run backward twice, not a tensor kept from an earlier call (a cache on
    # the class: 05-ex4 of a blind review, where the grader's checks run backward once).
    ("backward through the graph a second time",
     "a backward pass reached a graph that an earlier backward pass had freed: one graph "
     "run backward twice, or a tensor kept from an earlier call used again", None),
    ("has changed the size of value",
     "a hook returned a gradient of another shape than the one it received",
     "return a tensor of the shape of the gradient the hook receives"),
    ("has changed the type of value",
     "a hook returned a gradient of another dtype than the one it received",
     "return a tensor computed from the gradient it receives"),
    ("Mismatch in shape: grad_output",
     "the vector given to backward() has another shape than the output",
     "backward(v) takes one v of the output's shape (made like the output, not the input)"),
    # No advice: the message tells the shape, not whether forward mode was the way to go.
    ("forward gradient that has a different size",
     "the tangent given to jvp has another shape than the input: jvp takes a tangent shaped "
     "like the input and gives J times it", None),
    ("not RemovableHandle",
     "a hook returned the handle that register_hook gives, and it took the place of a value",
     "a forward hook's return value replaces the module's output, and a lambda returns its "
     "expression's value: write the hook with def, and let it return nothing"),
    ("but hook returned", "a hook returned a value of a kind it may not return",
     "a hook that acts in place must return None (a lambda returns its expression's value)"),
    ("NoneType", "None was used where a value was needed", None),
    ("must match the size of tensor", "the shapes of two tensors do not fit together", None),
    ("cannot be multiplied", "the shapes of a matrix product do not fit together", None),
    ("expected scalar type", "two tensors of different dtypes met", None),
    ("grad can be implicitly created only for scalar outputs",
     "backward() was called on a tensor with more than one element without a gradient for it",
     "pass gradient= (a vector) to backward(), or reduce to a scalar first"),
)


def message_kind(message: str) -> int | None:
    """Which of the messages the grader knows `message` is (an index of MESSAGES), if any."""
    return next((i for i, (pattern, _, _) in enumerate(MESSAGES) if pattern in message), None)


def raised_relations(message: str) -> list[Relation]:
    """The grader's own sentence (and hint) for an exception's `message`, when one fits."""
    for pattern, fact, hint in MESSAGES:
        if pattern in message:
            return [(fact, hint)]
    return []


# --------------------------------------------------------------------------------------------
# Any message, quoted with what it must not carry left out

MAX_QUOTE = 160  # characters of a message quoted in the student's own words
LEFT_OUT = "…"
# A number in any form a message may print it: 3, -0.25, 1e-05, 2x3 (a size), 0x7f (an address);
# a letter or digit before it makes it part of a name (float32, fc1, conv2d), which stays, and
# so does a one-digit dimension count ("a 0-dim tensor"), which the exercise's domain states.
_NUMBER = re.compile(r"(?<!\w)(?!\d-dim\b)[-+]?(?:\d+(?:\.\d+)?[eE][-+]?\d+|"
                     r"\.?\d(?:\w|\.(?=\w))*)")
# A tensor's repr (or torch.Size's), whose values go as a whole: tensor(…).
_TENSOR_REPR = re.compile(r"\b(tensor|Size)\((?:[^()]|\([^()]*\))*\)?")
# Not-a-number and infinity, as Python and torch print them.
_SPECIAL = re.compile(r"(?<!\w)[-+]?(?:nan|inf)(?!\w)", re.IGNORECASE)
# A quoted string (a key, a name: a hidden input may hold names), unless it is a type's name.
_QUOTED = re.compile(r"'([^'\n]{0,80})'|\"([^\"\n]{0,80})\"")
_RUN_LEFT_OUT = re.compile(r"…(?:[\s,;:]*…)+")
_TOKEN = re.compile(r"\w+|[^\w\s]")


def shown_message(message: str, *, hidden: bool, source: str | None) -> str | None:
    """An exception's message as the feedback may quote it, in quotes, or None when nothing is
    left to quote. `hidden`: every number is left out (it may be a hidden input's). `source`:
    the scenario module's text; a stretch of the message it holds is left out. Without a
    source, nothing but torch's and Python's own messages is quoted (see `quotable`)."""
    text = one_line(message, 400)
    if hidden:
        text = _TENSOR_REPR.sub(lambda m: f"{m.group(1)}({LEFT_OUT})", text)
        text = _QUOTED.sub(_quoted, text)
        text = _SPECIAL.sub(LEFT_OUT, _NUMBER.sub(LEFT_OUT, text))
    known = quotable(message) if not hidden else None
    if known is not None:
        return known
    if source is None:
        return None
    text = _RUN_LEFT_OUT.sub(LEFT_OUT, _without_source(text, source))
    if not re.search(r"[^\W\d_]", text.replace(LEFT_OUT, "")):
        return None  # nothing but numbers and signs is left
    return "“" + one_line(text, MAX_QUOTE) + "”"


def _quoted(found: re.Match) -> str:
    """A quoted string of a hidden check's message: kept when it names a type ('NoneType'),
    else left out (it may be a name a hidden input holds)."""
    inside = found.group(1) if found.group(1) is not None else found.group(2)
    quote = found.group(0)[0]
    return found.group(0) if re.fullmatch(_TYPE, inside) else f"{quote}{LEFT_OUT}{quote}"


@functools.lru_cache(maxsize=32)
def _trigrams(source: str) -> frozenset[tuple[str, ...]]:
    tokens = _TOKEN.findall(source)
    return frozenset(gram for gram in zip(tokens, tokens[1:], tokens[2:])
                     if any(t[0].isalnum() or t[0] == "_" for t in gram))


def _without_source(text: str, source: str) -> str:
    """`text` with each stretch of three tokens (words, numbers or signs, one a word) that
    `source` holds replaced by LEFT_OUT."""
    grams = _trigrams(source)
    found = list(_TOKEN.finditer(text))
    out = [False] * len(found)
    for i in range(len(found) - 2):
        if tuple(m.group() for m in found[i:i + 3]) in grams:
            out[i:i + 3] = [True, True, True]
    pieces, at, i = [], 0, 0
    while i < len(found):
        if not out[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(found) and out[j + 1]:
            j += 1
        pieces += [text[at:found[i].start()], LEFT_OUT]
        at, i = found[j].end(), j + 1
    return "".join(pieces) + text[at:]


def source_of(func: object) -> str | None:
    """The text of the file that defines `func` (a scenario: the scenario module, which the
    grader reads from the course's scenarios/), or None when there is none to read."""
    path = getattr(getattr(func, "__code__", None), "co_filename", "")
    try:
        stat = os.stat(path)
    except (OSError, TypeError, ValueError):
        return None
    return _read(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=32)
def _read(path: str, mtime: int, size: int) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(4 << 20)
    except OSError:
        return None
