"""Grading a class on a Dask cluster (`grade --cluster`, issues 26, 30 and 31), with real processes
on 127.0.0.1: a `dask scheduler` and `dask worker` processes started here, over TLS with
mutual certificates made here (the supported setup), or over tcp:// with --insecure-cluster.

The same class of the fixture course is graded by the local pool and through the cluster:
the same grades.csv, gradebook and feedback; a worker killed while its first notebook runs
loses nothing, and neither does the only worker when its nanny restarts it; an unreachable
scheduler, a tcp:// one without --insecure-cluster, or workers that cannot grade this course,
stop the command before it writes anything. A rogue worker (its own module of the grader's
name first on its path) gets nothing, forges nothing and runs nothing in the command; a
worker that holds the course but returns impossible grades is dropped.
"""

from __future__ import annotations

import hashlib
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
import fixture_course
from dask_cluster import Cluster, make_certificates

from autograder.dispatch.cluster_worker import COURSE_ENV, HOLD_ENV
from autograder.demo import Lessons, _write
from autograder.sandbox.probe import PROBE_ENV

pytestmark = pytest.mark.dask

A, B = fixture_course.LESSONS
EXIT_NO_CLUSTER = 5
CACHE_ENV = "AUTOGRADER_CLUSTER_CACHE"  # autograder.dispatch.cluster_bundle.CACHE_ENV


def build_class(dest: Path, course: Lessons) -> None:
    for lesson in (A, B):
        _write(course.correct(lesson), dest / "correct" / f"{lesson}.ipynb")
        _write(course.blank(lesson), dest / "blank" / f"{lesson}.ipynb")
        _write(course.partial(lesson, seed=1), dest / "partial" / f"{lesson}.ipynb")
    _write(course.with_answer(A, "while True:\n    pass", base="correct"),
           dest / "loop" / f"{A}.ipynb")


def grade(submissions: Path, out: Path, root: Path, *extra: str,
          check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(grade_command(submissions, out, root, *extra), capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, CI="true"))
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def grade_command(submissions: Path, out: Path, root: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
            "--course-root", str(root), "--timeout", "4", "--memory-limit", "1G", *extra]


def start_grading(course: dict, out: Path, cluster: Cluster) -> subprocess.Popen:
    return subprocess.Popen(grade_command(course["submissions"], out, course["root"],
                                          *cluster.grade_args()),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, CI="true"))


def wait_while_grading(grading: subprocess.Popen, ready, seconds: int = 400) -> None:
    """Wait for `ready()`; the command is stopped if it ends first or the wait fails."""
    deadline = time.monotonic() + seconds
    try:
        while not ready() and time.monotonic() < deadline:
            assert grading.poll() is None, grading.stdout.read()
            time.sleep(0.05)
        assert ready(), f"not ready after {seconds} s"
    except BaseException:
        grading.kill()
        raise


def release(grading: subprocess.Popen, hold: Path, timeout: int) -> str:
    """Let the held notebooks go on; the command's output once it ends."""
    (hold / "go").touch()
    return finish(grading, timeout)


def kill_the_first_to_start(grading: subprocess.Popen, hold: Path) -> tuple[Path, int]:
    """SIGKILL the worker process whose notebook started first (it waits in `hold`)."""
    wait_while_grading(grading, lambda: list(hold.glob("started-*")))
    first = sorted(hold.glob("started-*"))[0]
    pid = int(first.read_text())
    os.kill(pid, signal.SIGKILL)
    return first, pid


def finish(grading: subprocess.Popen, timeout: int) -> str:
    """The command's output once it ends; a failure with its output if it waits past
    `timeout` seconds (the state the issue saw: waiting for ever)."""
    try:
        return grading.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        grading.kill()
        pytest.fail(f"the command was still waiting after {timeout} s:\n"
                    + grading.communicate()[0][-5000:])


