"""Benchmark the grading command (sandbox on) against plain `nbgrader autograde`.

    .venv/bin/python benchmarks/grading.py [--students 20] [--sample 14] [--jobs N]
                                           [--sandbox-runs 12] [--no-sandbox] [--keep DIR]
                                           [--cluster]

Builds a synthetic class from solutions/ and notebooks/ (every lesson for each student, in
turn correct, partly right, partly right, blank), grades all of it with
`python -m autograder grade` in a copy of the course (each notebook confined in the sandbox,
the trusted verdicts' reference runs included), and grades a sample of it (one notebook of
each lesson and kind of student, `--sample` notebooks; 0: none) with
`nbgrader autograde <lesson>`, serially, in another copy. It checks that both give the sample
the same scores, then prints notebooks per second for both, where the grading command's time
went, the sandbox's own cost per notebook (a notebook of one trivial cell run confined and
unconfined, `--sandbox-runs` times each, through the same runner host as grading), peak memory
of each run's processes, and last

    speedup_vs_nbgrader=<ratio> efficiency=<ratio> trusted_cpu=<seconds>

speedup: nbgrader's time per notebook over ours, each measured on the whole run (start-up
included). efficiency: the running time of each notebook's own code over the command's wall
time times its workers. The notebooks' own code is their cells as they ran: each notebook's
own (as its process measured them), the lesson's worked examples as often as they really ran
(once per worker and lesson, shared by that worker's notebooks of the lesson), and the
scenarios calling each notebook's answers (on the grader's clock: they replaced the hidden
tests that used to run in its cells). The reference runs are grading work, not counted.
trusted_cpu: the grading work per notebook beyond the notebook's own code, in CPU seconds
(which change less than wall time with the machine's load): the grading workers' own CPU
time (nbgrader's steps, the verdicts, the gradebook, the feedback page) after their warm-up,
over the class's notebooks; the sandbox's own cost is printed apart. The machine's load is printed before and after: other
work on the machine changes both figures.

--cluster: the same class is graded again with `grade --cluster`, on a Dask scheduler and as
many `dask worker` processes (one thread each) as the local pool had workers, started here on
127.0.0.1: once with the workers cold (their warm-up counted, as the local pool's is) and once
more with them warm. It prints both throughputs beside the local pool's, and
`cluster_overhead=<ratio>`: the local pool's notebooks per second over the cold cluster's, less
one (the cost of going through Dask).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autograder.demo import build_class  # noqa: E402
from autograder.release import lessons as course_lessons, nbgrader_command, nbgrader_env  # noqa: E402


class PeakMemory:
    """Peak of the summed memory of a process and its descendants, sampled: proportional set
    size (PSS: pages shared by forked processes counted once), or resident size where PSS
    cannot be read. It also follows the CPU time of each grading worker (the trusted side:
    `python -m autograder.dispatch.pool`, its own time, not its children's), sampled with
    the same clock as the pool's timeline."""

    WORKER = "autograder.dispatch.pool"

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        import psutil

        self.root = psutil.Process(pid)
        self.interval = interval
        self.peak_bytes = 0
        self.peak_processes = 0
        # worker pid -> (its start, [(time.monotonic(), its own CPU seconds), ...])
        self.workers: dict[int, tuple[float, list[tuple[float, float]]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                processes = [self.root] + self.root.children(recursive=True)
            except psutil.Error:
                break
            total = 0
            for process in processes:
                self._worker_cpu(process)
                try:
                    total += process.memory_full_info().pss
                except (psutil.Error, AttributeError):
                    try:
                        total += process.memory_info().rss
                    except psutil.Error:
                        pass
            if total > self.peak_bytes:
                self.peak_bytes, self.peak_processes = total, len(processes)
            self._stop.wait(self.interval)

    def _worker_cpu(self, process) -> None:
        import psutil

        try:
            if process.pid not in self.workers:
                if self.WORKER not in process.cmdline():
                    return
                self.workers[process.pid] = (process.create_time(), [])
            times = process.cpu_times()
        except psutil.Error:
            return
        self.workers[process.pid][1].append((time.monotonic(), times.user + times.system))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def trusted_cpu(self, ready: list[float]) -> tuple[float, float]:
        """(CPU seconds of the workers after they were ready, before): the workers in the order
        they were started, the n-th ready at `ready[n]` (the pool's timeline), its CPU at that
        moment read from its samples (each worker's last 0.2 s may be missed)."""
        after = before = 0.0
        started = sorted(self.workers.values(), key=lambda worker: worker[0])
        for (_, samples), when in zip(started, ready):
            if not samples:
                continue
            at_ready = max([cpu for t, cpu in samples if t <= when], default=0.0)
            before += at_ready
            after += samples[-1][1] - at_ready
        return after, before


def children_cpu() -> float:
    """CPU seconds of this process's children that ended and were waited for (with theirs)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_measured(command: list[str], **kwargs) -> tuple[float, PeakMemory, subprocess.Popen]:
    started, cpu = time.perf_counter(), children_cpu()
    process = subprocess.Popen(command, **kwargs)
    memory = PeakMemory(process.pid)
    process.wait()
    elapsed = time.perf_counter() - started
    memory.stop()
    memory.cpu_seconds = children_cpu() - cpu  # every process of the command, all its CPU
    return elapsed, memory, process


def copy_course(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name in ("solutions", "notebooks", "scenarios"):  # scenarios: the trusted checks
        shutil.copytree(REPO / name, dest / name,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    shutil.copy(REPO / "nbgrader_config.py", dest / "nbgrader_config.py")
    return dest


def read_grades(path: Path) -> dict[tuple[str, str], dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return {(row["student_id"], row["lesson"]): row for row in csv.DictReader(handle)}


def read_timings(log: Path) -> list[dict]:
    """Each graded notebook's line of grading.log: student, lesson, seconds in its worker,
    its cells' running time, its scenarios' and its shared prologue's."""
    pattern = re.compile(r"^== (\S+) / (\S+): (?:graded|timeout|error), .* ([\d.]+) s "
                         r"\(cells ([\d.]+) s, scenarios ([\d.]+) s, shared ([\d.]+) s\)$")
    timings = []
    for line in log.read_text(encoding="utf-8").splitlines():
        match = pattern.match(line)
        if match:
            student, lesson, *numbers = match.groups()
            seconds, cells, scenarios, shared = (float(x) for x in numbers)
            timings.append({"student": student, "lesson": lesson, "seconds": seconds,
                            "cells": cells, "scenarios": scenarios, "shared": shared})
    return timings


def read_trace(path: Path) -> dict[int, dict]:
    """The pool's timeline ($AUTOGRADER_POOL_TRACE), by worker: when it was started, when it
    was ready, and each task: (handed out, returned, lesson, student)."""
    workers: dict[int, dict] = {}
    if not path.is_file():
        return workers
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["event"] == "closed":  # the pool, once its workers had stopped
            workers.setdefault(0, {})["closed"] = event["t"]
            continue
        worker = workers.setdefault(event["worker"], {"spawn": None, "ready": None,
                                                      "tasks": []})
        if event["event"] == "spawn":
            worker["spawn"] = event["t"]
        elif event["event"] == "ready":  # when the worker was ready, not when it was read
            worker["ready"] = event.get("since", event["t"])
        elif event["event"] == "task":
            worker["tasks"].append({"sent": event["t"], "lesson": event["lesson"],
                                    "student": event["student"]})
        elif event["event"] == "result" and worker["tasks"]:
            worker["tasks"][-1]["done"] = event["t"]
    return workers


def where_time_went(started: float, ended: float, jobs: int, workers: dict[int, dict],
                    timings: list[dict]) -> list[tuple[str, float]]:
    """The command's wall time x workers, split: (what, seconds)."""
    cells = sum(t["cells"] for t in timings)
    scenarios = sum(t["scenarios"] for t in timings)
    # A lesson's worked examples ran once for each worker that graded it (its prologue process).
    prologue = {}
    for t in timings:
        prologue[t["lesson"]] = max(prologue.get(t["lesson"], 0.0), t["shared"])
    prologues = 0.0
    closed = min(workers.pop(0, {}).get("closed", ended), ended)
    startup = reading = first_extra = rest = between = end = 0.0
    for worker in workers.values():
        tasks = [t for t in worker["tasks"] if "done" in t]
        if not tasks:
            continue
        ready = worker["ready"] or tasks[0]["sent"]  # a task handed out earlier waits for it
        startup += max(0.0, ready - max(started, worker["spawn"] or started)) + \
            max(0.0, (worker["spawn"] or started) - started)
        reading += max(0.0, tasks[0]["sent"] - ready)
        for before, after in zip(tasks, tasks[1:]):
            between += max(0.0, after["sent"] - before["done"])
        end += max(0.0, closed - tasks[-1]["done"])
        # A worker's first notebook of a lesson also starts the lesson's prologue process
        # and runs the reference solution: its time beyond that lesson's usual notebook.
        lessons: dict[str, list[float]] = {}
        for task in tasks:
            lessons.setdefault(task["lesson"], []).append(
                task["done"] - max(task["sent"], ready))
        prologues += sum(prologue.get(lesson, 0.0) for lesson in lessons)
        for times in lessons.values():
            usual = statistics.median(times[1:]) if len(times) > 1 else 0.0
            first_extra += max(0.0, times[0] - usual)
            rest += sum(times) - max(0.0, times[0] - usual)
    rest -= cells + scenarios
    first_extra -= prologues
    total = (ended - started) * jobs
    parts = [("cells the notebooks ran (their own, not the shared prologues)", cells),
             ("the lessons' worked examples, run once per worker and lesson", prologues),
             ("the scenarios calling each notebook's answers, in its sandbox", scenarios),
             ("each notebook's grading beyond that (sandbox, verdicts, nbgrader's steps, "
              "feedback)", rest),
             ("a worker's first notebook of a lesson, beyond its worked examples: the "
              "reference runs (solution and mistakes)", first_extra),
             ("start-up: the command, the workers, their runner hosts", startup),
             ("reading and importing the class, workers ready", reading),
             ("between notebooks (waiting for the pool, or for a lesson worth joining)",
              between),
             ("after a worker's last notebook, until the workers stopped", end),
             ("the class report, grades.csv and grading.log, after that",
              (ended - closed) * jobs)]
    accounted = sum(seconds for _, seconds in parts)
    parts.append(("not accounted for (workers replaced, rounding)", total - accounted))
    return parts


def sandbox_cost(runs: int) -> dict[str, float]:
    """Median wall time of a notebook of one trivial cell, through a runner host as grading
    starts it, confined and not: the difference is the sandbox's own cost per notebook
    (namespaces, the filesystem view, the cgroup, and tearing them down)."""
    from autograder.sandbox.policy import SandboxPolicy
    from autograder.trusted.executor import Host, host_config

    medians = {}
    for sandbox in (True, False):
        host = Host(host_config(SandboxPolicy.build(memory_limit=4 << 30, confined=sandbox)))
        host.start()
        try:
            times = []
            for _ in range(runs):
                request = {"cells": [(0, "x = 1")], "prologue": 0, "timeout": 60,
                           "max_lines": 1000, "files_from": None, "observe": None}
                began = time.perf_counter()
                run = host.run(request, timeout=60, budget=600)
                times.append(time.perf_counter() - began)
                if run.outcome != "ok":
                    raise RuntimeError(f"the trivial notebook did not run: {run.outcome} "
                                       f"{run.detail}")
            medians["confined" if sandbox else "unconfined"] = statistics.median(times)
        finally:
            host.stop()
    medians["cost"] = medians["confined"] - medians["unconfined"]
    return medians


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


def gib(size: float) -> str:
    return f"{size / (1 << 30):.2f} GiB"


def cluster_runs(work: Path, jobs: int, env: dict) -> tuple[float | None, float | None]:
    """Seconds of `grade --cluster` on the class with `jobs` local Dask workers: cold, warm."""
    root = copy_course(work / "course-cluster")
    dask = str(Path(sys.executable).parent / "dask")
    scheduler_file = work / "scheduler.json"
    processes = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                                   "--no-dashboard", "--scheduler-file", str(scheduler_file)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True, env=env)]
    try:
        while not scheduler_file.is_file():
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        for number in range(jobs):
            processes.append(subprocess.Popen(
                [dask, "worker", "--scheduler-file", str(scheduler_file), "--nworkers", "1",
                 "--nthreads", "1", "--no-dashboard",
                 "--local-directory", str(work / f"dask-{number}")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                env=dict(env, AUTOGRADER_COURSE=str(root))))
        from distributed import Client
        with Client(address, timeout=60) as client:
            client.wait_for_workers(jobs, timeout=300)
        seconds = []
        for run in ("cold", "warm"):
            command = [sys.executable, "-m", "autograder", "grade", str(work / "class"), "--out",
                       str(work / f"out-cluster-{run}"), "--course-root", str(root),
                       "--no-progress", "--cluster", address,
                       "--insecure-cluster"]  # tcp:// on 127.0.0.1 of this machine
            started = time.perf_counter()
            done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
            seconds.append(time.perf_counter() - started)
            if done.returncode != 0:
                print(done.stdout + done.stderr)
                return None, None
        same = read_grades(work / "out-cluster-cold" / "grades.csv") == \
            read_grades(work / "out" / "grades.csv")
        print(f"cluster:  grades {'the same as' if same else 'DIFFERENT from'} the local pool's")
        return (seconds[0], seconds[1]) if same else (None, None)
    finally:
        for process in processes:
            try:
                os.killpg(process.pid, 15)
            except ProcessLookupError:
                pass
            process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--sample", type=int, default=14,
                        help="notebooks graded with nbgrader autograde (default 14: each lesson "
                             "twice, correct and blank or partly right; 0: none, no speedup)")
    parser.add_argument("--jobs", type=int, default=None, help="--jobs of the grading command")
    parser.add_argument("--sandbox-runs", type=int, default=12,
                        help="trivial notebooks run each way to measure the sandbox's cost "
                             "(0: not measured)")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="grade without the sandbox (as unsafe as nbgrader; to compare)")
    parser.add_argument("--cluster", action="store_true",
                        help="also grade the class on a local Dask cluster of as many workers")
    parser.add_argument("--keep", type=Path, default=None,
                        help="work in this folder and keep it (default: a temporary folder)")
    args = parser.parse_args(argv)

    work = args.keep or Path(tempfile.mkdtemp(prefix="grading-benchmark-"))
    if args.keep and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    env = dict(nbgrader_env(), CI="true")
    try:
        print(f"Machine: {load()} before the run")
        lessons = course_lessons(REPO)
        fast_root = copy_course(work / "course-fast")
        slow_root = copy_course(work / "course-nbgrader")
        kinds = build_class(work / "class", fast_root, students=args.students)
        notebooks = args.students * len(lessons)
        print(f"Class: {args.students} students x {len(lessons)} lessons = {notebooks} notebooks "
              f"({', '.join(f'{k} {list(kinds.values()).count(k)}' for k in ('correct', 'partial', 'blank'))})")

        # The course's command, on the whole class.
        command = [sys.executable, "-m", "autograder", "grade", str(work / "class"),
                   "--out", str(work / "out"), "--course-root", str(fast_root), "--no-progress"]
        if args.jobs:
            command += ["--jobs", str(args.jobs)]
        if args.no_sandbox:
            command += ["--no-sandbox"]
        trace = work / "pool-trace.jsonl"
        started = time.monotonic()
        ours, ours_memory, process = run_measured(
            command, cwd=REPO, env=dict(env, AUTOGRADER_POOL_TRACE=str(trace)),
            stdout=subprocess.PIPE, text=True)
        ended = time.monotonic()
        summary = process.stdout.read()
        if process.returncode != 0:
            print(summary)
            print("the grading command failed")
            return 1
        jobs = int(re.search(r"(\d+) workers?", summary).group(1))
        grades = read_grades(work / "out" / "grades.csv")
        timings = read_timings(work / "out" / "grading.log")
        workers = read_trace(trace)
        ready = [worker["ready"] for number, worker in sorted(workers.items())
                 if number and worker.get("ready") is not None]
        trusted, warm_up = ours_memory.trusted_cpu(ready)
        parts = where_time_went(started, ended, jobs, workers, timings)
        cost = sandbox_cost(args.sandbox_runs) if args.sandbox_runs and not args.no_sandbox \
            else None

        # A sample with nbgrader autograde, one lesson at a time, serially.
        sample: list[tuple[str, str]] = []
        students = sorted(kinds)
        for i in range(min(args.sample, notebooks)):
            lesson = lessons[i % len(lessons)]
            student = students[(i // len(lessons) * 3 + i) % len(students)]
            sample.append((student, lesson))
        for student, lesson in sample:
            target = slow_root / "submitted" / student / lesson / f"{lesson}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(work / "class" / student / f"{lesson}.ipynb", target)
        with tempfile.TemporaryDirectory() as scratch:  # nbgrader's assignments, as released
            for lesson in sorted({lesson for _, lesson in sample}):
                subprocess.run(nbgrader_command(
                    "generate_assignment", lesson, "--force", "--log-level=ERROR",
                    f"--CourseDirectory.root={slow_root}",
                    f"--CourseDirectory.release_directory={scratch}"),
                    cwd=slow_root, env=env, check=True)
        theirs, theirs_peak, theirs_processes = 0.0, 0, 0
        for lesson in sorted({lesson for _, lesson in sample}):
            elapsed, memory, process = run_measured(
                nbgrader_command("autograde", lesson, "--force", "--log-level=ERROR",
                                 f"--CourseDirectory.root={slow_root}"),
                cwd=slow_root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            theirs += elapsed
            if memory.peak_bytes > theirs_peak:
                theirs_peak, theirs_processes = memory.peak_bytes, memory.peak_processes

        # Same scores?
        disagree = []
        if sample:
            from nbgrader.api import Gradebook
            with Gradebook(f"sqlite:///{slow_root / 'gradebook.db'}", "autograd-hooks") as gb:
                for student, lesson in sample:
                    theirs_score = gb.find_submission(lesson, student).score
                    ours_score = float(grades[(student, lesson)]["score"])
                    if theirs_score != ours_score:
                        disagree.append((student, lesson, ours_score, theirs_score))

        per_ours = ours / notebooks
        ran = sum(t["cells"] for t in timings)
        observed = sum(t["scenarios"] for t in timings)
        shared = sum(t["shared"] for t in timings)
        # The notebooks' own code: their cells, the worked examples as run, the scenarios.
        efficiency = sum(seconds for _, seconds in parts[:3]) / (ours * jobs)
        print(f"ours:     {notebooks} notebooks in {ours:.1f} s with {jobs} workers, sandbox "
              f"{'OFF' if args.no_sandbox else 'on'}: {notebooks / ours:.2f} notebooks/s, "
              f"{per_ours:.3f} s a notebook")
        print(f"          cells run {ran / notebooks:.3f} s and scenarios "
              f"{observed / notebooks:.3f} s a notebook; prologues run once and "
              f"shared: {shared / notebooks:.3f} s a notebook saved")
        print(f"          where the time went ({ours:.1f} s x {jobs} workers = "
              f"{ours * jobs:.1f} s):")
        for what, seconds in parts:
            print(f"            {seconds:7.1f} s {100 * seconds / (ours * jobs):5.1f} %  {what}")
        print(f"          CPU: {ours_memory.cpu_seconds:.1f} s in all "
              f"({ours_memory.cpu_seconds / notebooks:.3f} s a notebook); the workers' own "
              f"(the trusted side: nbgrader's steps, the verdicts, the feedback page) "
              f"{trusted / notebooks:.3f} s a notebook after their warm-up ({warm_up:.1f} s "
              "for all of them)")
        if cost is not None:
            print(f"          sandbox's own cost: {cost['cost']:.3f} s a notebook (a one-cell "
                  f"notebook: {cost['confined']:.3f} s confined, {cost['unconfined']:.3f} s "
                  f"not; median of {args.sandbox_runs} each)")
        print(f"          peak memory {gib(ours_memory.peak_bytes)} PSS "
              f"({ours_memory.peak_processes} processes: the command, {jobs} workers, their "
              "runner hosts, prologue processes and notebooks)")
        if sample:
            per_theirs = theirs / len(sample)
            print(f"nbgrader: {len(sample)} notebooks in {theirs:.1f} s, serially: "
                  f"{len(sample) / theirs:.2f} notebooks/s, {per_theirs:.3f} s a notebook; "
                  f"peak memory {gib(theirs_peak)} PSS ({theirs_processes} processes)")
            if disagree:
                print(f"scores DISAGREE on {len(disagree)} of {len(sample)} sample notebooks:")
                for item in disagree:
                    print("  ", item)
            else:
                print(f"scores agree on all {len(sample)} sample notebooks")
        if args.cluster:
            cold, warm = cluster_runs(work, jobs, env)
            if cold is None:
                print("the grading command failed on the cluster")
                return 1
            for name, seconds in (("cold", cold), ("warm", warm)):
                print(f"cluster:  {notebooks} notebooks in {seconds:.1f} s with {jobs} Dask "
                      f"workers ({name}): {notebooks / seconds:.2f} notebooks/s")
            overhead = cold / ours - 1
        print(f"Machine: {load()} after the run")
        figures = [f"efficiency={efficiency:.2f}", f"trusted_cpu={trusted / notebooks:.3f}"]
        if args.cluster:
            figures.append(f"cluster_overhead={overhead:.2f}")
        if sample:
            figures.insert(0, f"speedup_vs_nbgrader={per_theirs / per_ours:.1f}")
        print(" ".join(figures))
        return 1 if disagree else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
