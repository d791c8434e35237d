"""Attacks on grading with a Dask cluster (autograder/dispatch/cluster*.py) by a peer that reaches
the scheduler: each test is one attack, reproduced with real processes, that the grader must
defeat.

A proven worker's address taken over: when a worker the command proved leaves (killed, its
machine gone), a peer registers a worker of its own at the same address (its port, or a pod's
reused IP) under the same name, which is the "id" the scheduler reports for a worker: both are
what a worker says of itself. The command's watch sees nothing change, and the chunks pinned to
that address go to the peer's worker, which returns full marks for every notebook in replies
that pass every check of a grade. The command must not record them: a grading reply carries a
proof, keyed by the course secret, of the chunk's own nonce, the address and the items.
(The peer still receives the notebooks of the chunks pinned to that address, which the
proof does not prevent: only mutual TLS does.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_grading_cluster import (HOLD_ENV, _grades, course, course_env, release,  # noqa: F401
                                  rows, start_grading, wait_while_grading)

from dask_cluster import Cluster

pytestmark = pytest.mark.dask

# The peer: imports everything first, then waits for its trigger; takes over the address of
# the worker named "honest" (unregisters it, registers as it) and answers every chunk with
# full marks that pass the command's checks.
THIEF = r'''
import asyncio, json, os, sys, time
from pathlib import Path

from distributed import Worker
from distributed.core import rpc

from autograder.dispatch import cluster_worker
from autograder.dispatch.cluster_checks import submission_time
from autograder.tasks import Result, Task

scheduler, trigger, loot = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])


def forge(shipped):
    task = Task.from_dict(shipped["task"])
    import base64, hashlib
    from autograder.trusted.seeds import submission_digest
    raw = base64.b64decode(shipped["notebook"])
    grades = {}
    for cell in json.loads(raw)["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            grades[meta["grade_id"]] = [float(meta.get("points", 0)), bool(meta.get("solution"))]
    when = submission_time(shipped.get("timestamp_text"))
    record = {"timestamp": when.isoformat() if when else None,
              "notebooks": {task.lesson: {"late_penalty": None, "grades": grades,
                                          "comments": {}}}}
    result = Result(student_id=task.student, lesson=task.lesson, status="graded")
    from dataclasses import asdict
    return {"result": asdict(result), "digest": submission_digest(raw), "record": record}


LAST = [time.monotonic()]


def grade_chunk(spec, chunk, *args, **kwargs):
    LAST[0] = time.monotonic()
    (loot / f"chunk-{len(list(loot.iterdir()))}").write_text(json.dumps(chunk)[:1000])
    return json.dumps({"items": [forge(shipped) for shipped in chunk]}).encode()


cluster_worker.grade_chunk = grade_chunk


async def main():
    while not trigger.exists():
        await asyncio.sleep(0.01)
    async with rpc(scheduler) as s:
        info = await s.identity()
        address = next(a for a, w in info["workers"].items() if w.get("name") == "honest")
        (loot.parent / "armed").write_text(address)
        while address in (await s.identity())["workers"]:  # until it leaves
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.5)
    host, port = address.rsplit("/", 1)[1].rsplit(":", 1)
    worker = Worker(scheduler, host=host, port=int(port), nthreads=1, name="honest")
    await worker
    (loot.parent / "registered").write_text(worker.address)
    LAST[0] = time.monotonic()
    while time.monotonic() - LAST[0] < 10:  # its replies fetched, it leaves
        await asyncio.sleep(0.2)
    os._exit(0)

asyncio.run(main())
'''


def test_a_peer_that_takes_a_proven_workers_address_and_id_forges_no_grade(course, tmp_path):
    hold, loot, trigger = tmp_path / "hold", tmp_path / "loot", tmp_path / "trigger"
    hold.mkdir()
    loot.mkdir()
    (tmp_path / "thief.py").write_text(THIEF)
    cluster = Cluster(tmp_path, tls=None)  # a peer that can attach a worker
    out = tmp_path / "out"
    stopped = None
    thief = subprocess.Popen([sys.executable, str(tmp_path / "thief.py"), cluster.address,
                              str(trigger), str(loot)], start_new_session=True,
                             stdout=open(tmp_path / "thief.log", "w"), stderr=subprocess.STDOUT)
    try:
        cluster.worker("honest", "--no-nanny",
                       **course_env(course, "honest-thief", **{HOLD_ENV: str(hold)}))
        cluster.wait_for_workers(1)
        grading = start_grading(course, out, cluster)
        wait_while_grading(grading, lambda: list(hold.glob("started-*")))
        trigger.touch()
        wait_while_grading(grading, (tmp_path / "armed").exists, 60)
        stopped = int(sorted(hold.glob("started-*"))[0].read_text())
        os.kill(stopped, signal.SIGKILL)  # the proven worker leaves, mid-notebook
        wait_while_grading(grading, (tmp_path / "registered").exists, 120)
        wait_while_grading(grading, lambda: list(loot.iterdir()), 120)
        thief.wait(300)  # it left once its replies were fetched
        cluster.worker("honest-2", **course_env(course, "honest-thief-2",
                                                **{HOLD_ENV: str(hold)}))
        output = release(grading, hold, 480)
    finally:
        if stopped:
            try:
                os.kill(stopped, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if thief.poll() is None:
            os.killpg(thief.pid, signal.SIGKILL)
            thief.wait()
        cluster.stop()
    assert grading.returncode == 0, output
    assert rows(out) == course["local"], output
    assert _grades(course["root"]) == course["local_gradebook"]
