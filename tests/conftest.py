"""Shared fixtures: where the course lives and how to read its notebooks; the guard that keeps
a test file marked `fast` (`make test-fast`) from starting a grader, a notebook, the hub or a
browser; the thread count of nbval's kernels; and how xdist's two workers share the suite."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from autograder.release import COURSE_ROOT, lessons

LESSONS = lessons(COURSE_ROOT)
SPEC_EXAMPLES = json.loads((Path(__file__).parent / "fixtures" / "spec_examples.json").read_text())


def solution_path(lesson: str) -> Path:
    return COURSE_ROOT / "solutions" / lesson / f"{lesson}.ipynb"


def student_path(lesson: str) -> Path:
    return COURSE_ROOT / "notebooks" / lesson / f"{lesson}.ipynb"


def read_notebook(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


@pytest.fixture(params=LESSONS)
def lesson(request: pytest.FixtureRequest) -> str:
    return request.param


# The stored outputs must not depend on the CPU: floating-point sums change their last digits
# with torch's thread count as they do with the CPU. So the suite's nbval run of solutions/ gives
# each notebook's kernel another thread count than the default (one thread a core): one, or two
# on a one-core machine. A lesson that prints digits only one machine agrees on fails there; print
# such values rounded to what every CPU agrees on. (A lesson that sets its thread count itself,
# as 07 does for its training runs, keeps its own.)
def other_thread_count() -> int:
    """One torch thread, or two where the default is one."""
    import torch

    return 1 if torch.get_num_threads() > 1 else 2


def ipython_dir_with_threads(where: Path, threads: int) -> Path:
    """An IPYTHONDIR whose start-up file sets torch's thread count in every kernel started with
    it, before the notebook's first cell."""
    startup = where / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-threads.py").write_text(f"import torch\ntorch.set_num_threads({threads})\n")
    return where


class _SolutionKernelsThreads:
    """Starts the kernels of nbval's run of solutions/ with IPYTHONDIR set to
    ipython_dir_with_threads (those kernels only: nothing else sees it)."""

    folder: Path | None = None

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item):
        if item.path.suffix != ".ipynb" or COURSE_ROOT / "solutions" not in item.path.parents:
            return (yield)
        if self.folder is None:
            self.folder = ipython_dir_with_threads(
                Path(tempfile.mkdtemp(prefix="nbval-threads-")), other_thread_count())
        before = os.environ.get("IPYTHONDIR")
        os.environ["IPYTHONDIR"] = str(self.folder)  # a notebook's kernel starts with its first cell
        try:
            return (yield)
        finally:
            if before is None:
                os.environ.pop("IPYTHONDIR", None)
            else:
                os.environ["IPYTHONDIR"] = before

    def pytest_unconfigure(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_SolutionKernelsThreads(), "solution-kernels-threads")
    if not hasattr(config, "workerinput"):  # the controller, or a run without workers
        config.stash[_UNITS_FILE] = Path(tempfile.mkdtemp(prefix="xdist-units-")) / "units.json"


def pytest_unconfigure(config: pytest.Config) -> None:
    if _UNITS_FILE in config.stash:
        shutil.rmtree(config.stash[_UNITS_FILE].parent, ignore_errors=True)


# What a program's command line starts, by the words that name it: a fast test starts none.
_SLOW_PROGRAMS = {
    "autograder.runner.host": "a runner host (it runs notebooks' cells)",
    "ipykernel_launcher": "a notebook's kernel",
    "ipykernel": "a notebook's kernel",
    "jupyter": "Jupyter",
    "jupyter-lab": "JupyterLab",
    "jupyter-nbconvert": "a notebook run by nbconvert",
    "jupyterhub": "the class hub",
    "jupyterhub-singleuser": "a hub's notebook server",
    "nbgrader": "nbgrader",
    "chromium": "a browser",
    "dask": "a Dask cluster",
    "pytest": "a test suite",
}
_GRADING_COMMANDS = {"grade", "demo", "execute"}


def slow_program(argv: list[str]) -> str | None:
    """What the command line `argv` starts when that makes a test slow (a grader, a notebook,
    the hub, a browser, another test run), else None: by its program, or the module that
    `python -m` runs."""
    if not argv:
        return None
    program = os.path.basename(argv[0])
    if program in _SLOW_PROGRAMS:
        return _SLOW_PROGRAMS[program]
    if "-m" in argv[1:-1]:
        at = argv.index("-m", 1)
        module, command = argv[at + 1], argv[at + 2:at + 3]
        if module in _SLOW_PROGRAMS:
            return _SLOW_PROGRAMS[module]
        if module == "autograder" and _GRADING_COMMANDS & set(command):
            return f"the grading command (autograder {command[0]})"
    return None


_WATCHING: list[list[list[str]]] = []


def _record_programs(event: str, args: tuple) -> None:
    if not _WATCHING:
        return
    if event not in ("subprocess.Popen", "os.posix_spawn", "os.exec"):
        return
    argv = args[1]  # each of these events passes the command line second
    if isinstance(argv, (str, bytes, os.PathLike)):
        argv = os.fsdecode(argv).split()  # shell=True: the words of the line
    argv = [os.fsdecode(word) if isinstance(word, (bytes, os.PathLike)) else str(word)
            for word in argv or ()]
    for started in _WATCHING:
        started.append(argv)


sys.addaudithook(_record_programs)


