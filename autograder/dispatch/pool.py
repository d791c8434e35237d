"""Grading workers: warm processes that grade one submission at a time, in parallel.

Each worker imports torch, nbgrader and what the lessons import once, then grades the
submissions it is handed with nbgrader's Autograde converter in-process; the notebook's cells
run in a child forked for each submission (see `autograder.trusted.executor`). A worker that dies is
replaced, and the submission it was grading is reported as an error; the batch goes on.
"""

from __future__ import annotations

from autograder.nbgrader_glue import patches  # noqa: F401 (first: a quicker jsonschema import)

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, replace
from multiprocessing.connection import Connection, wait

from autograder.dispatch.grade_task import (grade_task, record_failure, warm_worker,
                                            worker_environment)
from autograder.release import nbgrader_env
from autograder.tasks import GradingOptions, Result, Task

STARTUP_FAILURES_ALLOWED = 3
REFERENCE_BATCH = 16  # students whose reference outcomes one reference run computes
# A worker joins a lesson other workers are on only when what is left of it would take them
# longer than this many times the cost of its first notebook there (prologue, references).
JOIN_FACTOR = 1.5
TRACE_ENV = "AUTOGRADER_POOL_TRACE"  # a file where the pool appends its timeline (benchmarks)


def _worker_main(conn: Connection, plain_options: dict, preload: list[str]) -> None:
    """The body of a grading worker."""
    from autograder.sandbox.confine import die_with_parent

    die_with_parent(signal.SIGTERM)  # a worker never outlives the command that started it
    if os.getppid() == 1:  # that command had already gone
        return
    worker_environment()
    # Student code must not write to the terminal through inherited descriptors.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    try:
        from autograder.trusted.autograde import grading_config
        from autograder.nbgrader_glue.gradebook import install_gradebook_lock

        options = GradingOptions.from_dict(plain_options)
        if options.lock_path:  # the run's scratch folder: removed with it, whatever happens
            tempfile.tempdir = os.path.dirname(options.lock_path)
        install_gradebook_lock(options.lock_path)
        config = grading_config(options)
        session = warm_worker(options, config, preload)
    except BaseException:  # noqa: BLE001
        conn.send(("failed", traceback.format_exc()))
        return
    conn.send(("ready", time.monotonic()))  # when it was ready (the pool may read it later)
    while True:
        try:
            task = conn.recv()
        except (EOFError, KeyboardInterrupt):
            task = None
        if isinstance(task, dict) and "options" in task:  # a resident grader's next run
            options = GradingOptions.from_dict(task["options"])  # (its OUT, its checks shown)
            install_gradebook_lock(options.lock_path)
            config = grading_config(options)
            task = task["task"]
        if task is None:
            # Everything this worker wrote is written (the gradebook's sessions are committed,
            # the feedback files closed): stop the runner host and leave at once, without the
            # seconds Python takes to tear down torch, nbgrader and their objects.
            if session is not None:
                session.close()
            os._exit(0)
        conn.send(("result", asdict(grade_task(session, options, config,
                                               Task.from_dict(task)))))


class _Worker:
    """A worker process (`python -m autograder.dispatch.pool FD`) and the socket to talk to it."""

    def __init__(self, options: GradingOptions, preload: list[str]) -> None:
        ours, theirs = socket.socketpair()
        fd = theirs.fileno()
        env = nbgrader_env()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "autograder.dispatch.pool", str(fd),
             json.dumps({"options": options.to_dict(), "preload": preload})],
            pass_fds=[fd], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env,
            start_new_session=True)
        theirs.close()
        self.conn = Connection(ours.detach())
        self.task: Task | None = None
        self.lesson: str | None = None
        self.options = options.to_dict()  # what it grades with now (a resident pool's change)
        # lesson -> (student, submission digest) it has reference outcomes for
        self.references: dict[str, set[tuple[str, str]]] = {}
        self.ready = False
        self.number = 0

    def reference_batch(self, task: Task, pending: "_Queue") -> dict[str, str]:
        """The students whose reference outcomes the worker computes with `task`'s, each with
        the digest of their submission (their hidden inputs are drawn for it): none new when
        it has them already; else this one and the next students of the lesson not yet
        handed to any worker (it will likely grade them, not those graded elsewhere), at most
        REFERENCE_BATCH, so that a reference run stays within one cell's time limit however
        large the class."""
        known = self.references.setdefault(task.lesson, set())
        batch = {task.student: task.digest}
        if (task.student, task.digest) in known:
            return batch
        for waiting in pending.lessons.get(task.lesson) or ():
            if len(batch) >= REFERENCE_BATCH:
                break
            if (waiting.student, waiting.digest) not in known:
                batch[waiting.student] = waiting.digest
        known.update(batch.items())
        return batch

    @property
    def exitcode(self) -> int | None:
        return self.process.poll()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass
        self.conn.close()


