"""What a trusted verdict tells the student never quotes text the sandbox's report chose.

The answer under test runs beside the scenario module (hidden scenarios included), so a hostile
answer can read that source and try to carry it out through anything the feedback echoes. These
unit tests feed `autograder.trusted.verdicts` reports carrying such text in every place a report can
hold text, and check that none of it reaches the check's messages, while an honest mistake is
still described usefully.
"""

from __future__ import annotations

import pytest

from autograder.trusted.outcomes import differences, outcome_problems, read_outcome
from coursekit.scenarios import Scenario, encode

pytestmark = pytest.mark.fast

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
    """An exception's message is quoted, but none of the scenario module's code in it (this
    file, here, whose text holds SECRET)."""
    text = _problems(report, visible)
    assert text, "the hostile report was taken as a match"
    for piece in ("random_points", "randn") + (() if report.get("message") else ("LEAK",)):
        assert piece not in text, text


@pytest.mark.parametrize("message", [
    "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 0 "
    + SECRET,
    "zeros_like(): argument 'input' (position 1) must be Tensor, not NoneType" + SECRET,
    "random_points(): argument 'input' (position 1) must be Tensor, not NoneType",
    "expected Variable, but hook returned 'random_points'",
    "Trying to backward through the graph a second time. LEAK " + SECRET])
def test_text_shaped_like_torch_s_messages_carries_nothing_more(message):
    """A visible check quotes a message only when it is one of torch's or Python's, whose
    variable parts are small numbers and type names; text around it, or a name the answer
    chose where torch puts a function's or a type's, is not quoted."""
    text = _problems({"raised": "RuntimeError", "message": message}, visible=True)
    for piece in ("random_points", "randn", "LEAK"):
        assert piece not in text, text


def test_an_honest_failure_is_still_described():
    hidden = _problems({"raised": "TypeError", "message": "bad operand"}, visible=False)
    assert hidden == "your code raised TypeError: “bad operand”", hidden
    visible = _problems({"raised": "ZeroDivisionError", "message": "division by zero"},
                        visible=True)
    assert visible == "your code raised ZeroDivisionError: division by zero", visible
    own = _problems({"raised": "ValueError", "message": "my own words"}, visible=True)
    # Not quoted: the scenario's source (this file) holds these words (tests/test_raised_words.py)
    assert own == "your code raised ValueError", own
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
    assert extra == "the check reported 2 entries that the reference's run does not report", \
        extra
    # beside a difference already named, an extra entry (a scenario's flag reported only for
    # failing answers) is not counted again (blind round: "1 observation not expected")
    extra = _problems({"observations": {
        "x.grad": T(6.0, 24.0), "label": "ok", "more": 1}}, visible=False)
    assert "not report" not in extra and "not expected" not in extra, extra


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
    from autograder.trusted.outcomes import ReportError
    with pytest.raises(ReportError):
        read_outcome({"observations": {"x.grad": {"__tensor__": {
            "dtype": ["float32"], "shape": [1], "data": [1.0]}}}})


def test_found_values_are_quoted_to_six_digits():
    text = _problems({"observations": {"x.grad": T(3.14159265358979, 12.0), "label": "ok"}},
                     visible=True)
    assert "found tensor[3.14159, 12]" in text and "3.1415926" not in text, text


def test_an_integer_too_large_for_a_float_is_a_malformed_report():
    from autograder.trusted.outcomes import ReportError
    with pytest.raises(ReportError):
        read_outcome({"observations": {"x.grad": {"__tensor__": {
            "dtype": "int64", "shape": [1], "data": [10 ** 400]}}}})


# --------------------------------------------------------------------------------------------
# What a failing check says when no known mistake matched: the measured relation

from autograder.trusted.outcomes import Outcome, ScenarioRun  # noqa: E402
from autograder.trusted.relations import relate  # noqa: E402
from autograder.trusted.verdicts import judge, judge_exercise  # noqa: E402
from coursekit.scenarios import Mistake  # noqa: E402


def _t(shape: list[int], data: list, dtype: str = "float32"):
    return read_outcome({"observations": {"v": {"__tensor__": {
        "dtype": dtype, "shape": shape, "data": data}}}}).observations["v"]


def _fact(expected, found, visible: bool = False) -> str:
    relation = relate(expected, found, 1e-5, 1e-6, "x.grad", visible)
    assert relation is not None, "no relation found"
    return relation[0]


E = _t([4], [1.0, -2.0, 3.5, 0.25])


@pytest.mark.parametrize("factor,words", [
    (2.0, "twice the expected values (×2)"), (3.0, "three times the expected values (×3)"),
    (5.0, "5 times the expected values (×5)"), (0.5, "half the expected values (×1/2)"),
    (0.25, "1/4 of the expected values (×1/4)"),
    (-1.0, "sign flipped"), (-2.0, "twice the expected values, with the sign flipped (×-2)")])
