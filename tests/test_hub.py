"""A class on the course's JupyterHub, end to end in Chromium.

`hub/hubctl.py start` (what `make hub` runs) starts a real JupyterHub on a free port of
127.0.0.1, with its state in a temporary folder. An instructor and two students sign up and
the administrator approves them; the instructor releases lesson 01 from the formgrader; each
student fetches it, answers (one all of it, one half), validates and submits; the instructor
collects, grades with the course's command in a JupyterLab terminal and releases the feedback;
each student fetches and opens theirs, and the scores agree everywhere. `make hub-stop` ends
every server; the hub restarts with nothing lost (accounts, exchange, gradebook, homes).

Needs root (the hub runs each user's server as that user's own system account, created for the
test and removed after it), npm (the hub's proxy) and Chromium; without them the tests skip, or
fail under CI=true. Screenshots go to test-artifacts/hub/; the two in docs/images are refreshed
from there with REFRESH_SCREENSHOTS=1.
"""

from __future__ import annotations

import csv
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

import browser_support as lab_page
from browser_support import REPO_ROOT, VENV_BIN, free_port, require_chromium
from conftest import LESSONS
from notebook_support import answer_cells, grading, without_markers

sys.path.insert(0, str(REPO_ROOT / "hub" / "lib"))
from coursehub import settings as class_settings

pytestmark = [pytest.mark.browser, pytest.mark.hub]

LESSON = "01_leaf_and_intermediate"
NOTEBOOK = f"{LESSON}/{LESSON}.ipynb"
LAST_LESSON = LESSONS[-1]  # the course's last lesson, whichever it is
START_PAGE = "START-HERE.md"
PASSWORD = "lesson-01-leaf-tensors"
ARTIFACTS = REPO_ROOT / "test-artifacts" / "hub"
DOC_IMAGES = REPO_ROOT / "docs" / "images"
MEMORY_LIMIT = 4 << 30
VALIDATE_SUCCESS = "Success! Your notebook passes all the tests."
# An answer that tries to read files it must not see while it is graded.
SNOOP = """from pathlib import Path
for _path in {paths!r}:
    try:
        print("READ", _path, Path(_path).read_bytes()[:16].hex())
    except Exception as _error:
        print("BLOCKED", _path, type(_error).__name__)
raise NotImplementedError()
"""


def _on_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_hub_machine() -> None:
    """Root and npm, or skip (fail under CI=true, where they must be there)."""
    missing = None
    if os.geteuid() != 0:
        missing = "the class hub runs users' servers as their own accounts, which needs root"
    elif not shutil.which("npm") and not (REPO_ROOT / "hub" / "node_modules").exists():
        missing = "npm is not installed (the hub's proxy comes from npm): apt-get install npm"
    if missing:
        if _on_ci():
            pytest.fail(f"{missing} (CI=true: the hub tests must run)", pytrace=False)
        pytest.skip(missing)


def hubctl(config: Path, command: str, timeout: float = 300) -> str:
    done = subprocess.run([str(VENV_BIN / "python"), str(REPO_ROOT / "hub" / "hubctl.py"),
                           command, "--config", str(config)], capture_output=True, text=True,
                          timeout=timeout, env=lab_page.venv_env())
    assert done.returncode == 0, f"hubctl {command} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


