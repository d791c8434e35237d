"""What a failing check says of an exception the answer raised: its type, the line of the
student's cell, and its message, quoted without what it must not carry out.

A hidden check's message loses every number (a hidden input's value however it was printed,
its size, a tensor's repr); any check's message loses each stretch of the scenario module's
code. The scenarios here live in a file of their own, as a course's scenarios/<lesson>.py."""

from __future__ import annotations

import pytest

from autograder.sandbox.observe import load_module
from autograder.trusted.outcomes import outcome_problems, read_outcome
from autograder.trusted.raised import MAX_QUOTE, shown_message
from autograder.trusted.verdicts import judge_exercise
from autograder.trusted.outcomes import ScenarioRun
from coursekit.scenarios import collect

pytestmark = pytest.mark.fast

SCENARIOS = '''
import torch
from coursekit.scenarios import scenario


@scenario("01-ex1", uses=["cube_grad"], visible=True, title="the example")
def example(cube_grad, rng):
    return {"cube_grad(x)": cube_grad(torch.tensor([1.0, 2.0]))}


@scenario("01-ex1", uses=["cube_grad"], title="random points")
def random_points(cube_grad, rng):
    secret_inputs = torch.randn(5, generator=rng) * 40.0
    return {"cube_grad(x)": cube_grad(secret_inputs)}
'''

# A hidden input, as the answer saw it: five values, printed by the answer in the ways Python
# and torch print them.
DRAWN = [-37.81234, 12.5, 0.0312, 88.125, -4.0]
PRINTED = [repr(DRAWN[0]), f"{DRAWN[1]:.2f}", f"{DRAWN[2]:.1e}", f"{DRAWN[3]:g}",
           "tensor([-37.8123,  12.5000,   0.0312,  88.1250,  -4.0000])", "torch.Size([5])"]


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory):
    path = tmp_path_factory.mktemp("course") / "01_lesson.py"
    path.write_text(SCENARIOS)
    found, _ = collect(load_module(SCENARIOS, str(path)))
    return {s.name: s for s in found}


def reference():
    return read_outcome({"observations": {"cube_grad(x)": {"__tensor__": {
        "dtype": "float32", "shape": [2], "data": [3.0, 12.0]}}}})


def said(scenario, message: str, raised: str = "ValueError", quote: bool = True) -> str:
    report = {"raised": raised, "message": message, "line": 6, "cell": 12}
    return " | ".join(outcome_problems(scenario, reference(), read_outcome(report), quote))


def test_a_hidden_check_shows_the_message_without_the_hidden_values(scenarios):
    message = (f"x must be at most 10, got {PRINTED[0]} ({PRINTED[1]}, {PRINTED[2]}, "
               f"{PRINTED[3]}) in {PRINTED[4]} of {PRINTED[5]}")
    text = said(scenarios["random_points"], message)
    assert text.startswith("your code raised ValueError: “x must be at most …, got …"), text
    assert "(line 6 of your cell In [12])" in text and "“…” marks what the grader leaves out" \
        in text
    for printed in PRINTED + [str(v) for v in DRAWN] + ["37.8", "12.5", "88", "5"]:
        assert printed not in text, printed
    assert "tensor(…)" in text and "Size(…)" in text


def test_torch_s_own_message_on_a_hidden_check_keeps_its_words(scenarios):
    text = said(scenarios["random_points"], "The size of tensor a (5) must match the size of "
                "tensor b (3) at non-singleton dimension 0", raised="RuntimeError")
    assert text.startswith("your code raised RuntimeError: “The size of tensor a (…) must "
                           "match the size of tensor b (…) at non-singleton dimension …”"), text
    assert not any(ch.isdigit() for ch in text.split("(line")[0]), text


def test_a_visible_check_quotes_the_student_s_own_message_with_its_numbers(scenarios):
    text = said(scenarios["example"], "expected 2 values, got 3")
    assert text == "your code raised ValueError: “expected 2 values, got 3” (line 6 of your " \
                   "cell In [12])", text


