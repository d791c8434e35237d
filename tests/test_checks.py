"""The feedback checks that test cells use: they pass on right answers and explain wrong ones."""

import pytest
import torch

from coursekit.checks import check_equal, check_is_none, check_tensor, check_true, diagnose


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


def test_twice_the_value_points_to_accumulated_gradients():
    message = failure_message(check_tensor, "x.grad", torch.tensor([2.0, 4.0]), [1.0, 2.0])
    assert "twice the expected value" in message
    assert "without zeroing" in message


def test_flipped_sign_and_half_and_zeros_are_named():
    assert "wrong sign" in failure_message(check_tensor, "g", torch.tensor([-1.0]), [1.0])
    assert "half the expected" in failure_message(check_tensor, "g", torch.tensor([0.5]), [1.0])
    assert "all zeros" in failure_message(check_tensor, "g", torch.zeros(2), [1.0, 2.0])


def test_none_gradient_explains_leaf_and_retain_grad():
    message = failure_message(check_tensor, "y.grad", None, [1.0])
    assert "y.grad is None" in message
    assert "retain_grad()" in message


def test_shape_mismatch_is_reported_before_values():
    message = failure_message(check_tensor, "J", torch.ones(2, 3), torch.ones(3, 2))
    assert "shape (2, 3), expected (3, 2)" in message
    assert "transpose" in message
    message = failure_message(check_tensor, "v", torch.ones(3), torch.ones(2, 3))
    assert "summed away" in message


def test_known_mistakes_take_precedence_over_generic_hints():
    wrong = torch.tensor([24.0, 388.0])
    message = failure_message(check_tensor, "x.grad", wrong, [12.0, 194.0],
                              mistakes={"you multiplied by x instead of v": wrong})
    assert "likely mistake: you multiplied by x instead of v" in message


def test_hint_is_shown_when_nothing_is_recognised():
    message = failure_message(check_tensor, "g", torch.tensor([7.0]), [1.0], hint="look again")
    assert "likely mistake: look again" in message


def test_non_tensor_answer_is_named():
    message = failure_message(check_tensor, "g", "a string", [1.0])
    assert "should be a torch.Tensor, not str" in message


def test_integer_tensors_compare_without_scale_hints():
    check_tensor("counts", torch.tensor([1, 2]), [1, 2])
    assert diagnose("counts", torch.tensor([2, 4]), torch.tensor([1, 2])) is None


def test_check_equal_and_type_hint():
    check_equal("n", 3, 3)
    assert "is a float, not a int" in failure_message(check_equal, "n", 3.0, 3)
    assert "likely mistake: count again" in failure_message(
        check_equal, "n", 4, 3, hint="count again")


def test_check_is_none_and_check_true():
    check_is_none("y.grad", None)
    assert "y.grad is not what was expected" in failure_message(check_is_none, "y.grad", 1.0)
    check_true(True, "unused")
    assert failure_message(check_true, False, "the hook never fired") == "the hook never fired"
