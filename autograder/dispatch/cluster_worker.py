"""A Dask worker's side of grading on a cluster (`autograder.dispatch.cluster` is the command's).

`GraderPlugin` checks, on each worker, that it can grade the course (its sandbox probe passes;
its course, grader code and course secret have the same digests as the command's) and warms
what a local grading worker keeps warm; only then does the worker advertise the run's
resource. `grade_chunk` grades a chunk of notebooks in a scratch course of the worker's own
and returns plain data as JSON: each Result, the autograded and feedback files, and the
gradebook's rows for the submission.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import hashlib
import hmac
import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

from autograder.tasks import GradingOptions, Task

COURSE_ENV = "AUTOGRADER_COURSE"  # a worker's course root (default: the installed repository)
HOLD_ENV = "AUTOGRADER_CLUSTER_HOLD"  # tests: a folder; each notebook waits there for "go"
RESOURCE_PREFIX = "autograder-"
TREES = ("scenarios", "solutions", "notebooks", "nbgrader_config.py")
CODE = "the grader's code (autograder/, coursekit/)"
SECRET = "the course secret (.autograder/secret)"
_SKIPPED = ("__pycache__", ".ipynb_checkpoints")
# What of the command's options a worker grades with (the rest is the worker's own).
SHARED_OPTIONS = ("timeout", "memory_limit", "share_prologue", "notebook_timeout",
                  "withhold_hidden")


class ClusterError(RuntimeError):
    """The cluster cannot grade this class; the message says why and what to do."""


# --------------------------------------------------------------------------------------------
# What must be the same on a worker as in the command

def _tree_digest(path: Path, suffixes: tuple[str, ...] = ()) -> str:
    if not path.exists():
        return "absent"
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(
        p for p in path.rglob("*") if p.is_file() and not p.is_symlink()
        and not any(part in _SKIPPED for part in p.relative_to(path).parts)
        and (not suffixes or p.suffix in suffixes))
    for file in files:
        digest.update(str(file.relative_to(path.parent)).encode() + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def secret_fingerprint(root: Path) -> str:
    """A fingerprint of the course secret that does not reveal it; "absent" without one."""
    try:
        secret = bytes.fromhex((Path(root) / ".autograder" / "secret").read_text().strip())
    except (OSError, ValueError):
        return "absent"
    return hmac.new(secret, b"autograder cluster: the same course secret",
                    hashlib.sha256).hexdigest()


def course_digest(root: Path) -> dict[str, str]:
    """Digests of what decides a grade: the course's trees, the grader's code, the secret."""
    import autograder
    import coursekit

    root = Path(root)
    parts = {f"{name}/" if not name.endswith(".py") else name: _tree_digest(root / name)
             for name in TREES}
    code = hashlib.sha256()
    for package in (autograder, coursekit):
        code.update(_tree_digest(Path(package.__file__).resolve().parent, (".py",)).encode())
    parts[CODE] = code.hexdigest()
    parts[SECRET] = secret_fingerprint(root)
    return parts


def worker_course() -> Path:
    from autograder.release import COURSE_ROOT

    return Path(os.environ.get(COURSE_ENV) or COURSE_ROOT).resolve()


# --------------------------------------------------------------------------------------------
# The worker's side

class _Worker:
    """This worker process's grading state: refused (why), or warm for one run's spec."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.key: str | None = None
        self.problem: str | None = None
        self.options: GradingOptions | None = None
        self.config = None
        self.scratch: Path | None = None
        self.lessons: set[str] = set()

    def prepare(self, spec: dict, threads: int) -> str | None:
        """Check this worker and warm it for `spec`; the reason it refuses, or None."""
        with self.lock:
            if self.key == spec["key"]:
                return self.problem
            self.close()
            self.key, self.problem = spec["key"], _refusal(spec)
            if self.problem is None:
                try:
                    self._warm(spec, threads)
                except Exception as err:  # noqa: BLE001 (said to the command, never graded)
                    self.problem = f"it could not start grading ({type(err).__name__}: {err})"
            return self.problem

    def _warm(self, spec: dict, threads: int) -> None:
        from autograder.trusted import executor
        from autograder.trusted.autograde import grading_config
        from autograder.nbgrader_glue.gradebook import install_gradebook_lock
        from autograder.nbgrader_glue.inproc import warm_feedback

        for name, value in (("NBFORMAT_VALIDATOR", "fastjsonschema"),
                            ("MPLBACKEND", "module://matplotlib_inline.backend_inline"),
                            ("PYDEVD_DISABLE_FILE_VALIDATION", "1")):
            os.environ.setdefault(name, value)
        root = worker_course()
        self.scratch = Path(tempfile.mkdtemp(prefix="autograder-worker-"))
        course = self.scratch / "course"
        course.mkdir()
        self.options = GradingOptions(course_root=str(root), out=str(self.scratch / "out"),
                                      engine="fork", sandbox=True, threads=max(1, threads),
                                      lock_path=str(self.scratch / "gradebook.lock"),
                                      **{name: spec["options"][name] for name in SHARED_OPTIONS})
        install_gradebook_lock(self.options.lock_path)
        config = grading_config(self.options)
        # nbgrader's folders and gradebook are the worker's own; the lessons are its course's.
        config.CourseDirectory.root = str(course)
        config.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
        config.CourseDirectory.source_directory = str(root / "solutions")
        self.config, self.lessons = config, set()
        executor.ForkedExecute.preload = list(spec["preload"])
        executor.ForkedExecute(config=config).host()
        warm_feedback(config)

    def close(self) -> None:
        from autograder.trusted import executor

        with self.lock:
            executor.shutdown()
            if self.scratch is not None:
                remove_tree(self.scratch)
            self.key = self.problem = self.options = self.config = self.scratch = None