class ClassHub:
    """A class hub of its own: a state folder, accounts and a group named for this run only."""

    def __init__(self, idle_timeout: int = 3600, cull_every: int = 300,
                 students: tuple[str, ...] = ("ann", "bob"), extra: str = ""):
        prefix = "t" + secrets.token_hex(3)
        self.admin, self.instructor = f"{prefix}-admin", f"{prefix}-teach"
        self.students = tuple(f"{prefix}-{name}" for name in students)
        self.group = f"{prefix}-instructors"
        self.root = Path(tempfile.mkdtemp(prefix="class-hub-"))
        self.root.chmod(0o711)  # students pass through to their home folders
        self.config = self.root / "class.toml"
        self.port = free_port()
        # hide_repository stays off: the test runs in a checkout other tests share, and
        # tests/test_hub_units.py checks what it does on a copy.
        self.config.write_text(f"""
[hub]
ip = "127.0.0.1"
port = {self.port}
state_dir = "state"
hide_repository = false

[accounts]
admins = ["{self.admin}"]
instructors = ["{self.instructor}"]
instructors_group = "{self.group}"

[limits]
memory = "{MEMORY_LIMIT >> 30}G"
idle_timeout = {idle_timeout}
cull_every = {cull_every}
{extra}""")
        self.settings = class_settings.load(self.config)
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def accounts(self) -> tuple[str, ...]:
        return (self.admin, self.instructor, *self.students)

    def start(self) -> str:
        return hubctl(self.config, "start")

    def stop(self) -> str:
        return hubctl(self.config, "stop")

    def remove(self) -> None:
        """Stop the hub, remove the accounts and the group made for the test, and the state."""
        try:
            self.stop()
        finally:
            for name in self.accounts:
                for pid in user_processes(name):
                    try:
                        os.kill(pid, 9)
                    except ProcessLookupError:
                        pass
                subprocess.run(["userdel", name], capture_output=True)
            subprocess.run(["groupdel", self.group], capture_output=True)
            shutil.rmtree(self.root, ignore_errors=True)


def user_processes(name: str) -> list[int]:
    """Process ids running as the account `name`, zombies aside (none if it does not exist)."""
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            match = re.search(r"^Uid:\s+(\d+)", status, re.M)
            zombie = re.search(r"^State:\s+Z", status, re.M)
            if match and int(match.group(1)) == uid and not zombie:
                found.append(int(entry.name))
    return found


def address_space_limit(pid: int) -> int | None:
    line = next(row for row in Path(f"/proc/{pid}/limits").read_text().splitlines()
                if row.startswith("Max address space"))
    soft = line.split()[3]
    return None if soft == "unlimited" else int(soft)


def listening_addresses(pids: list[int]) -> set[str]:
    """The local addresses of TCP sockets in LISTEN state held by these processes."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                address = fields[1].split(":")[0]
                found.add(_ip(address, width))
    return found


def _ip(hex_address: str, width: int) -> str:
    if width == 8:
        return ".".join(str(int(hex_address[i:i + 2], 16)) for i in (6, 4, 2, 0))
    if hex_address == "0" * 32:
        return "::"
    if hex_address == "0000000000000000FFFF0000" + hex_address[24:]:
        return "::ffff:" + _ip(hex_address[24:], 8)
    return "ipv6:" + hex_address


def can_read(account: str, path: Path) -> bool:
    """Whether `account` may read `path` (list it, for a folder)."""
    command = ["ls", str(path)] if path.is_dir() else ["head", "-c1", str(path)]
    return subprocess.run(["runuser", "-u", account, "--", *command],
                          capture_output=True).returncode == 0


def screenshot(page, name: str, doc_image: str | None = None) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    if doc_image and os.environ.get("REFRESH_SCREENSHOTS"):
        shutil.copyfile(path, DOC_IMAGES / doc_image)
    return path


# --- pages ------------------------------------------------------------------------------------

def sign_up(browser, hub: ClassHub, name: str) -> str:
    context = browser.new_context(viewport=lab_page.VIEWPORT)
    try:
        page = context.new_page()
        page.goto(f"{hub.url}/hub/signup")
        page.fill("#username_input", name)
        page.fill("#password_input", PASSWORD)
        page.fill("#password_confirmation_input", PASSWORD)
        page.click("#signup_submit")
        page.wait_for_load_state()
        return page.locator(".alert").first.inner_text()
    finally:
        context.close()


def log_in(context, hub: ClassHub, name: str, next_url: str = ""):
    page = context.new_page()
    page.goto(f"{hub.url}/hub/login" + (f"?next={next_url}" if next_url else ""))
    page.fill("#username_input", name)
    page.fill("#password_input", PASSWORD)
    page.click("#login_submit")
    return page


def open_lab_after_login(page, name: str):
    """After logging in, the hub starts the user's server and opens JupyterLab."""
    page.wait_for_url(re.compile(rf"/user/{name}/lab"), timeout=240_000)
    page.locator(".lm-MenuBar-itemLabel", has_text="File").wait_for(timeout=120_000)
    return page


