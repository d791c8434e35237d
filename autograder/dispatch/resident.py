"""The resident grader: the grading command of feedback on submit, started once and kept warm.

`python -m autograder.dispatch.resident --jobs N` reads requests on its standard input, one JSON
line each: the arguments of a `python -m autograder grade ...` command. It runs each as that
command runs (the same OUT/grades.csv, feedback pages, grading.log and gradebook; the same exit
status), in the same process, with the same grading workers (`autograder.dispatch.pool`) kept
between requests: their imports, runner hosts, the lessons' shared prologues and reference
outcomes are paid once, not once per request. It answers each request with one JSON line on its
standard output: {"code": exit status, "output": what the command printed, "warmups": grading
workers started so far}.

The workers are started again when what they were warmed with changes: the course (the digest of
the files grading reads, which Generate changes) or the run's limits. A worker that dies (a
notebook that kills it) is that notebook's error, and a new worker takes its place. The resident
grader ends with the process that started it (PR_SET_PDEATHSIG) and when its input closes; its
workers end with it. Requests come only from the pipe of the process that started it: nothing a
student writes reaches it, and nothing from a notebook's process is unpickled.
"""

from __future__ import annotations

from autograder.nbgrader_glue import patches  # noqa: F401 (first: a quicker jsonschema import)

import argparse
import contextlib
import io
import json
import os
import shutil
import signal
import sys
import tempfile
import traceback
from dataclasses import replace
from pathlib import Path

from autograder.dispatch.cluster_bundle import TREES, _files, bundle_digest
from autograder.dispatch.pool import WorkerPool
from autograder.tasks import GradingOptions

# What the workers were warmed with: a run with other values gets new workers. The rest (OUT,
# hidden checks withheld, the lessons, the jobs) is sent with each run's tasks.
WARM_OPTIONS = ("course_root", "engine", "timeout", "memory_limit", "notebook_timeout",
                "share_prologue", "sandbox", "threads", "lock_path")


def course_digest(root: str) -> str:
    """The digest of the course's files that grading reads (what Generate changes)."""
    base = Path(root)
    return bundle_digest({str(p.relative_to(base)): p.read_bytes()
                          for name in TREES for p in _files(base, name)})


class Resident:
    """The warm workers kept between runs, for `grade_class(..., resident=...)`."""

    resident = True  # how grade_class tells it from a cluster's workers

    def __init__(self, jobs: int) -> None:
        from autograder.grading import default_jobs

        self.jobs = max(1, jobs)
        self.threads = max(1, default_jobs() // self.jobs)
        self.scratch = tempfile.mkdtemp(prefix="autograder-resident-")
        self.lock_path = os.path.join(self.scratch, "gradebook.lock")
        self.pool: WorkerPool | None = None
        self.key: tuple | None = None
        self.retired = 0  # workers started by pools since closed

    @property
    def warmups(self) -> int:
        """Grading workers started (each one warm-up: imports, runner host) so far."""
        return self.retired + (self.pool.spawned if self.pool is not None else 0)

    def pool_for(self, options: GradingOptions, preload: list[str]) -> WorkerPool:
        """The warm pool for a run with `options`: the one kept, unless the course or the
        limits changed since its workers were started."""
        plain = options.to_dict()
        key = (tuple(plain[name] for name in WARM_OPTIONS), course_digest(options.course_root))
        if self.pool is not None and key != self.key:
            self.close()
        if self.pool is None:
            self.pool, self.key = WorkerPool(replace(options, jobs=self.jobs), preload), key
        self.pool.options = options  # this run's OUT and feedback, sent with its tasks
        return self.pool

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.retired += self.pool.spawned
            self.pool = None

    def run(self, argv: list[str]) -> dict:
        """One request: the grade command with `argv`, run with the warm workers."""
        from autograder.__main__ import main

        if not (isinstance(argv, list) and argv[:1] == ["grade"]
                and all(isinstance(a, str) for a in argv)):
            return {"code": 2, "output": "error: a request is the arguments of `grade`",
                    "warmups": self.warmups}
        output = io.StringIO()
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            try:
                code = main(argv, resident=self)
            except SystemExit as stop:  # the arguments' parser
                code = stop.code if isinstance(stop.code, int) else 2
            except Exception:  # noqa: BLE001 (one request's failure; the next is served)
                traceback.print_exc()
                code = 1
        return {"code": code, "output": output.getvalue(), "warmups": self.warmups}


def serve(requests, replies, jobs: int) -> None:
    resident = Resident(jobs)
    try:
        for line in requests:
            try:
                argv = json.loads(line)
            except ValueError:
                argv = None
            replies.write(json.dumps(resident.run(argv)) + "\n")
            replies.flush()
    finally:
        resident.close()
        shutil.rmtree(resident.scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    from autograder.sandbox.confine import die_with_parent

    parser = argparse.ArgumentParser(prog="python -m autograder.dispatch.resident",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="grading workers kept warm")
    args = parser.parse_args(argv)
    die_with_parent(signal.SIGTERM)
    if os.getppid() == 1:  # the service had already gone
        return 0
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the run, close, leave
    # Replies have standard output to themselves: anything else printed goes to stderr.
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    try:
        serve(sys.stdin, replies, args.jobs)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
