"""Grading a class on a Dask cluster: `python -m autograder grade SUBMISSIONS --cluster ADDRESS`.

The command connects to a running Dask scheduler and registers `GraderPlugin`
(`autograder.dispatch.cluster_worker`) with it, which checks and warms each worker. The
notebooks go out lesson by lesson in chunks (`grade_chunk`); what a worker returns is plain
data as JSON. Only the command's process writes the course's gradebook, autograded/,
feedback/, OUT/ and the report. A chunk whose worker died is graded again elsewhere by Dask;
nothing of it was written.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from autograder.dispatch.cluster_worker import (RESOURCE_PREFIX, SHARED_OPTIONS, ClusterError,
                                                GraderPlugin, course_digest, grade_chunk,
                                                remove_tree, worker_report)
from autograder.dispatch.grade_task import record_failure
from autograder.tasks import GradingOptions, Result, Task

CONNECT_SECONDS = 10
STALL_SECONDS = 600  # no worker able to grade for this long: the rest is reported, not graded


class ClusterPool:
    """The command's end of the cluster: the calls of `autograder.dispatch.pool.WorkerPool` (run,
    kill, close), with the notebooks graded on the cluster's workers."""

    def __init__(self, client, address: str, spec: dict, accepted: list[str]) -> None:
        self.client, self.address, self.spec = client, address, spec
        self.accepted = accepted
        self.options: GradingOptions | None = None
        self.config = None
        self.futures: list = []

    @property
    def resource(self) -> str:
        return RESOURCE_PREFIX + self.spec["key"]

    def bind(self, options: GradingOptions) -> "ClusterPool":
        from autograder.trusted.autograde import grading_config

        self.options, self.config = options, grading_config(options)
        return self

    def chunks(self, tasks: list[Task]) -> list[list[Task]]:
        """Each lesson's tasks in chunks: at most REFERENCE_BATCH (one reference run each),
        and small enough that every worker has some when lessons are fewer than workers."""
        from autograder.dispatch.pool import REFERENCE_BATCH

        lessons: dict[str, list[Task]] = {}
        for task in tasks:
            lessons.setdefault(task.lesson, []).append(task)
        share = max(1, math.ceil(max(1, len(self.accepted)) / max(1, len(lessons))))
        out = []
        for group in lessons.values():
            size = max(1, min(REFERENCE_BATCH, math.ceil(len(group) / share)))
            out += [group[i:i + size] for i in range(0, len(group), size)]
        return out

    def run(self, tasks: Iterable[Task], on_result: Callable[[Result], None]) -> None:
        """Grade `tasks`; report each Result as it comes, after writing what its worker
        returned."""
        from distributed import wait

        tasks = list(tasks)
        if not tasks:
            return
        duedates = _duedates(self.config, {t.lesson for t in tasks})
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

    def _deliver(self, future, chunk: list[Task], done_rows: set,
                 on_result: Callable[[Result], None]) -> None:
        try:
            items = json.loads(future.result())
        except Exception as err:  # noqa: BLE001 (KilledWorker, a refusal, a cancelled task)
            self._fail(chunk, f"{type(err).__name__}: {err}", done_rows, on_result)
            return
        expected = {(t.student, t.lesson): t for t in chunk}
        for item in items:
            result = Result.from_dict(item.get("result"))
            key = (result.student_id, result.lesson) if result else None
            if key not in expected or key in done_rows:
                continue
            try:
                _write_item(self.config, self.options, result, item)
            except Exception as err:  # noqa: BLE001 (this notebook only)
                self._fail([expected[key]], f"what its worker returned could not be recorded "
                           f"({type(err).__name__}: {err})", done_rows, on_result)
                continue
            done_rows.add(key)
            on_result(result)
        self._fail([t for k, t in expected.items() if k not in done_rows],
                   "its worker returned no result for it", done_rows, on_result)

    def _fail(self, chunk: list[Task], why: str, done_rows: set,
              on_result: Callable[[Result], None]) -> None:
        from autograder.text import one_line

        for task in chunk:
            key = (task.student, task.lesson)
            if key in done_rows:
                continue
            done_rows.add(key)
            result = Result.failed(task, "The notebook could not be graded on the grading "
                                   "cluster. Your instructor can review it.",
                                   log=f"ERROR on the cluster: {one_line(why, 2000)}")
            record_failure(self.options, result)
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
    from autograder.nbgrader_glue.gradebook import gradebook

    with gradebook(config) as gb:
        return {name: (gb.find_assignment(name).duedate.isoformat()
                       if gb.find_assignment(name).duedate else None) for name in lessons}


def _payload(task: Task, chunk: list[Task], duedates: dict) -> dict:
    """What a worker needs of a task, as plain data: the notebook's bytes, not the command's
    paths."""
    shipped = replace(task, path="", timestamp=None,
                      classmates={t.student: t.digest for t in chunk})
    return {"task": shipped.to_dict(),
            "notebook": base64.b64encode(Path(task.path).read_bytes()).decode(),
            "timestamp_text": (Path(task.timestamp).read_text(errors="replace")
                               if task.timestamp else None),
            "duedate": duedates.get(task.lesson)}


def _write_item(config, options: GradingOptions, result: Result, item: dict) -> None:
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
    page = Path(options.out) / "feedback" / student / f"{lesson}.html"
    if item.get("page") is not None:
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_bytes(base64.b64decode(item["page"]))


def _write_files(folder: Path, files: list[dict]) -> None:
    if folder.exists():
        remove_tree(folder)
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
    from autograder.nbgrader_glue.gradebook import gradebook

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


def connect(options: GradingOptions, preload: list[str], echo=print) -> ClusterPool:
    """Connect to the scheduler at `options.cluster`, check and warm its workers for this
    course; a ClusterError (before anything is written) when it cannot be reached or no
    worker may grade."""
    from distributed import Client

    from autograder.trusted.seeds import course_secret

    address, root = options.cluster, Path(options.course_root)
    course_secret(root)  # the command's course has its secret before it is compared
    spec = {"digest": course_digest(root), "preload": list(preload),
            "options": {name: getattr(options, name) for name in SHARED_OPTIONS}}
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
