"""Validate says what it ran: the test cells' visible examples, in the student's own server.
The hidden checks run only where a notebook is graded (the grader, its reference solutions and
the course's secret never come into a student's server), so Validate's summary, and nbgrader's
"Success!" dialog through the course's lab extension, say where they run instead."""

from __future__ import annotations

import json
from pathlib import Path

from coursekit.progress import HIDDEN_CHECKS_NOTE, ExerciseResult, validation_summary

REPO = Path(__file__).resolve().parent.parent
EXTENSION = REPO / "jupyter" / "student" / "labextensions" / "coursekit-validate" / "static" \
    / "remoteEntry.js"
SUCCESS = ('<div class="jp-Dialog"><div class="jp-Dialog-body"><div class="validation-success">'
           '<div><p>Success! Your notebook passes all the tests.</p></div></div></div></div>')


def test_the_summary_says_the_hidden_checks_did_not_run():
    results = [ExerciseResult(1, "01-ex1-test", 2.0, "passed", ""),
               ExerciseResult(2, "01-ex2-test", 1.0, "failed", "y is wrong.")]
    lines = validation_summary(results).splitlines()
    assert "  Exercise 1 (2 points): its example passes" in lines
    assert lines[-1] == HIDDEN_CHECKS_NOTE
    assert "visible examples only" in HIDDEN_CHECKS_NOTE and "Submit" in HIDDEN_CHECKS_NOTE


def test_the_lab_extension_says_the_same_words():
    assert f"var HIDDEN_CHECKS_NOTE = {json.dumps(HIDDEN_CHECKS_NOTE)};" in EXTENSION.read_text()


def test_in_chromium_the_success_dialog_gets_the_note():
    from playwright.sync_api import sync_playwright

    import browser_support as lab_page

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=lab_page.require_chromium(),
                                             headless=True, args=lab_page.CHROMIUM_ARGS)
        try:
            tab = browser.new_context(offline=True).new_page()
            tab.set_content("<html><body></body></html>")
            tab.add_script_tag(content=EXTENSION.read_text())
            tab.evaluate("""async () => {
                const factory = await window._JUPYTERLAB["coursekit-validate"].get("./extension");
                factory().default.activate();
            }""")
            tab.evaluate(f"document.body.insertAdjacentHTML('beforeend', {json.dumps(SUCCESS)})")
            note = tab.locator(".validation-success .coursekit-validate-note")
            note.wait_for(timeout=10_000)
            assert note.inner_text() == HIDDEN_CHECKS_NOTE
            text = tab.locator(".jp-Dialog").inner_text()
            assert text.startswith("Success! Your notebook passes all the tests.")
            assert note.count() == 1
        finally:
            browser.close()
