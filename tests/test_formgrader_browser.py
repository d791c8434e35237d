"""`make formgrader`: nbgrader's formgrader for a course, opened in Chromium.

The command starts JupyterLab from the course root with nbgrader's instructor panels and prints
the formgrader's address; the test reads that address from the command's output, as an
instructor would, and finds the graded class there: the lesson and its submissions, the
Nbgrader menu's Formgrader in JupyterLab, and a hostile submission whose page runs none of the
scripts the student put into it (a hostile notebook runs nothing in the browser or the
formgrader).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from nbformat.v4 import new_markdown_cell

import browser_support as lab_page
from browser_support import REPO_ROOT, free_port, require_chromium, screenshot, venv_env

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from test_feedback_html import HOSTILE_ANSWER, hostile_markdown

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LESSON = fixture_course.LESSON_A
# A student's note with maths, which the formgrader's view of the submission must typeset.
MATHS_MARKDOWN = (r"My note: the gradient of $y = \sum_i x_i^3$ is "
                  r"$\frac{\partial y}{\partial x_i} = 3x_i^2$.")
URL = re.compile(r"(http://127\.0\.0\.1:\d+/formgrader\?token=\w+)")


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    """The fixture course with a graded class: correct, blank and a hostile student."""
    from autograder.demo import Lessons, _write

    require_chromium()
    base = tmp_path_factory.mktemp("formgrader")
    root = fixture_course.build_course(base / "course")
    lessons = Lessons(root, [LESSON])
    submissions = base / "class"
    correct = lessons.correct(LESSON)
    correct.cells.insert(1, new_markdown_cell(MATHS_MARKDOWN))
    _write(correct, submissions / "correct" / f"{LESSON}.ipynb")
    _write(lessons.blank(LESSON), submissions / "blank" / f"{LESSON}.ipynb")
    hostile = lessons.with_answer(LESSON, HOSTILE_ANSWER, base="correct")
    hostile.cells.insert(1, new_markdown_cell(hostile_markdown()))
    _write(hostile, submissions / "mallory" / f"{LESSON}.ipynb")
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(submissions), "--out",
         str(root / "grading"), "--course-root", str(root), "--jobs", "2", "--timeout", "30",
         "--no-progress"],
        capture_output=True, text=True, env=dict(venv_env(), CI="true"), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    # The summary names the command that opens the formgrader.
    assert "make formgrader" in done.stdout
    return root


@pytest.fixture(scope="module")
def formgrader_run(graded_course, tmp_path_factory):
    """`make formgrader COURSE=...`, started as an instructor would; yields its URL and the
    file with the command's output."""
    state = tmp_path_factory.mktemp("formgrader-state")
    settings = state / "lab-settings"
    for name, values in lab_page.LAB_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(values))
    env = venv_env()
    env.update({name: str(state / sub) for name, sub in (
        ("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_DATA_DIR", "data"), ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
        ("IPYTHONDIR", "ipython"))})
    # `make lab`'s students' configuration must not leak in, even when set in the shell.
    env["JUPYTER_CONFIG_PATH"] = str(REPO_ROOT / "jupyter" / "student")
    port = free_port()
    extra = (f"--no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port_retries=0 "
             f"--LabApp.user_settings_dir={settings} --LabApp.news_url=None "
             f"--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate")
    log_path = state / "make-formgrader.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            ["make", "--no-print-directory", "-C", str(REPO_ROOT), "formgrader",
             f"COURSE={graded_course}", f"PORT={port}", f"FORMGRADER_ARGS={extra}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True)
    try:
        deadline, url = time.monotonic() + 120, None
        while url is None and time.monotonic() < deadline:
            text = log_path.read_text(errors="replace")
            found = URL.search(text)
            if found:
                url = found.group(1)
            elif process.poll() is not None:
                pytest.fail(f"make formgrader exited with {process.returncode}:\n{text[-3000:]}")
            else:
                time.sleep(0.5)
        assert url, "make formgrader printed no formgrader URL:\n" + log_path.read_text()[-3000:]
        assert f":{port}/" in url
        yield url, log_path
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)  # the group started above: make and jupyter
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=20)


@pytest.fixture(scope="module")
def formgrader(formgrader_run):
    """The formgrader's URL."""
    return formgrader_run[0]