@pytest.fixture(autouse=True)
def _fast_tests_start_nothing_slow(request: pytest.FixtureRequest):
    """A test of a file marked `fast` fails when it started a grader, a notebook's kernel or
    runner host, the hub, a browser or another test run: that file belongs out of test-fast
    (or that test, marked `slow`, which test-fast leaves out)."""
    node = request.node
    if node.get_closest_marker("fast") is None or node.get_closest_marker("slow") is not None:
        yield
        return
    started: list[list[str]] = []
    _WATCHING.append(started)
    try:
        yield
    finally:
        _WATCHING.remove(started)
    slow = [(what, argv) for argv in started if (what := slow_program(argv))]
    if slow:
        what, argv = slow[0]
        pytest.fail(f"{request.node.nodeid} is in a file marked fast (its pytestmark) yet started "
                    f"{what}: {' '.join(argv)[:300]}. Take the fast marker off that file "
                    "or mark this test slow (make test-fast runs no notebook, grader, hub or "
                    "browser).", pytrace=False)


# Sharing the suite between pytest-xdist's two workers (pyproject.toml: `-n 2 --dist
# loadscope`, with the scheduler below). A unit of work runs whole on one worker, in its order:
# a test file, so that its module-scoped fixtures (a graded class, a server) and module-level
# caches are built once, and an nbval notebook, whose cells share one kernel. A test that takes
# a `lesson` and no fixture wider than a test is a unit of its own instead: a file of eight
# lessons' tests runs on both workers (their helpers' per-lesson caches are built at most once
# on each). (xdist's own `--dist loadgroup` cannot group them here: it marks a test's group in
# its id, which pytest 9 no longer lets a plugin change.)
_SHARED_SCOPES = {"class", "module", "package"}
_UNITS_FILE = pytest.StashKey[Path]()


def unit_of(item: pytest.Item) -> str:
    """The unit of work that `item` runs in: its file, or itself."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and isinstance(callspec.params.get("lesson"), str):
        definitions = getattr(item, "_fixtureinfo", None)
        if definitions is not None and not any(
                definition.scope in _SHARED_SCOPES
                for defs in definitions.name2fixturedefs.values() for definition in defs):
            return item.nodeid
    return item.nodeid.split("::")[0]


# The units that take longest, longest first: each worker takes the next unit as it finishes
# one, so the longest start first and the short ones fill the end. One not named here comes
# after them, in the order pytest collected it. Measured with benchmarks/suite_times.py (which
# prints this list from a run's times, and reads runs of parts of the suite as one) on the
# course's two-core machine, under load: by test time and CPU time, a grading file's CPU
# counting every process of its grading runs. A test of test_scenarios.py is short since
# scenario_support computes an exercise's reference and mistakes once per worker; the one that
# judges 08-ex3's (DDP's) mistakes, and the solutions' runs of test_student_notebooks.py (a kernel
# each), are the longest units of one test. nbval's run of lesson 07 is no longer the longest
# unit since tests/nbval_sanitize.cfg no longer scans its figures' base64 text quadratically, nor
# test_release.py since the release runs nbgrader once for all the lessons (7 s of CPU, not 25).
LONGEST_FIRST = [
    "tests/test_misconceptions_grading.py",
    "tests/test_grading.py",
    "tests/test_attacks_sandbox.py",
    "tests/test_browser.py",
    "tests/test_attacks_verdicts.py",
    "tests/test_attacks_confinement.py",
    "tests/test_student_notebooks.py::test_pasted_solutions_pass_and_blank_answers_fail"
    "[06_module_hooks]",
    "tests/test_formgrader_browser.py",
    "tests/test_exchange.py",
    "tests/test_grading_equivalence.py",
    "tests/test_manual_grades.py",
    "solutions/06_module_hooks/06_module_hooks.ipynb",
    "solutions/07_hooks_in_practice/07_hooks_in_practice.ipynb",
    "tests/test_release.py",
    "solutions/03_tensor_hooks/03_tensor_hooks.ipynb",
    "solutions/04_vector_jacobian_products/04_vector_jacobian_products.ipynb",
    "tests/test_student_notebooks.py::test_pasted_solutions_pass_and_blank_answers_fail"
    "[07_hooks_in_practice]",
    "tests/test_attacks_refactor.py",
    "tests/test_scenarios.py::test_every_mistake_is_told_apart_from_the_reference"
    "[08_hooks_in_a_training_stack-08-ex3]",
    "tests/test_student_notebooks.py::test_pasted_solutions_pass_and_blank_answers_fail"
    "[08_hooks_in_a_training_stack]",
    "solutions/08_hooks_in_a_training_stack/08_hooks_in_a_training_stack.ipynb",
]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests in the order the workers take them (LONGEST_FIRST first); a worker also
    writes each test's unit for the scheduler (the same on every worker)."""
    rank = {unit: index for index, unit in enumerate(LONGEST_FIRST)}
    units = {item.nodeid: unit_of(item) for item in items}
    order = {item.nodeid: (rank.get(units[item.nodeid], len(rank)), index)
             for index, item in enumerate(items)}
    items.sort(key=lambda item: order[item.nodeid])
    target = getattr(config, "workerinput", {}).get("units_file")
    if target and config.workerinput.get("workerid") == "gw0":
        Path(target).write_text(json.dumps(units), encoding="utf-8")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """(xdist, in the controller) where the workers write the tests' units."""
    node.workerinput["units_file"] = str(node.config.stash[_UNITS_FILE])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        """xdist's loadscope, with the units of unit_of as its scopes."""

        units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None:  # written before the workers reported their collection
                self.units = json.loads(config.stash[_UNITS_FILE].read_text(encoding="utf-8"))
            return self.units.get(nodeid) or nodeid.split("::")[0]

    return ByUnit(config, log)
