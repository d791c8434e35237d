"""The course in a real browser: a student opens the course with `make lab`, works through lesson
01 to lesson 02 in JupyterLab, and an instructor reads the demo class's grades in nbgrader's
formgrader.

Headless Debian Chromium driven by Playwright for Python. Screenshots of each step go to
test-artifacts/browser/; with UPDATE_DOCS_IMAGES=1, the start page, a failing check and
Validate's dialog also go to docs/images/ (the README shows them). All browser tests live in this one file, so that
one pytest-xdist worker runs them, one after the other (tests/conftest.py keeps a file's tests
together when they share a module-scoped fixture, as these do).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import nbformat
import pytest

import browser_support as lab_page
from browser_support import REPO_ROOT, VENV_BIN, JupyterLab, require_chromium, screenshot
from conftest import LESSONS
from notebook_support import answer_cells, grading, without_markers

pytestmark = pytest.mark.browser

LESSON = "01_leaf_and_intermediate"
NOTEBOOK = f"{LESSON}/{LESSON}.ipynb"
START_PAGE = "START-HERE.md"
# tests/fixtures/lab/practice.ipynb (one exercise, two hints), beside a lesson's copy
PRACTICE = "01_leaf_and_intermediate/practice.ipynb"
VALIDATE_SUCCESS = "Success! Your notebook passes all the tests."
DOCS_IMAGES = REPO_ROOT / "docs" / "images"
# A common laptop screen (the course was tried on one of this size).
LAPTOP = {"width": 1366, "height": 768}
# What axe-core checks in JupyterLab: the course's content (the start page; each cell of the
# lesson in view: its rendered markdown and its outputs), not JupyterLab's own widgets. Left
# out as JupyterLab's: the cell list (a "feed" whose cells lack role "article"), the prompts
# and their heading-collapse buttons (no name), the collapsers, and the code editor
# (CodeMirror's unnamed textbox, coloured by JupyterLab's theme).
START_PAGE_CONTENT = [".jp-RenderedMarkdown"]
LESSON_CONTENT = [".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell"]
JUPYTERLAB_CHROME = [".jp-InputPrompt", ".jp-OutputPrompt", ".jp-Collapser", ".cm-editor"]


@pytest.fixture(scope="module", autouse=True)
def chromium_executable():
    """Debian's Chromium; without it the tests skip, or fail under CI=true (set up first, so
    nothing else is built for tests that cannot run)."""
    return require_chromium()


@pytest.fixture(scope="module")
def browser(chromium_executable):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_executable,
                                              headless=True, args=lab_page.CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport=lab_page.VIEWPORT)
    context.set_default_timeout(30_000)
    page = context.new_page()
    try:
        yield page
    finally:
        # The page as the test left it: after a failure, what the browser showed.
        try:
            screenshot(page, f"{request.node.name}-last")
        finally:
            context.close()


def docs_image(locator_or_page, name: str) -> None:
    """A screenshot for the README, written to docs/images/ when UPDATE_DOCS_IMAGES=1."""
    screenshot_path = lab_page.ARTIFACTS / f"docs-{name}"
    lab_page.ARTIFACTS.mkdir(parents=True, exist_ok=True)
    locator_or_page.screenshot(path=str(screenshot_path))
    if os.environ.get("UPDATE_DOCS_IMAGES") == "1":
        DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(screenshot_path, DOCS_IMAGES / name)


@pytest.fixture(scope="module")
def student_lab(tmp_path_factory):
    """JupyterLab started by `make lab` itself (WORK: a temporary folder for the student's
    copies), from the repository root so that Validate reads the course's nbgrader_config.py.
    The tests never change the repository's notebooks or work/."""
    base = tmp_path_factory.mktemp("student")
    work = base / "work"
    # Test-only settings: every cell attached to the page, so cells are found by position.
    tracker = (work / ".coursekit" / "lab" / "settings" / "@jupyterlab" / "notebook-extension"
               / "tracker.jupyterlab-settings")
    tracker.parent.mkdir(parents=True)
    tracker.write_text(json.dumps({"windowingMode": "none"}))
    practice = work / PRACTICE
    practice.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(REPO_ROOT / "tests" / "fixtures" / "lab" / "practice.ipynb", practice)
    server = JupyterLab(root_dir=work, state_dir=base / "jupyter", cwd=REPO_ROOT,
                        command=lambda address: ["make", "--no-print-directory", "-s", "lab",
                                                 f"WORK={work}", "LAB_ARGS=" + " ".join(address)])
    server.start(timeout=120)
    try:
        yield server
    finally:
        server.stop()


