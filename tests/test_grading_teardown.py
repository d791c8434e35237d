"""Grading ends quietly: no traceback on the terminal from the grader's own processes.

Each grading worker starts a runner host in a session of its own. A host whose worker had
already gone (the run was interrupted, or the worker was stopped, while the host still
imported torch) used to carry on importing, then fail to say "ready" and print a
BrokenPipeError traceback on the instructor's terminal, seconds after the command had
returned. The host now ends with its worker.

Both runs read the command's stderr until every process that holds it (the command, its
workers, their hosts) has closed it, so a host that outlives the command is seen.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from nbformat.v4 import new_code_cell

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.demo import Lessons, _write

pytestmark = pytest.mark.slow

A, B = fixture_course.LESSONS


@pytest.fixture(scope="module")
def honest_class(tmp_path_factory):
    base = tmp_path_factory.mktemp("teardown")
    root = fixture_course.build_course(base / "course")
    course = Lessons(root)
    for lesson in (A, B):
        _write(course.correct(lesson), base / "class" / "correct" / f"{lesson}.ipynb")
        _write(course.blank(lesson), base / "class" / "blank" / f"{lesson}.ipynb")
        _write(course.partial(lesson, seed=1), base / "class" / "partial" / f"{lesson}.ipynb")
    return base, root


def command(base: Path, root: Path, out: str, jobs: int) -> list[str]:
    return [sys.executable, "-m", "autograder", "grade", str(base / "class"), "--out",
            str(base / out), "--course-root", str(root), "--jobs", str(jobs), "--timeout", "4"]


def test_an_honest_class_is_graded_without_a_traceback(honest_class):
    base, root = honest_class
    done = subprocess.run(command(base, root, "out", 2), capture_output=True, text=True,
                          env=dict(os.environ, CI="true"), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "graded 6," in done.stdout
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, \
        done.stderr
    assert "Traceback" not in (base / "out" / "grading.log").read_text()


def test_a_run_interrupted_while_hosts_start_leaves_no_host_and_no_traceback(honest_class):
    base, root = honest_class
    process = subprocess.Popen(command(base, root, "out-interrupted", 1),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, CI="true"))
    hosts: list[psutil.Process] = []
    try:
        grader = psutil.Process(process.pid)
        deadline = time.monotonic() + 300
        while not hosts and process.poll() is None and time.monotonic() < deadline:
            for child in grader.children(recursive=True):
                try:
                    if "autograder.runner.host" in " ".join(child.cmdline()):
                        hosts.append(child)
                except psutil.Error:
                    pass
            time.sleep(0.02)
        assert hosts, "no runner host was started"
        process.send_signal(signal.SIGINT)  # Ctrl-C while the host still imports torch
        _, stderr = process.communicate(timeout=120)  # until every holder of stderr closed it
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode != 0  # interrupted
    assert "BrokenPipeError" not in stderr and "runner/host.py" not in stderr, stderr
    for host in hosts:
        try:
            assert host.status() == psutil.STATUS_ZOMBIE, f"runner host {host.pid} left"
        except psutil.NoSuchProcess:
            pass


def test_a_stopped_command_takes_its_workers_and_their_notebooks_with_it(honest_class):
    """`kill` (or `timeout`) on the grading command used to leave its workers grading on as
    orphans, their runner hosts and notebooks with them."""
    base, root = honest_class
    course = Lessons(root)
    slow = course.correct(A)
    slow.cells.append(new_code_cell("import time\ntime.sleep(300)"))
    _write(slow, base / "slow-class" / "sleeper" / f"{A}.ipynb")
    process = subprocess.Popen(
        [sys.executable, "-m", "autograder", "grade", str(base / "slow-class"), "--out",
         str(base / "out-stopped"), "--course-root", str(root), "--jobs", "1", "--timeout", "30"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, CI="true"))
    started: list[psutil.Process] = []
    try:
        grader = psutil.Process(process.pid)
        deadline = time.monotonic() + 300
        while process.poll() is None and time.monotonic() < deadline and not any(
                "autograder.runner.host" in " ".join(p.cmdline())
                for p in grader.children(recursive=True)):
            time.sleep(0.2)
        assert process.poll() is None, "the command ended before its notebook slept"
        time.sleep(20)  # a worker, its runner host and (most likely) the notebook, asleep
        started = grader.children(recursive=True)
        process.terminate()
        process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    _, alive = psutil.wait_procs(started, timeout=30)
    assert not alive, "left running: " + "; ".join(
        " ".join(p.cmdline())[:80] for p in alive if p.is_running())
