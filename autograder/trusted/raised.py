"""What the feedback may say of an exception an answer raised: its type when it is one of
Python's own, its message when it is one of torch's or Python's own (`quotable`), and which of
the grader's own sentences fits it (`raised_relations`). A message is untrusted text: these
patterns only choose what to say, and quote nothing else."""

from __future__ import annotations

import builtins
import functools
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


# An exception's message is untrusted text, never quoted on a hidden check; these patterns only
# choose one of the grader's own sentences (part of the list of phrases, see `phrases`): a fact
# the message decides and, where the message decides it too, what to do.
MESSAGES: tuple[tuple[str, str, str | None], ...] = (
    ("does not require grad and does not have a grad_fn",
     "backward() met a tensor with no grad_fn: no tensor that requires grad led to it",
     None),
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
     "return a tensor of the shape of the gradient the hook receives"),
    ("has changed the type of value",
     "a hook returned a gradient of another dtype than the one it received",
     "return a tensor computed from the gradient it receives"),
    ("Mismatch in shape: grad_output",
     "the vector given to backward() has another shape than the output",
     "backward(v) takes one v of the output's shape (made like the output, not the input)"),
    ("forward gradient that has a different size",
     "the tangent given to jvp has another shape than the input",
     "make it like the input x (torch.zeros_like(x)), not like the output"),
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
