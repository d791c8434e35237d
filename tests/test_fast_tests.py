"""`make test-fast` runs the test files marked `fast` (`pytestmark = pytest.mark.fast`): the
unit-test files, none of whose tests runs a notebook, starts a grader or the hub, or takes more
than a few seconds. These tests hold the files to their place: those known to be fast keep
the marker, the slow ones never get it, and tests/conftest.py fails a fast file's test that
starts a slow program."""

from __future__ import annotations

import ast
import re
import subprocess
import sys

import pytest

from conftest import COURSE_ROOT, LONGEST_FIRST, slow_program, unit_of

pytestmark = pytest.mark.fast

# The unit-test files, each timed with `--durations` (every test under 2 s on a busy two-core
# machine): they stay in test-fast.
FAST = {"checks", "cluster_settings", "cluster_units", "conventions", "docs_standalone",
        "documented_values", "environment", "fast_tests", "grading_units", "hints", "hook_plots",
        "intake_units", "jacobian_plots", "layout", "lesson_text", "memory_bounds", "messages",
        "module_plots", "notebook_structure", "onsubmit_batch", "onsubmit_hostile", "patches",
        "report", "sandbox_leaks", "status", "tasks", "verdicts", "withhold_hidden"}
# Files that stay out of it, and why.
SLOW = {
    "attacks_hub": "makes accounts and runs the hub's instructors' commands as them",
    "grading": "grades classes end to end",
    "hub_cgroups": "starts the feedback-on-submit service and sandboxed notebooks in cgroups",
    "lesson_feedback_08": "runs lesson 08's notebook (its DDP exercise starts two processes)",
    "onsubmit_report": "grades on submit (about 9 s) and drives a browser",
    "sandbox_filter": "enters the sandbox and runs torch.distributed under its filter",
    "sandbox_loopback": "confines two notebooks side by side",
    "socket_queues": "runs a notebook's probe in the sandbox",
    "student_notebooks": "runs every lesson's released notebook",
    "thread_count": "starts a notebook's kernel",
}
SLOW_MARKERS = {"slow", "browser", "hub", "dask"}


def markers(path) -> set[str]:
    """The names of the `pytest.mark.X` in a test file's module-level `pytestmark`."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            return {n.attr for n in ast.walk(node.value)
                    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute)
                    and n.value.attr == "mark"}
    return set()


def marked_files():
    return {path.stem.removeprefix("test_"): markers(path)
            for path in sorted((COURSE_ROOT / "tests").glob("test_*.py"))}


def test_the_fast_files_are_marked_fast_and_the_slow_ones_are_not():
    files = marked_files()
    assert not {*FAST, *SLOW} - set(files), \
        f"FAST or SLOW names a file that is not there: {sorted({*FAST, *SLOW} - set(files))}"
    lost = sorted(name for name in FAST if "fast" not in files[name])
    assert not lost, f"known to be fast but no longer marked fast: {lost}"
    wrong = sorted(name for name in SLOW if "fast" in files[name])
    assert not wrong, f"marked fast, yet slow: {[(n, SLOW[n]) for n in wrong]}"
    both = sorted(name for name, marks in files.items() if "fast" in marks and marks & SLOW_MARKERS)
    assert not both, f"marked fast and also slow, browser, hub or dask: {both}"


def test_make_test_fast_selects_the_marker_and_lints():
    text = (COURSE_ROOT / "Makefile").read_text(encoding="utf-8")
    recipe = re.search(r"^test-fast:(.*)\n((?:\t.*\n)+)", text, re.M)
    assert recipe, "the Makefile has no test-fast target"
    assert "lint" in recipe[1].split(), "test-fast does not run the lint target first"
    assert re.search(r'pytest -m "fast and not slow" \$\(FAST_FILES\)', recipe[2]), recipe[2]
    files = re.search(r"^FAST_FILES = \$\(shell grep -l '(.*)' tests/test_\*\.py\)$", text, re.M)
    assert files, "FAST_FILES is not the files that grep finds marked"
    pattern = re.compile(files[1])  # grep's basic pattern reads the same in Python here
    marked = {path.stem.removeprefix("test_") for path in (COURSE_ROOT / "tests").glob("test_*.py")
              if any(pattern.match(line) for line in path.read_text().splitlines())}
    assert marked == {name for name, marks in marked_files().items() if "fast" in marks}
    assert "FAST_TESTS" not in text, "a hand-kept list of fast test files is back"


@pytest.mark.parametrize("argv, starts", [
    ([sys.executable, "-s", "-B", "-m", "autograder.runner.host", "5", "{}"], "runner host"),
    ([sys.executable, "-m", "ipykernel_launcher", "-f", "k.json"], "kernel"),
    (["/usr/bin/chromium", "--headless"], "browser"),
    ([sys.executable, "-m", "autograder", "grade", "class", "--out", "o"], "grading command"),
    (["/work/.venv/bin/jupyterhub", "-f", "config.py"], "hub"),
    ([sys.executable, "-m", "pytest", "solutions/01/01.ipynb"], "test suite"),
])
def test_the_guard_names_what_a_slow_command_line_starts(argv, starts):
    assert starts in slow_program(argv)


@pytest.mark.parametrize("argv", [
    ["sleep", "600"], [sys.executable, "-c", "print('pytest')"], ["git", "grep", "jupyter"],
    [sys.executable, "-m", "autograder", "release"], ["useradd", "nbgrader"],
])
def test_the_guard_lets_ordinary_programs_run(argv):
    assert slow_program(argv) is None


def test_the_guard_sees_a_fast_test_start_a_program():
    """The audit hook behind the guard records what this (fast) test starts."""
    from conftest import _WATCHING

    assert _WATCHING, "no guard is watching this fast test"
    before = len(_WATCHING[-1])
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert _WATCHING[-1][before:] == [[sys.executable, "-c", "pass"]]


# How xdist's workers share the suite (tests/conftest.py): these tests check unit_of on themselves.
def test_a_lesson_s_test_without_a_wider_fixture_is_a_unit_of_its_own(lesson, request):
    assert unit_of(request.node) == request.node.nodeid


@pytest.fixture(scope="module")
def shared_by_the_file():
    return {}


def test_a_lesson_s_test_with_a_module_fixture_runs_with_its_file(lesson, shared_by_the_file,
                                                                  request):
    shared_by_the_file[lesson] = True
    assert unit_of(request.node) == "tests/test_fast_tests.py"


def test_a_test_without_a_lesson_runs_with_its_file(request):
    assert unit_of(request.node) == "tests/test_fast_tests.py"


def test_the_longest_units_name_files_that_are_there():
    missing = [unit for unit in LONGEST_FIRST
               if not (COURSE_ROOT / unit.split("::")[0]).is_file()]
    assert not missing, f"LONGEST_FIRST names what is no longer there: {missing}"