def open_in_lab(page, server, path: str = "") -> None:
    """Open `path` (the start page when empty) in a fresh layout: no tabs of earlier tests."""
    target = f"lab/tree/{path}" if path else ""
    page.goto(server.url(target) + ("&reset" if path else ""))
    if path.endswith(".ipynb"):
        lab_page.wait_for_kernel_idle(page, timeout=120_000)


def _solutions(lesson: str = LESSON) -> dict[str, str]:
    """Each answer cell's grade id -> the cell as a student who solved it would have it."""
    solution = nbformat.read(REPO_ROOT / "solutions" / lesson / f"{lesson}.ipynb", as_version=4)
    return {grading(cell)["grade_id"]: without_markers(cell.source)
            for cell in answer_cells(solution)}


def _doubled(answer: str) -> str:
    """A wrong answer: the solution's function, returning every tensor doubled (what running
    backward twice without zeroing gives)."""
    name = re.search(r"^def (\w+)\(", answer, re.M)[1]
    return (answer.replace(f"def {name}(", f"def _right_{name}(", 1) + "\n\n\n"
            f"def {name}(*args, **kwargs):\n"
            f"    result = _right_{name}(*args, **kwargs)\n"
            "    if isinstance(result, tuple):\n"
            "        return tuple(2 * value for value in result)\n"
            "    return 2 * result\n")


def _lines(cell) -> list[str]:
    return [line for line in lab_page.output_text(cell).splitlines() if line.strip()]


def _progress_row(page, number: str) -> str:
    row = page.locator(".jp-RenderedMarkdown tr").filter(
        has=page.locator("td", has_text=re.compile(rf"^{number}$")))
    return row.inner_text()


def _tab_labels(page) -> list[str]:
    return page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current "
                        ".lm-TabBar-tabLabel").all_inner_texts()


def save_and_read(page, path):
    """Save the notebook in view (Ctrl+S) and read the file JupyterLab wrote."""
    before = path.stat().st_mtime_ns
    page.keyboard.press("Escape")
    page.keyboard.press("ControlOrMeta+s")
    page.wait_for_function("() => { const tab = document.querySelector("
                           "'.lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current');"
                           " return tab && !tab.classList.contains('jp-mod-dirty') }")
    deadline = 100
    while path.stat().st_mtime_ns == before and deadline:
        page.wait_for_timeout(100)
        deadline -= 1
    return nbformat.read(path, as_version=4)


def _errors(cell) -> list:
    return [o for o in cell.get("outputs", []) if o.output_type == "error"]


def _assert_only_unanswered_exercises_fail(page, path, tests: list[int]) -> None:
    """After Run All on a fresh lesson: every code cell ran; only the test cells have an error,
    and each shows "Exercise N is not answered yet." as its first line, without a traceback."""
    saved = save_and_read(page, path)
    code = [i for i, c in enumerate(saved.cells) if c.cell_type == "code"]
    not_run = [i for i in code if not saved.cells[i].execution_count]
    assert not not_run, f"cells {not_run} did not run"
    failing = [i for i in code if _errors(saved.cells[i])]
    assert failing == tests, f"cells {failing} fail, expected only the test cells {tests}"
    cells = lab_page.cells(page)
    for index in tests:
        number = int(re.search(r"-ex(\d+)-", grading(saved.cells[index])["grade_id"])[1])
        shown = _lines(cells.nth(index))
        assert shown[0] == f"Exercise {number} is not answered yet.", shown
        assert not lab_page.has_error(cells.nth(index)), shown


def _run_all_to_the_end(page, notebook) -> list[int]:
    """Run > Run All Cells, wait for the last code cell; the indices of the test cells."""
    cells = lab_page.cells(page)
    last_code = max(i for i, c in enumerate(notebook.cells) if c.cell_type == "code")
    before = lab_page.execution_count(cells.nth(last_code))
    lab_page.menu(page, "Run", "Run All Cells")
    lab_page.wait_for_run(page, cells.nth(last_code), before, "the last code cell")
    return [i for i, c in enumerate(notebook.cells) if grading(c).get("grade")]