def reload_lab(page, hub: ClassHub, name: str):
    """JupyterLab loaded again in a logged-in browser (its server still runs): the
    Assignments tab then lists what changed in the exchange meanwhile."""
    page.goto(f"{hub.url}/user/{name}/lab")
    page.locator(".lm-MenuBar-itemLabel", has_text="File").wait_for(timeout=120_000)
    return page


def assignment_list(page):
    """The Assignments tab, opened from the menu, in front and loaded."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    lab_page.menu(page, "Nbgrader", "Assignment List")
    tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Assignments").first
    listing = page.locator("#released_assignments_list")
    # JupyterLab restoring its layout, or opening the file of its URL, may bring another tab
    # to the front after the first click: click again until the list stays in view.
    for _ in range(10):
        tab.click()
        try:
            listing.wait_for(state="visible", timeout=3000)
            page.wait_for_timeout(500)
            if listing.is_visible():
                break
        except PlaywrightTimeout:  # the tab went behind another
            continue
    page.locator("#released_assignments_list_loading").wait_for(state="hidden")
    return page


def formgrader_row(page, text: str):
    row = page.locator("#main-table tr", has_text=text).first
    row.wait_for()
    return row


def formgrader_action(page, lesson: str, column: str) -> str:
    """Click the formgrader's button in `column` of the lesson's row; the dialog's text."""
    formgrader_row(page, lesson).locator(f"td.{column} a").click()
    dialog = page.locator(".modal-dialog", has_text=re.compile(r"Success|Error"))
    dialog.wait_for(timeout=180_000)
    text = dialog.inner_text()
    dialog.get_by_role("button", name="OK").click()
    dialog.wait_for(state="hidden")
    page.locator(".modal-backdrop").wait_for(state="detached")
    return text


def solution_sources() -> dict[str, str]:
    solution = nbformat.read(REPO_ROOT / "solutions" / NOTEBOOK, as_version=4)
    return {grading(cell)["grade_id"]: without_markers(cell.source)
            for cell in answer_cells(solution)}


def lesson_points(lesson: str = LESSON) -> dict[str, float]:
    """Points of each exercise's test cell, by its answer cell's grade id."""
    notebook = nbformat.read(REPO_ROOT / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)
    points, answer = {}, None
    for cell in notebook.cells:
        meta = grading(cell)
        if meta.get("solution"):
            answer = meta["grade_id"]
        elif meta.get("grade") and answer:
            points[answer] = points.get(answer, 0) + float(meta["points"])
    return points


def fetch_answer_and_validate(page, hub: ClassHub, student: str,
                              answers: dict[str, str]) -> None:
    """Fetch the lesson, type `answers` (grade id -> source), press Validate (which saves the
    notebook first); the validation runs on while the test goes on."""
    assignment_list(page)
    page.locator("#released_assignments_list .list_item", has_text=LESSON) \
        .get_by_role("button", name="Fetch").click()
    page.locator("#fetched_assignments_list .list_item", has_text=LESSON).first.wait_for()
    assert (hub.settings.home(student) / NOTEBOOK).is_file(), "Fetch put no notebook in the home"

    page.goto(f"{hub.url}/user/{student}/lab/tree/{NOTEBOOK}")
    notebook = nbformat.read(hub.settings.home(student) / NOTEBOOK, as_version=4)
    cells = lab_page.cells(page)
    page.wait_for_function(f"() => document.querySelectorAll('.jp-NotebookPanel:not("
                           f".lm-mod-hidden) .jp-Notebook .jp-Cell').length == "
                           f"{len(notebook.cells)}", timeout=120_000)
    for index, cell in enumerate(notebook.cells):
        grade_id = grading(cell).get("grade_id")
        if grade_id in answers:
            lab_page.replace_cell_source(page, cells.nth(index), answers[grade_id])
    page.keyboard.press("Escape")
    page.locator(".validate-button").click()