@pytest.fixture(scope="module")
def chromium():
    """One Chromium for the module's tests; each test has a context of its own."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=require_chromium(), headless=True,
                                             args=lab_page.CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport=lab_page.VIEWPORT)
    context.set_default_timeout(30_000)
    try:
        yield context.new_page()
    finally:
        context.close()


def test_make_formgrader_shows_the_graded_class(page, formgrader):
    page.goto(formgrader)
    row = page.locator("#main-table tr", has_text=LESSON).first
    row.wait_for()
    assert row.locator("td.num-submissions").inner_text().strip() == "3"
    screenshot(page, "make-formgrader-01-assignments")

    page.get_by_role("link", name="Manage Students").click()
    page.wait_for_url(re.compile(r"/formgrader/manage_students$"))
    for student in ("correct", "blank", "mallory"):
        page.locator("#main-table td.id", has_text=re.compile(rf"^\s*{student}\s*$")).wait_for()
    screenshot(page, "make-formgrader-02-students")


def test_jupyterlab_has_the_instructors_nbgrader_panels(page, formgrader):
    page.goto(formgrader.replace("/formgrader?", "/lab?"))
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$")).click()
    items = page.locator(".lm-Menu-itemLabel")
    items.first.wait_for()
    labels = [label.strip() for label in items.all_inner_texts()]
    assert "Formgrader" in labels, labels
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Formgrader$")).first.click()
    frame = page.frame_locator("iframe").first
    frame.locator("#main-table tr", has_text=LESSON).first.wait_for()
    screenshot(page, "make-formgrader-03-lab-panel")


def test_a_hostile_submission_runs_nothing_in_the_formgrader(page, formgrader):
    page.goto(formgrader)
    page.get_by_role("link", name="Manage Students").click()
    page.wait_for_url(re.compile(r"/formgrader/manage_students$"))
    rows = page.locator("#main-table tr")
    rows.filter(has=page.locator("td.id", has_text="mallory")).locator("a").first.click()
    page.wait_for_url(re.compile(r"/manage_students/mallory$"))
    rows.filter(has_text=LESSON).first.locator("a").first.click()
    page.wait_for_url(re.compile(rf"/manage_students/mallory/{LESSON}$"))
    rows.filter(has_text=LESSON).first.locator("a").first.click()
    page.wait_for_url(re.compile(r"/formgrader/submissions/\w+/?$"))
    page.locator("input.score").first.wait_for()
    page.wait_for_timeout(1000)
    assert "run-print" in page.content()  # the student's output is on the page, as text
    assert page.evaluate("window.__pwned || []") == []
    screenshot(page, "make-formgrader-04-hostile-submission")


def _open_submission(page, student: str) -> None:
    """From the formgrader's start, through Manage Students, to `student`'s submission."""
    page.get_by_role("link", name="Manage Students").click()
    page.wait_for_url(re.compile(r"/formgrader/manage_students$"))
    rows = page.locator("#main-table tr")
    rows.filter(has=page.locator("td.id", has_text=student)).locator("a").first.click()
    page.wait_for_url(re.compile(rf"/manage_students/{student}$"))
    rows.filter(has_text=LESSON).first.locator("a").first.click()
    page.wait_for_url(re.compile(rf"/manage_students/{student}/{LESSON}$"))
    rows.filter(has_text=LESSON).first.locator("a").first.click()
    page.wait_for_url(re.compile(r"/formgrader/submissions/\w+/?$"))
    page.locator("input.score").first.wait_for()


def test_maths_render_in_a_submission_offline(page, formgrader):
    """Offline: with every address but the formgrader's own blocked, a student's maths are
    typeset (MathJax from the Jupyter server), and nothing is asked of the internet."""
    outside = []

    def local_only(route):
        host = urlsplit(route.request.url).hostname
        if host in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.context.route("**/*", local_only)
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(formgrader)
    _open_submission(page, "correct")
    note = page.locator(".text_cell_render", has_text="My note").first
    note.locator(".MathJax").nth(1).wait_for()
    assert note.locator(".MathJax").count() == 2  # both formulas, typeset
    assert "$" not in note.inner_text()  # no TeX left as text
    assert outside == []
    assert errors == []  # the formgrader's own script needs MathJax too
    screenshot(page, "make-formgrader-05-maths-offline")


def test_the_formgrader_has_an_exchange_on_one_machine(page, formgrader_run):
    """Grading locally, the formgrader neither logs that nbgrader's exchange
    folder is unwritable nor warns about it on its assignments page."""
    url, log_path = formgrader_run
    page.goto(url)
    page.locator("#main-table tr", has_text=LESSON).first.wait_for()
    assert page.locator("#warning-exchange").count() == 0
    assert "Unwritable directory" not in log_path.read_text(errors="replace")
