"""The class report in headless Chromium, offline: the page loads nothing from anywhere, its
figures are drawn, its tables are there, and nothing a student wrote runs. A screenshot goes
to test-artifacts/browser/class-report.png. (docs/images/class-report.png, in the README, is
the top of the demo class's report: `make demo`, then demo/out/report.html in this Chromium
with a 1200 x 1500 window.)"""

from __future__ import annotations

import pytest

import browser_support as lab_page
from browser_support import require_chromium, screenshot
from test_report import L3, class_rows, result, student_rows

pytestmark = pytest.mark.browser


def test_the_report_opens_offline_and_runs_nothing(tmp_path):
    from playwright.sync_api import sync_playwright

    from autograder.report.class_report import write_report
    from autograder.intake.roster import RosterEntry, RosterReport

    executable = require_chromium()
    rows = class_rows() + [result('<img src=x onerror="window.pwned=1">', L3, 0,
                                  status="error", reason="<script>window.pwned=2</script>")]
    roster = RosterReport(unknown={}, absent=[RosterEntry(id="nobody", first_name="No",
                                                          last_name="Body")])
    page_path = write_report(tmp_path / "out", rows, lessons=[L3, "06_module_hooks"],
                             roster=roster)
    requests, dialogs = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True,
                                             args=lab_page.CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900},
                                          offline=True, java_script_enabled=True)

            def route(request_route):
                requests.append(request_route.request.url)
                if request_route.request.url.startswith(("file:", "data:")):
                    request_route.continue_()
                else:
                    request_route.abort()

            context.route("**/*", route)
            page = context.new_page()
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.goto(page_path.as_uri())
            page.wait_for_load_state("load")
            # Nothing but the page itself was requested (figures are inline data).
            assert [url for url in requests if not url.startswith("data:")] == \
                [page_path.as_uri()]
            images = page.locator("img")
            assert images.count() == 2
            sizes = images.evaluate_all(
                "imgs => imgs.map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
            assert all(done and width > 300 and height > 100 for done, width, height in sizes)
            headings = page.locator("h2").all_inner_texts()
            assert headings == ["Scores per lesson", "Pass rates per exercise",
                                "Exercises most students fail", "Most frequent mistakes",
                                "Needs manual review", "Students",
                                "Files not attributed to a student",
                                "Roster"]
            review = page.locator("#review + table")
            assert review.locator("tbody tr").count() == 4
            assert '<img src=x onerror="window.pwned=1">' in review.inner_text()
            assert page.evaluate("() => window.pwned === undefined")
            assert not dialogs
            assert page.locator("#hardest + table tbody tr").first.inner_text().startswith(L3)
            screenshot(page, "class-report")
            page.screenshot(path=str(lab_page.ARTIFACTS / "class-report-full.png"),
                            full_page=True)
        finally:
            browser.close()


def test_the_students_table_of_500_reads_at_1366_by_768(tmp_path):
    """A class of 500 and 7 lessons: the table fits the window's width, its header stays in
    view while scrolling, and a score opens that student's feedback page."""
    from playwright.sync_api import sync_playwright

    from autograder.report.class_report import write_report

    executable = require_chromium()
    rows, lessons = student_rows(500)
    page_path = write_report(tmp_path / "out", rows, lessons=lessons)
    feedback = tmp_path / "out" / "feedback" / "student400" / f"{lessons[2]}.html"
    feedback.parent.mkdir(parents=True)
    feedback.write_text("<!DOCTYPE html><title>feedback of student400</title>")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True,
                                             args=lab_page.CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1366, "height": 768},
                                          offline=True)
            page = context.new_page()
            page.goto(page_path.as_uri())
            table = page.locator("#students ~ table.students")
            assert table.locator("tbody tr").count() == 500
            assert page.evaluate("() => document.documentElement.scrollWidth") <= 1366
            row = table.locator("tbody tr").filter(has_text="student400")
            row.scroll_into_view_if_needed()
            header = table.locator("thead th").first.bounding_box()
            assert abs(header["y"]) < 2, header  # the header row stays at the top
            screenshot(page, "class-report-students")
            row.get_by_role("link").nth(2).click()
            page.wait_for_load_state("load")
            assert page.title() == "feedback of student400"
        finally:
            browser.close()


def test_the_report_passes_axe_core(tmp_path):
    """The report of a class with every section filled (students, review, roster) has no
    serious or critical WCAG 2.1 A/AA violation."""
    from playwright.sync_api import sync_playwright

    from autograder.intake.roster import RosterEntry, RosterReport
    from autograder.report.class_report import write_report

    executable = require_chromium()
    students, lessons = student_rows(30)
    roster = RosterReport(unknown={}, absent=[RosterEntry(id="nobody", first_name="No",
                                                          last_name="Body")])
    page_path = write_report(tmp_path / "out", class_rows() + students,
                             lessons=[L3, "06_module_hooks", *lessons], roster=roster)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, headless=True,
                                             args=lab_page.CHROMIUM_ARGS)
        try:
            # The page forbids every script (its Content-Security-Policy): axe-core gets in
            # only so.
            context = browser.new_context(viewport={"width": 1366, "height": 768},
                                          offline=True, bypass_csp=True)
            page = context.new_page()
            page.goto(page_path.as_uri())
            lab_page.assert_accessible(page, "the class report")
        finally:
            browser.close()

