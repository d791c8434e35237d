"""The course in a real browser: a student works through lesson 01 in JupyterLab, and an
instructor reads the demo class's grades in nbgrader's formgrader.

Headless Debian Chromium driven by Playwright for Python. Screenshots of each step go to
test-artifacts/browser/. All browser tests live in this one file, so that pytest-xdist's
`--dist loadfile` runs them in one worker, one after the other.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import nbformat
import pytest

import browser_support as lab_page
from browser_support import REPO_ROOT, VENV_BIN, JupyterLab, require_chromium, screenshot
from notebook_support import answer_cells, grading, without_markers

pytestmark = pytest.mark.browser

LESSON = "01_leaf_and_intermediate"
NOTEBOOK = f"{LESSON}/{LESSON}.ipynb"
VALIDATE_SUCCESS = "Success! Your notebook passes all the tests."
# What a test cell under an unanswered exercise shows: the stub's NotImplementedError, a name
# the answer cell should have defined, or the message of a coursekit.checks check.
UNANSWERED_FAILURE = re.compile(r"NotImplementedError|NameError|AssertionError")


@pytest.fixture(scope="module")
def browser():
    executable = require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, headless=True,
                                              args=lab_page.CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport=lab_page.VIEWPORT)
    context.set_default_timeout(30_000)
    page = context.new_page()
    try:
        yield page
    finally:
        context.close()


@pytest.fixture
def student_lab(tmp_path):
    """JupyterLab as `make lab` starts it, over a copy of notebooks/ (the repo stays untouched)."""
    notebooks = tmp_path / "notebooks"
    shutil.copytree(REPO_ROOT / "notebooks", notebooks,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    server = JupyterLab(root_dir=notebooks, state_dir=tmp_path / "jupyter", cwd=tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _solutions() -> dict[str, str]:
    """Each answer cell's grade id -> the cell as a student who solved it would have it."""
    solution = nbformat.read(REPO_ROOT / "solutions" / NOTEBOOK, as_version=4)
    return {grading(cell)["grade_id"]: without_markers(cell.source)
            for cell in answer_cells(solution)}


def _wait_until(page, condition, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        page.wait_for_timeout(100)


def _wait_for_run(page, cell, previous: str, what: str) -> None:
    """Wait until `cell` has run again (a new execution count) and the kernel is idle."""
    _wait_until(page, lambda: lab_page.execution_count(cell) not in ("", "*", previous),
                f"{what} to run")
    lab_page.wait_for_kernel_idle(page)


def test_student_runs_lesson_01_answers_an_exercise_and_validates(page, student_lab):
    student_file = student_lab.root_dir / NOTEBOOK
    notebook = nbformat.read(student_file, as_version=4)
    solutions = _solutions()
    answers = [i for i, c in enumerate(notebook.cells)
               if c.cell_type == "code" and grading(c).get("solution")]
    assert answers, f"{NOTEBOOK} has no exercise"
    first_answer = answers[0]
    first_test = first_answer + 1
    assert grading(notebook.cells[first_test]).get("grade"), "no test cell under the exercise"

    # 1. Open the lesson; the kernel starts.
    page.goto(student_lab.url(f"lab/tree/{NOTEBOOK}"))
    lab_page.wait_for_kernel_idle(page, timeout=90_000)
    cells = lab_page.cells(page)
    assert cells.count() == len(notebook.cells), "JupyterLab shows another number of cells"
    assert "raise NotImplementedError()" in cells.nth(first_answer).inner_text()
    screenshot(page, "student-01-lesson-opened")

    # 2. Run > Run All Cells. Run All stops at the first failing cell: the test cell under
    #    the first (unanswered) exercise, which says what is missing.
    lab_page.menu(page, "Run", "Run All Cells")
    test_cell = cells.nth(first_test)
    _wait_for_run(page, test_cell, "", "the first exercise's test cell")
    assert lab_page.has_error(test_cell), "the unanswered exercise's test cell did not fail"
    failure = lab_page.output_text(test_cell)
    assert UNANSWERED_FAILURE.search(failure), failure
    for index in range(first_test):
        assert not lab_page.has_error(cells.nth(index)), (
            f"cell {index} fails before any exercise:\n{lab_page.output_text(cells.nth(index))}")
    lab_page.scroll_to_top(cells.nth(first_answer))
    screenshot(page, "student-02-unanswered-exercise-fails")

    # 3. Type the answer into the exercise cell, run it and its test cell (Shift+Enter twice).
    answer_id = grading(notebook.cells[first_answer])["grade_id"]
    lab_page.replace_cell_source(page, cells.nth(first_answer), solutions[answer_id])
    before = lab_page.execution_count(test_cell)
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")
    _wait_for_run(page, test_cell, before, "the test cell after answering")
    passed = lab_page.output_text(test_cell)
    assert not lab_page.has_error(test_cell), f"the answered exercise still fails:\n{passed}"
    success_line = _printed_text(notebook.cells[first_test].source)
    if success_line:
        assert success_line in passed, passed
    lab_page.scroll_to_top(cells.nth(first_answer))
    screenshot(page, "student-03-answered-exercise-passes")

    # 4. Answer the other exercises too, then Run All again: every cell passes.
    for index in answers[1:]:
        grade_id = grading(notebook.cells[index])["grade_id"]
        lab_page.replace_cell_source(page, cells.nth(index), solutions[grade_id])
    page.keyboard.press("Escape")
    last_code = max(i for i, c in enumerate(notebook.cells) if c.cell_type == "code")
    before = lab_page.execution_count(cells.nth(last_code))
    lab_page.menu(page, "Run", "Run All Cells")
    _wait_for_run(page, cells.nth(last_code), before, "the last cell")
    failing = [i for i in range(cells.count()) if lab_page.has_error(cells.nth(i))]
    assert not failing, f"cells {failing} fail with every exercise answered"

    # 5. nbgrader's Validate button (it saves the notebook first) reports success.
    page.locator(".validate-button").click()
    dialog = page.locator(".jp-Dialog")
    dialog.get_by_text(re.compile(r"Success!|failed|error", re.I)).first.wait_for(
        timeout=180_000)
    result = dialog.inner_text()
    screenshot(page, "student-04-validate")
    assert VALIDATE_SUCCESS in result, result
    dialog.get_by_role("button", name="Ok").click()

    # The saved notebook holds the typed answers, and `nbgrader validate` agrees.
    saved = nbformat.read(student_file, as_version=4)
    for index in answers:
        assert "NotImplementedError" not in saved.cells[index].source
    validate = subprocess.run(
        [str(VENV_BIN / "nbgrader"), "validate", str(student_file)],
        cwd=student_file.parent, capture_output=True, text=True, timeout=300,
        env=lab_page.venv_env())
    assert validate.returncode == 0, validate.stdout + validate.stderr
    assert VALIDATE_SUCCESS in validate.stdout, validate.stdout + validate.stderr


def _printed_text(source: str) -> str | None:
    """The text of a test cell's final `print("...")`, its success message."""
    for line in reversed(source.splitlines()):
        match = re.fullmatch(r"\s*print\((['\"])(.*)\1\)\s*", line)
        if match:
            return match.group(2)
    return None