def validated_then_submit(page) -> str:
    """Validate's message once it comes; then Submit in the Assignments tab."""
    dialog = page.locator(".jp-Dialog")
    dialog.get_by_text(re.compile(r"Success!|failed|error", re.I)).first.wait_for(timeout=300_000)
    message = dialog.inner_text()
    if "Validate ran this notebook" in message:
        screenshot(page, "student-validate-summary", doc_image="hub-validate-summary.png")
    dialog.get_by_role("button", name="Ok").click()
    assignment_list(page)
    page.locator("#fetched_assignments_list .list_item", has_text=LESSON).first \
        .get_by_role("button", name="Submit").click()
    page.locator("#submitted_assignments_list .list_item", has_text=LESSON).first.wait_for()
    return message


def start_page_rows(page, reload: tuple | None = None) -> dict[str, str]:
    """The start page's lesson rows by number ("01": the row's text); `reload`: (hub, name) to
    open it afresh first."""
    if reload:  # JupyterLab loaded again reads the open start page afresh from the server
        hub, name = reload
        reload_lab(page, hub, name)
        page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=START_PAGE).first.click()
    # The start page's own view: an open notebook's markdown cells are rendered too.
    view = page.locator(".jp-MarkdownViewer:not(.lm-mod-hidden) .jp-RenderedMarkdown").first
    table = view.locator("table").first
    table.wait_for(timeout=120_000)
    assert "start here" in view.locator("h1").first.inner_text()
    rows = {}
    for row in table.locator("tbody tr").all():
        cells = row.locator("td").all_inner_texts()
        rows[cells[0].strip()] = " | ".join(c.strip() for c in cells)
    return rows


def run_all_of_a_fresh_lesson(page, hub: ClassHub, student: str, lesson: str) -> None:
    """Fetch `lesson`, open it, Run All: every code cell runs, and only the test cells (each
    saying its exercise is not answered yet) have an error; the notebook is saved."""
    assignment_list(page)
    page.locator("#released_assignments_list .list_item", has_text=lesson) \
        .get_by_role("button", name="Fetch").click()
    page.locator("#fetched_assignments_list .list_item", has_text=lesson).first.wait_for()
    path = hub.settings.home(student) / lesson / f"{lesson}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    page.goto(f"{hub.url}/user/{student}/lab/tree/{lesson}/{lesson}.ipynb")
    page.wait_for_function(f"() => document.querySelectorAll('.jp-NotebookPanel:not("
                           f".lm-mod-hidden) .jp-Notebook .jp-Cell').length == "
                           f"{len(notebook.cells)}", timeout=120_000)
    lab_page.wait_for_kernel_idle(page, timeout=120_000)
    cells = lab_page.cells(page)
    last_code = max(i for i, c in enumerate(notebook.cells) if c.cell_type == "code")
    before = lab_page.execution_count(cells.nth(last_code))
    lab_page.menu(page, "Run", "Run All Cells")
    lab_page.wait_for_run(page, cells.nth(last_code), before, "the last code cell",
                          timeout=600)
    page.keyboard.press("Escape")
    page.keyboard.press("ControlOrMeta+s")
    def saved_run() -> bool:
        try:  # read while the server writes it, the file can be empty or cut for a moment
            return bool(nbformat.read(path, as_version=4).cells[last_code].execution_count)
        except (ValueError, nbformat.reader.NotJSONError):
            return False

    wait_until(saved_run, "saved run")
    saved = nbformat.read(path, as_version=4)
    not_run = [i for i, c in enumerate(saved.cells) if c.cell_type == "code"
               and not c.execution_count]
    assert not not_run, f"cells {not_run} of {lesson} did not run"
    failing = [i for i, c in enumerate(saved.cells)
               if any(o.output_type == "error" for o in c.get("outputs", []))]
    assert failing == [i for i, c in enumerate(saved.cells) if grading(c).get("grade")]
    from coursekit.progress import exercise_results
    assert {r.status for r in exercise_results(saved)} == {"unanswered"}


def _no_cgroup_here() -> str:
    """Why this machine gives the hub no cgroup for grading ("" where it does)."""
    from test_hub_cgroups import _root_has_cgroups

    return _root_has_cgroups()


