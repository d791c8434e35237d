"""Benchmark the grading command against plain `nbgrader autograde`.

    .venv/bin/python benchmarks/grading.py [--students 20] [--sample 14] [--jobs N] [--keep DIR]

Builds a synthetic class from solutions/ and notebooks/ (every lesson for each student, in
turn correct, partly right, partly right, blank), grades all of it with
`python -m autograder grade` in a copy of the course, and grades a sample of it (one notebook
of each lesson and kind of student, `--sample` notebooks) with `nbgrader autograde <lesson>`,
serially, in another copy. It checks that both give the sample the same scores, then prints
notebooks per second for both, the grading time per notebook beyond the cells it ran (the
overhead), peak memory of each run's processes, and last `speedup_vs_nbgrader=<ratio>`:
nbgrader's time per notebook over ours, each measured on the whole run (start-up included).
"""

from __future__ import annotations

import argparse
import csv
import os
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
    cannot be read."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        import psutil

        self.root = psutil.Process(pid)
        self.interval = interval
        self.peak_bytes = 0
        self.peak_processes = 0
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

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def run_measured(command: list[str], **kwargs) -> tuple[float, PeakMemory, subprocess.Popen]:
    started = time.perf_counter()
    process = subprocess.Popen(command, **kwargs)
    memory = PeakMemory(process.pid)
    process.wait()
    elapsed = time.perf_counter() - started
    memory.stop()
    return elapsed, memory, process


def copy_course(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name in ("solutions", "notebooks"):
        shutil.copytree(REPO / name, dest / name,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    shutil.copy(REPO / "nbgrader_config.py", dest / "nbgrader_config.py")
    return dest


def read_grades(path: Path) -> dict[tuple[str, str], dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return {(row["student_id"], row["lesson"]): row for row in csv.DictReader(handle)}


def read_timings(log: Path) -> list[tuple[float, float, float]]:
    """(seconds, cells run, shared prologue) for each graded notebook, from grading.log."""
    pattern = re.compile(r"^== .*: (?:graded|timeout|error), .* ([\d.]+) s "
                         r"\(cells ([\d.]+) s, shared ([\d.]+) s\)$")
    timings = []
    for line in log.read_text(encoding="utf-8").splitlines():
        match = pattern.match(line)
        if match:
            timings.append(tuple(float(x) for x in match.groups()))
    return timings


def gib(size: float) -> str:
    return f"{size / (1 << 30):.2f} GiB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--sample", type=int, default=14,
                        help="notebooks graded with nbgrader autograde (default 14: each lesson "
                             "twice, correct and blank or partly right)")
    parser.add_argument("--jobs", type=int, default=None, help="--jobs of the grading command")
    parser.add_argument("--keep", type=Path, default=None,
                        help="work in this folder and keep it (default: a temporary folder)")
    args = parser.parse_args(argv)

    work = args.keep or Path(tempfile.mkdtemp(prefix="grading-benchmark-"))
    if args.keep and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    env = dict(nbgrader_env(), CI="true")
    try:
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
        ours, ours_memory, process = run_measured(command, cwd=REPO, env=env,
                                                  stdout=subprocess.PIPE, text=True)
        summary = process.stdout.read()
        if process.returncode != 0:
            print(summary)
            print("the grading command failed")
            return 1
        jobs = int(re.search(r"(\d+) workers?", summary).group(1))
        grades = read_grades(work / "out" / "grades.csv")
        timings = read_timings(work / "out" / "grading.log")

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
        from nbgrader.api import Gradebook
        disagree = []
        with Gradebook(f"sqlite:///{slow_root / 'gradebook.db'}", "autograd-hooks") as gb:
            for student, lesson in sample:
                theirs_score = gb.find_submission(lesson, student).score
                ours_score = float(grades[(student, lesson)]["score"])
                if theirs_score != ours_score:
                    disagree.append((student, lesson, ours_score, theirs_score))

        per_ours = ours / notebooks
        per_theirs = theirs / len(sample)
        ran = sum(t[1] for t in timings)
        shared = sum(t[2] for t in timings)
        overhead = sum(t[0] - t[1] for t in timings) / max(1, len(timings))
        all_in = (ours * jobs - ran) / notebooks
        print(f"ours:     {notebooks} notebooks in {ours:.1f} s with {jobs} workers: "
              f"{notebooks / ours:.2f} notebooks/s, {per_ours:.3f} s a notebook")
        print(f"          cells run {ran / notebooks:.3f} s a notebook; prologues run once and "
              f"shared: {shared / notebooks:.3f} s a notebook saved")
        print(f"          overhead (grading time beyond the cells run): {overhead:.3f} s a "
              f"notebook in the workers; {all_in:.3f} s a notebook all-in (start-up, import, "
              f"feedback, {jobs} workers' time)")
        print(f"          peak memory {gib(ours_memory.peak_bytes)} PSS "
              f"({ours_memory.peak_processes} processes: the command, {jobs} workers, their "
              "prologue processes and notebooks)")
        print(f"nbgrader: {len(sample)} notebooks in {theirs:.1f} s, serially: "
              f"{len(sample) / theirs:.2f} notebooks/s, {per_theirs:.3f} s a notebook; "
              f"peak memory {gib(theirs_peak)} PSS ({theirs_processes} processes)")
        if disagree:
            print(f"scores DISAGREE on {len(disagree)} of {len(sample)} sample notebooks:")
            for item in disagree:
                print("  ", item)
        else:
            print(f"scores agree on all {len(sample)} sample notebooks")
        print(f"speedup_vs_nbgrader={per_theirs / per_ours:.1f}")
        return 1 if disagree else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
