"""Where the test suite's time goes, and how long it takes on two workers.

    .venv/bin/python benchmarks/suite_times.py [--log FILE] [--top 40] [-- PYTEST_ARGS...]
    .venv/bin/python benchmarks/suite_times.py --from FILE [FILE...] [--top 40]

Runs the suite as `make test` runs it (pyproject.toml's options: two pytest-xdist workers,
sharing units of work as tests/conftest.py's scheduler makes them), recording each test's set-up, call and tear-down times and its worker in a
log of JSON lines (`--log`, default a temporary file), with the CPU time of each test's
processes (the worker's and those it started: as root on cgroup v1, all that ran in a cpuacct
group of the worker's own, a grader's sandboxed notebooks included), or reads such a log
(`--from`). It prints the
suite's wall time and each worker's busy time, the units of work (a file, or a test of its own:
see tests/conftest.py's unit_of) that took longest with their share of all test time, the
slowest tests, and estimates of the wall time on two workers from the units' measured times
and from their CPU times: in the order the suite runs them (each worker takes the next unit
as it finishes one), and longest first. Every figure is in seconds of this run: on a machine
shared with other work, compare shares and estimates with each other rather than with another
run's seconds; the CPU times change least with the machine's load.

Several logs (`--from` with more than one file) are read as one run: parts of the suite
measured apart (`-- -n 0 tests/test_x.py ...`), each test's latest measurement counted once.
The table of files splits their CPU time: the test process's own, and the processes the
tests started (kernels, graders, servers, browsers). For nbval, the test process's own time
is its comparing of the outputs (a sanitizer pattern that scanned the figures' base64 text
from every character once took 114 s of it for lesson 07, against 6 s in its kernel).
The CPU estimate, longest first, is the figure for an idle machine of two cores: each unit's
CPU time is what one core spends on it (the waits it has for clocks, a timeout say, add to
it).

tests/conftest.py's LONGEST_FIRST names the longest units, which the workers take first; this
prints the list that this run's times give.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOG_ENV = "SUITE_TIMES_LOG"


# As a pytest plugin (-p suite_times, with benchmarks/ on the path): one line per test.
_CPU_AT_START: dict[str, tuple[float, float]] = {}


def own_cpu_seconds() -> float:
    """CPU time of this process alone (a test's own work: for nbval, comparing a cell's
    outputs with the stored ones)."""
    mine = os.times()
    return mine.user + mine.system


# The rusage of waited-for children and psutil's view of live ones miss the CPU time of a
# process that no process of the test waits for: a grader's sandboxed notebook, stopped with its
# PID namespace (a notebook looping until its 4 s of CPU ran out: 4 s missing from 11.7 s of
# its grading command). As root, on cgroup v1's cpuacct, each test process puts itself in a
# cpuacct group of its own, which its descendants (and their nested groups: the sandbox makes
# its own under the one it is in) are charged to, and reads its CPU time there.
_CPUACCT: list[str] = []


def _join_cpuacct() -> None:
    if _CPUACCT or os.geteuid() != 0:
        return
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpuacct" in controllers.split(","):
            folder = Path(f"/sys/fs/cgroup/{controllers}{path}") / f"suite-times-{os.getpid()}"
            try:
                folder.mkdir()
                (folder / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                return
            _CPUACCT.append(str(folder / "cpuacct.usage"))
            return


def pytest_unconfigure(config) -> None:
    """Back to the group this process came from; its own group goes (when nothing is left in
    it)."""
    if _CPUACCT:
        folder = Path(_CPUACCT.pop()).parent
        try:
            (folder.parent / "cgroup.procs").write_text(str(os.getpid()))
            folder.rmdir()
        except OSError:
            pass


def cpu_seconds() -> float:
    """CPU time of this process and its descendants: those that ended (and were waited for)
    and those still running (a notebook's kernel, a server); where this process has a cpuacct
    group of its own, all that ran in it, sandboxed notebooks included."""
    import psutil

    if _CPUACCT:
        return int(Path(_CPUACCT[0]).read_text()) / 1e9
    mine = os.times()
    total = mine.user + mine.system + mine.children_user + mine.children_system
    for process in psutil.Process().children(recursive=True):
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def _logging() -> str | None:
    """Where to log, in a worker (or a run without workers); None in xdist's controller."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None and \
            os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
        return None
    return os.environ.get(LOG_ENV)


def pytest_runtest_logstart(nodeid, location) -> None:
    if _logging():
        _join_cpuacct()
        _CPU_AT_START[nodeid] = (cpu_seconds(), own_cpu_seconds())


def pytest_runtest_logfinish(nodeid, location) -> None:
    log = _logging()
    if not log or nodeid not in _CPU_AT_START:
        return
    cpu, own = _CPU_AT_START.pop(nodeid)
    _write(log, {"test": nodeid, "phase": "cpu", "seconds": cpu_seconds() - cpu,
                 "own": own_cpu_seconds() - own})


def pytest_runtest_logreport(report) -> None:
    log = _logging()
    if log:
        _write(log, {"test": report.nodeid, "phase": report.when,
                     "seconds": report.duration})


def _write(log: str, line: dict) -> None:
    line["group"] = _UNITS.get(line["test"], line["test"])
    line.update(ended=time.time(), worker=os.environ.get("PYTEST_XDIST_WORKER", "main"))
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")


_UNITS: dict[str, str] = {}


def pytest_collection_finish(session) -> None:
    """Each test's unit of work on the workers (tests/conftest.py's unit_of)."""
    conftest = sys.modules.get("conftest")
    for item in session.items:
        unit_of = getattr(conftest, "unit_of", None)
        _UNITS[item.nodeid] = unit_of(item) if unit_of else item.nodeid.split("::")[0]


def schedule(groups: list[tuple[str, float]], workers: int) -> float:
    """The wall time when each worker takes the next group as it finishes one."""
    free = [0.0] * workers
    for _, seconds in groups:
        heapq.heappush(free, heapq.heappop(free) + seconds)
    return max(free)


def read_logs(logs: list[Path]) -> list[dict]:
    """The rows of the logs, as one run's: a worker's rows (a run with workers also logs each
    report once more in its controller), and of a test measured in several logs, the last."""
    latest: dict[str, list[dict]] = {}
    for number, log in enumerate(logs):
        rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()
                if line]
        workers = {row["worker"] for row in rows}
        by_test: dict[str, list[dict]] = defaultdict(list)
        for row in rows:
            if row["worker"] != "main" or len(workers) == 1:
                row["worker"] = row["worker"] if len(logs) == 1 else f"{number}:{row['worker']}"
                by_test[row["test"]].append(row)
        latest.update(by_test)
    return [row for rows in latest.values() for row in rows]


