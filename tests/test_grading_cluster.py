"""Grading a class on a Dask cluster (`grade --cluster`, issue 26), with real processes on
127.0.0.1: a `dask scheduler` and `dask worker` processes started here.

The same class of the fixture course is graded by the local pool and through the cluster:
the same grades.csv, gradebook and feedback; a worker killed while its first notebook runs
loses nothing; an unreachable scheduler, or workers that cannot grade this course, stop the
command before it writes anything.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course  # noqa: E402

from autograder.dispatch.cluster_worker import COURSE_ENV, HOLD_ENV  # noqa: E402
from autograder.demo import Lessons, _write  # noqa: E402
from autograder.sandbox.confine import PROBE_ENV  # noqa: E402

pytestmark = pytest.mark.dask

A, B = fixture_course.LESSONS
DASK = Path(sys.executable).parent / "dask"
EXIT_NO_CLUSTER = 5


def build_class(dest: Path, course: Lessons) -> None:
    for lesson in (A, B):
        _write(course.correct(lesson), dest / "correct" / f"{lesson}.ipynb")
        _write(course.blank(lesson), dest / "blank" / f"{lesson}.ipynb")
        _write(course.partial(lesson, seed=1), dest / "partial" / f"{lesson}.ipynb")
    _write(course.with_answer(A, "while True:\n    pass", base="correct"),
           dest / "loop" / f"{A}.ipynb")


def grade(submissions: Path, out: Path, root: Path, *extra: str,
          check: bool = True) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
               "--course-root", str(root), "--timeout", "4", "--memory-limit", "1G", *extra]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, CI="true"))
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def rows(out: Path) -> list[str]:
    lines = (out / "grades.csv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(set(lines)), "a row twice"
    return lines


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


class Cluster:
    """A scheduler and workers on 127.0.0.1, each in a process group of its own."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.file = base / "scheduler.json"
        self.processes: list[subprocess.Popen] = []
        self.start([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0",
                    "--no-dashboard", "--scheduler-file", str(self.file)], "scheduler")
        deadline = time.monotonic() + 120
        while not self.file.is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        self.address = json.loads(self.file.read_text())["address"]

    def start(self, command: list[str], name: str, env: dict | None = None) -> None:
        log = open(self.base / f"{name}.log", "w")
        self.processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                               env=dict(os.environ, **(env or {})),
                                               start_new_session=True, cwd=self.base))

    def worker(self, name: str, **env: str) -> None:
        self.start([str(DASK), "worker", "--scheduler-file", str(self.file), "--nworkers", "1",
                    "--nthreads", "1", "--no-dashboard", "--name", name,
                    "--local-directory", str(self.base / name)], name, env)

    def wait_for_workers(self, count: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(count, timeout=120)

    def stop(self) -> None:
        for process in self.processes:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in self.processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    base = tmp_path_factory.mktemp("cluster")
    root = fixture_course.build_course(base / "course")
    submissions = base / "class"
    build_class(submissions, Lessons(root))
    grade(submissions, base / "local", root, "--jobs", "2")
    return {"base": base, "root": root, "submissions": submissions,
            "local": rows(base / "local"), "local_gradebook": _grades(root)}


def _grades(root: Path) -> list[tuple]:
    import sqlite3

    with sqlite3.connect(root / "gradebook.db") as db:
        return db.execute(
            "SELECT sa.student_id, n.name, gc.name, g.auto_score, g.needs_manual_grade "
            "FROM grade g JOIN submitted_notebook sn ON g.notebook_id = sn.id "
            "JOIN submitted_assignment sa ON sn.assignment_id = sa.id "
            "JOIN notebook n ON sn.notebook_id = n.id JOIN base_cell gc ON g.cell_id = gc.id "
            "ORDER BY 1, 2, 3").fetchall()


@pytest.fixture(scope="module")
def cluster(course):
    hold = course["base"] / "hold"
    hold.mkdir()
    cluster = Cluster(course["base"])
    try:
        for name in ("worker-a", "worker-b"):
            cluster.worker(name, **{COURSE_ENV: str(course["root"]), HOLD_ENV: str(hold)})
        cluster.wait_for_workers(2)
        cluster.hold = hold
        yield cluster
    finally:
        cluster.stop()


def test_a_class_graded_on_the_cluster_gets_the_local_grades(course, cluster):
    (cluster.hold / "go").touch()
    out = course["base"] / "on-cluster"
    done = grade(course["submissions"], out, course["root"], "--cluster", cluster.address)
    assert "2 workers of the cluster will grade" in done.stdout
    assert rows(out) == course["local"]
    assert _grades(course["root"]) == course["local_gradebook"]
    assert digest(out / "feedback") == digest(course["base"] / "local" / "feedback")


def test_a_worker_killed_mid_run_loses_nothing(course, cluster):
    go = cluster.hold / "go"
    go.unlink(missing_ok=True)
    for old in cluster.hold.glob("started-*"):
        old.unlink()
    out = course["base"] / "killed"
    command = [sys.executable, "-m", "autograder", "grade", str(course["submissions"]), "--out",
               str(out), "--course-root", str(course["root"]), "--timeout", "4",
               "--memory-limit", "1G", "--cluster", cluster.address]
    grading = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=dict(os.environ, CI="true"))
    try:
        deadline = time.monotonic() + 300
        while not list(cluster.hold.glob("started-*")) and time.monotonic() < deadline:
            assert grading.poll() is None, grading.stdout.read()
            time.sleep(0.05)
        first = sorted(cluster.hold.glob("started-*"))[0]
        pid = int(first.read_text())
        os.kill(pid, signal.SIGKILL)  # the worker process, while its notebook waits
        go.touch()
        output, _ = grading.communicate(timeout=600)
    finally:
        if grading.poll() is None:
            grading.kill()
    assert grading.returncode == 0, output
    assert rows(out) == course["local"], output
    assert _grades(course["root"]) == course["local_gradebook"]
    # The killed worker's notebook was graded again, by another process.
    notebook = first.name.split("-", 2)[2]
    again = [p for p in cluster.hold.glob(f"started-*-{notebook}") if p != first]
    assert again and all(int(p.read_text()) != pid for p in again)


