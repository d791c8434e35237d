"""What a trusted verdict tells the student never quotes text the sandbox's report chose.

The answer under test runs beside the scenario module (hidden scenarios included), so a hostile
answer can read that source and try to carry it out through anything the feedback echoes. These
unit tests feed `autograder.verdicts` reports carrying such text in every place a report can
hold text, and check that none of it reaches the check's messages, while an honest mistake is
still described usefully.
"""

from __future__ import annotations

import pytest

from autograder.verdicts import outcome_problems, read_outcome
from coursekit.scenarios import Scenario

def T(*data: float) -> dict:
    """A float32 tensor as a report carries it."""
    return {"__tensor__": {"dtype": "float32", "shape": [len(data)], "data": list(data)}}


SECRET = "def random_points(cube_grad, rng): x = torch.randn(5, generator=rng)"


def _scenario(visible: bool) -> Scenario:
    return Scenario(exercise="01-ex1", name="random_points", func=lambda answer, rng: {},
                    uses=("cube_grad",), visible=visible)


def _reference() -> object:
    return read_outcome({"observations": {
        "x.grad": T(3.0, 12.0),
        "label": "ok"}})


def _problems(report: dict, visible: bool) -> str:
    return " | ".join(outcome_problems(_scenario(visible), _reference(), read_outcome(report)))


@pytest.mark.parametrize("visible", [True, False])
@pytest.mark.parametrize("report", [
    {"raised": "RuntimeError", "message": "LEAK " + SECRET},
    {"raised": "def_random_points_cube_grad_rng", "message": ""},
    {"unreportable": "LEAK " + SECRET},
    {"observations": {"x.grad": T(3.0, 12.0),
                      "label": "ok", SECRET: 1}},
    {"observations": {"x.grad": T(3.0, 12.0),
                      "label": SECRET}},
    {"observations": {"x.grad": T(3.0, 12.0),
                      "label": {SECRET: 1}}},
], ids=["message", "class-name", "unreportable", "extra-key", "string", "nested-key"])
def test_no_text_of_the_report_is_quoted(report, visible):
    text = _problems(report, visible)
    assert text, "the hostile report was taken as a match"
    for piece in ("random_points", "randn", "LEAK"):
        assert piece not in text, text


def test_an_honest_failure_is_still_described():
    hidden = _problems({"raised": "TypeError", "message": "bad operand"}, visible=False)
    assert hidden == "the answer raised TypeError on these inputs", hidden
    visible = _problems({"raised": "ZeroDivisionError", "message": "division"}, visible=True)
    assert visible.startswith("the answer raised ZeroDivisionError on the test cell's inputs")
    own = _problems({"raised": "MyError", "message": ""}, visible=False)
    assert "an exception of its own class" in own and "MyError" not in own
    wrong = _problems({"observations": {
        "x.grad": T(6.0, 24.0), "label": "ok"}},
        visible=True)
    assert "expected tensor[3, 12]" in wrong and "found tensor[6, 24]" in wrong, wrong
    word = _problems({"observations": {
        "x.grad": T(3.0, 12.0), "label": "no"}},
        visible=True)
    assert "found 'no'" in word, word  # a short plain word is still quoted
    extra = _problems({"observations": {
        "x.grad": T(3.0, 12.0), "label": "ok",
        "more": 1, "again": 2}}, visible=False)
    assert extra == "2 observations not expected", extra


def _shaped(dims: list[int]) -> dict:
    size = 1
    for d in dims:
        size *= d
    return {"__tensor__": {"dtype": "float32", "shape": dims, "data": [1.0] * size}}


@pytest.mark.parametrize("visible", [True, False])
def test_numbers_the_answer_chose_are_not_quoted_where_they_could_carry_text(visible):
    """An empty tensor of many dimensions, or a hidden check's shape or list length, can hold
    any numbers the answer picked (a red-team notebook spelt the hidden scenario's source in
    the shape of empty tensors): those are not quoted."""
    dims = [0, 10043, 8292, 30051, 25973, 8293]
    text = _problems({"observations": {"x.grad": _shaped(dims), "label": "ok"}}, visible)
    assert "another shape" in text and "10043" not in text, text
    # The expected shape or length, on a hidden check, tells the size of a hidden input.
    assert ("expected shape [2]" in text) == visible, text
    text = _problems({"observations": {"x.grad": _shaped([3, 1]), "label": "ok"}}, visible)
    assert ("shape [3, 1]" in text) == visible, text
    reference = read_outcome({"observations": {"xs": [1, 2]}})
    student = read_outcome({"observations": {"xs": list(range(9043))}})
    text = " | ".join(outcome_problems(_scenario(visible), reference, student))
    assert ("9043" in text) == visible and ("expected 2" in text) == visible, text


def test_a_report_shaped_to_break_the_reading_is_malformed():
    """A tensor whose dtype is a list raised TypeError, not the ReportError the grader
    catches: the notebook then ended in `error` (found by a red-team review)."""
    from autograder.verdicts import ReportError
    with pytest.raises(ReportError):
        read_outcome({"observations": {"x.grad": {"__tensor__": {
            "dtype": ["float32"], "shape": [1], "data": [1.0]}}}})


def test_found_values_are_quoted_to_six_digits():
    text = _problems({"observations": {"x.grad": T(3.14159265358979, 12.0), "label": "ok"}},
                     visible=True)
    assert "found tensor[3.14159, 12]" in text and "3.1415926" not in text, text


def test_an_integer_too_large_for_a_float_is_a_malformed_report():
    from autograder.verdicts import ReportError
    with pytest.raises(ReportError):
        read_outcome({"observations": {"x.grad": {"__tensor__": {
            "dtype": "int64", "shape": [1], "data": [10 ** 400]}}}})