def test_make_lab_opens_the_start_page_on_the_students_own_copies(page, student_lab):
    work = student_lab.root_dir
    for lesson in LESSONS:  # `make lab` made the copies
        copy = work / lesson / f"{lesson}.ipynb"
        assert copy.read_bytes() == (REPO_ROOT / "notebooks" / lesson / f"{lesson}.ipynb").read_bytes()
    open_in_lab(page, student_lab)
    page.wait_for_url(re.compile(rf"/lab/tree/{START_PAGE}"))
    view = page.locator(".jp-RenderedMarkdown").first
    view.get_by_role("heading", name=re.compile("start here")).wait_for()
    numbers = [cell.strip() for cell in page.locator(".jp-RenderedMarkdown tr td:first-child")
               .all_inner_texts()]
    assert numbers == [lesson[:2] for lesson in LESSONS]
    assert "not started" in _progress_row(page, "01")
    view.get_by_role("link", name="Leaf and intermediate tensors").wait_for()
    # A tidy lab: no Nbgrader menu, no news pop-up, lesson folders readable in full, and the
    # file browser shows the copies (no tracked notebooks/ folder).
    menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
    assert "Nbgrader" not in menus and "Run" in menus
    page.wait_for_timeout(1500)
    assert page.get_by_text(re.compile("Jupyter news", re.I)).count() == 0
    items = page.locator(".jp-DirListing-item .jp-DirListing-itemText")
    names = [n.strip() for n in items.all_inner_texts()]
    assert set(LESSONS) <= set(names) and "notebooks" not in names and START_PAGE in names
    truncated = items.evaluate_all("els => els.filter(e => e.scrollWidth > e.clientWidth + 1)"
                                   ".map(e => e.textContent)")
    assert not truncated, f"names cut short in the file browser: {truncated}"
    screenshot(page, "student-00-start-page")
    lab_page.assert_accessible(page, "the start page", include=START_PAGE_CONTENT)