def run_in_terminal(page, command: str) -> None:
    """Open a JupyterLab terminal and type `command` into it."""
    lab_page.menu(page, "File", "New")
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Terminal$")).last.click()
    terminal = page.locator(".jp-Terminal").last
    terminal.wait_for()
    page.locator(".jp-Terminal .xterm-helper-textarea").last.wait_for(state="attached")
    terminal.click()
    page.wait_for_timeout(1000)  # the shell's prompt
    page.keyboard.type(command)
    page.keyboard.press("Enter")


def wait_for_file(path: Path, timeout: float = 600.0) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout:.0f} s"
        time.sleep(1)
    time.sleep(0.5)
    return path.read_text()


def wait_until(condition, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} after {timeout:.0f} s"
        time.sleep(1)


def read_grades(path: Path) -> dict[str, tuple[float, float, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return {row["student_id"]: (float(row["score"]), float(row["max_score"]), row["status"])
                for row in csv.DictReader(handle) if row["lesson"] == LESSON}


# --- the test ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    require_hub_machine()
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
def class_hub():
    hub = ClassHub()
    try:
        yield hub
    finally:
        hub.remove()


def run_in_contexts(browser, run, label: str) -> None:
    """Call `run(new_context)`, where `new_context()` opens a browser context of the lab's
    size; at the end, each context's pages are photographed (`<label>-<context>-<page>`, for
    a failure's evidence) and the contexts closed."""
    contexts = []

    def new_context(**options):
        context = browser.new_context(viewport=lab_page.VIEWPORT, **options)
        context.set_default_timeout(60_000)
        contexts.append(context)
        return context

    try:
        run(new_context)
    finally:
        for index, context in enumerate(contexts):
            for number, page in enumerate(context.pages):
                try:
                    screenshot(page, f"{label}-{index}-{number}")
                except Exception:  # noqa: BLE001 (a screenshot is best effort, never the failure)
                    pass
            context.close()


def test_a_class_releases_works_submits_and_gets_feedback(browser, class_hub):
    run_in_contexts(browser, lambda new_context: _run_class(class_hub, browser, new_context),
                    "last")


def _run_class(hub: ClassHub, browser, new_context) -> None:
    ann, bob = hub.students
    points = lesson_points()
    full = sum(points.values())
    solutions = solution_sources()
    answer_ids = list(points)
    half = answer_ids[: len(answer_ids) // 2]
    answers = {ann: {i: solutions[i] for i in answer_ids}, bob: {i: solutions[i] for i in half}}
    expected = {ann: full, bob: sum(points[i] for i in half)}
    assert 0 < expected[bob] < full
    # In an exercise bob leaves unanswered, his code tries to read the instructors' files.
    course = hub.settings.course_dir
    secrets_ = [course / ".autograder" / "secret", course / "solutions" / NOTEBOOK,
                course / "scenarios" / f"{LESSON}.py", course / "gradebook.db"]
    answers[bob][answer_ids[-1]] = SNOOP.format(paths=[str(p) for p in secrets_])

    timings = {"begin": time.monotonic()}
    # 1. `make hub`: the hub answers on 127.0.0.1 only.
    started = hub.start()
    timings["hub started"] = time.monotonic()
    assert hub.url in started, started
    hub_pid = int((hub.settings.hub_dir / "hub.pid").read_text())
    proxy_pid = int((hub.settings.hub_dir / "proxy.pid").read_text())
    assert listening_addresses([hub_pid, proxy_pid]) == {"127.0.0.1"}

    # 2. Accounts: everyone signs up; the administrator approves the others.
    for name in hub.accounts:
        message = sign_up(browser, hub, name)
        # The administrator's sign-up is approved at once; the others wait for approval.
        assert ("signup was successful" if name == hub.admin else "sent to the admin") \
            in message, message
    page = log_in(new_context(), hub, ann)  # not approved yet: refused, and told why
    assert f"User {ann} has not been authorized" in page.locator(".login_error").inner_text()
    page.context.close()
    # The administrator lands on the sign-ups to approve.
    admin = log_in(new_context(), hub, hub.admin)
    admin.wait_for_url(re.compile(r"/hub/authorize$"))
    for name in (hub.instructor, *hub.students):
        link = admin.locator(f"a[href='/hub/authorize/{name}']")
        assert link.inner_text().strip() == "Authorize"
        with admin.expect_navigation():
            link.click()
        assert admin.locator(f"a[href='/hub/authorize/{name}']").inner_text().strip() \
            == "Unauthorize"

    # 3. Everyone logs in (the hub starts the three servers at once); the instructor
    #    releases lesson 01 from the formgrader.
    teacher_context = new_context()
    logins = {hub.instructor: log_in(teacher_context, hub, hub.instructor)}
    for student in hub.students:
        logins[student] = log_in(new_context(), hub, student)
    pages = {name: open_lab_after_login(page, name) for name, page in logins.items()}
    teacher = pages[hub.instructor]
    # Students land on the course's start page: every lesson, none released yet.
    for student in hub.students:
        rows = start_page_rows(pages[student])
        assert len(rows) == len(LESSONS) and all("not released yet" in row for row in rows.values()), rows
    assert page_menu_items(teacher, "Nbgrader") >= {"Formgrader", "Assignment List"}
    grader = teacher_context.new_page()
    grader.goto(f"{hub.url}/hub/user-redirect/formgrader")
    assert "Successfully created the student version" in \
        formgrader_action(grader, LESSON, "assign")
    assert "Successfully released" in formgrader_action(grader, LESSON, "release")
    # Generate made what `make release` makes (navigation, points, Run All past an exercise).
    outbound = hub.settings.exchange_dir / hub.settings.course_id / "outbound"
    assert (outbound / NOTEBOOK).read_bytes() == (REPO_ROOT / "notebooks" / NOTEBOOK).read_bytes()
    assert "Successfully created the student version" in \
        formgrader_action(grader, LAST_LESSON, "assign")
    assert "Successfully released" in formgrader_action(grader, LAST_LESSON, "release")
    timings["release"] = time.monotonic()

    # 4. Each student fetches, answers and validates (both validations run together), then
    #    submits.
    student_pages = {student: pages[student] for student in hub.students}
    for student, page in student_pages.items():
        # A student's JupyterLab: the Assignments list and Validate, no instructor panels.
        assert page_menu_items(page, "Nbgrader") == {"Assignment List"}
        # The start page, opened again, says what is released and to fetch it.
        rows = start_page_rows(page, reload=(hub, student))
        assert "released: Fetch it" in rows["01"] and "released: Fetch it" in rows[LAST_LESSON[:2]], rows
        assert "not released yet" in rows["02"], rows
        response = page.context.request.get(f"{hub.url}/user/{student}/formgrader")
        assert response.status == 404, "a student's server serves the formgrader"
        fetch_answer_and_validate(page, hub, student, answers[student])
    for student, page in student_pages.items():
        message = validated_then_submit(page)
        if student == ann:
            assert VALIDATE_SUCCESS in message, message
        else:  # Validate sums up, as with `make lab`: the exercises that pass, and the points.
            assert VALIDATE_SUCCESS not in message, message
            assert "Validate ran this notebook from the top in a fresh kernel" in message, message
            assert re.search(r"Result: \d+ of \d+ exercises pass \(\d+ of \d+ points\)\.",
                             message), message
    assignment_list(student_pages[ann])
    screenshot(student_pages[ann], "student-assignments-submitted")
    timings["submit"] = time.monotonic()

    # Ann fetches the last lesson: Run All goes past every unanswered exercise to the last cell.
    run_all_of_a_fresh_lesson(student_pages[ann], hub, ann, LAST_LESSON)
    rows = start_page_rows(student_pages[ann], reload=(hub, ann))
    assert re.search(r"0 of \d+ exercises pass", rows[LAST_LESSON[:2]]), rows
    # docs/images/hub-start-page.png shows a class with feedback on submit (its alt text says
    # so), taken from a first-time instructor's class run through: this one is a test artifact only.
    screenshot(student_pages[ann], "student-start-page")
    timings["run all"] = time.monotonic()

    # Each server runs as its own account with the class's memory limit, its home is its own,
    # and no student reads another's files, the course folder or the exchange's submissions.
    for student in hub.students:
        processes = user_processes(student)
        assert processes, f"no process runs as {student}"
        assert {address_space_limit(pid) for pid in processes} == {MEMORY_LIMIT}
        assert listening_addresses(processes) <= {"127.0.0.1"}
        home = hub.settings.home(student)
        assert home.stat().st_uid == pwd.getpwnam(student).pw_uid
        assert oct(home.stat().st_mode & 0o777) == oct(0o700)
    assert can_read(ann, hub.settings.home(ann) / NOTEBOOK)
    assert not can_read(ann, hub.settings.home(bob))
    assert not can_read(ann, hub.settings.home(bob) / NOTEBOOK)
    assert not can_read(ann, hub.settings.course_dir)
    assert not can_read(ann, hub.settings.course_dir / "gradebook.db")
    assert not can_read(ann, hub.settings.exchange_dir / hub.settings.course_id / "inbound")
    assert can_read(hub.instructor, hub.settings.course_dir / "gradebook.db")

    # The gradebook lists the class from the hub's users (the hub adds each student when
    # their server starts), before anything is collected.
    wait_until(lambda: gradebook_students(hub) == set(hub.students), "students in the gradebook")

    # 5. The instructor collects, then grades with the course's command in a terminal.
    grader.goto(f"{hub.url}/hub/user-redirect/formgrader")
    assert "Successfully collected" in formgrader_action(grader, LESSON, "collect")
    for student in hub.students:
        assert (hub.settings.course_dir / "submitted" / student / NOTEBOOK).is_file()
    # The terminal opens in the course folder, the instructor's JupyterLab's root.
    # Then the grades go out for Canvas: typed in the course folder, the export finds it.
    run_in_terminal(teacher, "python -m autograder grade submitted --out grading "
                             "--course-root . --no-progress; echo $? > grading-exit-status; "
                             "python -m autograder export --to canvas > export-said.txt 2>&1; "
                             "echo $? > export-exit-status")
    status = wait_for_file(hub.settings.course_dir / "grading-exit-status")
    grades_csv = hub.settings.course_dir / "grading" / "grades.csv"
    assert status.strip() == "0", (grades_csv.parent / "grading.log").read_text()[-3000:]
    grades = read_grades(grades_csv)
    assert {s: grades[s][:2] for s in hub.students} == {s: (expected[s], full)
                                                       for s in hub.students}, grades
    assert {grades[s][2] for s in hub.students} == {"graded"}
    # Bob's code ran while grading, and read none of the instructors' files.
    graded = nbformat.read(course / "autograded" / bob / NOTEBOOK, as_version=4)
    printed = "".join(output.get("text", "") for cell in graded.cells if cell.cell_type == "code"
                      for output in cell.get("outputs", []))
    assert printed.count("BLOCKED") == len(secrets_) and "READ " not in printed, printed
    # It graded in the instructor's own cgroup, set up by the hub at its start: each notebook
    # had the sandbox's cgroup, and no warning of weaker limits was printed.
    log = (grades_csv.parent / "grading.log").read_text()
    no_cgroup = _no_cgroup_here()
    assert no_cgroup or "limits are weaker" not in log, log[:3000]
    assert no_cgroup or (hub.settings.state_dir / "cgroups.json").is_file(), no_cgroup
    # The export, typed after it, wrote the gradebook's grades for Canvas.
    status = wait_for_file(hub.settings.course_dir / "export-exit-status")
    said = (hub.settings.course_dir / "export-said.txt").read_text()
    assert status.strip() == "0", said
    exported = hub.settings.course_dir / "grading" / "export-canvas.csv"
    assert str(exported) in said
    with open(exported, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    column = next(i for i, header in enumerate(rows[0]) if header.startswith(LESSON))
    assert {row[3]: float(row[column]) for row in rows[2:] if row[3] in hub.students} == \
        {s: float(expected[s]) for s in hub.students}, rows
    timings["graded"] = time.monotonic()

    # 6. The instructor releases the feedback; the formgrader shows the class's scores.
    grader.reload()
    assert "Successfully released feedback" in \
        formgrader_action(grader, LESSON, "release-feedback")
    row = formgrader_row(grader, LESSON)
    assert row.locator("td.status").inner_text().strip() == "released"
    assert row.locator("td.num-submissions").inner_text().strip() == str(len(hub.students))
    screenshot(grader, "instructor-formgrader-assignments", doc_image="hub-formgrader.png")
    grader.get_by_role("link", name="Manage Students").click()
    for student in hub.students:
        row = grader.locator("#main-table tr", has=grader.locator(
            "td.id", has_text=re.compile(rf"^\s*{re.escape(student)}\s*$")))
        row.wait_for()
        # Of every lesson in the gradebook: lesson 07, released, was not submitted.
        assert row.locator("td.score").inner_text().strip() == \
            f"{expected[student]:g} / {full + sum(lesson_points(LAST_LESSON).values()):g}"
    screenshot(grader, "instructor-formgrader-students")

    # 7. Each student fetches and opens their feedback: the score they see is the grade.
    for student in hub.students:
        page = reload_lab(student_pages[student], hub, student)
        assignment_list(page)
        submitted = page.locator("#submitted_assignments_list .list_item", has_text=LESSON).first
        submitted.get_by_role("button", name="Fetch Feedback").click()
        view = page.get_by_text("view feedback").first
        view.wait_for()
        # "view feedback" opens its folder in the file browser; the student opens the page.
        view.click()
        item = page.locator(".jp-DirListing-item", has_text=f"{LESSON}.html")
        item.wait_for()
        if student == ann:
            screenshot(page, "student-assignments-feedback",
                       doc_image="hub-student-assignments.png")
        item.dblclick()
        viewer = page.frame_locator(".jp-HTMLViewer iframe").last
        header = viewer.get_by_text(re.compile(rf"{LESSON} \(Score: [\d.]+ / [\d.]+\)"))
        header.first.wait_for()
        shown = re.search(r"Score: ([\d.]+) / ([\d.]+)", header.first.inner_text())
        assert (float(shown.group(1)), float(shown.group(2))) == (expected[student], full)
        screenshot(page, f"student-feedback-{'right' if student == ann else 'partial'}")

    timings["feedback"] = time.monotonic()
    # 8. `make hub-stop`, with every server running: the hub and every server it started are
    #    gone.
    assert "stopped" in hub.stop()
    for name in hub.accounts:
        assert not user_processes(name), f"{name} still has processes after hub-stop"

    # 9. The hub starts again and has lost nothing: the accounts (a student logs in, to the
    #    hub's home page, which starts no server), the exchange (the released lesson, both
    #    submissions, the feedback), the gradebook's grades and the students' homes.
    hub.start()
    home = log_in(new_context(), hub, ann, next_url="/hub/home")
    home.wait_for_url(re.compile(r"/hub/home$"))
    assert not user_processes(ann)
    exchange = hub.settings.exchange_dir / hub.settings.course_id
    assert (exchange / "outbound" / NOTEBOOK).is_file()
    assert len(list((exchange / "feedback").glob("*.html"))) == len(hub.students)
    for student in hub.students:
        assert len(list((exchange / "inbound").glob(f"{student}+{LESSON}+*"))) == 1, student
        assert (hub.settings.home(student) / NOTEBOOK).is_file()
        assert list((hub.settings.home(student) / LESSON / "feedback").glob(f"*/{LESSON}.html"))
    assert gradebook_scores(hub) == expected
    hub.stop()
    timings["restarted"] = time.monotonic()
    steps = list(timings.items())
    print("time per step: " + ", ".join(f"{name} {now - before:.0f} s" for (_, before), (name, now)
                                          in zip(steps, steps[1:])))


def page_menu_items(page, top: str) -> set[str]:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^{top}$")).click()
    items = {t.strip() for t in page.locator(".lm-Menu-itemLabel").all_inner_texts() if t.strip()}
    page.keyboard.press("Escape")
    return items


def gradebook_scores(hub: ClassHub, students: tuple[str, ...] = ()) -> dict[str, float]:
    """Lesson 01's score of `students` (default: all) in the class's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{hub.settings.course_dir / 'gradebook.db'}",
                   hub.settings.course_id) as gradebook:
        return {student: gradebook.find_submission(LESSON, student).score
                for student in students or hub.students}


def gradebook_students(hub: ClassHub) -> set[str]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{hub.settings.course_dir / 'gradebook.db'}",
                   hub.settings.course_id) as gradebook:
        return {student.id for student in gradebook.students}