def rows(out: Path) -> list[str]:
    lines = (out / "grades.csv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(set(lines)), "a row twice"
    return lines


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def course_env(course: dict, name: str, **env: str) -> dict:
    """A worker's environment: where its course secret is, and a cache of its own."""
    return {COURSE_ENV: str(course["root"]), CACHE_ENV: str(course["base"] / "caches" / name),
            **env}


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


def secret_only(base: Path, root: Path, name: str = "secret-only") -> Path:
    """A worker's course folder with nothing but the course secret: no checkout."""
    folder = base / name / ".autograder"
    folder.mkdir(parents=True)
    shutil.copy(root / ".autograder" / "secret", folder / "secret")
    return folder.parent


@pytest.fixture(scope="module")
def tls(course):
    return make_certificates(course["base"] / "tls")


@pytest.fixture(scope="module")
def cluster(course, tls):
    hold = course["base"] / "hold"
    hold.mkdir()
    bare = secret_only(course["base"], course["root"])
    cluster = Cluster(course["base"], tls)
    try:
        for name in ("worker-a", "worker-b"):
            cluster.worker(name, **course_env(course, name, **{COURSE_ENV: str(bare),
                                                               HOLD_ENV: str(hold)}))
        cluster.wait_for_workers(2)
        cluster.hold = hold
        yield cluster
    finally:
        cluster.stop()


def test_a_class_graded_on_the_cluster_gets_the_local_grades(course, cluster):
    """Over TLS, by workers that hold the course secret and no checkout: the course comes
    from the command, once per worker, kept by its digest."""
    (cluster.hold / "go").touch()
    out = course["base"] / "on-cluster"
    done = grade(course["submissions"], out, course["root"], *cluster.grade_args())
    assert "2 workers of the cluster will grade" in done.stdout, done.stdout
    assert "refused" not in done.stdout
    assert rows(out) == course["local"]
    assert _grades(course["root"]) == course["local_gradebook"]
    assert digest(out / "feedback") == digest(course["base"] / "local" / "feedback")
    caches = [course["base"] / "caches" / name for name in ("worker-a", "worker-b")]
    assert [len([p for p in c.iterdir() if not p.name.startswith(".")]) for c in caches] \
        == [1, 1]


def test_a_worker_killed_mid_run_loses_nothing(course, cluster):
    """... and is said in one line; after a Generate (notebooks/ changed) the workers take the
    new bundle, with no re-sync."""
    go = cluster.hold / "go"
    go.unlink(missing_ok=True)
    for old in cluster.hold.glob("started-*"):
        old.unlink()
    generated = course["root"] / "notebooks" / "generated-again.txt"
    generated.write_text("Generate ran again\n")
    out = course["base"] / "killed"
    grading = start_grading(course, out, cluster)
    try:
        first, pid = kill_the_first_to_start(grading, cluster.hold)
        output = release(grading, cluster.hold, 600)
    finally:
        generated.unlink()
    assert grading.returncode == 0, output
    assert rows(out) == course["local"], output
    assert _grades(course["root"]) == course["local_gradebook"]
    assert "refused" not in output
    left = [line for line in output.splitlines() if "left the cluster while grading" in line]
    assert len(left) == 1, output
    # The killed worker's notebook was graded again, by another process.
    notebook = first.name.split("-", 2)[2]
    again = [p for p in cluster.hold.glob(f"started-*-{notebook}") if p != first]
    assert again and all(int(p.read_text()) != pid for p in again)


def test_workers_stay_warm_from_one_grading_to_the_next(course, tls, tmp_path):
    """Feedback on submit with `[feedback] cluster`: each batch is a grading of its own, with a
    new connection; the workers keep the course, their imports and runner
    host from the earlier one (same course, same limits), and the command says so. After a
    Generate (the course changed) they warm again."""
    cluster = Cluster(tmp_path, tls)
    try:
        cluster.worker("kept", **course_env(course, "kept"))
        cluster.wait_for_workers(1)
        first = grade(course["submissions"], tmp_path / "first", course["root"],
                      *cluster.grade_args())
        second = grade(course["submissions"], tmp_path / "second", course["root"],
                       *cluster.grade_args())
        solution = course["root"] / "solutions" / A / f"{A}.ipynb"
        original = solution.read_bytes()
        solution.write_bytes(original + b"\n")  # what Generate's changes do to the digest
        try:
            changed = grade(course["submissions"], tmp_path / "third", course["root"],
                            *cluster.grade_args())
        finally:
            solution.write_bytes(original)
    finally:
        cluster.stop()
    assert "1 workers of the cluster will grade." in first.stdout, first.stdout
    assert "1 workers of the cluster will grade (1 of them warm from an earlier grading" \
        in second.stdout, second.stdout
    assert "1 workers of the cluster will grade." in changed.stdout, changed.stdout
    assert rows(tmp_path / "second") == course["local"]


def test_the_only_worker_restarted_by_its_nanny_is_not_waited_for_for_ever(course, tls,
                                                                            tmp_path):
    hold = tmp_path / "hold"
    hold.mkdir()
    cluster = Cluster(tmp_path, tls)
    out = tmp_path / "out"
    try:
        cluster.worker("only", **course_env(course, "only", **{HOLD_ENV: str(hold)}))
        cluster.wait_for_workers(1)
        grading = start_grading(course, out, cluster)
        _, pid = kill_the_first_to_start(grading, hold)  # its nanny starts it again
        output = release(grading, hold, 480)
    finally:
        cluster.stop()
    assert grading.returncode == 0, output
    assert rows(out) == course["local"], output
    assert "left the cluster while grading" in output
    again = [p for p in hold.glob("started-*") if int(p.read_text()) != pid]
    assert again, "the restarted worker graded the rest"


def test_an_unreachable_scheduler_is_a_clear_error_and_nothing_is_written(course, tls):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    before = digest(course["root"])
    out = course["base"] / "unreachable"
    done = grade(course["submissions"], out, course["root"], "--cluster",
                 f"tls://127.0.0.1:{port}", "--cluster-tls", tls["ca"], tls["cert"],
                 tls["key"], check=False)
    assert done.returncode == EXIT_NO_CLUSTER, done.stdout + done.stderr
    assert f"the Dask scheduler at tls://127.0.0.1:{port} cannot be reached" in done.stderr
    assert "nothing was written" in done.stderr
    assert not out.exists()
    assert digest(course["root"]) == before


def test_a_tcp_scheduler_is_refused_without_insecure_cluster(course):
    before = digest(course["root"])
    out = course["base"] / "plain-tcp"
    done = grade(course["submissions"], out, course["root"], "--cluster",
                 "tcp://127.0.0.1:8786", check=False)
    assert done.returncode == EXIT_NO_CLUSTER, done.stdout + done.stderr
    assert "is not encrypted and lets anyone attach a worker" in done.stderr
    assert "--cluster-tls CA CERT KEY" in done.stderr and "--insecure-cluster" in done.stderr
    assert not out.exists()
    assert digest(course["root"]) == before


def test_workers_that_cannot_grade_this_course_are_refused_with_why(course, tls, tmp_path):
    other = tmp_path / "other-secret" / ".autograder"
    other.mkdir(parents=True)
    (other / "secret").write_text("cd" * 32)
    before = digest(course["root"])
    cluster = Cluster(tmp_path, tls)
    try:
        cluster.worker("other-secret", **course_env(course, "other-secret",
                                                    **{COURSE_ENV: str(other.parent)}))
        cluster.worker("no-sandbox", **course_env(course, "no-sandbox", **{PROBE_ENV: "fail"}))
        cluster.worker("no-secret", **course_env(course, "no-secret",
                                                 AUTOGRADER_SECRET_FILE=str(tmp_path / "nope")))
        cluster.wait_for_workers(3)
        out = tmp_path / "out"
        done = grade(course["submissions"], out, course["root"], *cluster.grade_args(),
                     check=False)
    finally:
        cluster.stop()
    assert done.returncode == EXIT_NO_CLUSTER, done.stdout + done.stderr
    assert "no worker of the cluster" in done.stderr and "nothing was written" in done.stderr
    assert "it did not prove that it holds this course's secret" in done.stderr
    assert "it cannot confine notebooks" in done.stderr
    assert f"it cannot read the course secret at {tmp_path / 'nope'} (No such file or " \
        f"directory; the worker runs as uid {os.getuid()})" in done.stderr
    assert not out.exists()
    assert digest(course["root"]) == before
    assert not list((course["base"] / "caches" / "other-secret").glob("*")), \
        "the course went to a worker that did not prove it holds it"


# --------------------------------------------------------------------------------------------
# A rogue worker: its own `autograder.dispatch.cluster_worker` first on its path. It answers
# every call of the grader's (this one's and the earlier one's) with what an attacker would:
# a made-up proof, a claim of the run's resource, pickles that run code where they are loaded,
# an exception that does the same, and full marks; it keeps whatever it is sent.

ROGUE = '''
import json, os, pickle

LOOT, MARK = os.environ["ROGUE_LOOT"], os.environ["ROGUE_MARK"]
RESOURCE_PREFIX, SHARED_OPTIONS = "autograder-", ()


class Evil:
    def __reduce__(self):
        return (os.system, (f"touch {MARK}",))


class EvilError(Exception):
    def __reduce__(self):
        return (os.system, (f"touch {MARK}",))


class ClusterError(RuntimeError):
    pass


def _keep(name, data):
    with open(os.path.join(LOOT, f"{name}-{os.getpid()}-{len(os.listdir(LOOT))}"), "w") as f:
        f.write(repr(data)[:100000])


def _warn(worker):  # events carry msgpack only: pickles as bytes, for the client to load
    worker.log_event("warn", {"message": pickle.dumps(Evil()), "category": pickle.dumps(Evil())})
    worker.log_event("print", {"args": pickle.dumps(Evil())})


def worker_hello(nonce, bundle, code, dask_worker=None):
    _keep("hello", nonce)
    _warn(dask_worker)
    return {"proof": "0" * 64, "problem": None, "has_bundle": False, "evil": Evil()}


def worker_install(bundle, files):
    _keep("install", sorted(files))


def check_and_warm(spec):
    _keep("warm", spec)
    raise EvilError("warm")


def grade_chunk(spec, chunk):
    _keep("grade", chunk)
    from distributed import get_worker
    _warn(get_worker())
    return Evil()


def worker_report(*args):
    return {"ready": True, "problem": None}


from distributed.diagnostics.plugin import WorkerPlugin


class GraderPlugin(WorkerPlugin):
    name = "autograder-rogue"

    def __init__(self, spec):
        self.spec = spec
        self.name = RESOURCE_PREFIX + spec["key"]

    async def setup(self, worker):
        await worker.set_resources(**{self.name: 1000})
'''


def rogue_path(base: Path) -> Path:
    package = base / "rogue" / "autograder" / "dispatch"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "cluster_worker.py").write_text(ROGUE)
    return package.parent.parent