def test_student_goes_from_the_start_page_through_lesson_01_to_lesson_02(page, student_lab):
    work = student_lab.root_dir
    student_file = work / NOTEBOOK
    notebook = nbformat.read(student_file, as_version=4)
    solutions = _solutions()
    answers = [i for i, c in enumerate(notebook.cells)
               if c.cell_type == "code" and grading(c).get("solution")]
    first_answer, first_test = answers[0], answers[0] + 1
    assert grading(notebook.cells[first_test]).get("grade"), "no test cell under the exercise"
    answer_id = grading(notebook.cells[first_answer])["grade_id"]
    points = [grading(c)["points"] for c in notebook.cells if grading(c).get("grade")]

    # 1. From the start page, the first lesson's link opens the student's copy.
    open_in_lab(page, student_lab, START_PAGE)
    page.locator(".jp-RenderedMarkdown").get_by_role(
        "link", name="Leaf and intermediate tensors").click()
    lab_page.wait_for_kernel_idle(page, timeout=120_000)
    assert _tab_labels(page) == [f"{LESSON}.ipynb"]
    cells = lab_page.cells(page)
    assert cells.count() == len(notebook.cells), "JupyterLab shows another number of cells"
    assert "raise NotImplementedError()" in cells.nth(first_answer).inner_text()
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    assert panel.locator(".validate-button").is_visible()
    assert page.get_by_text("Create Assignment").count() == 0
    screenshot(page, "student-01-lesson-opened")

    # 2. Run All reaches the last cell: each unanswered exercise says so, without a traceback.
    tests = _run_all_to_the_end(page, notebook)
    _assert_only_unanswered_exercises_fail(page, work / NOTEBOOK, tests)
    lab_page.assert_accessible(page, f"{LESSON} after Run All", include=LESSON_CONTENT,
                               exclude=JUPYTERLAB_CHROME)
    lab_page.scroll_to_top(cells.nth(first_answer))
    screenshot(page, "student-02-run-all-unanswered")

    # 3. A wrong answer: the check's message is the first line, the hint the next.
    test_cell = cells.nth(first_test)
    lab_page.replace_cell_source(page, cells.nth(first_answer), _doubled(solutions[answer_id]))
    before = lab_page.execution_count(test_cell)
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")
    lab_page.wait_for_run(page, test_cell, before, "the test cell after a wrong answer")
    lines = _lines(test_cell)
    assert re.fullmatch(r"\S.* is not what was expected\.", lines[0]), lines
    assert lines[1].startswith("  hint: ") and "twice the expected value" in lines[1]
    assert not any("Traceback" in line or "checks.py" in line for line in lines)
    lab_page.scroll_to_top(test_cell)
    docs_image(test_cell, "failing-check.png")
    screenshot(page, "student-03-wrong-answer")

    # 4. The right answer passes.
    lab_page.replace_cell_source(page, cells.nth(first_answer), solutions[answer_id])
    before = lab_page.execution_count(test_cell)
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")
    lab_page.wait_for_run(page, test_cell, before, "the test cell after answering")
    assert not lab_page.has_error(test_cell)
    success_line = _printed_text(notebook.cells[first_test].source)
    if success_line:
        assert _lines(test_cell) == [success_line]

    # 5. A broken answer cell leaves the old definition behind: the test says so first. (The
    #    answer cell's error stops what was queued after it, so the test cell runs afterwards.)
    lab_page.replace_cell_source(page, cells.nth(first_answer), solutions[answer_id] + "\n)")
    answer_cell = cells.nth(first_answer)
    before = lab_page.execution_count(answer_cell)
    page.keyboard.press("Shift+Enter")
    lab_page.wait_for_run(page, answer_cell, before, "the broken answer cell")
    assert "SyntaxError" in lab_page.output_text(answer_cell)
    before = lab_page.execution_count(test_cell)
    page.keyboard.press("Shift+Enter")
    lab_page.wait_for_run(page, test_cell, before, "the test cell after breaking the answer")
    notice = _lines(test_cell)[0]
    assert notice.startswith("Note: This test checks an old version of your answer: Exercise 1's "
                             "answer cell failed when it last ran (SyntaxError"), notice
    lab_page.scroll_to_top(cells.nth(first_answer))
    screenshot(page, "student-04-stale-definition")
    lab_page.replace_cell_source(page, cells.nth(first_answer), solutions[answer_id])
    before = lab_page.execution_count(test_cell)
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")
    lab_page.wait_for_run(page, test_cell, before, "the test cell after fixing the answer")
    assert not any(line.startswith("Note:") for line in _lines(test_cell))

    # 6. Saved, the start page counts the exercise (File > Reload from Disk shows it).
    save_and_read(page, student_file)
    open_in_lab(page, student_lab, START_PAGE)
    page.locator(".jp-RenderedMarkdown tr").first.wait_for()
    expected = (f"1 of {len(points)} exercises pass ({points[0]:g} of {sum(points):g} points)")
    assert expected in _progress_row(page, "01"), _progress_row(page, "01")
    docs_image(page, "start-page.png")
    screenshot(page, "student-05-start-page-progress")

    # 7. Validate sums up: which exercises pass, and the points.
    open_in_lab(page, student_lab, NOTEBOOK)
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .validate-button").click()
    dialog = page.locator(".jp-Dialog")
    dialog.get_by_text(re.compile(r"Success!|failed|error", re.I)).first.wait_for(timeout=180_000)
    result = dialog.inner_text()
    screenshot(page, "student-06-validate-summary")
    first = dialog.locator("pre").first.inner_text()
    assert first.startswith("Validate ran this notebook from the top in a fresh kernel"), result
    assert f"Result: {expected}." in first
    assert f"  Exercise 2 ({points[1]:g} points): not answered yet" in first
    dialog.get_by_role("button", name="Ok").click()

    # 8. Every exercise answered: Run All passes everywhere and Validate says so.
    cells = lab_page.cells(page)
    for index in answers:
        grade_id = grading(notebook.cells[index])["grade_id"]
        lab_page.replace_cell_source(page, cells.nth(index), solutions[grade_id])
    page.keyboard.press("Escape")
    _run_all_to_the_end(page, notebook)
    saved = save_and_read(page, student_file)
    failing = [i for i, c in enumerate(saved.cells) if _errors(c)]
    assert not failing, f"cells {failing} fail with every exercise answered"
    page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .validate-button").click()
    dialog.get_by_text(re.compile(r"Success!|failed|error", re.I)).first.wait_for(timeout=180_000)
    result = dialog.inner_text()
    screenshot(page, "student-07-validate")
    assert VALIDATE_SUCCESS in result, result
    dialog.get_by_role("button", name="Ok").click()
    saved = nbformat.read(student_file, as_version=4)
    for index in answers:
        assert "NotImplementedError" not in saved.cells[index].source

    # 9. The link at the bottom opens lesson 02; its link back opens lesson 01 again.
    following = LESSONS[1]
    bottom = cells.nth(cells.count() - 1)
    bottom.scroll_into_view_if_needed()
    bottom.get_by_role("link", name=re.compile(r"^Lesson 02: .* →$")).click()
    page.wait_for_function(f"() => [...document.querySelectorAll('.lm-TabBar-tab.lm-mod-current "
                           f".lm-TabBar-tabLabel')].some(t => t.textContent === '{following}.ipynb')")
    lab_page.wait_for_kernel_idle(page, timeout=120_000)
    top = lab_page.cells(page).nth(0)
    assert lab_page.cells(page).nth(1).locator("h1").inner_text().startswith("Lesson 02")
    screenshot(page, "student-08-lesson-02")
    top.get_by_role("link", name=re.compile(r"^← Lesson 01: ")).click()
    page.wait_for_function("() => [...document.querySelectorAll('.lm-TabBar-tab.lm-mod-current "
                           f".lm-TabBar-tabLabel')].some(t => t.textContent === '{LESSON}.ipynb')")
    lab_page.cells(page).nth(0).get_by_role("link", name=re.compile("Start page")).click()
    page.wait_for_function("() => [...document.querySelectorAll('.lm-TabBar-tab.lm-mod-current "
                           f".lm-TabBar-tabLabel')].some(t => t.textContent === '{START_PAGE}')")
    student_lab.shut_down_kernels()