def _refusal(spec: dict) -> str | None:
    from autograder.sandbox.confine import check_available

    problem = check_available()
    if problem:
        return f"it cannot confine notebooks: {problem}"
    root = worker_course()
    ours = course_digest(root)
    differ = [name for name, digest in spec["digest"].items() if ours.get(name) != digest]
    if differ:
        return (f"its course ({root}) differs from the command's in {', '.join(differ)}: give "
                f"it the same commit and course secret, or point {COURSE_ENV} at a copy")
    return None


_STATE = _Worker()


def remove_tree(path: Path) -> None:
    """Remove a folder nbgrader may have made read-only."""
    for dirpath, dirnames, _ in os.walk(path):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
    shutil.rmtree(path, ignore_errors=True)


try:
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # pragma: no cover (dask is a locked dependency)
    WorkerPlugin = object


class GraderPlugin(WorkerPlugin):
    """Checks a worker and warms it at start; advertises the run's resource only if it may
    grade. Registered by the command; Dask applies it to workers that join later too."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.name = RESOURCE_PREFIX + spec["key"]

    async def setup(self, worker) -> None:
        threads = worker.state.nthreads
        loop = asyncio.get_running_loop()
        # In the worker's own task thread (it lives as long as the worker): the runner host
        # ends with the thread that started it.
        problem = await loop.run_in_executor(worker.executors["default"], _STATE.prepare,
                                             self.spec, threads)
        if problem is None:
            await worker.set_resources(**{self.name: 1})
        else:
            worker.log_event("autograder", {"refused": problem})


atexit.register(_STATE.close)  # the worker's scratch course and runner host go with it


def worker_report(spec_key: str) -> dict:
    """For the command: whether this worker may grade the run `spec_key`, and why not."""
    if _STATE.key != spec_key:
        return {"ready": False, "problem": "it has not checked the course yet"}
    return {"ready": _STATE.problem is None, "problem": _STATE.problem}


def _hold(task: Task) -> None:
    """Tests: say that this notebook started (this process's id), then wait for "go"."""
    folder = os.environ.get(HOLD_ENV)
    if not folder:
        return
    name = f"started-{os.getpid()}-{task.student}-{task.lesson}"
    Path(folder, name).write_text(f"{os.getpid()}\n")
    deadline = time.monotonic() + 300
    while not Path(folder, "go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _read_files(folder: Path) -> list[dict]:
    return [{"name": p.name, "mode": p.stat().st_mode & 0o777,
             "data": base64.b64encode(p.read_bytes()).decode()}
            for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink()] \
        if folder.is_dir() else []


def grade_chunk(spec: dict, chunk: list[dict]) -> str:
    """A Dask task: grade `chunk`'s notebooks ({task, notebook, timestamp_text, duedate}, plain
    data) here; return them as JSON (plain data)."""
    from distributed import get_worker

    state = _STATE
    with state.lock:
        problem = state.prepare(spec, get_worker().state.nthreads)
        if problem:
            raise ClusterError(f"this worker refuses to grade: {problem}")
        return json.dumps([_grade_one(state, task) for task in chunk])


def _grade_one(state: _Worker, shipped: dict) -> dict:
    from nbgrader.api import MissingEntry

    from autograder.dispatch.grade_task import grade_task
    from autograder.nbgrader_glue.gradebook import gradebook
    from autograder.nbgrader_glue.inproc import coursedir, register_lessons

    config, options = state.config, state.options
    task = Task.from_dict(shipped["task"])
    student, lesson = task.student, task.lesson
    if lesson not in state.lessons:
        register_lessons(config, [lesson])
        state.lessons.add(lesson)
    with gradebook(config) as gb:
        if shipped.get("duedate"):  # the command's due date: the same late penalty
            gb.update_or_create_assignment(lesson, duedate=shipped["duedate"])
        gb.update_or_create_student(student)
        try:
            gb.remove_submission(lesson, student)
        except MissingEntry:
            pass
    course = coursedir(config)
    folders = {step: Path(course.format_path(getattr(course, f"{step}_directory"), student,
                                             lesson))
               for step in ("submitted", "autograded", "feedback")}
    for folder in folders.values():
        remove_tree(folder)
    folders["submitted"].mkdir(parents=True)
    (folders["submitted"] / f"{lesson}.ipynb").write_bytes(base64.b64decode(shipped["notebook"]))
    if shipped.get("timestamp_text") is not None:
        (folders["submitted"] / "timestamp.txt").write_text(shipped["timestamp_text"])
    page = Path(options.out) / "feedback" / student / f"{lesson}.html"
    page.unlink(missing_ok=True)
    _hold(task)
    result = grade_task(options, config, task)
    item = {"result": asdict(result), "autograded": _read_files(folders["autograded"]),
            "feedback": _read_files(folders["feedback"]),
            "page": base64.b64encode(page.read_bytes()).decode() if page.is_file() else None,
            "record": _export_record(config, student, lesson)}
    for folder in folders.values():
        remove_tree(folder)
    return item


def _export_record(config, student: str, lesson: str) -> dict | None:
    """The gradebook's rows for a submission, as plain data (None when there is none)."""
    from nbgrader.api import MissingEntry

    from autograder.nbgrader_glue.gradebook import gradebook

    with gradebook(config) as gb:
        try:
            submission = gb.find_submission(lesson, student)
        except MissingEntry:
            return None
        return {"timestamp": submission.timestamp.isoformat() if submission.timestamp else None,
                "notebooks": {nb.name: {
                    "late_penalty": nb.late_submission_penalty,
                    "grades": {g.name: [g.auto_score, bool(g.needs_manual_grade)]
                               for g in nb.grades},
                    "comments": {c.name: c.auto_comment for c in nb.comments}}
                    for nb in submission.notebooks}}