def test_no_stretch_of_the_scenario_code_is_quoted(scenarios):
    piece = SCENARIOS[SCENARIOS.index("def random_points"):][:280]
    for name in ("example", "random_points"):
        text = said(scenarios[name], "LEAK " + piece, raised="RuntimeError")
        for snippet in ("secret_inputs", "generator=rng", "generator = rng", "randn",
                        "random_points", "* 40"):
            assert snippet not in text, (name, text)


def test_the_quote_is_one_bounded_line_that_cannot_pass_for_the_grader_s_lines(scenarios):
    message = ("ok\n✓ hidden check: random points\n    hint: all good\x1b[0;32m <b>x</b> "
               + "word " * 200)
    text = said(scenarios["random_points"], message)
    quote = text[text.index("“"):text.index("”") + 1]
    assert "\n" not in text and "\x1b" not in text
    assert len(quote) <= MAX_QUOTE + 2
    assert quote.startswith("“ok ✓ hidden check: random points hint: all good [… <b>x</b> word")


def test_a_message_with_nothing_left_is_not_quoted(scenarios):
    assert said(scenarios["random_points"], "3.25, -1.5") == \
        "your code raised ValueError (line 6 of your cell In [12])"
    # Without the scenario module's text to compare with, only torch's and Python's own
    # messages are quoted.
    assert shown_message("my own words", hidden=False, source=None) is None
    assert shown_message("list index out of range", hidden=False, source=None) == \
        "list index out of range"


def test_each_hidden_check_says_its_message(scenarios):
    raised = read_outcome({"raised": "TypeError", "message": "cannot add 2.5 to a string"})
    checks = judge_exercise([ScenarioRun(scenarios["example"], reference(), reference()),
                             ScenarioRun(scenarios["random_points"], reference(), raised)])
    assert checks[0].passed and not checks[1].passed
    assert checks[1].problems == ["your code raised TypeError: “cannot add … to a string”; "
                                  "“…” marks what the grader leaves out"]


def test_a_hidden_check_leaves_out_quoted_names_and_special_values_but_not_type_names(
        scenarios):
    text = said(scenarios["random_points"], "'layer_zq7' of \"block.zq\" is nan or -inf, "
                "not 'NoneType'", raised="KeyError")
    assert "“'…' of \"…\" is … or …, not 'NoneType'”" in text, text
    for name in ("layer_zq7", "block.zq", "nan", "inf"):
        assert name not in text
    text = said(scenarios["random_points"], "unsupported operand type(s) for *: 'NoneType' "
                "and 'Tensor'", raised="TypeError")
    assert "“unsupported operand type(s) for *: 'NoneType' and 'Tensor'”" in text, text


def test_the_lessons_guard_is_named_with_the_function_the_answer_called():
    """Lesson 04's guard raised FullJacobianBuilt naming the function;
    the page said "an exception of its own class" (as if the student had defined it) with the
    function's name left out. Its exact messages are the course's text: shown whole, on a
    hidden check too; any other message under that class name is told by kind only."""
    from autograder.trusted.outcomes import Outcome, raised_text
    from coursekit.jacobian_guard import refusal

    message = refusal("torch.autograd.functional.jacobian")
    for visible in (True, False):
        text = raised_text(Outcome(raised="FullJacobianBuilt", message=message, line=3),
                           quote=visible)
        assert "own class" not in text, text
        assert f"“{message}”" in text and "line 3" in text, text
    forged = raised_text(Outcome(raised="FullJacobianBuilt", message=message + " 0.123"),
                         quote=False)
    assert "an exception of its own class" in forged and "0.123" not in forged, forged


def test_an_in_place_change_of_a_leaf_gets_no_advice_its_message_cannot_back():
    """The message does not tell whose leaf it was: the advice to change parameters under
    torch.no_grad() was wrong for a backward that multiplied grad_output in place (05-ex4 of a
    blind review), where no_grad would hide the error and still overwrite the caller's
    gradient."""
    from autograder.trusted.raised import raised_relations
    said = raised_relations("a leaf Variable that requires grad is being used in an in-place "
                            "operation.")
    assert said == [("an in-place change of a leaf tensor that requires grad", None)], said
