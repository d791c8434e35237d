"""Feedback on submit's class report (hub/lib/coursehub/onsubmit_report.py):
made from the records each grading on submit leaves (grades.csv and checks.json, written by
the grading command's own writers), it is the report a local `python -m autograder grade` of
the same results writes: named mistakes shown, visible and hidden checks kept apart."""

from __future__ import annotations

import os
import re
import shutil
import sys

import pytest

import browser_support as lab_page
from browser_support import require_chromium, screenshot
from conftest import COURSE_ROOT

from autograder.outputs import write_grades
from autograder.report.class_report import read_checks, write_report
from autograder.tasks import Result

sys.path.insert(0, str(COURSE_ROOT / "hub" / "lib"))
from coursehub.onsubmit_report import class_report

L1 = "01_leaf_and_intermediate"
MISTAKE = "gradient taken of the intermediate instead of the leaf"


def _check(scenario: str, visible: bool, passed: bool) -> dict:
    return {"exercise": "01-ex1", "cell": "01-ex1-test", "scenario": scenario,
            "visible": visible, "passed": passed, "mistake": None if passed else MISTAKE}


def _result(student: str, visible: bool, hidden: bool) -> Result:
    return Result(student, L1, score=2.0 * (visible and hidden), max_score=2.0,
                  reason="Graded.", checks=[_check("the example", True, visible),
                                            _check("a longer chain", False, hidden)])


def _course(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    shutil.copy2(COURSE_ROOT / "nbgrader_config.py", course)
    shutil.copytree(COURSE_ROOT / "solutions" / L1, course / "solutions" / L1)
    return course


def _grade_on_submit(course, result: Result) -> None:
    """What one grading on submit writes in its own folder: grades.csv and the class report of
    its one result (the grading command's own writers)."""
    out = course / "on-submit" / f"{result.student_id}+{result.lesson}"
    out.mkdir(parents=True, exist_ok=True)
    write_grades(out / "grades.csv", [result])
    write_report(out, [result], lessons=[L1])


def test_the_on_submit_report_is_the_local_report_of_the_same_results(tmp_path, monkeypatch):
    course = _course(tmp_path, monkeypatch)
    # Ann passes everything; Bob the example only (the hidden check names his mistake); Cat
    # fails both. Ann's first try, replaced by her second, failed both.
    _grade_on_submit(course, _result("ann", False, False))
    latest = [_result("ann", True, True), _result("bob", True, False),
              _result("cat", False, False)]
    for result in latest:
        _grade_on_submit(course, result)
    page = class_report(course).read_text(encoding="utf-8")
    local = write_report(tmp_path / "local", latest, lessons=[L1])
    # The same items (per check, visible and hidden apart, with their mistakes) as the local
    # grading's report of the same results.
    items = (course / "on-submit" / "items.csv").read_text(encoding="utf-8")
    assert items == (local.parent / "items.csv").read_text(encoding="utf-8")
    assert f"01-ex1,01-ex1-test,the example,visible,3,2,0.667,{MISTAKE}: 1" in items
    assert f"01-ex1,01-ex1-test,a longer chain,hidden,3,1,0.333,{MISTAKE}: 2" in items
    # The page names the mistake and gives the visible and hidden pass rates apart.
    assert "No named mistake was recorded" not in page
    assert re.search(rf"<td>{L1}</td><td>01-ex1</td><td>{MISTAKE}</td><td[^>]*>2</td>", page)
    assert re.search(r"<td>01-ex1</td><td[^>]*>3</td><td[^>]*>2</td><td[^>]*>67 %</td>"
                     r"<td[^>]*>33 %</td><td[^>]*>–</td>", page), "visible 67 %, hidden 33 %"


def test_the_records_are_read_back_only_when_bounded(tmp_path):
    """checks.json is refused before parsing when nested deeper than its records are."""
    deep = '{"results": [{"checks": [' + "[" * 50 + "]" * 50 + "]}]}"
    try:
        read_checks(deep)
    except ValueError as err:
        assert "nested deeper" in str(err)
    else:
        raise AssertionError("a deeply nested checks.json was parsed")
    # Only the fields a check has are kept.
    assert read_checks('{"results": [{"student_id": "ann", "lesson": "x", "checks": '
                       '[{"exercise": "e", "passed": true, "other": 1}]}]}') == \
        {("ann", "x"): [{"exercise": "e", "cell": None, "scenario": None, "visible": None,
                         "passed": True, "mistake": None}]}


@pytest.mark.browser
def test_the_on_submit_report_shows_the_named_mistake_in_a_browser(tmp_path, monkeypatch):
    """What an instructor sees opening on-submit/report.html: the mistake by name, the
    visible and hidden checks' pass rates apart, and each student's score linked to the
    feedback page they got."""
    from playwright.sync_api import sync_playwright

    course = _course(tmp_path, monkeypatch)
    for result in (_result("ann", True, True), _result("bob", True, False)):
        _grade_on_submit(course, result)
        page = course / "feedback" / result.student_id / L1 / f"{L1}.html"
        page.parent.mkdir(parents=True)
        page.write_text(f"<!DOCTYPE html><title>{result.student_id}'s feedback</title>")
    report = class_report(course)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=require_chromium(), headless=True,
                                             args=lab_page.CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            page.goto(report.as_uri())
            mistakes = page.locator("h2#mistakes + table").inner_text()
            assert MISTAKE in mistakes and "No named mistake" not in page.inner_text("body")
            row = page.locator("tr", has=page.locator("td", has_text="01-ex1")).first
            cells = row.locator("td").all_inner_texts()
            assert cells[-3:] == ["100 %", "50 %", "–"], cells  # visible, hidden, test cells
            screenshot(page, "onsubmit-class-report")
            page.get_by_role("link", name="0/2").click()
            assert page.title() == "bob's feedback"
        finally:
            browser.close()