def test_a_constant_factor_is_named(factor, words):
    assert words in _fact(E, _t([4], [factor * x for x in E.data]))


def test_a_factor_that_is_no_small_whole_number_is_not_quoted_on_a_hidden_check():
    found = _t([4], [1.37 * x for x in E.data])
    assert _fact(E, found) == "x.grad is the expected values times one constant factor"
    assert "1.37" in _fact(E, found, visible=True)
    many = _t([4], [40.0 * x for x in E.data])  # a whole factor past 10: a number, not quoted
    assert "40" not in _fact(E, many) and "40" in _fact(E, many, visible=True)


def test_an_additive_constant_is_named_without_its_value_on_a_hidden_check():
    found = _t([4], [x + 0.75 for x in E.data])
    assert _fact(E, found) == "x.grad is the expected values shifted by one constant"
    assert "(+0.75)" in _fact(E, found, visible=True)
    counts = _t([3], [3, 5, 1], "int64")
    assert _fact(counts, _t([3], [4, 6, 2], "int64")) == "x.grad is one more than expected"


def test_transposed():
    expected = _t([2, 3], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert "transposed" in _fact(expected, _t([3, 2], [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]))
    square = _t([2, 2], [1.0, 2.0, 3.0, 4.0])
    assert "transposed" in _fact(square, _t([2, 2], [1.0, 3.0, 2.0, 4.0]))


def test_reversed_shifted_and_permuted():
    assert "reverse order" in _fact(E, _t([4], list(reversed(E.data))))
    rolled = _t([4], [9.0] + E.data[:3])
    assert "shifted by one position" in _fact(E, rolled)
    permuted = _t([4], [E.data[1], E.data[0], E.data[3], E.data[2]])
    assert "the right values in another order" in _fact(E, permuted)


def test_zeros_none_and_nan():
    assert _fact(E, _t([4], [0.0] * 4)) == "x.grad is all zeros"
    assert _fact(E, None) == "x.grad is None where a float32 tensor was expected"
    assert _fact(E, _t([4], [1.0, {"__float__": "nan"}, 3.5, 0.25])) == "x.grad holds NaN"
    mask = _t([4], [0.0, -2.0, 0.0, 0.25])  # zero where it should not be
    assert "zero in some entries that should not be" in _fact(E, mask)
    frozen = _t([3], [0.0, 2.0, 0.0])  # the mask the wrong way round
    assert "zero where the expected values are not" in _fact(frozen, _t([3], [1.0, 0.0, 3.0]))


def test_detached():
    assert "detached" in relate(True, False, 0, 0, "y.requires_grad", False)[0]
    detached = read_outcome({"raised": "RuntimeError", "message": "element 0 of tensors does "
                             "not require grad and does not have a grad_fn"})
    check = judge_exercise([ScenarioRun(_scenario(False), _reference(), detached)])[0]
    assert any("no grad_fn" in r for r in check.relations), check.relations


def test_dtype_broadcast_shape_and_a_list_for_a_dict():
    assert _fact(E, _t([4], E.data, "float64")) == \
        "x.grad has the right values as float64, float32 was expected"
    ints = _t([2], [1, 2], "int64")
    assert "as float32, int64 was expected" in _fact(ints, _t([2], [1.0, 2.0]))
    column = _t([3], [1.0, 2.0, 3.0])
    assert "broadcasting" in _fact(column, _t([3, 3], [1.0] * 9))
    assert "size 1 added or missing" in _fact(column, _t([3, 1], [1.0, 2.0, 3.0]))
    assert "a list of the right values where a dict" in _fact({"a": 1.0, "b": 2.0}, [1.0, 2.0])


def test_the_first_call_right_and_a_later_one_wrong():
    assert "first item is right, a later one is not" in _fact([3, 3], [3, 4])
    per_pass = [_t([2], [1.0, 2.0]), _t([2], [1.0, 2.0])]
    running = [_t([2], [1.0, 2.0]), _t([2], [2.0, 4.0])]
    assert "accumulated" in _fact(per_pass, running)
    assert "more items before the expected ones" in _fact([3, 1], [2, 3, 1])
    assert "then more after them" in _fact([3], [3, 2])


def _run(visible: bool, expected: float, found: float, name: str = "random_points",
         mistakes=()) -> ScenarioRun:
    scenario = Scenario(exercise="01-ex1", name=name, func=lambda answer, rng: {},
                        uses=("f",), visible=visible)
    return ScenarioRun(scenario, read_outcome({"observations": {"y": expected}}),
                       read_outcome({"observations": {"y": found}}), list(mistakes))


def test_right_on_the_visible_example_and_wrong_elsewhere():
    checks = judge_exercise([_run(True, 2.0, 2.0, "example"), _run(False, 5.0, 7.3)])
    assert checks[0].passed and not checks[1].passed
    assert "right on the test cell's example, wrong on these inputs" in checks[1].relations
    # Returning the visible example's value whatever the inputs is said as such.
    checks = judge_exercise([_run(True, 2.0, 2.0, "example"), _run(False, 5.0, 2.0)])
    assert "y is the test cell example's value, whatever the inputs" in checks[1].relations


def _mistake(message: str = "the known mistake") -> Mistake:
    return Mistake("01-ex1", message, lambda: None, "f")


def _o(value: float) -> Outcome:
    return read_outcome({"observations": {"y": value}})


def test_a_mistake_matched_on_every_scenario_where_it_differs_is_named():
    wrong = _mistake()
    runs = [_run(True, 2.0, 4.0, "example", [(wrong, _o(4.0))]),
            _run(False, 5.0, 10.0, "a", [(wrong, _o(10.0))]),
            _run(False, 0.0, 0.0, "b", [(wrong, _o(0.0))])]  # the mistake is right here
    checks = judge_exercise(runs)
    assert [c.mistake for c in checks] == ["the known mistake", "the known mistake", None]
    assert not checks[0].relations  # a named mistake is said alone


def test_a_mistake_matched_on_one_scenario_but_not_another_is_not_named():
    wrong = _mistake()
    runs = [_run(True, 2.0, 4.0, "example", [(wrong, _o(4.0))]),   # matches here
            _run(False, 5.0, 15.0, "a", [(wrong, _o(10.0))])]      # not here
    checks = judge_exercise(runs)
    assert [c.mistake for c in checks] == [None, None]
    assert "twice" in checks[0].relations[0] and "three times" in checks[1].relations[0]


def test_a_mistake_that_raised_is_not_named_on_a_coincidence_of_types():
    wrong = _mistake()
    raised = read_outcome({"raised": "TypeError", "message": ""})
    runs = [ScenarioRun(_scenario(True), _reference(), raised, [(wrong, raised)]),
            _run(False, 5.0, 6.0, "a", [(wrong, read_outcome({"raised": "TypeError"}))])]
    checks = judge_exercise(runs)
    assert [c.mistake for c in checks] == [None, None]


def test_a_mistake_without_an_outcome_on_some_scenario_is_not_named():
    wrong = _mistake()
    runs = [_run(True, 2.0, 4.0, "example", [(wrong, _o(4.0))]),
            _run(False, 5.0, 10.0, "a", [(wrong, None)])]
    assert [c.mistake for c in judge_exercise(runs)] == [None, None]


def test_a_mistake_not_applicable_to_a_scenario_is_judged_on_the_others():
    wrong = _mistake()
    runs = [_run(True, 2.0, 4.0, "example", [(wrong, _o(4.0))]),
            _run(False, 5.0, 7.0, "a", [(wrong, read_outcome({"raised": "NotApplicable"}))])]
    assert [c.mistake for c in judge_exercise(runs)] == ["the known mistake", None]


# --------------------------------------------------------------------------------------------
# What the student's code raised

def test_the_message_and_line_are_shown_on_a_visible_check_only():
    report = {"raised": "RuntimeError", "line": 4, "cell": 7,
              "message": "Subtraction, the `-` operator, with a bool tensor is not supported. "
                         "If you are trying to invert a mask, use the `~` or `logical_not()` "
                         "operator instead.\n(more lines)"}
    visible = _problems(report, visible=True)
    assert visible == ("your code raised RuntimeError: Subtraction, the `-` operator, with a "
                       "bool tensor is not supported. If you are trying to invert a mask, use "
                       "the `~` or `logical_not()` operator instead. (line 4 of your cell "
                       "In [7])"), visible
    hidden = _problems(report, visible=False)
    assert hidden == "your code raised RuntimeError (line 4 of your cell In [7])", hidden
    shapes = {"raised": "RuntimeError", "message": "mat1 and mat2 shapes cannot be multiplied "
                                                   "(2x3 and 2x3)"}
    assert _problems(shapes, visible=True).endswith("cannot be multiplied (2x3 and 2x3)")
    assert "2x3" not in _problems(shapes, visible=False)


def test_the_message_is_quoted_once_per_exercise():
    raised = read_outcome({"raised": "IndexError", "message": "list index out of range"})
    first = ScenarioRun(_scenario(True), _reference(), raised)
    second = ScenarioRun(Scenario("01-ex1", "again", lambda answer, rng: {}, ("cube_grad",),
                                  visible=True), _reference(), raised)
    checks = judge_exercise([first, second])
    assert checks[0].problems[0] == "your code raised IndexError: list index out of range"
    assert checks[1].problems[0] == "your code raised IndexError"


@pytest.mark.parametrize("line", [0, -3, 10 ** 6, True, "4", 2.5])
def test_a_line_number_that_is_not_a_small_number_is_dropped(line):
    outcome = read_outcome({"raised": "TypeError", "message": "", "line": line, "cell": line})
    assert outcome.line is None and outcome.cell is None


def test_a_list_of_counts_that_are_all_zero():
    assert _fact([3, 3], [0, 0]) == "x.grad holds only zeros"


def test_items_that_are_all_the_same_where_the_expected_ones_differ():
    assert "every item is the same" in _fact([_t([2], [1.0, 0.0]), _t([2], [0.0, 1.0])],
                                             [_t([2], [5.0, 5.0]), _t([2], [5.0, 5.0])])


def test_a_dict_whose_entries_are_all_the_same():
    assert "every entry is the same" in _fact({"a": 1, "b": 2, "c": 0}, {"a": 1, "b": 1, "c": 1})


def test_a_dict_of_counts_that_stayed_zero_is_said_so():
    """07-ex2 of a blind review: the counts a caller held stayed 0, and the page said only
    that every entry was the same; that they are all 0 is what was measured."""
    fact = _fact({"received": 3800, "stored": 2600}, {"received": 0, "stored": 0})
    assert fact == "x.grad holds only zeros", fact


def test_a_factor_of_one_number_comes_without_a_hint():
    assert relate(2, 1, 0, 0, "counts['act']", False) == \
        ("counts['act'] is half the expected value (×1/2)", None)


def test_the_sandbox_reports_the_line_of_the_student_s_cell():
    """run_one (in the sandbox) reports where in a notebook cell the answer raised: IPython
    names a cell's code <ipython-input-N-...>, N its execution count."""
    from autograder.sandbox.observe import run_one

    namespace: dict = {}
    exec(compile("def answer(x):\n    y = x + 1\n    return y / 0\n",  # noqa: S102
                 "<ipython-input-7-0123abcd>", "exec"), namespace)

    def scenario(answer, rng):
        return {"y": answer(1.0)}

    report = run_one(scenario, ("answer",), namespace, seed=1)
    assert report["raised"] == "ZeroDivisionError"
    assert (report["line"], report["cell"]) == (3, 7)
    outcome = read_outcome(report)
    assert outcome_problems(_scenario(True), _reference(), outcome) == [
        "your code raised ZeroDivisionError: float division by zero (line 3 of your cell In [7])"]


# --------------------------------------------------------------------------------------------
# A scenario that calls the answer in two orders (A, B, B again, A again on fresh inputs)

def _orders(expected: tuple[float, float], found: list[float], what: str = "y") -> ScenarioRun:
    """A hidden scenario of two orders: the reference gives `expected` (A's and B's result) in
    both orders, the answer `found` (calls 1 to 4)."""
    calls = ("call 1 (A)", "call 2 (B)", "call 3 (B again)", "call 4 (A again)")
    a, b = expected
    scenario = Scenario(exercise="01-ex1", name="two_orders", func=lambda answer, rng: {},
                        uses=("f",), visible=False)
    return ScenarioRun(scenario,
                       read_outcome({"observations": {f"{what}, {c}": v for c, v in
                                                      zip(calls, (a, b, b, a))}}),
                       read_outcome({"observations": {f"{what}, {c}": v for c, v in
                                                      zip(calls, found)}}))


def test_right_on_the_first_call_only_is_said_when_measured():
    checks = judge_exercise([_run(True, 2.0, 2.0, "example"),
                             _orders((5.0, 7.0), [5.0, 8.0, 9.0, 6.0])])
    relations = checks[1].relations
    assert "y: right on the first call only, wrong on every later call" in relations
    assert not any("right on the test cell's example" in r for r in relations)
    assert any("keep nothing between calls" in h for h in checks[1].hints)


def test_right_on_the_first_call_and_wrong_when_it_comes_again():
    checks = judge_exercise([_orders((5.0, 7.0), [5.0, 7.0, 7.0, 6.0])])
    assert "y: right on the first call, wrong when the same call came again after another one" \
        in checks[0].relations


def test_a_result_that_depends_on_the_order_of_calls():
    checks = judge_exercise([_run(True, 2.0, 2.0, "example"),
                             _orders((5.0, 7.0), [6.0, 8.0, 9.0, 7.5]), _run(False, 3.0, 4.0)])
    assert any("the result depends on the order of calls" in r for r in checks[1].relations)
    assert not any("first call" in r for r in checks[1].relations)
    # Where state is measured, the other hidden checks say the example ran first, without
    # guessing at a hard-coded answer.
    assert "right on the test cell's example, which runs first, and wrong on these later " \
        "calls" in checks[2].relations
    assert not any("hard-coded" in h for h in checks[2].hints)


def test_the_same_wrong_result_in_both_orders_is_no_order_relation():
    """A wrong answer without state (the same result for the same call) is not said to depend
    on the order of calls."""
    checks = judge_exercise([_run(True, 2.0, 2.0, "example"),
                             _orders((5.0, 7.0), [2.0, 2.0, 2.0, 2.0])])
    relations = checks[1].relations
    assert not any("order of calls" in r or "first call" in r for r in relations)
    assert "right on the test cell's example, wrong on these inputs" in relations


def test_two_counts_that_agree_are_not_said_to_be_in_the_wrong_place():
    """04-ex3: reverse passes where forward-mode passes were expected is no value stored in the
    wrong place; a tensor of several values in another observation's place is."""
    scenario = Scenario(exercise="04-ex3", name="columns", func=lambda answer, rng: {},
                        uses=("f",), visible=False)
    reference = read_outcome({"observations": {"forward-mode passes": 2, "reverse passes": 0}})
    student = read_outcome({"observations": {"forward-mode passes": 0, "reverse passes": 2}})
    (check,) = judge_exercise([ScenarioRun(scenario, reference, student)])
    assert not any("should be" in r for r in check.relations)
    assert not any("wrong place" in h for h in check.hints)
    tensors = {"h.grad": T(1.0, -5.0), "x.grad": T(3.0, 4.0)}
    reference = read_outcome({"observations": tensors})
    student = read_outcome({"observations": {"h.grad": T(3.0, 4.0), "x.grad": T(3.0, 4.0)}})
    (check,) = judge_exercise([ScenarioRun(scenario, reference, student)])
    assert "h.grad holds what x.grad should be" in check.relations


def test_a_rule_the_example_never_measures_is_not_said_to_fit_the_example():
    """A hidden check that fails only on what the visible example does not measure (here a
    flag) says nothing of an answer fitted to the example: its values were right."""
    def run(visible: bool, expected: dict, found: dict, name: str) -> ScenarioRun:
        scenario = Scenario(exercise="01-ex1", name=name, func=lambda answer, rng: {},
                            uses=("f",), visible=visible)
        return ScenarioRun(scenario, read_outcome({"observations": expected}),
                           read_outcome({"observations": found}))

    example = run(True, {"y": 2.0}, {"y": 2.0}, "example")
    rule = run(False, {"y": 5.0, "retains_grad": True}, {"y": 5.0, "retains_grad": False},
               "every_step")
    checks = judge_exercise([example, rule])
    assert not checks[1].passed
    assert not any("test cell's example" in r for r in checks[1].relations)
    assert not any("special-cased" in h for h in checks[1].hints)
    values = run(False, {"y": 5.0, "retains_grad": True}, {"y": 7.0, "retains_grad": True},
                 "every_step")
    checks = judge_exercise([example, values])
    assert "right on the test cell's example, wrong on these inputs" in checks[1].relations


# --------------------------------------------------------------------------------------------
# A cause is named only when the evidence decides it

def test_a_count_one_off_names_no_cause():
    """0 backward calls against 1, or a symmetric clamp's count one more: the count is said,
    not "off by one" (which names a cause the count cannot tell)."""
    fact, hint = relate(1, 2, 0, 0, "backward() calls", False)
    assert fact == "backward() calls is twice the expected value (×2)" and hint is None
    fact, hint = relate(0, 1, 0, 0, "backward() calls", False)
    assert "off by one" not in fact and hint is None
    fact, hint = relate([3], [4], 0, 0, "calls", False)
    assert "off by one" not in fact and hint is None


def test_expected_zeros_are_no_mask():
    """Every expected value zero: the grader says how many entries are not, and guesses no mask
    "not applied everywhere"."""
    zeros = _t([4], [0.0, 0.0, 0.0, 0.0])
    fact, hint = relate(zeros, _t([4], [0.0, 1.5, 0.0, -2.0]), 1e-5, 1e-6, "x.grad", False)
    assert fact == "x.grad should be all zeros; 2 of its 4 entries are not" and hint is None


@pytest.mark.parametrize("expected,found", [
    ([1.0, 2.0], [1.0, 2.0, 3.0]),                     # more items after
    ([1.0, 2.0], [0.5, 1.0, 2.0]),                     # more items before
    ([_t([2], [1.0, 0.0]), _t([2], [0.0, 1.0])],
     [_t([2], [5.0, 5.0]), _t([2], [5.0, 5.0])]),      # every item the same
    ({"a": 1, "b": 2, "c": 0}, {"a": 1, "b": 1, "c": 1}),  # every entry the same
    ({"a": 1}, {"a": 1, "b": 2}),                      # more entries
    (_t([3], [1.0, 2.0, 3.0]), _t([3, 3], [1.0] * 9)),  # broadcast
    (_t([3, 3], [1.0] * 9), _t([3], [1.0, 2.0, 3.0])),  # smaller
])
def test_a_relation_that_cannot_tell_its_cause_guesses_none(expected, found):
    """Too many items is not "state kept between calls", every item the same is not "the
    result ignores the argument", a smaller tensor is not "a dimension summed away": nothing
    the values show decides the cause, so no hint goes with the fact."""
    fact, hint = relate(expected, found, 1e-5, 1e-6, "x.grad", False)
    assert fact and hint is None, (fact, hint)


def test_no_hint_asks_whether_the_answer_is_hard_coded():
    checks = judge_exercise([_run(True, 2.0, 2.0, "example"), _run(False, 5.0, 2.0)])
    assert "y is the test cell example's value, whatever the inputs" in checks[1].relations
    assert not any("hard-coded" in h for h in checks[1].hints), checks[1].hints
    checks = judge_exercise([_run(True, 2.0, 2.0, "example"), _run(False, 5.0, 7.3)])
    assert not any("hard-coded" in h or "special-cased" in h for h in checks[1].hints)


def test_every_phrase_has_its_evidence_and_every_sentence_said_is_one():
    from autograder.trusted.phrases import PHRASES, is_phrase, say

    assert all(p.text and p.evidence for p in PHRASES.values())
    assert is_phrase(say("times", name="y", word="twice", values="values", sign="", n=2)[0])
    assert is_phrase("backward() met a tensor with no grad_fn: no tensor that requires grad "
                     "led to it")
    assert not is_phrase("is the result hard-coded?")
    assert not is_phrase("x.grad is one more than expected (off by one)")


# --------------------------------------------------------------------------------------------
# Tolerances fitted to the dtype and to the magnitudes involved

def _as_outcome_tensor(t):
    return read_outcome({"observations": {"v": encode(t)}}).observations["v"]


def test_two_correct_orders_of_one_update_agree_and_a_wrong_one_does_not():
    """p - lr * (g + wd * p) against p * (1 - lr * wd) - lr * g in float32: entries that nearly
    cancel differ by rounding of the large terms (about eps × 100 here), which a fixed
    atol=1e-6 rejected; a missing factor lr on the decay term is still told apart."""
    import torch

    gen = torch.Generator().manual_seed(7)
    p, g = torch.randn(4000, generator=gen) * 100, torch.randn(4000, generator=gen) * 100
    lr, wd = 0.3, 0.05
    one = p - lr * (g + wd * p)
    other = p.clone().mul_(1 - lr * wd).sub_(lr * g)
    assert not torch.equal(one, other)  # they do round differently
    expected, found = _as_outcome_tensor(one), _as_outcome_tensor(other)
    assert differences(expected, found, 1e-5, 1e-6, "p", True) == []
    wrong = _as_outcome_tensor(p - lr * g - wd * p)
    assert differences(expected, wrong, 1e-5, 1e-6, "p", True)


def test_the_tolerance_grows_with_the_scale_of_the_values_not_past_it():
    from coursekit.tolerance import fitted

    assert fitted("float32", [0.5, -1.0], 1e-5, 1e-6) == (1e-5, 64 * 2.0 ** -23)
    rtol, atol = fitted("float32", [1000.0, 0.001], 1e-5, 1e-6)
    assert atol == 64 * 2.0 ** -23 * 1000.0 and rtol == 1e-5
    assert fitted("int64", [5], 0.0, 0.0) == (0.0, 0.0)
    assert fitted("float64", [1.0], 1e-5, 1e-6) == (1e-5, 1e-6)  # the check's own are larger


def test_results_that_cannot_be_read_say_what_was_expected():
    """The words "its results could not be reported" become what the check expected."""
    unreadable = read_outcome({"unreportable": "an observation of type Foo cannot be reported"})
    reference = read_outcome({"observations": {"h.grad": encode(__import__("torch").ones(2)),
                                               "calls": 1}})
    (text,) = outcome_problems(_scenario(False), reference, unreadable)
    assert "could not be reported" not in text
    assert text.endswith("expected h.grad: a float32 tensor; calls: an int"), text
    assert "Foo" not in text  # the answer's own text is never quoted


def test_a_long_tensor_says_how_many_entries_differ_and_where_the_largest_is():
    """4435 parameters printed the same first 8 values as expected and found."""
    import torch

    expected = torch.arange(300, dtype=torch.float32).reshape(20, 15) / 7
    found = expected.clone()
    found[3, 4] += 0.5
    found[12, 1] -= 2.0
    e, f = _as_outcome_tensor(expected), _as_outcome_tensor(found)
    (visible,) = differences(e, f, 1e-5, 1e-6, "w", True)
    assert visible.startswith("w: 2 of 300 entries differ; the largest difference is at "
                              "[12, 1]: expected 25.8571, found 23.8571"), visible
    assert differences(e, f, 1e-5, 1e-6, "w", False) == [
        "w: 2 of 300 entries differ; the largest difference is at [12, 1], about 5% of the "
        "largest expected value in size"]  # no value of a hidden check is quoted


def test_an_entry_named_in_words_is_not_shown_as_an_internal_key():
    """A name like "a 300-element float32 tensor['stored dtype']" reads as code nobody wrote."""
    expected = {"stored dtype": "torch.float16", "grads": {"pre": 1.0}}
    found = {"stored dtype": "torch.float32", "grads": {"pre": 2.0}}
    said = differences(expected, found, 1e-5, 1e-6, "the packed tensor", True)
    assert said[0].startswith("the packed tensor: stored dtype: expected"), said
    assert said[1].startswith("the packed tensor: grads['pre']: expected"), said


INF = {"__float__": "inf"}


@pytest.mark.parametrize("expected, found", [
    (2.0, INF), (2.0, {"__float__": "-inf"}), (1, INF), (1e-300, 1e300), (5e-324, 1.0),
    (1.0, 5e-324), ({"a": 1.0}, {"a": INF}), ([1.0, 2.0], [INF, 2.0]),
    (T(1.0, 2.0), {"__tensor__": {"dtype": "float64", "shape": [2], "data": [5e-324, 1e-323]}}),
    ({"__tensor__": {"dtype": "float64", "shape": [2], "data": [1e-300, 2e-300]}},
     {"__tensor__": {"dtype": "float64", "shape": [2], "data": [1e300, 2e300]}})])
def test_a_value_past_floats_range_is_judged_not_a_grader_error(expected, found):
    """An answer's number may be infinite (a loss that overflowed) or so far from the expected
    one that their ratio is: the check fails and says what it can, where relating the two
    raised OverflowError (round(inf)) or ZeroDivisionError, and the whole notebook was graded
    "error" (lesson 07 reports plain floats)."""
    reference = read_outcome({"observations": {"value": expected}})
    for visible in (True, False):
        scenario = _scenario(visible)
        check = judge_exercise([ScenarioRun(scenario, reference,
                                            read_outcome({"observations": {"value": found}}))])[0]
        assert not check.passed and check.problems


def test_a_frozen_parameter_is_not_said_to_be_detached():
    """A parameter's requires_grad False (frozen) is no result cut from the graph."""
    fact, hint = relate(True, False, 0, 0, "requires_grad of each parameter['body.0.weight']",
                        False)
    assert "detached" not in fact and fact.endswith("is False, not True") and hint is None
    assert "detached" in relate(True, False, 0, 0, "y.requires_grad", False)[0]


# --------------------------------------------------------------------------------------------
# What the test cell said, found again from the visible scenario's observations (the page says at
# least what the cell said)

def _cell_scenario(*checks) -> Scenario:
    from coursekit.scenarios import cell_checks
    scenario = _scenario(True)
    scenario.cell = cell_checks("01-ex1", *checks)
    return scenario


def test_the_first_failing_check_of_the_cell_says_its_message():
    from autograder.trusted.said import cell_says
    from coursekit.scenarios import expect_equal, expect_tensor, expect_true
    scenario = _cell_scenario(
        expect_true(lambda seen: seen["label"] == "ok", "the label is wrong"),
        expect_tensor("x.grad", mistakes={"x.grad is halved: use .sum()": [1.5, 6.0]},
                      hint="x.grad = 3 x**2"),
        expect_equal("label", hint="never reached"))
    halved = read_outcome({"observations": {"x.grad": T(1.5, 6.0), "label": "ok"}})
    assert cell_says(scenario, _reference(), halved) == "x.grad is halved: use .sum()"
    other = read_outcome({"observations": {"x.grad": T(1.0, 1.0), "label": "ok"}})
    assert cell_says(scenario, _reference(), other) == "x.grad = 3 x**2"
    both = read_outcome({"observations": {"x.grad": T(1.0, 1.0), "label": "no"}})
    assert cell_says(scenario, _reference(), both) == "the label is wrong"
    assert cell_says(scenario, _reference(), _reference()) is None
    check = judge(scenario, _reference(), halved)
    assert check.said == "x.grad is halved: use .sum()"


def test_a_cell_mistake_made_from_the_references_observations_is_named():
    """A test cell that computes a mistake's value from its example (twice the expected
    gradient) declares it as a function of the reference's observations."""
    from autograder.trusted.said import cell_says
    from coursekit.scenarios import expect_tensor
    scenario = _cell_scenario(expect_tensor("x.grad", mistakes={
        "x.grad is doubled: backward ran twice": lambda seen: 2 * seen["x.grad"]}))
    doubled = read_outcome({"observations": {"x.grad": T(6.0, 24.0), "label": "ok"}})
    assert cell_says(scenario, _reference(), doubled) == "x.grad is doubled: backward ran twice"
    other = read_outcome({"observations": {"x.grad": T(1.0, 24.0), "label": "ok"}})
    assert cell_says(scenario, _reference(), other) is None


def test_the_cell_says_nothing_where_its_check_cannot_read_the_report():
    from autograder.trusted.said import cell_says
    from coursekit.scenarios import expect_true
    scenario = _cell_scenario(expect_true(lambda seen: seen["x.grad"].sum() > 100, "too small"))
    for report in ({"observations": {"x.grad": "a string", "label": "ok"}},
                   {"observations": {"label": "ok"}},
                   {"raised": "TypeError", "message": "boom"}):
        assert cell_says(scenario, _reference(), read_outcome(report)) is None


@pytest.mark.parametrize("dtype, value", [("int64", {"__float__": "nan"}), ("int8", 100000),
                                          ("int32", 2 ** 40)])
def test_a_forged_tensor_the_report_passes_leaves_the_cell_silent_not_the_grader_broken(
        dtype, value):
    """A report is the notebook's: it may hold a tensor no torch tensor of its dtype can hold
    (nan among int64s, 100000 as an int8). Validated, it is data; the cell's checks cannot read
    it, so the cell says nothing, and the verdict is still given (it raised RuntimeError, and
    the submission was graded "error", flagged for the instructor, before)."""
    from autograder.trusted.said import cell_says
    from coursekit.scenarios import expect_tensor
    scenario = _cell_scenario(expect_tensor("x.grad", hint="x.grad = 3 x**2"))
    forged = read_outcome({"observations": {
        "x.grad": T(1.0, 1.0), "label": "ok",
        "extra": {"__tensor__": {"dtype": dtype, "shape": [1], "data": [value]}}}})
    assert cell_says(scenario, _reference(), forged) is None
    check = judge(scenario, _reference(), forged)
    assert not check.passed and check.said is None and check.problems


def test_a_cell_message_never_quotes_a_string_the_answer_reported():
    from autograder.trusted.said import cell_says
    from coursekit.scenarios import expect_true
    scenario = _cell_scenario(expect_true(lambda seen: seen["label"] == "ok",
                                          lambda seen: f"the label is {seen['label']}"))
    hostile = read_outcome({"observations": {"x.grad": T(3.0, 12.0), "label": "LEAK " + SECRET}})
    assert cell_says(scenario, _reference(), hostile) is None
    plain = read_outcome({"observations": {"x.grad": T(3.0, 12.0), "label": "list"}})
    assert cell_says(scenario, _reference(), plain) == "the label is list"


def test_a_count_equal_to_the_examples_once_is_not_told_as_the_examples_value():
    """A count of products that equalled the example's 3 by chance
    read as "the test cell example's value, whatever the inputs" (as if hard-coded). A count
    or flag is told so only when two hidden runs of different expectations both found it."""
    said = "y is the test cell example's value, whatever the inputs"
    once = judge_exercise([_run(True, 3, 3, "example"), _run(False, 1, 3, "one_row"),
                           _run(False, 4, 4, "several")])
    assert not once[1].passed and said not in once[1].relations, once[1].relations
    twice = judge_exercise([_run(True, 3, 3, "example"), _run(False, 1, 3, "one_row"),
                            _run(False, 4, 3, "several")])
    assert all(said in c.relations for c in twice[1:]), [c.relations for c in twice]
    # a value that is no count keeps the rule it had: once is enough
    floats = judge_exercise([_run(True, 2.5, 2.5, "example"), _run(False, 1.5, 2.5)])
    assert said in floats[1].relations
    # a name (07-ex1 of a blind review: steepest_drop gave the example's layer name once, from
    # norms that were wrong) is one of few too: once is not enough
    names = judge_exercise([_run(True, "fc1", "fc1", "example"), _run(False, "fc2", "fc1"),
                            _run(False, "fc3", "fc3", "several")])
    assert not names[1].passed and said not in names[1].relations, names[1].relations
