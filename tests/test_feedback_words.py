"""Words a student can read on the graded page: long tensors and lists told by how many entries
differ, where the largest difference is and its size (never a hidden check's value); results
the check cannot read told by what came back and what was expected; each paragraph said once
per page; no internal keys."""

from __future__ import annotations

import re

import pytest

from autograder.trusted.outcomes import Tensor, differences

NUMBER = re.compile(r"-?\d+\.\d+|-?\d+(?:e-?\d+)?")


def _tensor(values: list[float], shape: tuple[int, ...]) -> Tensor:
    return Tensor("float32", shape, list(values))


@pytest.fixture
def parameters() -> tuple[Tensor, Tensor]:
    """4435 parameters, found and expected alike in their first hundred values (as in the
    report that printed the same first 8 values twice), two of them wrong further on."""
    expected = [((i * 37) % 101 - 50) / 16 for i in range(4435)]
    found = list(expected)
    found[2000] += 0.25
    found[4100] -= 1.5
    return _tensor(expected, (4435,)), _tensor(found, (4435,))


def test_a_long_tensor_on_a_visible_check_says_where_and_how_large(parameters):
    expected, found = parameters
    (said,) = differences(expected, found, 1e-5, 1e-6, "the parameters after one step", True)
    assert said == ("the parameters after one step: 2 of 4435 entries differ; the largest "
                    f"difference is at [4100]: expected {expected.data[4100]:.6g}, found "
                    f"{found.data[4100]:.6g}")


def test_a_long_tensor_on_a_hidden_check_says_where_and_how_large_without_a_value(parameters):
    expected, found = parameters
    (said,) = differences(expected, found, 1e-5, 1e-6, "the parameters after one step", False)
    assert said == ("the parameters after one step: 2 of 4435 entries differ; the largest "
                    "difference is at [4100], about 50% of the largest expected value in size")
    values = {f"{x:.6g}" for x in expected.data + found.data} | {"3.125", "1.5", "0.25"}
    assert not [n for n in NUMBER.findall(said) if n in values and n not in ("2", "4435",
                                                                             "4100", "50")]


def test_the_position_is_an_index_of_every_dimension():
    expected = _tensor([float(i) for i in range(60)], (3, 4, 5))
    found = _tensor([float(i) for i in range(60)], (3, 4, 5))
    found.data[2 * 20 + 1 * 5 + 3] = 1000.0
    found.data[7] = 8.5
    (said,) = differences(expected, found, 1e-5, 1e-6, "w.grad", False)
    assert said.startswith("w.grad: 2 of 60 entries differ; the largest difference is at "
                           "[2, 1, 3], about 20 times the largest expected value"), said


def test_a_long_list_of_numbers_is_told_as_a_long_tensor():
    expected = [float(i) for i in range(40)]
    found = list(expected)
    found[31] = -31.0
    (said,) = differences(expected, found, 1e-5, 1e-6, "losses", True)
    assert said == ("losses: 1 of 40 items differ; the largest difference is at [31]: "
                    "expected 31, found -31")
    (hidden,) = differences(expected, found, 1e-5, 1e-6, "losses", False)
    assert hidden == ("losses: 1 of 40 items differ; the largest difference is at [31], about "
                      "2 times the largest expected value in size")
    assert differences(expected, list(expected), 1e-5, 1e-6, "losses", False) == []


def test_a_not_a_number_found_is_said_so():
    expected = _tensor([1.0] * 20, (20,))
    found = _tensor([1.0] * 19 + [float("nan")], (20,))
    (said,) = differences(expected, found, 1e-5, 1e-6, "y", False)
    assert said.endswith("at [19], where the answer's value is not a finite number"), said