def test_an_unreachable_scheduler_is_a_clear_error_and_nothing_is_written(course):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    before = digest(course["root"])
    out = course["base"] / "unreachable"
    done = grade(course["submissions"], out, course["root"], "--cluster",
                 f"tcp://127.0.0.1:{port}", check=False)
    assert done.returncode == EXIT_NO_CLUSTER, done.stdout + done.stderr
    assert f"the Dask scheduler at tcp://127.0.0.1:{port} cannot be reached" in done.stderr
    assert "nothing was written" in done.stderr
    assert not out.exists()
    assert digest(course["root"]) == before


def test_workers_that_cannot_grade_this_course_are_refused_with_why(course, tmp_path):
    other = tmp_path / "other-course"
    shutil.copytree(course["root"], other, ignore=shutil.ignore_patterns(
        "submitted", "autograded", "feedback", "gradebook.db"))
    scenario = other / "scenarios" / f"{A}.py"
    scenario.write_text(scenario.read_text() + "\n# another commit of the scenarios\n")
    before = digest(course["root"])
    cluster = Cluster(tmp_path)
    try:
        cluster.worker("other-course", **{COURSE_ENV: str(other)})
        cluster.worker("no-sandbox", **{COURSE_ENV: str(course["root"]), PROBE_ENV: "fail"})
        cluster.wait_for_workers(2)
        out = tmp_path / "out"
        done = grade(course["submissions"], out, course["root"], "--cluster", cluster.address,
                     check=False)
    finally:
        cluster.stop()
    assert done.returncode == EXIT_NO_CLUSTER, done.stdout + done.stderr
    assert "no worker of the cluster" in done.stderr and "nothing was written" in done.stderr
    assert f"its course ({other}) differs from the command's in scenarios/: give" in done.stderr
    assert "it cannot confine notebooks" in done.stderr
    assert not out.exists()
    assert digest(course["root"]) == before
