"""Every sentence the grader may say of a failing check on its own (not a lesson's named
mistake, not a raw value): one list, each phrase with the evidence it needs.

A phrase is a fact the grader measured ("x.grad is twice the expected values (×2)") and, where
the same evidence decides what to do, advice. No phrase guesses at a cause the evidence does
not decide: "off by one", "state kept between calls" or "hard-coded" are said only where what
they claim was measured (the same call giving another result the second time is state; a
count one more than expected is only that). `say(key, **fields)` is how `relations`, `raised`
and `verdicts` build what they say; `is_phrase` tells whether a sentence is one of these, and
tests/test_verdicts.py checks that everything the grader says of the variants suite is.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Phrase:
    text: str               # a template: {name} and the other fields are filled by `say`
    evidence: str           # what must have been measured for the grader to say it
    advice: str | None = None  # what to do, decided by the same evidence


_P = Phrase
PHRASES: dict[str, Phrase] = {
    # ---- a value of another kind
    "none": _P("{name} is None where {kind} was expected",
               "the reference gave a value, the answer None"),
    "not_none": _P("{name} should be None, found {kind}",
                   "the reference gave None, the answer a value"),
    "detached": _P("{name} is False: the result is detached from the graph",
                   "a requires_grad or grad_fn flag the reference has True is False",
                   "keep the result in the graph: no detach(), .data, torch.no_grad(), "
                   ".item() or NumPy on its way"),
    "flag": _P("{name} is {found}, not {expected}", "two booleans differ"),
    "one_element": _P("{name} is a one-element tensor where a plain number was expected",
                      "the tensor's one value equals the expected number",
                      "use .item() or int(...)"),
    "number_kind": _P("{name} is the right value as {found}, {expected} was expected",
                      "equal values of two number types"),
    "nan_number": _P("{name} is NaN", "the expected number is not NaN"),
    "zero_number": _P("{name} is 0", "the expected number is not 0"),
    "list_for_dict": _P("{name} is a list of the right values where a dict (name → value) was "
                        "asked", "the list's items are the dict's values, in order",
                        "build a dict keyed by name"),
    "list_not_dict": _P("{name} is a list where a dict (name → value) was asked",
                        "a list where the reference gave a dict"),
    "list_for_tensor": _P("{name} is a list of the right rows where a tensor was expected",
                          "a list of tensors that stack into the expected tensor",
                          "torch.stack the items"),
    "numbers_for_tensor": _P("{name} is a list (or tuple) of the right numbers where a tensor "
                             "was expected", "plain numbers equal to the expected 1-d tensor's",
                             "return the tensor itself (no .tolist())"),
    "one_item_list": _P("{name} is a list (or tuple) of one item, the expected tensor",
                        "one item, a tensor equal to the expected one",
                        "return that item itself (the [0] of the list or tuple)"),
    "list_where_tensor": _P("{name} is a list (or tuple) where a tensor was expected",
                            "a list as long as the tensor's first dimension, items not the "
                            "expected rows"),
    "number_for_tensor": _P("{name} is a plain number where a tensor was expected",
                            "the number equals the one-element tensor's value"),
    "dtype_values": _P("{name} has the right values as {found}, {expected} was expected",
                       "all values within tolerance, another dtype",
                       "convert with .to(torch.{expected}), or keep the input's dtype"),
    "and_dtype": _P("{fact} (and its dtype is {found}, not {expected})",
                    "another relation holds and the dtype differs"),
    # ---- dicts and lists
    "dict_more": _P("{name} holds the expected entries, and more",
                    "every expected entry right, and entries the reference has not"),
    "dict_same": _P("{name}: every entry is the same, where the expected ones differ",
                    "all found entries equal, the expected ones not"),
    "empty": _P("{name} is empty", "an empty list where items were expected"),
    "more_after": _P("{name} holds the expected items, then more after them",
                     "the first items are the expected ones, then more"),
    "more_before": _P("{name} holds more items before the expected ones",
                      "the last items are the expected ones, more come first"),
    "stops_early": _P("{name} stops early: the first items are right, the rest are missing",
                      "fewer items, each right"),
    "only_zeros": _P("{name} holds only zeros", "numbers all 0, the expected ones not"),
    "items_same": _P("{name}: every item is the same, where the expected ones differ",
                     "all found items equal, the expected ones not"),
    "reverse_items": _P("{name} holds the right items in reverse order",
                        "item i is expected item n−1−i"),
    "other_order": _P("{name} holds the right items in another order",
                      "a permutation of the expected items"),
    "accumulated": _P("{name}: each item adds up the expected ones so far (accumulated)",
                      "item i is the sum of expected items 0..i"),
    "first_right": _P("{name}: the first item is right, a later one is not",
                      "item 0 right, a later item wrong"),
    "wrong_place": _P("{name} holds what {other} should be",
                      "the value equals another observation's expected value (not a count)"),
    # ---- tensors
    "transposed": _P("{name} is the expected values transposed", "found = expected.T"),
    "size_one": _P("{name} has the right values with a dimension of size 1 added or missing",
                   "the same values, shapes equal but for dimensions of size 1"),
    "reshaped": _P("{name} has the right values, laid out in another shape",
                   "the same values in order, another shape"),
    "broadcast": _P("{name} is larger than expected, in a shape that broadcasting makes from "
                    "the expected one", "the expected shape broadcasts to the found one"),
    "dimension_missing": _P("{name} is smaller than expected: a dimension is missing",
                            "the found shape broadcasts to the expected one"),
    "nan": _P("{name} holds NaN", "NaN in the found values, none in the expected"),
    "inf": _P("{name} holds inf", "inf in the found values, none in the expected"),
    "opposite": _P("{name} is the opposite in every entry", "every boolean entry flipped"),
    "zeros": _P("{name} is all zeros", "all found values 0, an expected one not"),
    "sign": _P("{name} has the sign flipped (−1 × the expected {values})",
               "found = −expected"),
    "times": _P("{name} is {word} the expected {values}{sign} (×{n})",
                "found = n × expected, n a whole number"),
    "fraction": _P("{name} is {word} the expected {values}{sign} (×1/{m})",
                   "found = expected / m, m a whole number"),
    "times_shown": _P("{name} is the expected {values} times {k}",
                      "found = k × expected (a visible check quotes k)"),
    "times_constant": _P("{name} is the expected {values} times one constant factor",
                         "found = k × expected (a hidden check does not quote k)"),
    "one_off": _P("{name} is {more} than expected", "found − expected = ±1 in every entry"),
    "shifted": _P("{name} is the expected values shifted by one constant{shown}",
                  "found − expected is one constant"),
    "reversed": _P("{name} holds the expected values in reverse order",
                   "the rows in reverse order"),
    "rolled": _P("{name} holds the expected values shifted by one position",
                 "the rows rolled by one"),
    "permuted": _P("{name} holds the right values in another order",
                   "the same values, sorted"),
    "mask_swapped": _P("{name} is zero where the expected values are not, and not zero where "
                       "they are", "zero where expected is not and the reverse, equal elsewhere"),
    "mask_more": _P("{name} is right where it is not zero, but zero in some entries that "
                    "should not be", "zero where expected is not, equal elsewhere"),
    "mask_less": _P("{name} is right where the expected values are not zero, but not zero in "
                    "some entries that should be",
                    "not zero where expected is, equal elsewhere, some expected entry not zero"),
    "should_be_zeros": _P("{name} should be all zeros; {count} of its {total} entries are not",
                          "every expected value is zero"),
    # ---- what the exercise's other scenarios tell (verdicts)
    "example_only": _P("right on the test cell's example, wrong on these inputs",
                       "the visible checks pass, this hidden one fails on what the example "
                       "measures too"),
    "example_first": _P("right on the test cell's example, which runs first, and wrong on "
                        "these later calls", "as example_only, and state was measured"),
    "example_value": _P("{name} is the test cell example's value, whatever the inputs",
                        "the hidden check's value is the visible example's expected value"),
    "fresh_only": _P("right on the test cell's example on a fresh start (the test cell's own "
                     "call), wrong when the same example runs again: the results depend on "
                     "what earlier calls left behind",
                     "the visible scenario run on a fresh start of the answer cell passes; "
                     "run after the test cell's call it fails",
                     "keep nothing between calls: make every list, dict, cache and leaf "
                     "tensor inside the function"),
    "first_call_only": _P("{name}: right on the first call only, wrong on every later call",
                          "calls A, B, B, A: the first right, the others wrong",
                          "keep nothing between calls: make every list, dict, counter and "
                          "hook inside the function, remove the hooks, clear .grad"),
    "first_call_again": _P("{name}: right on the first call, wrong when the same call came "
                           "again after another one", "calls A, B, B, A: A right, then wrong",
                           "keep nothing between calls: make every list, dict, counter and "
                           "hook inside the function, remove the hooks, clear .grad"),
    "order": _P("{name}: the result depends on the order of calls (the same call gave another "
                "result the second time)", "calls A, B, B, A: equal calls gave other results",
                "keep nothing between calls: make every list, dict, counter and hook inside "
                "the function, remove the hooks, clear .grad"),
}


def say(key: str, **fields: object) -> tuple[str, str | None]:
    """The phrase `key` with its fields filled: (fact, advice or None)."""
    phrase = PHRASES[key]
    advice = phrase.advice.format(**fields) if phrase.advice else None
    return phrase.text.format(**fields), advice


def _pattern(template: str) -> re.Pattern:
    parts = re.split(r"\{[a-z]+\}", template)
    return re.compile(".*".join(re.escape(part) for part in parts), re.S)


@functools.lru_cache(maxsize=1)
def _patterns() -> list[re.Pattern]:
    texts = [p.text for p in PHRASES.values()] + [p.advice for p in PHRASES.values()
                                                  if p.advice]
    from autograder.trusted.raised import MESSAGES
    texts += [text for _, fact, advice in MESSAGES for text in (fact, advice) if text]
    return [_pattern(text) for text in texts]


def is_phrase(sentence: str) -> bool:
    """Whether `sentence` is one of the grader's phrases (with its fields filled)."""
    return any(p.fullmatch(sentence) for p in _patterns())
