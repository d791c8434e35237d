"""Isolation of the fast grading engine: what a notebook's process inherits and can reach.

A notebook's process must hold no socket but its own channel (not the worker's socket to the
pool, nor a zygote's), lines it forges must not reach another notebook's result, a process it
leaves behind must not hold the batch, and a worker that died while idle must not stop the
batch. The executor's cases run in one short Python process (`_SCRIPT`), which stands in for a
grading worker: it holds a socket pair, as a worker holds its socket to the pool.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
A = fixture_course.LESSON_A

_SCRIPT = r'''
import json, os, select, socket, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
from nbformat.v4 import new_code_cell, new_notebook
from autograder import executor

executor.make_shell()
pool_side, worker_side = socket.socketpair()  # as a worker's socket to the pool

def notebook(source):
    answer = new_code_cell(source)
    answer.metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "answer"}
    return new_notebook(cells=[new_code_cell("shared = 1"), answer])

SCAN = """import os, stat
found = []
for name in os.listdir('/proc/self/fd'):
    fd = int(name)
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        continue
    if fd > 2 and (stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode)):
        found.append(fd)
"""
FORGE = SCAN + """
import json
forged = {"event": "done", "index": 1, "execution_count": 1, "timed_out": False,
          "seconds": 0, "outputs": [{"output_type": "stream", "name": "stdout",
                                      "text": "FORGED"}]}
lines = "".join(json.dumps(m) + "\\n" for m in (
    {"event": "exited", "pid": 0, "status": 9}, {"event": "start", "index": 1}, forged,
    {"event": "end"}, {"event": "exited", "pid": 0, "status": 9}))
for fd in found:
    try:
        os.write(fd, lines.encode())
    except OSError:
        pass
print('forger')
"""
report = {}
folder = tempfile.mkdtemp()
for share in (False, True):
    def run(source):
        nb = notebook(source)
        began = time.monotonic()
        result = executor.execute_notebook(nb, folder, timeout=5, memory_limit=0, threads=1,
                                           share_prologue=share)
        texts = [o.get("text", o.get("ename")) for o in nb.cells[1].outputs]
        return {"outcome": result.outcome, "texts": texts,
                "seconds": time.monotonic() - began}
    key = "shared" if share else "alone"
    sockets = run(SCAN + "import stat\nprint([fd for fd in found "
                  "if stat.S_ISSOCK(os.fstat(fd).st_mode)])")
    forger = run(FORGE)
    after = run("print('innocent')")
    leftover = run("import os, time\nif os.fork() == 0:\n    time.sleep(30)\n    os._exit(0)\n"
                   "print('forked')")
    pool_side.setblocking(False)
    try:
        leaked = pool_side.recv(1 << 16).decode("utf-8", "replace")
    except BlockingIOError:
        leaked = ""
    report[key] = {"sockets": sockets, "forger": forger, "after": after,
                   "leftover": leftover, "leaked": leaked}
print("REPORT" + json.dumps(report))
'''


@pytest.fixture(scope="module")
def report():
    root = os.environ.get("ISOLATION_AUTOGRADER_ROOT", str(REPO))
    done = subprocess.run([sys.executable, "-c", _SCRIPT, root], capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    lines = [line for line in done.stdout.splitlines() if line.startswith("REPORT")]
    assert lines, done.stdout + done.stderr
    return json.loads(lines[0][len("REPORT"):])


@pytest.mark.parametrize("mode", ["alone", "shared"])
def test_a_notebook_holds_no_socket_of_the_worker(report, mode):
    assert report[mode]["sockets"]["texts"] == ["[]\n"]
    assert report[mode]["leaked"] == ""  # nothing written reached the pool's side


@pytest.mark.parametrize("mode", ["alone", "shared"])
def test_forged_events_do_not_reach_the_next_notebook(report, mode):
    after = report[mode]["after"]
    assert after["outcome"] == "ok" and after["texts"] == ["innocent\n"], after


@pytest.mark.parametrize("mode", ["alone", "shared"])
def test_a_process_left_behind_does_not_hold_the_worker(report, mode):
    leftover = report[mode]["leftover"]
    assert leftover["outcome"] == "ok" and leftover["texts"] == ["forked\n"], leftover
    assert leftover["seconds"] < 10, leftover


# --------------------------------------------------------------------------------------------
# The pool: a worker that died while idle

@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return fixture_course.build_course(tmp_path_factory.mktemp("isolation") / "course")


def test_a_worker_that_died_idle_does_not_stop_the_batch(course, tmp_path):
    """The task it could not be handed is an error row with a feedback page, its scores 0 and
    flagged in the gradebook, as for a worker that died while grading."""
    from autograder.autograde import Settings
    from autograder.demo import Lessons, _write
    from autograder.autograde import grading_config
    from autograder.nbgrader_inproc import (course_config, gradebook, install_gradebook_lock,
                                            register_lessons)
    from autograder.pool import WorkerPool

    _write(Lessons(course).correct(A), course / "submitted" / "idle" / A / f"{A}.ipynb")
    with gradebook(course_config(course)) as gb:
        gb.update_or_create_student("idle")
    settings = Settings(course_root=str(course), out=str(tmp_path), timeout=10,
                        lock_path=str(tmp_path / "lock"), threads=1, share_prologue=False)
    install_gradebook_lock(settings.lock_path)
    register_lessons(grading_config(settings), [A])
    results = []
    task = {"student": "idle", "lesson": A, "notes": []}
    with WorkerPool(settings, 1, []) as pool:
        pool.run([task], results.append)
        assert results[-1].status == "graded" and results[-1].score > 0, results[-1]
        worker = pool.workers[0]
        worker.process.kill()
        worker.process.wait(10)
        time.sleep(0.2)
        pool.run([task], results.append)
    last = results[-1]
    assert last.status == "error" and "died" in last.reason, last
    assert last.score == 0
    page = tmp_path / "feedback" / "idle" / f"{A}.html"
    assert "error" in page.read_text() and "died" in page.read_text()
    with gradebook(course_config(course)) as gb:
        submission = gb.find_submission(A, "idle")
        assert submission.score == 0 and submission.needs_manual_grade