@pytest.mark.parametrize("lesson", LESSONS[1:])
def test_run_all_reaches_the_end_of_a_fresh_lesson(page, student_lab, lesson):
    """Lesson 01 is run through above. Every other lesson, fresh: Run All runs every cell,
    and each unanswered exercise says so instead of stopping the run."""
    path = f"{lesson}/{lesson}.ipynb"
    notebook = nbformat.read(student_lab.root_dir / path, as_version=4)
    try:
        open_in_lab(page, student_lab, path)
        tests = _run_all_to_the_end(page, notebook)
        _assert_only_unanswered_exercises_fail(page, student_lab.root_dir / path, tests)
        lab_page.assert_accessible(page, f"{lesson} after Run All", include=LESSON_CONTENT,
                                   exclude=JUPYTERLAB_CHROME)
    finally:
        student_lab.shut_down_kernels()


def test_validate_shows_its_summary_first_under_its_own_heading(browser, student_lab):
    """On a laptop's screen (1366x768), Validate's dialog opens with the
    course's summary under a heading of its own, whole and without a sideways scroll; nbgrader's
    failing test cells follow under theirs."""
    lesson = LESSONS[1]
    path = f"{lesson}/{lesson}.ipynb"
    notebook = nbformat.read(student_lab.root_dir / path, as_version=4)
    exercises = [c for c in notebook.cells if grading(c).get("grade")]
    context = browser.new_context(viewport=LAPTOP)
    context.set_default_timeout(30_000)
    page = context.new_page()
    try:
        open_in_lab(page, student_lab, path)
        page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .validate-button").click()
        message = page.locator(".jp-Dialog #validation-message")
        message.wait_for(timeout=180_000)
        screenshot(page, "student-11-validate-laptop")
        docs_image(page.locator(".jp-Dialog-content"), "validate-summary.png")
        children = message.locator(":scope > *")
        assert children.nth(0).evaluate("e => e.tagName") == "H2"
        assert children.nth(0).inner_text() == "Summary"
        summary = children.nth(1).locator("pre")
        assert summary.inner_text().startswith("Validate ran this notebook from the top")
        assert f"Result: 0 of {len(exercises)} exercises pass" in summary.inner_text()
        assert children.nth(2).inner_text() == "Failing test cells"
        assert children.nth(3).inner_text() == "The following cell failed:"
        text = message.inner_text()
        assert "This is a summary" not in text
        assert text.count("The following cell failed:") == len(exercises)
        # The heading and the whole summary are on the screen, no line cut off at the side.
        box = summary.bounding_box()
        assert children.nth(0).bounding_box()["y"] >= 0
        assert box["y"] + box["height"] <= LAPTOP["height"], box
        assert box["x"] >= 0 and box["x"] + box["width"] <= LAPTOP["width"], box
        assert summary.evaluate("e => e.scrollWidth <= e.clientWidth")
        page.locator(".jp-Dialog").get_by_role("button", name="Ok").click()
    finally:
        context.close()
        student_lab.shut_down_kernels()