class WorkerPool:
    """`options.jobs` grading workers, started early so that they warm up while the class is
    read."""

    def __init__(self, options: GradingOptions, preload: list[str]) -> None:
        self.options, self.jobs, self.preload = options, max(1, options.jobs), list(preload)
        self.workers: list[_Worker] = []
        self.spawned = 0
        # When each worker started, became ready, was handed a task and returned it
        # (monotonic seconds): written to $AUTOGRADER_POOL_TRACE, for benchmarks/grading.py.
        self.timeline: list[dict] = []

    def note(self, event: str, worker: "_Worker", **details) -> None:
        self.timeline.append({"t": time.monotonic(), "event": event, "worker": worker.number,
                              **details})

    def spawn(self) -> "_Worker":
        worker = _Worker(self.options, self.preload)
        self.spawned += 1
        worker.number = self.spawned
        self.note("spawn", worker)
        return worker

    def start(self, count: int | None = None) -> None:
        for _ in range(min(self.jobs, self.jobs if count is None else count)
                       - len(self.workers)):
            self.workers.append(self.spawn())

    def run(self, tasks: Iterable[Task], on_result: Callable[[Result], None]) -> None:
        """Grade `tasks`; report each Result as it comes."""
        pending = _Queue(tasks)
        for worker in [w for w in self.workers if w.exitcode is not None]:
            worker.kill()  # it died while idle, between a resident pool's runs
            self.workers.remove(worker)
        if pending:
            self.start(len(pending))
            _run(self, pending, on_result)

    def kill(self) -> None:
        for worker in self.workers:
            worker.kill()
        self.workers = []

    def close(self) -> None:
        for worker in self.workers:
            worker.stop()
        for worker in self.workers:
            try:
                worker.process.wait(10)
            except subprocess.TimeoutExpired:
                pass
            worker.kill()
        self.workers = []
        self.timeline.append({"t": time.monotonic(), "event": "closed", "worker": 0})
        self.write_trace()

    def write_trace(self) -> None:
        path = os.environ.get(TRACE_ENV)
        if path and self.timeline:
            try:
                with open(path, "a", encoding="utf-8") as handle:
                    for event in self.timeline:
                        handle.write(json.dumps(event) + "\n")
            except OSError:
                pass
        self.timeline = []  # written, or not asked for (a resident pool keeps no history)

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Queue:
    """Tasks by lesson. A worker keeps to one lesson while it has tasks (it has run that
    lesson's prologue once), else takes a lesson no other worker is on; only at the end do
    two workers share a lesson, and only where that saves time: a worker's first notebook of
    a lesson costs the lesson's prologue and a reference run more than the others (measured
    on the workers already on it), and the worker joins only when what is left of the lesson
    would take its worker longer than JOIN_FACTOR times that."""

    def __init__(self, tasks: Iterable[Task]) -> None:
        self.lessons: dict[str, deque] = {}
        for task in tasks:
            self.lessons.setdefault(task.lesson, deque()).append(task)
        self.seconds: dict[str, dict[int, list[float]]] = {}  # lesson -> worker -> times

    def record(self, worker: int, lesson: str | None, seconds: float) -> None:
        if lesson:
            self.seconds.setdefault(lesson, {}).setdefault(worker, []).append(float(seconds))

    def costs(self, lesson: str) -> tuple[float, float] | None:
        """(a notebook's usual time, a worker's extra time for its first) in `lesson`, once a
        worker has graded at least two of its notebooks; else None."""
        usual, extra = [], []
        for times in self.seconds.get(lesson, {}).values():
            if len(times) >= 2:
                rest = sorted(times[1:])
                typical = rest[len(rest) // 2]
                usual.append(typical)
                extra.append(max(0.0, times[0] - typical))
        if not usual:
            return None
        return sum(usual) / len(usual), sum(extra) / len(extra)

    def __len__(self) -> int:
        return sum(len(queue) for queue in self.lessons.values())

    def __iter__(self):
        for queue in self.lessons.values():
            yield from queue

    def clear(self) -> None:
        self.lessons.clear()

    def put_back(self, task: Task) -> None:
        self.lessons.setdefault(task.lesson, deque()).appendleft(task)

    def take(self, current: str | None, taken_by_others: set[str],
             busy_elsewhere: set[str] = frozenset()) -> Task | None:
        """The next task for a worker on lesson `current`; None when there is none, or when
        joining the lessons other workers are busy with would not save time."""
        if current and self.lessons.get(current):
            return self.lessons[current].popleft()
        waiting = [lesson for lesson, queue in self.lessons.items() if queue]
        if not waiting:
            return None
        free = [lesson for lesson in waiting if lesson not in taken_by_others]
        if free:
            return self.lessons[free[0]].popleft()
        lesson = max(waiting, key=lambda name: len(self.lessons[name]))
        costs = self.costs(lesson)
        if lesson in busy_elsewhere and costs is not None:
            usual, extra = costs
            if len(self.lessons[lesson]) * usual <= JOIN_FACTOR * extra:
                return None
        return self.lessons[lesson].popleft()


def _run(pool: WorkerPool, pending: _Queue, on_result: Callable[[Result], None]) -> None:
    workers = pool.workers
    startup_failures = 0
    failure_detail = ""

    def fail(task: Task, reason: str, log: str = "") -> None:
        result = Result.failed(task, reason, log)
        record_failure(pool.options, result)
        on_result(result)

    while pending or any(w.task is not None for w in workers):
        if not workers:  # every worker failed to start: nothing can be graded
            for task in pending:
                fail(task, "The notebook could not be graded: the grading workers failed "
                           "to start. Your instructor can review it.", failure_detail)
            pending.clear()
            break
        broken = set()  # workers that could not be handed their task: they died while idle
        for worker in workers:
            if worker.task is None and pending:
                others = {w.lesson for w in workers if w is not worker and w.lesson}
                busy = {w.lesson for w in workers if w is not worker and w.task is not None}
                task = pending.take(worker.lesson, others, busy)
                if task is None:  # joining a lesson would cost more than it saves: wait
                    continue
                worker.task = replace(task, classmates=worker.reference_batch(task, pending))
                worker.lesson = task.lesson
                pool.note("task", worker, student=task.student, lesson=task.lesson)
                message, plain = worker.task.to_dict(), pool.options.to_dict()
                if worker.options != plain:  # a resident pool's worker, in a new run
                    message, worker.options = {"options": plain, "task": message}, plain
                try:
                    worker.conn.send(message)
                except (OSError, ValueError):
                    broken.add(worker)
        ready = wait([w.conn for w in workers], timeout=0 if broken else None)
        for worker in list(workers):
            died = worker in broken
            if not died and worker.conn in ready:
                try:
                    kind, payload = worker.conn.recv()
                except (EOFError, OSError):
                    died = True
                else:
                    if kind == "ready":
                        worker.ready = True
                        pool.note("ready", worker, since=payload)
                    elif kind == "failed":
                        failure_detail = payload
                        died = True
                    elif kind == "result":
                        pending.record(worker.number, payload.get("lesson"),
                                       payload.get("seconds", 0.0))
                        worker.task = None
                        pool.note("result", worker, seconds=payload.get("seconds", 0.0))
                        on_result(Result(**payload))
            if not died:
                continue
            worker.kill()
            code = worker.exitcode
            workers.remove(worker)
            if not worker.ready:  # it never started: its task goes back in the queue
                startup_failures += 1
                if worker.task is not None:
                    pending.put_back(worker.task)
            elif worker.task is not None:
                fail(worker.task, "The grading process died while grading this notebook "
                                  f"(exit code {code}). Your instructor can review it.")
            if startup_failures < STARTUP_FAILURES_ALLOWED and pending:
                workers.append(pool.spawn())


if __name__ == "__main__":
    _arguments = json.loads(sys.argv[2])
    _worker_main(Connection(int(sys.argv[1])), _arguments["options"], _arguments["preload"])
