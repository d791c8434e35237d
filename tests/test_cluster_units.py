"""Units of grading on a Dask cluster (autograder/dispatch/cluster*.py) that need no cluster: the
course bundle a worker is sent, a worker's proof that it holds the course secret, the refusal
of tcp://, the command's refusal of pickles and its bounds on a worker's reply, and how a
class is cut into chunks."""

from __future__ import annotations

import os
import pickle
import shutil
from types import SimpleNamespace

import pytest
from conftest import COURSE_ROOT

from autograder.dispatch import cluster_bundle
from autograder.dispatch.cluster import ClusterPool
from autograder.dispatch.cluster_admit import security
from autograder.dispatch.cluster_guard import BadReply, RefusedPickle, read_reply, refuse_pickles
from autograder.dispatch.cluster_proof import proof_key, prove, proven, read_secret
from autograder.dispatch.cluster_worker import ClusterError
from autograder.tasks import GradingOptions, Task

pytestmark = pytest.mark.fast


def _course(dest):
    for name in ("scenarios", "solutions", "notebooks"):
        shutil.copytree(COURSE_ROOT / name, dest / name,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    shutil.copy(COURSE_ROOT / "nbgrader_config.py", dest / "nbgrader_config.py")
    (dest / ".autograder").mkdir()
    (dest / ".autograder" / "secret").write_text("ab" * 32)
    return dest


def test_the_bundle_is_the_course_without_its_secret_and_is_kept_by_its_digest(tmp_path,
                                                                                monkeypatch):
    digest, files = cluster_bundle.course_bundle(_course(tmp_path / "course"))
    assert files and all(name.split("/")[0] in cluster_bundle.TREES for name in files)
    assert not any(".autograder" in name for name in files)
    monkeypatch.setenv(cluster_bundle.CACHE_ENV, str(tmp_path / "cache"))
    assert cluster_bundle.cached_course(digest) is None
    folder = cluster_bundle.install_bundle(digest, files)
    assert cluster_bundle.cached_course(digest) == folder
    assert {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()} == \
        set(files) | {".complete"}
    scenario = tmp_path / "course" / "scenarios" / sorted(
        n for n in files if n.startswith("scenarios/"))[0].split("/", 1)[1]
    scenario.write_text(scenario.read_text() + "\n# Generate ran again\n")
    assert cluster_bundle.course_bundle(tmp_path / "course")[0] != digest


@pytest.mark.parametrize("name", ["../escape.py", "/etc/x", "scenarios/../../x", ".hidden/x",
                                  "elsewhere/x.py"])
def test_a_bundle_never_writes_outside_the_course(tmp_path, monkeypatch, name):
    monkeypatch.setenv(cluster_bundle.CACHE_ENV, str(tmp_path / "cache"))
    files = {"scenarios/a.py": b"x", name: b"y"}
    with pytest.raises(ValueError, match="outside the course"):
        cluster_bundle.install_bundle(cluster_bundle.bundle_digest(files), files)
    with pytest.raises(ValueError, match="does not match its digest"):
        cluster_bundle.install_bundle("0" * 64, {"scenarios/a.py": b"x"})


def test_a_refusal_names_the_file_of_the_grader_that_differs():
    ours = cluster_bundle.code_digests()
    assert cluster_bundle.code_difference(ours) is None
    theirs = dict(ours, **{"autograder/grading.py": "0" * 64})
    assert cluster_bundle.code_difference(theirs) == \
        "its grader's code differs from the command's in autograder/grading.py"


def test_a_proof_is_bound_to_the_secret_the_nonce_and_the_address():
    key = proof_key(b"\x01" * 32)
    answer = prove(key, "n1", "tls://10.0.0.5:4000")
    assert proven(key, "n1", "tls://10.0.0.5:4000", answer)
    assert not proven(key, "n2", "tls://10.0.0.5:4000", answer)  # a replayed answer
    assert not proven(key, "n1", "tls://10.0.0.6:4000", answer)  # another worker's
    assert not proven(proof_key(b"\x02" * 32), "n1", "tls://10.0.0.5:4000", answer)
    assert not proven(key, "n1", "tls://10.0.0.5:4000", None)
    assert b"\x01" * 32 not in bytes.fromhex(answer)


def test_a_secret_a_worker_cannot_read_says_where_and_as_whom(tmp_path):
    secret, why = read_secret(tmp_path / "missing")
    assert secret is None
    assert why == (f"it cannot read the course secret at {tmp_path / 'missing'} (No such file "
                   f"or directory; the worker runs as uid {os.getuid()}): mount it readable "
                   "by that uid")


@pytest.mark.parametrize("address,tls,insecure,problem", [
    ("tcp://h:8786", (), False, "is not encrypted and lets anyone attach a worker"),
    ("h:8786", (), False, "is not encrypted"),
    ("tls://h:8786", (), False, "give --cluster-tls CA CERT KEY"),
    ("tls://h:8786", ("/nope/ca", "/nope/c", "/nope/k"), False, "/nope/ca is not a file"),
    ("ws://h:8786", (), True, "is not tls://HOST:PORT"),
])
def test_the_cluster_must_be_tls_unless_insecure_is_said(address, tls, insecure, problem):
    options = GradingOptions(course_root=".", cluster=address, cluster_tls=tls,
                             insecure_cluster=insecure)
    with pytest.raises(ClusterError, match=problem.replace(".", r"\.")):
        security(options)
    assert security(GradingOptions(course_root=".", cluster="tcp://h:8786",
                                   insecure_cluster=True)) is None


class _Runs:
    """Unpickling it writes a file: the proof that a pickle was loaded."""

    def __init__(self, path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_nothing_the_cluster_sends_is_unpickled_in_the_command(tmp_path):
    from distributed.client import _handle_warn
    from distributed.protocol import dumps, loads
    from distributed.protocol.serialize import Serialize, ToPickle

    marks = [tmp_path / f"ran-{i}" for i in range(4)]
    message = {"op": "task-erred", "exception": ToPickle(_Runs(marks[0])),
               "result": Serialize(_Runs(marks[1])), "plain": [1, "a", b"bytes"]}
    frames = dumps(message)
    restore = refuse_pickles()
    try:
        received = loads(frames)
        with pytest.raises(TypeError):
            _handle_warn(("warn", {"message": pickle.dumps(_Runs(marks[2])),
                                   "category": pickle.dumps(_Runs(marks[3]))}))
    finally:
        restore()
    assert not any(mark.exists() for mark in marks)
    assert received["plain"] == (1, "a", b"bytes")  # msgpack's own data still comes
    assert isinstance(received["exception"], RefusedPickle)
    assert isinstance(received["result"], RefusedPickle)
    loads(frames)  # without the guard, Dask loads them: this test can fail
    assert marks[0].exists() and marks[1].exists()


def test_a_reply_is_bounded_before_it_is_parsed():
    assert read_reply(b'{"items": [{"a": "[[[[\\"]]"}]}') == {"items": [{"a": '[[[["]]'}]}
    deep = b"[" * 40 + b"]" * 40
    with pytest.raises(BadReply, match="nested more than 16 levels"):
        read_reply(deep)
    with pytest.raises(BadReply, match="holds more than 10 values"):
        read_reply(b"[" + b"1," * 20 + b"1]", max_values=10)
    with pytest.raises(BadReply, match="over 8"):
        read_reply(b"[1, 2, 3, 4]", max_bytes=8)
    with pytest.raises(BadReply, match="not the bytes of JSON"):
        read_reply({"items": []})


def test_chunks_keep_to_one_lesson_and_share_the_class_among_workers():
    tasks = [Task(student=f"s{i:03d}", lesson=lesson)
             for lesson in ("01_a", "02_b") for i in range(40)]
    for workers in (1, 2, 3, 50):
        admission = SimpleNamespace(client=None, proven={f"w{i}" for i in range(workers)})
        chunks = ClusterPool(admission).chunks(tasks)
        assert [t for chunk in chunks for t in chunk] == tasks  # each task once, in order
        assert all(len({t.lesson for t in chunk}) == 1 for chunk in chunks)
        assert all(len(chunk) <= 16 for chunk in chunks)
        assert len(chunks) >= min(workers, len(tasks) // 2)  # no worker left idle


def _item(**record_changes):
    """A notebook as an honest worker returns it for student s1's lesson L (two cells)."""
    rows = {"late_penalty": None, "grades": {"test-1": [2.0, False], "answer-1": [None, True]},
            "comments": {"answer-1": None}}
    rows.update(record_changes)
    return {"result": {"student_id": "s1", "lesson": "L", "status": "graded"},
            "digest": "d" * 64, "autograded": [], "feedback": [], "page": None,
            "record": {"timestamp": "2026-11-20T10:00:00", "notebooks": {"L": rows}}}


@pytest.mark.parametrize("change, why", [
    ({}, None),
    ({"grades": {"test-1": [7.0, False], "answer-1": [None, True]}}, "outside 0..2.0"),
    ({"grades": {"test-1": [-1, False], "answer-1": [None, True]}}, "outside 0..2.0"),
    ({"grades": {"test-1": [2.0, False], "answer-1": [3.0, False]}},
     "clears the instructor's review of cell answer-1"),
    ({"grades": {"test-1": [None, False], "answer-1": [None, True]}},
     "clears the instructor's review of cell test-1"),
    ({"grades": {"test-1": [2.0, False]}}, "cells of notebook L are not the lesson's"),
    ({"late_penalty": 1.0}, "late penalty 1.0 cannot be for this submission"),
    ({"grades": {"test-1": ["2", False], "answer-1": [None, True]}}, "not a number"),
])
def test_a_grade_a_worker_returns_is_checked_for_what_it_can_be(monkeypatch, change, why):
    from autograder.dispatch import cluster_checks
    from autograder.dispatch.cluster_checks import Impossible, check_item

    monkeypatch.setattr(cluster_checks, "_cells",
                        lambda config, lesson: {"L": ({"test-1": 2.0, "answer-1": 3.0},
                                                      {"answer-1"})})
    task = Task(student="s1", lesson="L")
    args = (None, task, _item(**change), "d" * 64, "2026-11-20 10:00:00 UTC",
            "2026-12-01T00:00:00")
    if why is None:
        assert check_item(*args)["record"]["notebooks"]["L"]["grades"]["test-1"] == [2.0, False]
    else:
        with pytest.raises(Impossible, match=why.replace(".", r"\.")):
            check_item(*args)


def test_a_returned_notebook_must_be_the_submission_sent_at_its_own_time(monkeypatch):
    from autograder.dispatch import cluster_checks
    from autograder.dispatch.cluster_checks import Impossible, check_item

    monkeypatch.setattr(cluster_checks, "_cells",
                        lambda config, lesson: {"L": ({"test-1": 2.0, "answer-1": 3.0},
                                                      {"answer-1"})})
    task = Task(student="s1", lesson="L")
    with pytest.raises(Impossible, match="graded another notebook"):
        check_item(None, task, _item(), "e" * 64, None, None)
    early = _item()
    early["record"]["timestamp"] = "2000-01-01T00:00:00"
    with pytest.raises(Impossible, match="submission time '2000-01-01T00:00:00' is not"):
        check_item(None, task, early, "d" * 64, "2026-11-20 10:00:00 UTC", None)
    other = _item()
    other["result"]["student_id"] = "s2"
    with pytest.raises(Impossible, match="not this submission's"):
        check_item(None, task, other, "d" * 64, None, None)
    bad_name = _item()
    bad_name["feedback"] = [{"name": "../../grades.csv", "mode": 0o644, "data": ""}]
    with pytest.raises(Impossible, match="not a plain name"):
        check_item(None, task, bad_name, "d" * 64, None, None)


class _Scheduler:
    """A client whose scheduler lists `workers` ({address: id}) and whose workers answer
    nothing to the proof (as a peer that claims an address would)."""

    def __init__(self, workers: dict[str, str]) -> None:
        self.workers = workers

    def scheduler_info(self, n_workers=-1):
        return {"workers": {address: {"id": ident} for address, ident in self.workers.items()}}

    def run(self, function, *args, workers=(), on_error="return"):
        return {address: {"proof": "0" * 64, "problem": None, "has_bundle": True}
                for address in workers}


def test_a_worker_that_takes_a_proven_workers_address_is_not_that_worker():
    from autograder.dispatch.cluster_admit import Admission

    admission = Admission.__new__(Admission)
    admission.client = _Scheduler({"tcp://10.0.0.5:4000": "Worker-honest"})
    admission.key, admission.bundle, admission.spec = proof_key(b"\x01" * 32), "b", {"code": {}}
    admission.proven, admission.seen, admission.ids, admission.dropped = set(), set(), {}, set()
    admission._workers()
    admission.proven = {"tcp://10.0.0.5:4000"}  # it proved itself at the start
    admission.seen = {"tcp://10.0.0.5:4000"}
    lines: list[str] = []
    assert not admission.watch(lines.append) and admission.proven == {"tcp://10.0.0.5:4000"}
    # It leaves; a peer registers at its address, and cannot prove it holds the course.
    admission.client.workers = {"tcp://10.0.0.5:4000": "Worker-peer"}
    assert admission.watch(lines.append)
    assert admission.proven == set()
    assert lines == [
        "Worker tcp://10.0.0.5:4000 left the cluster while grading (killed, or restarted by its "
        "nanny): what it returned is kept, the notebooks it held are graded again.",
        "Worker tcp://10.0.0.5:4000 refused: it did not prove that it holds this course's "
        "secret."]