def test_make_reset_restores_a_lesson_and_keeps_the_backup(page, student_lab):
    lesson = "03_tensor_hooks"
    path = f"{lesson}/{lesson}.ipynb"
    work = student_lab.root_dir
    notebook = nbformat.read(work / path, as_version=4)
    answer = next(i for i, c in enumerate(notebook.cells) if grading(c).get("solution"))
    mine = "def mine():\n    return 'my own attempt'"
    try:
        open_in_lab(page, student_lab, path)
        cells = lab_page.cells(page)
        lab_page.replace_cell_source(page, cells.nth(answer), mine)
        assert "my own attempt" in save_and_read(page, work / path).cells[answer].source
    finally:
        student_lab.shut_down_kernels()

    done = subprocess.run(["make", "--no-print-directory", "reset", f"LESSON={lesson}",
                           f"WORK={work}"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120, env=lab_page.venv_env())
    assert done.returncode == 0, done.stdout + done.stderr
    backups = sorted((work / "backups").glob(f"{lesson}-*.ipynb"))
    assert len(backups) == 1 and re.fullmatch(rf"{lesson}-\d{{4}}-\d\d-\d\d-\d{{6}}\.ipynb",
                                              backups[0].name)
    assert str(backups[0]) in done.stdout

    open_in_lab(page, student_lab, path)
    assert "raise NotImplementedError()" in lab_page.cells(page).nth(answer).inner_text()
    backup_path = f"backups/{backups[0].name}"
    open_in_lab(page, student_lab, backup_path)
    assert "my own attempt" in lab_page.cells(page).nth(answer).inner_text()
    screenshot(page, "student-09-backup-after-reset")
    student_lab.shut_down_kernels()


def test_a_wrong_answer_shows_its_message_first_and_a_hint_opens(page, student_lab):
    """On the practice notebook (tests/fixtures/lab): a hint is collapsed until clicked."""
    notebook = nbformat.read(student_lab.root_dir / PRACTICE, as_version=4)
    hint = next(i for i, c in enumerate(notebook.cells) if "hint" in c.metadata.get("tags", []))
    try:
        open_in_lab(page, student_lab, PRACTICE)
        cell = lab_page.cells(page).nth(hint)
        first, second = cell.locator("details").nth(0), cell.locator("details").nth(1)
        assert first.locator("summary").inner_text() == "Hint 1"
        text = first.locator("p")
        assert not text.is_visible()
        first.locator("summary").click()
        text.wait_for(state="visible")
        assert "times the same number" in text.inner_text()
        assert not second.locator("p").is_visible()
        lab_page.scroll_to_top(cell)
        screenshot(page, "student-10-hint-open")

        cells = lab_page.cells(page)
        lab_page.replace_cell_source(page, cells.nth(hint + 1), "def double(t):\n    return t")
        test_cell = cells.nth(hint + 2)
        page.keyboard.press("Shift+Enter")
        page.keyboard.press("Shift+Enter")
        lab_page.wait_for_run(page, test_cell, "", "the practice test cell")
        assert _lines(test_cell)[:2] == ["double(t) is not what was expected.",
                                         "  likely mistake: you returned t itself: multiply it by 2"]
    finally:
        student_lab.shut_down_kernels()


def _printed_text(source: str) -> str | None:
    """The text of a test cell's final `print("...")`, its success message."""
    for line in reversed(source.splitlines()):
        match = re.fullmatch(r"\s*print\((['\"])(.*)\1\)\s*", line)
        if match:
            return match.group(2)
    return None


# --- Instructor: the formgrader over a graded class ------------------------------------------

# A small class graded the way `make demo` grades its class (`python -m autograder` with the
# course's nbgrader_config.py), in a copy of the course so the repository's gradebook stays
# as it is. The whole demo class takes minutes; three students on two lessons take seconds.
DEMO_LESSONS = (LESSON, "02_retain_grad")
DEMO_STUDENTS = ("correct", "partial", "blank")


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    """A course root (nbgrader_config.py, solutions/, notebooks/) with a graded demo class."""
    from autograder.demo import Lessons

    base = tmp_path_factory.mktemp("instructor")
    root = base / "course"
    root.mkdir()
    shutil.copy2(REPO_ROOT / "nbgrader_config.py", root)
    for folder in ("solutions", "notebooks"):
        for lesson in DEMO_LESSONS:
            shutil.copytree(REPO_ROOT / folder / lesson, root / folder / lesson,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (root / "scenarios").mkdir()  # the hidden checks the grader scores with
    for lesson in DEMO_LESSONS:
        shutil.copy2(REPO_ROOT / "scenarios" / f"{lesson}.py", root / "scenarios")
    course = Lessons(root, list(DEMO_LESSONS))
    submissions = base / "class"
    for index, lesson in enumerate(DEMO_LESSONS):
        notebooks = {"correct": course.correct(lesson), "blank": course.blank(lesson),
                     "partial": course.partial(lesson, seed=index)}
        for student, notebook in notebooks.items():
            (submissions / student).mkdir(parents=True, exist_ok=True)
            nbformat.write(notebook, submissions / student / f"{lesson}.ipynb")
    out = root / "grading"
    done = subprocess.run(
        [str(VENV_BIN / "python"), "-m", "autograder", "grade", str(submissions),
         "--out", str(out), "--course-root", str(root), "--jobs", "2", "--no-progress"],
        cwd=root, env=lab_page.venv_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return root


@pytest.fixture
def formgrader(graded_course, tmp_path):
    """JupyterLab with nbgrader's formgrader, started from the course root as its root_dir."""
    server = JupyterLab(root_dir=graded_course, state_dir=tmp_path / "jupyter", cwd=graded_course)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _score_text(score: float, max_score: float) -> str:
    """A score as the formgrader writes it (JavaScript's rounding to 2 places)."""
    def number(value: float) -> str:
        value = round(value, 2)
        return str(int(value)) if value == int(value) else str(value)
    return f"{number(score)} / {number(max_score)}"


def _rows(page, text: str | None = None):
    """The rows of the formgrader's table (filled by JavaScript once its API answers)."""
    rows = page.locator("#main-table tr")
    return rows.filter(has_text=text) if text else rows


def _hidden_test_lines(lesson: str) -> set[str]:
    """Lines found only inside the hidden tests of a lesson's solution notebook."""
    solution = nbformat.read(REPO_ROOT / "solutions" / lesson / f"{lesson}.ipynb", as_version=4)
    hidden, visible = set(), set()
    for cell in solution.cells:
        inside = False
        for line in cell.source.splitlines():
            line = line.strip()
            if "### BEGIN HIDDEN TESTS" in line or "### END HIDDEN TESTS" in line:
                inside = "BEGIN" in line
                continue
            (hidden if inside else visible).add(line)
    return {line for line in hidden - visible if len(line) > 15}


def test_instructor_sees_lessons_students_scores_and_feedback(page, formgrader, graded_course):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{graded_course / 'gradebook.db'}") as gradebook:
        assignments = {a.name: a.num_submissions for a in gradebook.assignments}
        students = {s["id"]: (s["score"], s["max_score"]) for s in gradebook.student_dicts()}
        notebook = gradebook.find_submission_notebook(LESSON, LESSON, "partial")
        auto_scores = {grade.name: grade.auto_score for grade in notebook.grades}
        lesson_score = (notebook.score, notebook.max_score)
    # The demo class is what it claims to be.
    assert set(assignments) == set(DEMO_LESSONS)
    assert set(students) == set(DEMO_STUDENTS)
    full = students["correct"][1]
    assert students["correct"][0] == full > 0 and students["blank"][0] == 0
    assert 0 < students["partial"][0] < full

    # 1. The formgrader opens on Manage Assignments: the graded lessons, their submissions.
    page.goto(formgrader.url("formgrader"))
    for lesson, count in assignments.items():
        row = _rows(page, lesson).first
        row.wait_for()
        assert row.locator("td.num-submissions").inner_text().strip() == str(count)
    screenshot(page, "instructor-01-manage-assignments")

    # 2. Manage Students: every demo student with the total score from the gradebook.
    page.get_by_role("link", name="Manage Students").click()
    page.wait_for_url(re.compile(r"/formgrader/manage_students$"))
    for student, (score, max_score) in students.items():
        row = _rows(page).filter(has=page.locator("td.id", has_text=re.compile(
            rf"^\s*{re.escape(student)}\s*$")))
        row.wait_for()
        assert row.locator("td.score").inner_text().strip() == _score_text(score, max_score)
    screenshot(page, "instructor-02-students-and-scores")

    # 3. Click through to the partly right student's lesson 01: the graded notebook, with
    #    the autograder's score in each test cell.
    _rows(page).filter(has=page.locator("td.id", has_text="partial")).locator("a").first.click()
    page.wait_for_url(re.compile(r"/manage_students/partial$"))
    _rows(page, LESSON).first.locator("a").first.click()
    page.wait_for_url(re.compile(rf"/manage_students/partial/{LESSON}$"))
    row = _rows(page, LESSON).first
    assert row.locator("td.score").inner_text().strip() == _score_text(*lesson_score)
    row.locator("a").first.click()
    page.wait_for_url(re.compile(r"/formgrader/submissions/\w+/?$"))
    score_boxes = page.locator("input.score")
    score_boxes.first.wait_for()
    page.wait_for_function("() => [...document.querySelectorAll('input.score')]"
                           ".every(e => e.placeholder !== '')")
    shown = dict(score_boxes.evaluate_all("boxes => boxes.map(b => [b.id, b.placeholder])"))
    assert {name: float(value) for name, value in shown.items()} == auto_scores
    failed = min(auto_scores, key=auto_scores.get)
    page.locator(f"input.score[id='{failed}']").evaluate(
        "box => box.scrollIntoView({block: 'center'})")
    screenshot(page, "instructor-03-graded-submission")

    # 4. The feedback page the student gets (OUT/feedback/<student>/<lesson>.html): the
    #    lesson's score and each test cell's, and nothing of the hidden tests.
    page.goto(formgrader.url(f"files/grading/feedback/partial/{LESSON}.html"))
    header = page.get_by_text(re.compile(rf"^{LESSON} \(Score: [\d.]+ / [\d.]+\)$"))
    header.wait_for()
    numbers = re.findall(r"[\d.]+(?= /|\))", header.inner_text().split("Score:")[1])
    assert tuple(float(n) for n in numbers) == lesson_score
    body = page.locator("body").inner_text()
    assert body.count("Test cell (Score:") == len(auto_scores)
    assert "HIDDEN TESTS" not in body
    leaked = [line for line in _hidden_test_lines(LESSON) if line in body]
    assert not leaked, f"the feedback shows hidden tests: {leaked}"
    screenshot(page, "instructor-04-feedback")


def test_the_feedback_pages_pass_axe_core(browser, graded_course):
    """Each demo student's feedback page (as the grading command writes it, nbgrader's
    template around the course's page included) has no serious or critical WCAG 2.1 A/AA
    violation."""
    # The page forbids every script (its Content-Security-Policy): axe-core gets in only so.
    context = browser.new_context(viewport=LAPTOP, bypass_csp=True, offline=True)
    found = {}
    try:
        page = context.new_page()
        for student in DEMO_STUDENTS:
            feedback = graded_course / "grading" / "feedback" / student / f"{LESSON}.html"
            page.goto(feedback.as_uri())
            page.get_by_text(re.compile(rf"^{LESSON} \(Score: ")).wait_for()
            found[student] = lab_page.axe_violations(page)
    finally:
        context.close()
    problems = "\n".join(f"{student}'s:\n{lab_page.describe_violations(violations, nodes=3)}"
                         for student, violations in found.items() if violations)
    assert not problems, ("axe-core finds serious or critical WCAG 2.1 A/AA violations in the "
                          f"feedback pages:\n{problems}")

