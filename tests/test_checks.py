"""The feedback checks that test cells use: they pass on right answers and explain wrong ones."""

import re

import pytest
import torch

from coursekit.checks import (CheckFailed, check_equal, check_is_none, check_tensor, check_true,
                              diagnose)
from coursekit.notebook import render_failure

pytestmark = pytest.mark.fast


def failure_message(check, *args, **kwargs) -> str:
    with pytest.raises(AssertionError) as info:
        check(*args, **kwargs)
    return str(info.value)


def test_check_tensor_accepts_equal_values_within_tolerance():
    check_tensor("x.grad", torch.tensor([1.0, 2.0]), [1.0, 2.0 + 1e-8])
    check_tensor("loss", torch.tensor(3.0, requires_grad=True), 3.0)


def test_wrong_value_shows_expected_found_and_difference():
    message = failure_message(check_tensor, "x.grad", torch.tensor([1.0, 5.0]), [1.0, 2.0])
    assert "x.grad is not what was expected" in message
    assert "expected: [1.0, 2.0]" in message
    assert "found:    tensor([1., 5.])" in message
    assert "largest difference: 3" in message


def test_twice_the_value_is_said_as_measured():
    message = failure_message(check_tensor, "x.grad", torch.tensor([2.0, 4.0]), [1.0, 2.0])
    assert "twice the expected value (×2)" in message


def test_flipped_sign_and_half_and_zeros_are_named():
    assert "opposite sign" in failure_message(check_tensor, "g", torch.tensor([-1.0]), [1.0])
    assert "half the expected" in failure_message(check_tensor, "g", torch.tensor([0.5]), [1.0])
    assert "all zeros" in failure_message(check_tensor, "g", torch.zeros(2), [1.0, 2.0])


def test_none_gradient_explains_leaf_and_retain_grad():
    message = failure_message(check_tensor, "y.grad", None, [1.0])
    assert "y.grad is None" in message
    assert "retain_grad()" in message


def test_shape_mismatch_is_reported_before_values():
    message = failure_message(check_tensor, "J", torch.ones(2, 3), torch.ones(3, 2))
    assert "shape (2, 3), expected (3, 2)" in message
    assert "the same number of entries, laid out in another shape" in message
    message = failure_message(check_tensor, "v", torch.ones(3), torch.ones(2, 3))
    assert "shape (3,), expected (2, 3) (3 entries, not 6)" in message


@pytest.mark.parametrize("found,expected,said", [
    (torch.ones(3), torch.ones(2, 3), "3 entries, not 6"),
    (torch.tensor([2.0, 4.0]), [1.0, 2.0], "twice the expected value (×2)"),
    (torch.tensor([0.0, 0.0]), [1.0, 2.0], "all zeros, where the expected values are not"),
    (torch.tensor([0.5, 1.0]), [1.0, 2.0], "half the expected value (×1/2)"),
])
def test_a_check_says_what_it_measured_and_guesses_no_cause(found, expected, said):
    """The same factor, zeros or shape has several causes; a check (whose words now
    reach the graded page too) states the measurement, then its own hint, and guesses none."""
    message = failure_message(check_tensor, "g", found, expected, hint="look again")
    assert said in message and "hint:" in message and message.endswith("look again")
    for guess in ("summed away", "second backward", "did the gradient stop", "mean was used",
                  "?"):
        assert guess not in message, message


def test_known_mistakes_take_precedence_over_generic_hints():
    wrong = torch.tensor([24.0, 388.0])
    message = failure_message(check_tensor, "x.grad", wrong, [12.0, 194.0],
                              mistakes={"you multiplied by x instead of v": wrong})
    assert "likely mistake: you multiplied by x instead of v" in message


def test_hint_is_shown_when_nothing_is_recognised():
    message = failure_message(check_tensor, "g", torch.tensor([7.0]), [1.0], hint="look again")
    assert "hint: look again" in message and "likely mistake" not in message


def test_non_tensor_answer_is_named():
    message = failure_message(check_tensor, "g", "a string", [1.0])
    assert "should be a torch.Tensor, not str" in message


def test_integer_tensors_compare_without_scale_hints():
    check_tensor("counts", torch.tensor([1, 2]), [1, 2])
    assert diagnose("counts", torch.tensor([2, 4]), torch.tensor([1, 2])) is None


def test_check_equal_and_type_hint():
    check_equal("n", 3, 3)
    assert "is a float, not a int" in failure_message(check_equal, "n", 3.0, 3)
    assert "  hint: count again" in failure_message(
        check_equal, "n", 4, 3, hint="count again")


def test_check_is_none_and_check_true():
    check_is_none("y.grad", None)
    assert "y.grad is not what was expected" in failure_message(check_is_none, "y.grad", 1.0)
    check_true(True, "unused")
    assert failure_message(check_true, False, "the hook never fired") == "the hook never fired"


# --- how a failure is shown in a notebook ------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _rendered(check, *args, **kwargs) -> list[str]:
    """The lines IPython shows for the failure (its _render_traceback_), without colours."""
    with pytest.raises(CheckFailed) as info:
        check(*args, **kwargs)
    return [ANSI.sub("", line) for line in info.value._render_traceback_()]


def test_a_failure_is_an_assertion_error_with_the_same_message():
    with pytest.raises(AssertionError) as info:
        check_tensor("x.grad", torch.tensor([2.0, 4.0]), [1.0, 2.0])
    assert isinstance(info.value, CheckFailed)
    assert str(info.value).startswith("x.grad is not what was expected.\n  expected: [1.0, 2.0]")


def test_a_failure_shows_its_first_line_then_the_hint_then_the_values():
    lines = _rendered(check_tensor, "x.grad", torch.tensor([2.0, 4.0]), [1.0, 2.0])
    assert lines[0] == "x.grad is not what was expected."
    # Read from the values alone, "twice the expected value" is a hint, not a named mistake.
    assert lines[1].startswith("  hint: x.grad is twice the expected value")
    assert lines.index("  expected: [1.0, 2.0]") > 1
    # Long sentences are wrapped (JupyterLab breaks error text in the middle of words).
    assert all(len(line) <= 88 for line in lines if "hint" in line or
               line.startswith("      "))
    # The location is this test's call, not a frame of coursekit.
    assert re.fullmatch(r"\(failed: the check on line \d+ of `_rendered`\)", lines[-1])
    assert not any("checks.py" in line or "Traceback" in line for line in lines)


def test_every_check_fails_with_check_failed():
    assert _rendered(check_equal, "n", 4, 3)[0] == "n is not what was expected."
    assert _rendered(check_is_none, "y.grad", 1.0)[0] == "y.grad is not what was expected."
    assert _rendered(check_true, False, "the hook never fired")[0] == "the hook never fired"


def test_render_failure_keeps_value_lines_as_they_are():
    message = "t is not what was expected.\n  expected: " + "x" * 120 + "\n  likely mistake: short"
    lines = [ANSI.sub("", line) for line in render_failure(message)]
    assert lines == ["t is not what was expected.", "  likely mistake: short",
                     "  expected: " + "x" * 120]