def test_a_rogue_worker_gets_nothing_forges_nothing_and_runs_nothing_in_the_command(
        course, tmp_path):
    loot, mark = tmp_path / "loot", tmp_path / "code-ran-in-the-command"
    loot.mkdir()
    cluster = Cluster(tmp_path, tls=None)  # tcp://: anyone can attach a worker
    out = tmp_path / "out"
    try:
        cluster.worker("honest", **course_env(course, "honest-tcp"))
        cluster.worker("rogue", "--resources", "autograder-anything=1000",
                       PYTHONPATH=str(rogue_path(tmp_path)), ROGUE_LOOT=str(loot),
                       ROGUE_MARK=str(mark))
        cluster.wait_for_workers(2)
        done = grade(course["submissions"], out, course["root"], *cluster.grade_args(),
                     check=False)
    finally:
        cluster.stop()
    assert not mark.exists(), "a pickle from the rogue worker ran code in the command"
    assert done.returncode == 0, done.stdout + done.stderr
    assert rows(out) == course["local"]
    assert _grades(course["root"]) == course["local_gradebook"]
    kept = sorted(p.name.split("-")[0] for p in loot.iterdir())
    assert set(kept) <= {"hello"}, f"the rogue worker was sent {kept}"
    assert "it did not prove that it holds this course's secret" in done.stdout
    assert "1 workers of the cluster will grade" in done.stdout


