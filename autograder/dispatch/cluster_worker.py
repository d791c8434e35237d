"""A Dask worker's side of grading on a cluster (`autograder.dispatch.cluster` is the command's).

The command asks each worker to prove it holds the course secret (`worker_hello`), sends the
course as a bundle to the workers that did and lack it (`worker_install`), and pins chunks to
them. `grade_chunk` checks the worker (its sandbox probe passes, its grader's code is the
command's, it holds the bundle), warms it once per run, grades the chunk's notebooks in a
scratch course of its own and returns plain data as the bytes of JSON: each Result, the
autograded and feedback files, and the gradebook's rows for the submission. Nothing here
raises to the command: a refusal or an error is JSON too.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path

from autograder.dispatch.cluster_bundle import (cached_course, code_difference, install_bundle,
                                                remove_tree)
from autograder.dispatch.cluster_proof import proof_key, prove, read_secret, secret_path
from autograder.tasks import GradingOptions, Task

COURSE_ENV = "AUTOGRADER_COURSE"  # where a worker's course secret is (default: the repository)
HOLD_ENV = "AUTOGRADER_CLUSTER_HOLD"  # tests: a folder; each notebook waits there for "go"
# What of the command's options a worker grades with (the rest is the worker's own).
SHARED_OPTIONS = ("timeout", "memory_limit", "share_prologue", "notebook_timeout",
                  "withhold_hidden")


class ClusterError(RuntimeError):
    """The cluster cannot grade this class; the message says why and what to do."""


def worker_course() -> Path:
    from autograder.release import COURSE_ROOT

    return Path(os.environ.get(COURSE_ENV) or COURSE_ROOT).resolve()


def worker_hello(nonce: str, bundle: str, code: dict, dask_worker=None) -> dict:
    """For the command (`Client.run`, plain data back): this worker's proof that it holds the
    course secret, whether it holds the course's bundle, and why it cannot grade, if so."""
    secret, problem = read_secret(secret_path(worker_course()))
    proof = prove(proof_key(secret), str(nonce), dask_worker.address) if secret else None
    if problem is None:
        problem = code_difference(code)
    if problem is None:
        from autograder.sandbox.probe import check_available

        probe = check_available()
        problem = f"it cannot confine notebooks: {probe}" if probe else None
    return {"proof": proof, "problem": problem, "has_bundle": cached_course(bundle) is not None}


def worker_install(bundle: str, files: dict) -> str | None:
    """For the command: keep the course's bundle in this worker's cache; why not, or None."""
    try:
        install_bundle(bundle, files)
    except (OSError, ValueError) as err:
        return f"it could not keep the course it was sent ({err})"
    return None


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
        self.session = None  # the GradingSession it was warmed with (autograder.trusted.session)
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
        from autograder.dispatch.grade_task import warm_worker, worker_environment
        from autograder.trusted.autograde import grading_config
        from autograder.nbgrader_glue.gradebook import install_gradebook_lock

        worker_environment()
        root = cached_course(spec["bundle"])
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
        self.session = warm_worker(self.options, config, spec["preload"], feedback_required=True)

    def close(self) -> None:
        with self.lock:
            if self.session is not None:  # its runner host
                self.session.close()
                self.session = None
            if self.scratch is not None:
                remove_tree(self.scratch)
            self.key = self.problem = self.options = self.config = self.scratch = None


