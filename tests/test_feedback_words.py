"""Words a student can read on the graded page: long tensors and lists told by how many entries
differ, where the largest difference is and its size (never a hidden check's value); results
the check cannot read told by what came back and what was expected; each paragraph said once
per page; no internal keys."""

from __future__ import annotations

import re

import pytest

from autograder.trusted.outcomes import Tensor, differences

pytestmark = pytest.mark.fast

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


def test_a_difference_of_about_the_largest_value_is_not_said_as_1_times():
    """A blind review read "about 1 times the largest expected value in size" on many pages."""
    expected = [float(i) for i in range(40)]
    found = list(expected)
    found[31] = -10.0  # a gap of 41, about 1.05 times 39
    (hidden,) = differences(expected, found, 1e-5, 1e-6, "losses", False)
    assert hidden.endswith("at [31], about as large as the largest expected value"), hidden
    assert "1 times" not in hidden


def test_a_not_a_number_found_is_said_so():
    expected = _tensor([1.0] * 20, (20,))
    found = _tensor([1.0] * 19 + [float("nan")], (20,))
    (said,) = differences(expected, found, 1e-5, 1e-6, "y", False)
    assert said.endswith("at [19], where the answer's value is not a finite number"), said


# --------------------------------------------------------------------------------------------
# Each paragraph once per page

from nbformat import from_dict, v4  # noqa: E402

from autograder.feedback.once import NOT_GRADED_AGAIN, say_once  # noqa: E402
from autograder.grader_notes import (CHECK_ENAME, WITHHELD_NOTE,  # noqa: E402
                                     not_graded_output, withhold_hidden_checks)
from autograder.trusted.notes import not_run_output, verdict_outputs  # noqa: E402
from autograder.trusted.run import Run  # noqa: E402
from autograder.trusted.verdicts import Check  # noqa: E402

PARAGRAPH = ("keep nothing between calls: make every list, dict, counter and hook inside the "
             "function, remove the hooks, clear .grad")
EXAMPLE_ONLY = "right on the test cell's example, wrong on these inputs"


def _failing(title: str, visible: bool = False, problem: str = "y: the values differ",
             mistake: str | None = None) -> Check:
    return Check("01-ex1", title, title, visible, False, [problem], mistake,
                 [EXAMPLE_ONLY], [PARAGRAPH])


def _test_cell(exercise: str, checks: list[Check]):
    cell = v4.new_code_cell("check()")
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": f"{exercise}-test", "points": 2}
    verdict_outputs(cell, exercise, checks, Run())
    return cell


def _stream(cell) -> str:
    return "".join(o.text for o in cell.outputs if o.output_type == "stream")


def test_a_paragraph_under_every_failing_check_is_said_once():
    checks = [Check("01-ex1", "example", "the example", True, True)] + \
        [_failing(f"draw {n}") for n in range(1, 6)]
    cell = _test_cell("01-ex1", checks)
    assert _stream(cell).count(PARAGRAPH) == 5  # the autograded notebook keeps every line
    say_once(v4.new_notebook(cells=[cell]))
    text = _stream(cell)
    assert text.count(PARAGRAPH) == 1 and text.count(EXAMPLE_ONLY) == 1, text
    assert text.count("y: the values differ") == 1, text
    assert text.count("    - the same as under “draw 1” above") == 4, text
    # The error under the verdict points to it instead of saying it a second time.
    (error,) = [o for o in cell.outputs if o.output_type == "error"]
    assert error.ename == CHECK_ENAME and EXAMPLE_ONLY not in error.evalue + str(error.traceback)
    assert "see the first ✗ above" in error.traceback[0]


def test_a_check_with_something_of_its_own_says_only_that():
    checks = [_failing("draw 1"), _failing("draw 2", problem="y: 3 of 40 entries differ")]
    cell = _test_cell("01-ex1", checks)
    say_once(v4.new_notebook(cells=[cell]))
    lines = _stream(cell).splitlines()
    at = lines.index("✗ hidden check: draw 2")
    assert lines[at + 1:] == ["    - y: 3 of 40 entries differ"], lines


def test_across_the_page_advice_and_the_grader_s_notes_are_said_once():
    first = _test_cell("01-ex1", [_failing("draw 1")])
    second = _test_cell("01-ex2", [_failing("other draw", problem="z: the value differs")])
    later = [v4.new_code_cell("plot()", outputs=[from_dict(not_graded_output())])
             for _ in range(5)]
    unrun = [v4.new_code_cell("x = 1", outputs=[from_dict(not_run_output(Run(outcome="timeout")))])
             for _ in range(3)]
    nb = v4.new_notebook(cells=[first, second, *later, *unrun])
    say_once(nb)
    page = "\n".join(_stream(c) + str([o.get("traceback") for o in c.outputs])
                     for c in nb.cells)
    assert page.count(PARAGRAPH) == 1
    # What was measured of each exercise is said under each: only advice goes across cells.
    assert EXAMPLE_ONLY in _stream(first) and EXAMPLE_ONLY in _stream(second)
    assert page.count("this part of the lesson comes after its last") == 1
    assert [_stream(c) for c in later[1:]] == [NOT_GRADED_AGAIN] * 4
    assert page.count("This cell was not run") == 1 and page.count("not run either") == 2


