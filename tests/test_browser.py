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


@pytest.fixture
def student_lab(tmp_path):
    """JupyterLab as `make lab` starts it (from the repository root, so that nbgrader's
    Validate reads the course's nbgrader_config.py, and with the students' Jupyter
    configuration in jupyter/student), over a copy of notebooks/: the test never changes the
    repository's notebooks."""
    notebooks = tmp_path / "notebooks"
    shutil.copytree(REPO_ROOT / "notebooks", notebooks,
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    server = JupyterLab(root_dir=notebooks, state_dir=tmp_path / "jupyter", cwd=REPO_ROOT,
                        config_path=REPO_ROOT / "jupyter" / "student")
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
    # Students get nbgrader's Validate button, not its instructor panels.
    assert page.locator(".validate-button").is_visible()
    assert page.get_by_text("Create Assignment").count() == 0
    screenshot(page, "student-01-lesson-opened")

    # 2. Run > Run All Cells. Run All stops at the first failing cell: the test cell under
    #    the first (unanswered) exercise, which says what is missing.
    lab_page.menu(page, "Run", "Run All Cells")
    test_cell = cells.nth(first_test)
    lab_page.wait_for_run(page, test_cell, "", "the first exercise's test cell")
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
    lab_page.wait_for_run(page, test_cell, before, "the test cell after answering")
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
    lab_page.wait_for_run(page, cells.nth(last_code), before, "the last cell")
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
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
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