def _refusal(spec: dict) -> str | None:
    from autograder.sandbox.probe import check_available

    secret, problem = read_secret(secret_path(worker_course()))
    if problem:
        return problem
    problem = code_difference(spec.get("code"))
    if problem:
        return problem
    course = cached_course(spec.get("bundle"))
    if course is None:
        return "it has not been sent the course's bundle"
    folder = course / ".autograder"
    folder.mkdir(mode=0o700, exist_ok=True)
    target = folder / "secret"
    if not target.is_file() or target.read_text().strip() != secret.hex():
        fd = os.open(folder / f".secret-{os.getpid()}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                     0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secret.hex())
        os.replace(folder / f".secret-{os.getpid()}", target)
    problem = check_available()
    return f"it cannot confine notebooks: {problem}" if problem else None


_STATE = _Worker()


atexit.register(_STATE.close)  # the worker's scratch course and runner host go with it


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


def reply_proof(key: bytes, nonce: str, address: str, items: list) -> str:
    """The proof a grading reply carries: the chunk's nonce, the worker's address and what it
    returned, keyed by the course secret (a worker that took a proven worker's address, which
    the scheduler lets any worker claim, cannot make it)."""
    import hashlib

    digest = hashlib.sha256(json.dumps(items, sort_keys=True).encode()).hexdigest()
    return prove(key, f"{nonce}\0{digest}", address)


def grade_chunk(spec: dict, chunk: list[dict], nonce: str = "") -> bytes:
    """A Dask task, pinned to this worker: grade `chunk`'s notebooks ({task, notebook,
    timestamp_text, duedate}, plain data) here; return them as the bytes of JSON, with the
    proof that this worker holds the course secret (of `nonce`, its address and the items),
    or why this worker refuses. Never raises: what the command reads of an exception would be
    a pickle."""
    from distributed import get_worker

    state = _STATE
    try:
        with state.lock:
            worker = get_worker()
            problem = state.prepare(spec, worker.state.nthreads)
            if problem:
                return json.dumps({"refused": problem}).encode()
            secret, problem = read_secret(secret_path(worker_course()))
            if problem:
                return json.dumps({"refused": problem}).encode()
            items = [_grade_one(state, task) for task in chunk]
            proof = reply_proof(proof_key(secret), str(nonce), worker.address, items)
            return json.dumps({"items": items, "proof": proof}).encode()
    except Exception as err:  # noqa: BLE001 (said to the command as plain data)
        return json.dumps({"refused": f"it failed while grading ({type(err).__name__}: "
                                      f"{err})"[:2000]}).encode()


def check_and_warm(spec: dict) -> bytes:
    """A Dask task, pinned to this worker: check it and warm it for `spec`, through
    `grade_task.warm_worker` as a local pool's worker is warmed. JSON back: why it refuses, or
    None; and whether it was warm for `spec` already, from an earlier grading of the same
    course with the same limits: nothing to start again."""
    from distributed import get_worker

    warm = _STATE.key == spec.get("key") and _STATE.problem is None
    try:
        problem = _STATE.prepare(spec, get_worker().state.nthreads)
    except Exception as err:  # noqa: BLE001
        problem = f"it could not start grading ({type(err).__name__}: {err})"
    return json.dumps({"refused": problem, "warm": warm and problem is None}).encode()


def _grade_one(state: _Worker, shipped: dict) -> dict:
    from autograder.dispatch.grade_task import grade_task
    from autograder.nbgrader_glue.gradebook import fresh_submission, submission_record
    from autograder.nbgrader_glue.inproc import coursedir, register_lessons

    config, options = state.config, state.options
    task = Task.from_dict(shipped["task"])
    student, lesson = task.student, task.lesson
    if lesson not in state.lessons:
        register_lessons(config, [lesson])
        state.lessons.add(lesson)
    # The command's due date: the same late penalty.
    fresh_submission(config, lesson, student, shipped.get("duedate"))
    course = coursedir(config)
    folders = {step: Path(course.format_path(getattr(course, f"{step}_directory"), student,
                                             lesson))
               for step in ("submitted", "autograded", "feedback")}
    for folder in folders.values():
        remove_tree(folder)
    folders["submitted"].mkdir(parents=True)
    notebook = base64.b64decode(shipped["notebook"])
    (folders["submitted"] / f"{lesson}.ipynb").write_bytes(notebook)
    if shipped.get("timestamp_text") is not None:
        (folders["submitted"] / "timestamp.txt").write_text(shipped["timestamp_text"])
    page = Path(options.out) / "feedback" / student / f"{lesson}.html"
    page.unlink(missing_ok=True)
    _hold(task)
    result = grade_task(state.session, options, config, task)
    from autograder.intake.digests import submission_digest

    item = {"result": asdict(result), "digest": submission_digest(notebook),
            "autograded": _read_files(folders["autograded"]),
            "feedback": _read_files(folders["feedback"]),
            "page": base64.b64encode(page.read_bytes()).decode() if page.is_file() else None,
            "record": submission_record(config, student, lesson)}
    for folder in folders.values():
        remove_tree(folder)
    return item
