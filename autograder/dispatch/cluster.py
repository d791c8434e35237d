"""Grading a class on a Dask cluster: `python -m autograder grade SUBMISSIONS --cluster ADDRESS`.

The command connects to the scheduler over TLS with mutual certificates (`tcp://` only with
--insecure-cluster), and trusts no worker for being there: each must prove it holds the course
secret (`cluster_proof`), and only those that did are sent the course (a bundle, once) and the
chunks, pinned to them by address. What a worker returns is the bytes of JSON, bounded before
it is parsed (`cluster_guard`: nothing from the cluster is unpickled here) and checked for
what a grade can be (`cluster_checks`); a worker that returns something impossible is dropped
with one loud line. Only the command writes the gradebook, autograded/, feedback/ and OUT/.
A chunk whose worker died or left is sent again to the workers still proven; a worker that
(re)joins is asked to prove itself; no state waits without bound.
"""

from __future__ import annotations

import base64
import hmac
import itertools
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from autograder.dispatch.cluster_admit import Admission, connect_client
from autograder.dispatch.cluster_checks import Impossible, check_item, write_item
from autograder.dispatch.cluster_guard import BadReply, read_reply
from autograder.dispatch.cluster_worker import ClusterError, grade_chunk, reply_proof
from autograder.dispatch.grade_task import record_failure
from autograder.nbgrader_glue.gradebook import due_dates
from autograder.tasks import GradingOptions, Result, Task

STALL_SECONDS = 600  # no proven worker for this long: the rest is reported, not graded
TRIES = 3  # a chunk is sent this many times at most (its workers died or left)
POLL_SECONDS = 5
RESULT_SECONDS = 120  # fetching a finished chunk's reply from its worker