def test_the_note_on_withheld_checks_is_said_once():
    cells = [_test_cell(f"01-ex{n}", [Check(f"01-ex{n}", "example", "the example", True, True),
                                      _failing("hidden")]) for n in (1, 2, 3)]
    for cell in cells:
        withhold_hidden_checks(cell)
    say_once(v4.new_notebook(cells=cells))
    texts = [_stream(c) for c in cells]
    assert WITHHELD_NOTE in texts[0] and not any(WITHHELD_NOTE in t for t in texts[1:])
    assert all(t.startswith(f"Exercise {n}: 1 of 1 visible examples passed.")
               for n, t in zip((1, 2, 3), texts))


# --------------------------------------------------------------------------------------------
# Results the check cannot read

from autograder.trusted.outcomes import outcome_problems, read_outcome  # noqa: E402
from coursekit.scenarios import ObservationError, Scenario, encode  # noqa: E402


def _unreadable(value: object, visible: bool) -> str:
    try:
        encode({"y": value})
    except ObservationError as err:
        reason = str(err)
    scenario = Scenario("01-ex1", "s", lambda answer, rng: {}, ("f",), visible=visible)
    reference = read_outcome({"observations": {"y": encode(__import__("torch").ones(2, 3)),
                                               "calls": 2}})
    (text,) = outcome_problems(scenario, reference, read_outcome({"unreportable": reason}))
    return text


@pytest.mark.parametrize("value, words", [
    ({1.0, 2.0}, "a set"), ((x for x in range(2)), "a generator"),
    (len, "a built-in function (not called?)"), (__import__("numpy").ones(3), "a NumPy array"),
    (__import__("torch").nn.Linear(2, 2), "a torch.nn.Linear"),
    (type("Mine", (), {})(), "a value of a class of its own"),
    (__import__("torch").ones(2, dtype=__import__("torch").complex64),
     "a complex or sparse tensor")])
def test_what_came_back_and_what_was_expected(value, words):
    hidden = _unreadable(value, visible=False)
    assert hidden == (f"the answer gave {words}, which the check cannot read (it reads tensors, "
                      "numbers, strings, bools, None, and lists, tuples and dicts of them); "
                      "expected y: a float32 tensor; calls: an int"), hidden
    visible = _unreadable(value, visible=True)
    assert visible.endswith("expected y: a float32 tensor, tensor[1, 1, 1, 1, 1, 1] shape "
                            "[2, 3]; calls: an int, 2"), visible
    assert "Mine" not in hidden + visible and "could not be reported" not in hidden + visible


# --------------------------------------------------------------------------------------------
# No internal keys

from autograder.trusted.relations import relate  # noqa: E402


def test_a_list_item_is_named_in_words_not_by_an_index():
    said = differences([1, 2, 5], [1, 2, 4], 0, 0, "count_hooks(n) for three counts n", False)
    assert said == ["the 3rd item of count_hooks(n) for three counts n: the value differs"]
    nested = differences([[1, 2]] * 12, [[1, 2]] * 11 + [[1, 3]], 0, 0, "pairs", False)
    assert nested == ["the 2nd item of the 12th item of pairs: the value differs"]
    fact, _ = relate([_tensor([1.0, 2.0], (2,)), _tensor([3.0, 4.0], (2,))],
                     [_tensor([2.0, 4.0], (2,)), _tensor([3.0, 4.0], (2,))], 1e-5, 1e-6,
                     "x.grad after each call", False)
    assert fact.startswith("the 1st item of x.grad after each call is twice"), fact
    assert not re.search(r"\[\d+\]", " ".join(said + nested) + fact)


def test_an_error_that_repeats_a_long_mistake_points_above_too():
    mistake = "The hook keeps state between calls: " + "it appends to a list made once. " * 12
    cell = _test_cell("01-ex1", [_failing("draw 1", mistake=mistake)])
    (error,) = [o for o in cell.outputs if o.output_type == "error"]
    assert error.evalue.endswith("...")  # the verdict cut it to one line of 300 characters
    say_once(v4.new_notebook(cells=[cell]))
    assert error.evalue == "not right yet: see the first ✗ above"
    assert _stream(cell).count("it appends to a list made once.") == 12


def test_words_a_student_printed_change_nothing_the_grader_says():
    """A student's cell that prints a verdict's hint or the grader's note is no verdict: the
    grader's own lines below it are said in full."""
    printed = v4.new_code_cell("print(...)", outputs=[from_dict({
        "output_type": "stream", "name": "stdout",
        "text": f"Exercise 1: 0 of 1 checks passed (forged)\n✗ hidden check: x\n    hint: "
                f"{PARAGRAPH}\n"}), from_dict(not_graded_output())])
    real = _test_cell("01-ex1", [_failing("draw 1")])
    later = v4.new_code_cell("plot()", outputs=[from_dict(not_graded_output())])
    say_once(v4.new_notebook(cells=[printed, real, later]))
    assert PARAGRAPH in _stream(real) and _stream(later) == not_graded_output()["text"]
