"""Grading a class on a Dask cluster: `python -m autograder grade SUBMISSIONS --cluster ADDRESS`.

The command connects to a running Dask scheduler and registers `GraderPlugin` with it. On each
worker, the plugin checks that the worker can grade this course (its sandbox probe passes; its
course, grader code and course secret have the same digests as the command's) and warms what a
local grading worker keeps warm (the runner host, the lessons' imports, the feedback
templates); only then does the worker advertise the run's resource, so no other worker is ever
handed a notebook. The notebooks go out lesson by lesson in chunks (`grade_chunk`); a worker
grades them with nbgrader's Autograde in a scratch course of its own (its own gradebook,
submitted/, autograded/, feedback/) and returns plain data as JSON: the Result, the autograded
and feedback files, and the gradebook's rows for the submission. Only the command's process
writes the course's gradebook, autograded/, feedback/, OUT/ and the report. A chunk whose
worker died is graded again elsewhere by Dask; nothing of it was written.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import hashlib
import hmac
import json
import math
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, fields
from pathlib import Path

from autograder.trusted.autograde import Result, Settings

COURSE_ENV = "AUTOGRADER_COURSE"  # a worker's course root (default: the installed repository)
HOLD_ENV = "AUTOGRADER_CLUSTER_HOLD"  # tests: a folder; each notebook waits there for "go"
RESOURCE_PREFIX = "autograder-"
CONNECT_SECONDS = 10
STALL_SECONDS = 600  # no worker able to grade for this long: the rest is reported, not graded
TREES = ("scenarios", "solutions", "notebooks", "nbgrader_config.py")
CODE = "the grader's code (autograder/, coursekit/)"
SECRET = "the course secret (.autograder/secret)"
_SKIPPED = ("__pycache__", ".ipynb_checkpoints")


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
        self.settings: Settings | None = None
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
        from autograder.nbgrader_glue.inproc import install_gradebook_lock, warm_feedback

        for name, value in (("NBFORMAT_VALIDATOR", "fastjsonschema"),
                            ("MPLBACKEND", "module://matplotlib_inline.backend_inline"),
                            ("PYDEVD_DISABLE_FILE_VALIDATION", "1")):
            os.environ.setdefault(name, value)
        root = worker_course()
        self.scratch = Path(tempfile.mkdtemp(prefix="autograder-worker-"))
        course = self.scratch / "course"
        course.mkdir()
        self.settings = Settings(course_root=str(root), out=str(self.scratch / "out"),
                                 engine="fork", timeout=spec["timeout"],
                                 memory_limit=spec["memory_limit"],
                                 lock_path=str(self.scratch / "gradebook.lock"),
                                 threads=max(1, threads), share_prologue=spec["share_prologue"],
                                 sandbox=True, notebook_timeout=spec["notebook_timeout"],
                                 withhold_hidden=bool(spec.get("withhold_hidden")))
        install_gradebook_lock(self.settings.lock_path)
        config = grading_config(self.settings)
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
                _remove_tree(self.scratch)
            self.key = self.problem = self.settings = self.config = self.scratch = None


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


def _remove_tree(path: Path) -> None:
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


def _hold(task: dict) -> None:
    """Tests: say that this notebook started (this process's id), then wait for "go"."""
    folder = os.environ.get(HOLD_ENV)
    if not folder:
        return
    name = f"started-{os.getpid()}-{task['student']}-{task['lesson']}"
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
    """A Dask task: grade `chunk`'s notebooks here; return them as JSON (plain data)."""
    from distributed import get_worker

    state = _STATE
    with state.lock:
        problem = state.prepare(spec, get_worker().state.nthreads)
        if problem:
            raise ClusterError(f"this worker refuses to grade: {problem}")
        return json.dumps([_grade_one(state, task) for task in chunk])


def _grade_one(state: _Worker, task: dict) -> dict:
    from nbgrader.api import MissingEntry

    from autograder.nbgrader_glue.inproc import coursedir, gradebook, register_lessons
    from autograder.dispatch.pool import grade_task

    config, settings = state.config, state.settings
    student, lesson = task["student"], task["lesson"]
    if lesson not in state.lessons:
        register_lessons(config, [lesson])
        state.lessons.add(lesson)
    with gradebook(config) as gb:
        if task.get("duedate"):  # the command's due date: the same late penalty
            gb.update_or_create_assignment(lesson, duedate=task["duedate"])
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
        _remove_tree(folder)
    folders["submitted"].mkdir(parents=True)
    (folders["submitted"] / f"{lesson}.ipynb").write_bytes(base64.b64decode(task["notebook"]))
    if task.get("timestamp_text") is not None:
        (folders["submitted"] / "timestamp.txt").write_text(task["timestamp_text"])
    page = Path(settings.out) / "feedback" / student / f"{lesson}.html"
    page.unlink(missing_ok=True)
    _hold(task)
    result = grade_task(settings, config, task)
    item = {"result": asdict(result), "autograded": _read_files(folders["autograded"]),
            "feedback": _read_files(folders["feedback"]),
            "page": base64.b64encode(page.read_bytes()).decode() if page.is_file() else None,
            "record": _export_record(config, student, lesson)}
    for folder in folders.values():
        _remove_tree(folder)
    return item


def _export_record(config, student: str, lesson: str) -> dict | None:
    """The gradebook's rows for a submission, as plain data (None when there is none)."""
    from nbgrader.api import MissingEntry

    from autograder.nbgrader_glue.inproc import gradebook

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


# --------------------------------------------------------------------------------------------
# The command's side

class ClusterPool:
    """The command's end of the cluster: the calls of `autograder.dispatch.pool.WorkerPool` (run,
    kill, close), with the notebooks graded on the cluster's workers."""

    def __init__(self, client, address: str, spec: dict, accepted: list[str]) -> None:
        self.client, self.address, self.spec = client, address, spec
        self.accepted = accepted
        self.settings: Settings | None = None
        self.config = None
        self.futures: list = []

    @property
    def resource(self) -> str:
        return RESOURCE_PREFIX + self.spec["key"]

    def bind(self, settings: Settings) -> "ClusterPool":
        from autograder.trusted.autograde import grading_config

        self.settings, self.config = settings, grading_config(settings)
        return self

    def chunks(self, tasks: list[dict]) -> list[list[dict]]:
        """Each lesson's tasks in chunks: at most REFERENCE_BATCH (one reference run each),
        and small enough that every worker has some when lessons are fewer than workers."""
        from autograder.dispatch.pool import REFERENCE_BATCH

        lessons: dict[str, list[dict]] = {}
        for task in tasks:
            lessons.setdefault(task["lesson"], []).append(task)
        share = max(1, math.ceil(max(1, len(self.accepted)) / max(1, len(lessons))))
        out = []
        for group in lessons.values():
            size = max(1, min(REFERENCE_BATCH, math.ceil(len(group) / share)))
            out += [group[i:i + size] for i in range(0, len(group), size)]
        return out

    def run(self, tasks: Iterable[dict], on_result: Callable[[Result], None]) -> None:
        """Grade `tasks` ({student, lesson, notes, path, timestamp}); report each Result as
        it comes, after writing what its worker returned."""
        from distributed import wait

        tasks = list(tasks)
        if not tasks:
            return
        duedates = _duedates(self.config, {t["lesson"] for t in tasks})
        chunks = self.chunks(tasks)
        payloads = [[_payload(task, chunk, duedates) for task in chunk] for chunk in chunks]
        self.futures = [self.client.submit(grade_chunk, self.spec, payload, pure=False,
                                           resources={self.resource: 1},
                                           priority=len(payloads) - index)
                        for index, payload in enumerate(payloads)]
        chunk_of = {future.key: chunk for future, chunk in zip(self.futures, chunks)}
        pending, done_rows, idle_since = set(self.futures), set(), None
        while pending:
            try:
                finished, pending = wait(pending, timeout=5, return_when="FIRST_COMPLETED")
            except TimeoutError:  # nothing came back in 5 s: are there still workers?
                finished = set()
            for future in finished:
                self._deliver(future, chunk_of[future.key], done_rows, on_result)
            if finished or self._has_workers():
                idle_since = None
                continue
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since > STALL_SECONDS:
                for future in pending:
                    future.cancel()
                    self._fail(chunk_of[future.key], "no worker of the cluster could grade "
                               f"it for {STALL_SECONDS // 60} minutes", done_rows, on_result)
                pending = set()

    def _has_workers(self) -> bool:
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        return any(info.get("resources", {}).get(self.resource) for info in workers.values())

    def _deliver(self, future, chunk: list[dict], done_rows: set,
                 on_result: Callable[[Result], None]) -> None:
        try:
            items = json.loads(future.result())
        except Exception as err:  # noqa: BLE001 (KilledWorker, a refusal, a cancelled task)
            self._fail(chunk, f"{type(err).__name__}: {err}", done_rows, on_result)
            return
        expected = {(t["student"], t["lesson"]): t for t in chunk}
        for item in items:
            result = _result(item.get("result"))
            key = (result.student_id, result.lesson) if result else None
            if key not in expected or key in done_rows:
                continue
            try:
                _write_item(self.config, self.settings, result, item)
            except Exception as err:  # noqa: BLE001 (this notebook only)
                self._fail([expected[key]], f"what its worker returned could not be recorded "
                           f"({type(err).__name__}: {err})", done_rows, on_result)
                continue
            done_rows.add(key)
            on_result(result)
        self._fail([t for k, t in expected.items() if k not in done_rows],
                   "its worker returned no result for it", done_rows, on_result)

    def _fail(self, chunk: list[dict], why: str, done_rows: set,
              on_result: Callable[[Result], None]) -> None:
        from autograder.dispatch.pool import _record_failure
        from autograder.text import one_line

        for task in chunk:
            key = (task["student"], task["lesson"])
            if key in done_rows:
                continue
            done_rows.add(key)
            result = Result(student_id=task["student"], lesson=task["lesson"], status="error",
                            reason="The notebook could not be graded on the grading cluster. "
                                   "Your instructor can review it.",
                            log=f"ERROR on the cluster: {one_line(why, 2000)}",
                            notes=list(task.get("notes") or []))
            _record_failure(self.settings, result)
            on_result(result)

    def kill(self) -> None:
        if self.futures and self.client.status == "running":
            self.client.cancel(self.futures)
        self.futures = []

    def close(self) -> None:
        self.kill()
        if self.client.status != "closed":
            self.client.close()


def _duedates(config, lessons: set[str]) -> dict:
    from autograder.nbgrader_glue.inproc import gradebook

    with gradebook(config) as gb:
        return {name: (gb.find_assignment(name).duedate.isoformat()
                       if gb.find_assignment(name).duedate else None) for name in lessons}


def _payload(task: dict, chunk: list[dict], duedates: dict) -> dict:
    """What a worker needs of a task: the notebook's bytes, not the command's paths."""
    stamp = task.get("timestamp")
    return {"student": task["student"], "lesson": task["lesson"],
            "notes": list(task.get("notes") or []),
            "classmates": {t["student"]: t["digest"] for t in chunk},
            "notebook": base64.b64encode(Path(task["path"]).read_bytes()).decode(),
            "timestamp_text": Path(stamp).read_text(errors="replace") if stamp else None,
            "duedate": duedates.get(task["lesson"])}


def _result(data) -> Result | None:
    names = {f.name for f in fields(Result)}
    if not isinstance(data, dict) or set(data) - names:
        return None
    try:
        return Result(**data)
    except TypeError:
        return None


def _write_item(config, settings: Settings, result: Result, item: dict) -> None:
    """Record one notebook a worker graded: its gradebook rows, then its files."""
    from autograder.trusted.autograde import scores
    from autograder.nbgrader_glue.inproc import coursedir

    student, lesson = result.student_id, result.lesson
    _import_record(config, student, lesson, item.get("record"))
    result.score, result.max_score = scores(config, student, lesson)
    course = coursedir(config)
    for step, files in (("autograded", item.get("autograded")),
                        ("feedback", item.get("feedback"))):
        folder = Path(course.format_path(getattr(course, f"{step}_directory"), student, lesson))
        _write_files(folder, files or [])
    page = Path(settings.out) / "feedback" / student / f"{lesson}.html"
    if item.get("page") is not None:
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_bytes(base64.b64decode(item["page"]))


def _write_files(folder: Path, files: list[dict]) -> None:
    if folder.exists():
        _remove_tree(folder)
    folder.mkdir(parents=True)
    for entry in files:
        name = entry["name"]
        if not isinstance(name, str) or "/" in name or name.startswith(".") or not name:
            raise ValueError(f"a returned file name is not a plain name: {name!r}")
        path = folder / name
        path.write_bytes(base64.b64decode(entry["data"]))
        path.chmod(int(entry["mode"]) & 0o777)


def _import_record(config, student: str, lesson: str, record: dict | None) -> None:
    """Write a worker's gradebook rows for a submission into the course's gradebook."""
    from autograder.nbgrader_glue.inproc import gradebook

    if record is None:
        return
    with gradebook(config) as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy's notes on nbgrader's new rows
        kwargs = {"timestamp": record["timestamp"]} if record.get("timestamp") else {}
        submission = gb.update_or_create_submission(lesson, student, **kwargs)
        for notebook in submission.notebooks:
            rows = record["notebooks"][notebook.name]
            penalty = rows["late_penalty"]
            notebook.late_submission_penalty = None if penalty is None else float(penalty)
            for grade in notebook.grades:
                score, manual = rows["grades"][grade.name]
                grade.auto_score = None if score is None else float(score)
                grade.needs_manual_grade = bool(manual)
            for comment in notebook.comments:
                text = rows["comments"].get(comment.name)
                comment.auto_comment = None if text is None else str(text)
        gb.db.commit()


def connect(address: str, root: Path, *, timeout: int, memory_limit: int,
            share_prologue: bool, notebook_timeout: int, preload: list[str],
            withhold_hidden: bool = False, echo=print) -> ClusterPool:
    """Connect to the scheduler at `address`, check and warm its workers for this course;
    a ClusterError (before anything is written) when it cannot be reached or no worker may
    grade."""
    from distributed import Client

    from autograder.trusted.executor import course_secret

    course_secret(root)  # the command's course has its secret before it is compared
    digest = course_digest(root)
    spec = {"digest": digest, "timeout": int(timeout), "memory_limit": int(memory_limit),
            "share_prologue": bool(share_prologue), "notebook_timeout": int(notebook_timeout),
            "preload": list(preload), "withhold_hidden": bool(withhold_hidden)}
    spec["key"] = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]
    try:
        client = Client(address, timeout=CONNECT_SECONDS)
    except (OSError, TimeoutError, ValueError) as err:
        raise ClusterError(f"the Dask scheduler at {address} cannot be reached ({err}); "
                           "nothing was written. Check the address (tcp://HOST:8786) and that "
                           "the scheduler is running and reachable from here.") from err
    try:
        workers = client.scheduler_info(n_workers=-1).get("workers", {})
        if not workers:
            raise ClusterError(f"the Dask scheduler at {address} has no workers; nothing was "
                               "written. Start some (docs/SCALE.md) and grade again.")
        if echo:
            echo(f"Checking and warming {len(workers)} workers of the cluster at {address} ...")
        client.register_plugin(GraderPlugin(spec))
        reports = client.run(worker_report, spec["key"])
        accepted = sorted(a for a, r in reports.items() if r["ready"])
        refused = {a: r["problem"] for a, r in reports.items() if not r["ready"]}
        lines = [f"Worker {a} refused: {why}." for a, why in sorted(refused.items())]
        if not accepted:
            raise ClusterError(f"no worker of the cluster at {address} can grade this course; "
                               "nothing was written.\n  " + "\n  ".join(lines))
        if echo:
            for line in lines:
                echo(line)
            echo(f"{len(accepted)} workers of the cluster will grade.")
        return ClusterPool(client, address, spec, accepted)
    except BaseException:
        client.close()
        raise