def by_file(groups: dict[str, float], cpu: dict[str, float]) -> dict[str, tuple[float, float]]:
    """Test time and CPU time by test file (a unit's file)."""
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for group in set(groups) | set(cpu):
        entry = files[group.split("::")[0]]
        entry[0] += groups.get(group, 0.0)
        entry[1] += cpu.get(group, 0.0)
    return {name: (seconds, used) for name, (seconds, used) in files.items()}


def report(logs: list[Path], top: int, wall: float | None) -> None:
    rows = read_logs(logs)
    if not rows:
        print("no test ran")
        return
    groups: dict[str, float] = defaultdict(float)
    cpu: dict[str, float] = defaultdict(float)
    own: dict[str, float] = defaultdict(float)
    tests: dict[str, float] = defaultdict(float)
    busy: dict[str, float] = defaultdict(float)
    order: list[str] = []
    for row in sorted(rows, key=lambda r: r["ended"] - r["seconds"]):
        if row["group"] not in groups:
            order.append(row["group"])
        if row["phase"] == "cpu":
            cpu[row["group"]] += row["seconds"]
            if "own" in row:  # logs of an earlier version have no split
                own[row["group"]] += row["own"]
            groups[row["group"]] += 0.0
            continue
        groups[row["group"]] += row["seconds"]
        tests[row["test"]] += row["seconds"]
        busy[row["worker"]] += row["seconds"]
    total, total_cpu = sum(groups.values()), sum(cpu.values())
    timed = [r for r in rows if r["phase"] != "cpu"]
    started = min(r["ended"] - r["seconds"] for r in timed)
    ended = max(r["ended"] for r in timed)
    print(f"{len(tests)} tests in {len(groups)} units of work: {total:.0f} s of test time, "
          f"{total_cpu:.0f} s of CPU (the tests' processes and what they started); "
          f"{ended - started:.0f} s from the first test's start to the last one's end"
          + (f", {wall:.0f} s for the whole command" if wall else ""))
    print("busy: " + ", ".join(f"{w} {s:.0f} s" for w, s in sorted(busy.items())))
    print(f"\nthe {top} longest units (seconds of test time, share of it, seconds of CPU):")
    longest = sorted(groups.items(), key=lambda item: -item[1])
    for group, seconds in longest[:top]:
        print(f"  {seconds:8.1f} s {100 * seconds / total:5.1f} % {cpu[group]:8.1f} s  {group}")
    files = by_file(groups, cpu)
    started = by_file({group: groups[group] for group in own},
                      {group: cpu[group] - own[group] for group in own})
    print(f"\nthe {top} test files of most CPU (seconds of CPU, share of it, of which in the "
          "processes the tests started, seconds of test time):")
    for name, (seconds, used) in sorted(files.items(), key=lambda item: -item[1][1])[:top]:
        split = f"{started[name][1]:8.1f} s" if name in started else "       - s"
        print(f"  {used:8.1f} s {100 * used / max(total_cpu, 1e-9):5.1f} % {split} "
              f"{seconds:8.1f} s  {name}")
    print(f"\nthe {top} slowest tests (set-up, call and tear-down):")
    for test, seconds in sorted(tests.items(), key=lambda item: -item[1])[:top]:
        print(f"  {seconds:8.1f} s  {test}")
    print("\non 2 workers, each taking the next unit as it finishes one:")
    for what, times in (("test time", groups), ("CPU", cpu))[:2 if cpu else 1]:
        ran = schedule([(g, times[g]) for g in order], 2)
        best = schedule(sorted(times.items(), key=lambda item: -item[1]), 2)
        print(f"  by {what}: {ran:.0f} s in the order they ran, {best:.0f} s longest first "
              f"(the longest unit alone: {max(times.values()):.0f} s; all / 2: "
              f"{sum(times.values()) / 2:.0f} s)")
    print("\nLONGEST_FIRST for tests/conftest.py (units over 0.5 % of the test time):")
    print("LONGEST_FIRST = [\n" + "".join(f"    {g!r},\n" for g, s in longest
                                          if s > total / 200) + "]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="sources", type=Path, nargs="+",
                        help="read these logs (as one run); run nothing")
    parser.add_argument("--log", type=Path, help="where to write the log of this run")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("pytest_args", nargs="*", help="more arguments for pytest (after --)")
    args = parser.parse_args(argv)
    if args.sources:
        report(args.sources, args.top, None)
        return 0
    log = args.log or Path(tempfile.mkstemp(prefix="suite-times-", suffix=".jsonl")[1])
    log.write_text("")
    env = dict(os.environ, **{LOG_ENV: str(log)})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "benchmarks"),
                                                      env.get("PYTHONPATH")]))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "suite_times", "-q",
                           *args.pytest_args], cwd=REPO, env=env)
    wall = time.perf_counter() - began
    print(f"\npytest exited {done.returncode}; log: {log}\n")
    report([log], args.top, wall)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