class ClusterPool:
    """The command's end of the cluster: the calls of `autograder.dispatch.pool.WorkerPool` (run,
    kill, close), with the notebooks graded on the cluster's proven workers."""

    def __init__(self, admission: Admission, echo=print) -> None:
        self.admission, self.client, self.echo = admission, admission.client, echo
        self.options: GradingOptions | None = None
        self.config = None
        self.futures: dict = {}
        self.nonces: dict = {}  # each submitted chunk's nonce, by its future's key
        self._keys = itertools.count()

    @property
    def accepted(self) -> set[str]:
        return self.admission.proven

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

    # ----------------------------------------------------------------------------------------
    def run(self, tasks: Iterable[Task], on_result: Callable[[Result], None]) -> None:
        """Grade `tasks`; report each Result as it comes, after writing what its worker
        returned (checked). Every chunk ends graded or reported within a bound."""
        import time

        from distributed import wait

        tasks = list(tasks)
        if not tasks:
            return
        duedates = due_dates(self.config, {t.lesson for t in tasks})
        self.chunk_list = self.chunks(tasks)
        self.payloads = [[_payload(task, chunk, duedates) for task in chunk]
                         for chunk in self.chunk_list]
        self.tries = [0] * len(self.chunk_list)
        self.done_rows: set = set()
        self.on_result = on_result
        self.waiting: set[int] = set()  # chunks held back: no proven worker to send them to
        self.since: dict[str, tuple[str, float]] = {}  # a chunk's state at the scheduler, since
        for index in range(len(self.chunk_list)):
            self._submit(index)
        alone_since = None
        while self.futures or self.waiting:
            try:
                finished, _ = wait(list(self.futures), timeout=POLL_SECONDS,
                                   return_when="FIRST_COMPLETED")
            except TimeoutError:
                finished = set()
            for future in finished:
                index = self.futures.pop(future, None)
                if index is not None:
                    self._collect(future, index)
            if self.admission.watch(self.echo):  # workers left, joined or were dropped
                self._redispatch()
            self._audit(time.monotonic())
            if self.admission.proven:
                alone_since = None
                continue
            alone_since = alone_since or time.monotonic()
            if time.monotonic() - alone_since > STALL_SECONDS:
                for future, index in list(self.futures.items()):
                    future.cancel()
                    self.waiting.add(index)
                self.futures = {}
                for index in sorted(self.waiting):
                    self._fail(self.chunk_list[index], "no worker of the cluster could grade "
                               f"it for {STALL_SECONDS // 60} minutes")
                self.waiting = set()

    def _submit(self, index: int) -> None:
        workers = sorted(self.admission.proven)
        if not workers:  # never unpinned: held until a worker proves itself, or reported
            self.waiting.add(index)
            return
        self.waiting.discard(index)
        self.tries[index] += 1
        nonce = os.urandom(16).hex()
        future = self.client.submit(grade_chunk, self.admission.spec, self.payloads[index],
                                    nonce, key=f"grade-chunk-{os.getpid()}-{next(self._keys)}",
                                    workers=workers, allow_other_workers=False,
                                    priority=len(self.chunk_list) - index)
        self.futures[future] = index
        self.nonces[future.key] = nonce

    def _redispatch(self) -> None:
        """Send again each chunk that no proven worker is grading now (its worker left or was
        dropped, or new workers can share the rest)."""
        live = self.admission.proven
        processing = {key for address, keys in self.client.processing().items()
                      if address in live for key in keys}
        for future, index in list(self.futures.items()):
            if future.key not in processing and future.status == "pending":
                del self.futures[future]
                future.cancel()
                self.tries[index] -= 1  # not a failed try: sent to the workers there are now
                self._submit(index)
        for index in sorted(self.waiting):
            self._submit(index)

    def _audit(self, now: float) -> None:
        """Bound the wait on every state: a chunk the scheduler lost, or holds where no proven
        worker can take it, is sent again; one that runs past what its notebooks' limits allow
        is sent again elsewhere; each counts as a try."""
        if not self.futures:
            return
        keys = [future.key for future in self.futures]
        try:
            states = self.client.sync(self.client.scheduler.get_task_status, keys=keys)
        except (OSError, TimeoutError):
            return
        for future, index in list(self.futures.items()):
            state = states.get(future.key) if isinstance(states, dict) else None
            seen, since = self.since.get(future.key, (state, now))
            if seen != state:
                seen, since = state, now
            self.since[future.key] = (seen, since)
            stuck = state in (None, "no-worker", "released", "forgotten") and \
                now - since >= 2 * POLL_SECONDS
            overdue = state == "processing" and now - since > self._bound(index)
            if stuck or overdue:
                del self.futures[future]
                future.cancel()
                if self.tries[index] >= TRIES:
                    self._fail(self.chunk_list[index], f"it was sent {TRIES} times and never "
                               "came back")
                else:
                    self._submit(index)

    def _bound(self, index: int) -> float:
        """The longest a worker may take over a chunk: each notebook's whole-notebook limit
        and a margin, plus the worker's warm-up."""
        per_notebook = (self.options.notebook_timeout if self.options else 600) + 120
        return len(self.chunk_list[index]) * per_notebook + 600

    def _collect(self, future, index: int) -> None:
        chunk = self.chunk_list[index]
        if future.status != "finished":  # its worker died (KilledWorker) or it was cancelled
            if self.tries[index] < TRIES:
                self._submit(index)
            else:
                self._fail(chunk, f"its workers died {self.tries[index]} times while grading it")
            return
        holders = self.client.who_has([future]).get(future.key) or ()
        worker = holders[0] if holders else "(unknown)"
        try:
            data = future.result(timeout=RESULT_SECONDS)
        except TimeoutError:  # its worker went with the result: grade it again
            self._submit(index)
            return
        except Exception as err:  # noqa: BLE001 (what Dask could not load: not msgpack)
            data = err
        try:
            reply = read_reply(data)
            if not isinstance(reply, dict) or not set(reply) <= {"items", "refused", "proof"}:
                raise BadReply("it is not {items, proof} or {refused}")
        except BadReply as err:
            self._drop(worker, f"its reply cannot be read ({err})", index)
            return
        if reply.get("refused"):
            from autograder.text import one_line

            self.echo(f"Worker {one_line(worker, 200)} refused: "
                      f"{one_line(reply['refused'], 300)}.")
            self.admission.forget(worker)
            self._submit(index)
            return
        items = reply.get("items")
        proof = reply.get("proof")
        nonce = self.nonces.pop(future.key, None)
        expected = reply_proof(self.admission.key, nonce, worker, items) \
            if isinstance(items, list) and nonce is not None else None
        if expected is None or not isinstance(proof, str) or not proof.isascii() or \
                not hmac.compare_digest(proof, expected):
            self._drop(worker, "its reply does not prove that it holds the course secret (a "
                       "worker that took the address of a proven one?)", index)
            return
        try:
            if len(items) != len(chunk):
                raise Impossible("it returned another number of notebooks than it was sent")
            payloads = self.payloads[index]
            checked = [check_item(self.config, task, item, _sent_digest(payload),
                                  payload["timestamp_text"], payload["duedate"])
                       for task, item, payload in zip(chunk, items, payloads)]
        except Impossible as err:
            self._drop(worker, f"it returned an impossible grade: {err}", index)
            return
        for task, item, payload in zip(chunk, checked, self.payloads[index]):
            key = (task.student, task.lesson)
            if key in self.done_rows:
                continue
            try:
                result = write_item(self.config, self.options, task, item,
                                    payload["timestamp_text"])
            except Exception as err:  # noqa: BLE001 (this notebook only)
                self._fail([task], f"what its worker returned could not be recorded "
                           f"({type(err).__name__}: {err})")
                continue
            self.done_rows.add(key)
            self.on_result(result)

    def _drop(self, worker: str, why: str, index: int) -> None:
        from autograder.text import one_line

        self.echo(f"!! Worker {one_line(worker, 200)} is dropped from this run: "
                  f"{one_line(why, 300)}. None of what it returned was recorded; its notebooks "
                  "are graded by other workers.")
        self.admission.drop(worker)
        self._submit(index)
        self._redispatch()

    def _fail(self, chunk: list[Task], why: str) -> None:
        from autograder.text import one_line

        for task in chunk:
            key = (task.student, task.lesson)
            if key in self.done_rows:
                continue
            self.done_rows.add(key)
            result = Result.failed(task, "The notebook could not be graded on the grading "
                                   "cluster. Your instructor can review it.",
                                   log=f"ERROR on the cluster: {one_line(why, 2000)}")
            record_failure(self.options, result)
            self.on_result(result)

    def kill(self) -> None:
        if self.futures and self.client.status == "running":
            self.client.cancel(list(self.futures))
        self.futures = {}

    def close(self) -> None:
        self.kill()
        self.admission.close()


def _sent_digest(payload: dict) -> str:
    from autograder.intake.digests import submission_digest

    return submission_digest(base64.b64decode(payload["notebook"]))


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


def connect(options: GradingOptions, preload: list[str], echo=print) -> ClusterPool:
    """Connect to the scheduler at `options.cluster`, admit the workers that prove they hold
    the course and warm them; a ClusterError (before anything is written) when it cannot be
    reached or no worker may grade."""
    client, restore = connect_client(options)
    try:
        admission = Admission(client, restore, options, preload)
        admission.admit_all(echo)
        return ClusterPool(admission, echo or (lambda line: None))
    except BaseException:
        client.close()
        restore()
        raise


__all__ = ["ClusterError", "ClusterPool", "connect"]
