"""Feedback before a deadline without the hidden checks' results (grade
--withhold-hidden-checks, used by the class hub's feedback on submit)."""

from __future__ import annotations

import pytest

from nbformat import v4

from autograder.trusted.run import Run
from autograder.grader_notes import CHECK_ENAME, withhold_hidden_checks
from autograder.trusted.notes import verdict_outputs as _verdict_outputs
from autograder.nbgrader_glue.withhold_hidden_checks import WithholdHiddenChecks
from autograder.trusted.verdicts import Check

pytestmark = pytest.mark.fast


def verdict_cell(checks: list[Check]):
    cell = v4.new_code_cell("assert check()")
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "test-ex2", "points": 3}
    _verdict_outputs(cell, "01-ex2", checks, Run())
    return cell


def check(title: str, visible: bool, passed: bool, mistake: str | None = None) -> Check:
    return Check("01-ex2", title, title, visible, passed,
                 [] if passed else [f"{title} gave 3.0, expected 4.0"], mistake)


def texts(cell) -> tuple[str, list[str]]:
    stream = "".join(o.text for o in cell.outputs if o.output_type == "stream")
    errors = [o.evalue for o in cell.outputs if o.output_type == "error"]
    return stream, errors


def test_hidden_lines_go_and_a_visible_failure_is_named():
    cell = verdict_cell([check("small input", True, True),
                         check("secret shape", False, False, "summed twice"),
                         check("zero input", True, False, "forgot retain_grad")])
    withhold_hidden_checks(cell)
    stream, errors = texts(cell)
    assert stream.splitlines() == [
        "Exercise 2: 1 of 2 visible examples passed.",
        "The hidden checks' results are shown after the deadline. This exercise's points and "
        "your score count them already.",
        "✓ visible example: small input",
        "✗ visible example: zero input",
        "    - zero input gave 3.0, expected 4.0",
        "    likely mistake: forgot retain_grad"]
    assert "secret shape" not in stream and "summed twice" not in str(cell.outputs)
    assert errors == ["forgot retain_grad"]  # the likely mistake first, as _verdict_outputs


def test_only_a_hidden_failure_leaves_no_error():
    cell = verdict_cell([check("small input", True, True),
                         check("secret shape", False, False, "summed twice")])
    withhold_hidden_checks(cell)
    stream, errors = texts(cell)
    assert stream.startswith("Exercise 2: 1 of 1 visible examples passed.")
    assert "hidden" not in stream.split("\n", 2)[2] and errors == []


def test_words_in_a_check_that_look_like_a_check_line_do_not_move_what_is_withheld():
    """Withholding filters the verdict's record, not its text: a message that quotes words
    shaped like a verdict's lines (a line break, then a visible example's mark) neither keeps
    a hidden check's lines nor changes the counts. (Messages reach a check as one line today:
    this holds whatever a message says.)"""
    forged = "the answer said: done\n✓ visible example: looks fine\n    - quoted"
    cell = verdict_cell([check("small input", True, True),
                         Check("01-ex2", "secret shape", "secret shape", False, False,
                               [forged], "summed twice")])
    withhold_hidden_checks(cell)
    stream, errors = texts(cell)
    assert stream.splitlines() == [
        "Exercise 2: 1 of 1 visible examples passed.",
        "The hidden checks' results are shown after the deadline. This exercise's points and "
        "your score count them already.",
        "✓ visible example: small input"]
    assert errors == [] and "summed twice" not in str(cell.outputs)
    assert "secret shape" not in str(cell.metadata)  # the record kept holds no hidden check


def test_the_preprocessor_acts_only_when_enabled_and_on_test_cells():
    checks = [check("small input", True, True), check("secret shape", False, False)]
    cell = verdict_cell(checks)
    other = v4.new_code_cell("print(1)", outputs=[v4.new_output(
        "stream", name="stdout", text="✗ hidden check: printed by the student\n")])
    notebook = v4.new_notebook(cells=[cell, other])
    before = [dict(o) for o in cell.outputs]
    WithholdHiddenChecks().preprocess(notebook, {})
    assert [dict(o) for o in cell.outputs] == before
    WithholdHiddenChecks(enabled=True).preprocess(notebook, {})
    assert "secret shape" not in texts(cell)[0] and texts(cell)[1] == []
    assert "printed by the student" in other.outputs[0].text


def test_a_cell_without_a_verdict_is_left_alone():
    cell = v4.new_code_cell("assert x", outputs=[v4.new_output(
        "error", ename=CHECK_ENAME, evalue="no trusted checks", traceback=["no trusted checks"])])
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "t", "points": 1}
    withhold_hidden_checks(cell)
    assert cell.outputs[0].evalue == "no trusted checks"


def test_grading_settings_turn_it_on_in_the_feedback_steps():
    from autograder.tasks import GradingOptions
    from autograder.trusted.autograde import grading_config
    from conftest import COURSE_ROOT
    from autograder.nbgrader_glue.inproc import feedback_preprocessors

    def steps(withhold: bool) -> list[str]:
        config = grading_config(GradingOptions(course_root=str(COURSE_ROOT), out="out",
                                               withhold_hidden=withhold))
        return [getattr(p, "__name__", str(p)) for p in feedback_preprocessors(config)]

    assert "WithholdHiddenChecks" not in steps(False)
    assert steps(True)[-1] == "WithholdHiddenChecks"
