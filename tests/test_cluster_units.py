"""Units of grading on a Dask cluster (autograder/dispatch/cluster.py) that need no cluster: what a
worker's course is compared on, and how a class is cut into chunks."""

from __future__ import annotations

import shutil

from conftest import COURSE_ROOT

from autograder.dispatch.cluster import ClusterPool
from autograder.dispatch.cluster_worker import CODE, SECRET, course_digest, secret_fingerprint
from autograder.tasks import Task


def _course(dest, secret: str):
    for name in ("scenarios", "solutions", "notebooks"):
        shutil.copytree(COURSE_ROOT / name, dest / name,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    shutil.copy(COURSE_ROOT / "nbgrader_config.py", dest / "nbgrader_config.py")
    (dest / ".autograder").mkdir()
    (dest / ".autograder" / "secret").write_text(secret)
    return dest


def test_the_digest_names_what_differs_and_never_shows_the_secret(tmp_path):
    secret = "ab" * 32
    ours = course_digest(_course(tmp_path / "ours", secret))
    theirs_root = _course(tmp_path / "theirs", secret)
    assert course_digest(theirs_root) == ours
    assert set(ours) == {"scenarios/", "solutions/", "notebooks/", "nbgrader_config.py",
                         CODE, SECRET}
    scenario = sorted((theirs_root / "scenarios").glob("*.py"))[0]
    scenario.write_text(scenario.read_text() + "\n# another commit\n")
    (theirs_root / ".autograder" / "secret").write_text("cd" * 32)
    theirs = course_digest(theirs_root)
    assert sorted(name for name in ours if ours[name] != theirs[name]) == \
        sorted(["scenarios/", SECRET])
    assert secret not in ours[SECRET] and secret_fingerprint(tmp_path) == "absent"


def test_chunks_keep_to_one_lesson_and_share_the_class_among_workers():
    tasks = [Task(student=f"s{i:03d}", lesson=lesson)
             for lesson in ("01_a", "02_b") for i in range(40)]
    for workers in (1, 2, 3, 50):
        pool = ClusterPool(client=None, address="", spec={"key": "k"},
                           accepted=[f"w{i}" for i in range(workers)])
        chunks = pool.chunks(tasks)
        assert [t for chunk in chunks for t in chunk] == tasks  # each task once, in order
        assert all(len({t.lesson for t in chunk}) == 1 for chunk in chunks)
        assert all(len(chunk) <= 16 for chunk in chunks)
        assert len(chunks) >= min(workers, len(tasks) // 2)  # no worker left idle
