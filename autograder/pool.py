"""Grading workers: warm processes that grade one submission at a time, in parallel.

Each worker imports torch, nbgrader and what the lessons import once, then grades the
submissions it is handed with nbgrader's Autograde converter in-process; the notebook's cells
run in a child forked for each submission (see `autograder.executor`). A worker that dies is
replaced, and the submission it was grading is reported as an error; the batch goes on.
"""

from __future__ import annotations

from autograder import _imports  # noqa: F401 (first: a quicker jsonschema import)

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict
from multiprocessing.connection import Connection, wait

from autograder.autograde import Result, Settings
from autograder.release import nbgrader_env

STARTUP_FAILURES_ALLOWED = 3


def _worker_main(conn: Connection, settings_dict: dict, preload: list[str]) -> None:
    """The body of a grading worker."""
    os.environ.setdefault("NBFORMAT_VALIDATOR", "fastjsonschema")
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    # Student code must not write to the terminal through inherited descriptors.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    try:
        from autograder import executor
        from autograder.autograde import grade_submission, grading_config
        from autograder.nbgrader_inproc import install_gradebook_lock, warm_feedback

        settings = Settings(**settings_dict)
        if settings.lock_path:  # the run's scratch folder: removed with it, whatever happens
            tempfile.tempdir = os.path.dirname(settings.lock_path)
        install_gradebook_lock(settings.lock_path)
        config = grading_config(settings)
        if settings.engine == "fork":  # the runner host warms up while the class is read
            executor.ForkedExecute.preload = list(preload)
            executor.ForkedExecute(config=config).host()
        try:
            warm_feedback(config)
        except Exception:  # noqa: BLE001 (only a warm-up: the first notebook pays instead)
            pass
    except BaseException:  # noqa: BLE001
        conn.send(("failed", traceback.format_exc()))
        return
    conn.send(("ready", os.getpid()))
    while True:
        try:
            task = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if task is None:
            return
        try:
            if task.get("classmates"):
                executor.ForkedExecute.set_class({task["lesson"]: task["classmates"]})
            result = grade_submission(settings, config, task["student"], task["lesson"],
                                      task.get("notes"))
        except BaseException:  # noqa: BLE001 (grade_submission should not raise; be safe)
            result = Result(student_id=task["student"], lesson=task["lesson"], status="error",
                            reason="The notebook could not be graded (an error in the grader).",
                            log=traceback.format_exc())
        conn.send(("result", asdict(result)))


class _Worker:
    """A worker process (`python -m autograder.pool FD`) and the socket to talk to it."""

    def __init__(self, settings: Settings, preload: list[str]) -> None:
        ours, theirs = socket.socketpair()
        fd = theirs.fileno()
        env = nbgrader_env()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "autograder.pool", str(fd),
             json.dumps({"settings": asdict(settings), "preload": preload})],
            pass_fds=[fd], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env,
            start_new_session=True)
        theirs.close()
        self.conn = Connection(ours.detach())
        self.task: dict | None = None
        self.lesson: str | None = None
        self.ready = False
        self.started = time.monotonic()

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
    """`jobs` grading workers, started early so that they warm up while the class is read."""

    def __init__(self, settings: Settings, jobs: int, preload: list[str]) -> None:
        self.settings, self.jobs, self.preload = settings, max(1, jobs), list(preload)
        self.workers: list[_Worker] = []

    def start(self, count: int | None = None) -> None:
        for _ in range(min(self.jobs, self.jobs if count is None else count)
                       - len(self.workers)):
            self.workers.append(_Worker(self.settings, self.preload))

    def run(self, tasks: Iterable[dict], on_result: Callable[[Result], None]) -> None:
        """Grade `tasks` ({student, lesson, notes}); report each Result as it comes."""
        pending = _Queue(tasks)
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

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Queue:
    """Tasks by lesson. A worker keeps to one lesson while it has tasks (it has run that
    lesson's prologue once), else takes a lesson no other worker is on; only at the end do
    two workers share a lesson."""

    def __init__(self, tasks: Iterable[dict]) -> None:
        self.lessons: dict[str, deque] = {}
        for task in tasks:
            self.lessons.setdefault(task["lesson"], deque()).append(task)

    def __len__(self) -> int:
        return sum(len(queue) for queue in self.lessons.values())

    def __iter__(self):
        for queue in self.lessons.values():
            yield from queue

    def clear(self) -> None:
        self.lessons.clear()

    def put_back(self, task: dict) -> None:
        self.lessons.setdefault(task["lesson"], deque()).appendleft(task)

    def take(self, current: str | None, taken_by_others: set[str]) -> dict | None:
        if current and self.lessons.get(current):
            return self.lessons[current].popleft()
        waiting = [lesson for lesson, queue in self.lessons.items() if queue]
        if not waiting:
            return None
        free = [lesson for lesson in waiting if lesson not in taken_by_others]
        lesson = free[0] if free else max(waiting, key=lambda name: len(self.lessons[name]))
        return self.lessons[lesson].popleft()


def _run(pool: WorkerPool, pending: _Queue, on_result: Callable[[Result], None]) -> None:
    settings, preload = pool.settings, pool.preload
    workers = pool.workers
    startup_failures = 0
    failure_detail = ""

    def fail(task: dict, reason: str, log: str = "") -> None:
        result = Result(student_id=task["student"], lesson=task["lesson"], status="error",
                        reason=reason, log=log, notes=list(task.get("notes") or []))
        _record_failure(settings, result)
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
                worker.task = pending.take(worker.lesson, others)
                worker.lesson = worker.task["lesson"]
                try:
                    worker.conn.send(worker.task)
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
                    elif kind == "failed":
                        failure_detail = payload
                        died = True
                    elif kind == "result":
                        worker.task = None
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
                workers.append(_Worker(settings, preload))


def _record_failure(settings: Settings, result: Result) -> None:
    """For a submission no worker could grade: the autograder's scores in the gradebook set to
    0 and flagged for review, and a feedback page that says why, as for other errors."""
    from pathlib import Path

    try:
        from autograder.autograde import grading_config, scores, zero_grades
        from autograder.feedback import write_notice

        config = grading_config(settings)
        zero_grades(config, result.student_id, result.lesson)
        result.score, result.max_score = scores(config, result.student_id, result.lesson)
    except Exception as err:  # noqa: BLE001 (the batch goes on)
        result.log += f"\nERROR reading the gradebook: {err}"
    try:
        # Written over any page the worker wrote before it died: the page says what the row says.
        page = Path(settings.out) / "feedback" / result.student_id / f"{result.lesson}.html"
        write_notice(page, student=result.student_id, lesson=result.lesson,
                     status=result.status, reason=result.reason, score=result.score,
                     max_score=result.max_score)
    except Exception as err:  # noqa: BLE001
        result.log += f"\nERROR writing the feedback page: {err}"


if __name__ == "__main__":
    _arguments = json.loads(sys.argv[2])
    _worker_main(Connection(int(sys.argv[1])), _arguments["settings"], _arguments["preload"])