# A worker that holds the course (its secret, the grader's code) but changes what it returns:
# a preload that wraps the real grade_chunk and gives every cell 1000 points, none for review.
LIAR = '''
import json, os
from autograder.dispatch import cluster_worker

_real = getattr(cluster_worker, "real_grade_chunk", cluster_worker.grade_chunk)
cluster_worker.real_grade_chunk = _real  # Dask may run a preload twice


def grade_chunk(spec, chunk, nonce=""):
    raw = _real(spec, chunk, nonce)
    reply = json.loads(raw)
    items = reply.get("items", []) if isinstance(reply, dict) else reply
    for item in items:
        for rows in ((item.get("record") or {}).get("notebooks") or {}).values():
            rows["grades"] = {name: [1000, False] for name in rows["grades"]}
    if isinstance(reply, dict) and "proof" in reply:  # it holds the secret: it proves its lie
        from distributed import get_worker
        from autograder.dispatch.cluster_proof import proof_key, read_secret, secret_path
        secret, _ = read_secret(secret_path(cluster_worker.worker_course()))
        reply["proof"] = cluster_worker.reply_proof(proof_key(secret), nonce,
                                                    get_worker().address, items)
    open(os.environ["LIAR_MARK"], "w").write("lied")
    forged = json.dumps(reply)
    return forged.encode() if isinstance(raw, bytes) else forged


cluster_worker.grade_chunk = grade_chunk
'''


def test_a_worker_that_returns_impossible_grades_is_dropped_loudly(course, tls, tmp_path):
    hold, lied = tmp_path / "hold", tmp_path / "lied"
    hold.mkdir()
    (tmp_path / "liar.py").write_text(LIAR)
    cluster = Cluster(tmp_path, tls)
    out = tmp_path / "out"
    try:
        cluster.worker("honest", **course_env(course, "honest-liar-test",
                                              **{HOLD_ENV: str(hold)}))
        cluster.worker("liar", "--preload", str(tmp_path / "liar.py"),
                       **course_env(course, "liar", LIAR_MARK=str(lied)))
        cluster.wait_for_workers(2)
        grading = start_grading(course, out, cluster)
        wait_while_grading(grading, lied.exists)  # the liar graded a chunk, and lied
        output = release(grading, hold, 480)  # the honest worker held its first notebook
    finally:
        cluster.stop()
    assert grading.returncode == 0, output
    assert rows(out) == course["local"], output
    assert _grades(course["root"]) == course["local_gradebook"]
    dropped = [line for line in output.splitlines() if line.startswith("!! Worker ")]
    assert len(dropped) == 1 and "is dropped from this run: it returned an impossible grade" \
        in dropped[0] and "outside 0.." in dropped[0], output
