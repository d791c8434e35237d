"""Benchmark feedback on submit at a deadline rush: N students submit within a minute.

    sudo .venv/bin/python benchmarks/onsubmit.py [--students 30] [--window 60]
                                                 [--lesson 01_leaf_and_intermediate]

Runs the service's own queue and loop (coursehub.onsubmit: the fair queue, the batches, the
look at inbound while a step runs) with its real grading step (Steps.grade_many: each batch's
`grade` command run by the resident grader, kept warm from batch to batch, as the account
`nobody`, sandbox on, on a course folder of real files and a real gradebook under /tmp). Student i's submission (the lesson's solution) arrives at
i × WINDOW / N seconds. Collect and release run their real process, one per batch (its
start-up, nbgrader's API and the course's configuration), but move no file: there are no hub
accounts or exchange here. A submission is put where collect puts it when the service collects
it, and its feedback counts as released when that process ends; the copying itself, a few
milliseconds a submission, is not counted.

Prints each batch (its size and seconds), then

    students=N window=W median_s=<submit to released> p95_s=<...> max_s=<...>

Root only (the steps run as nobody). The machine's load changes the figures: it is printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "hub" / "lib"))

from coursehub import settings as class_settings  # noqa: E402
from coursehub.onsubmit import DONE, Queue, work  # noqa: E402
from coursehub.runtime import users_python  # noqa: E402
from coursehub.submitsteps import Steps  # noqa: E402


def course(base: Path, lesson: str, students: list[str]):
    """A class's state folder whose course the steps can use as nobody (group root)."""
    from nbgrader.api import Gradebook

    config = base / "class.toml"
    config.write_text('[hub]\nstate_dir = "state"\n[accounts]\nadmins = ["a"]\n'
                      'instructors_group = "root"\n[feedback]\nfeedback_on_submit = true\n'
                      'per_hour = 100\nper_lesson = 100\n')
    settings = class_settings.load(config)
    root = settings.course_dir
    root.mkdir(parents=True)
    os.chmod(settings.state_dir, 0o711)
    shutil.copy2(REPO / "nbgrader_config.py", root)
    shutil.copytree(REPO / "solutions", root / "solutions")
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        gradebook.add_assignment(lesson)
        for student in students:
            gradebook.add_student(student)
    for path in [root, *root.rglob("*")]:
        os.chown(path, 0, 0)
        os.chmod(path, 0o2770 if path.is_dir() else 0o660)
    return settings


class RushSteps(Steps):
    """The service's steps with its real grading; collect puts the solution where nbgrader's
    collect would, and release notes the time (see the module's doc)."""

    def __init__(self, settings, python, lesson: str, released: dict, **kwargs):
        super().__init__(settings, python, **kwargs)
        self.lesson, self.released, self.batches = lesson, released, []

    def collect(self, entry, now):
        return self.collect_many([entry], now)[entry.name]

    def collect_many(self, entries, now):
        """The real step's process, one per batch (its start-up, nbgrader's API and the
        course's configuration; there is no exchange here, so it collects nothing), then each
        solution put where collect puts it."""
        self._exchange("collect", entries)
        for entry in entries:
            folder = self.settings.course_dir / "submitted" / entry.student / entry.lesson
            folder.mkdir(parents=True, exist_ok=True)
            notebook = folder / f"{entry.lesson}.ipynb"
            shutil.copy(REPO / "solutions" / entry.lesson / f"{entry.lesson}.ipynb", notebook)
            (folder / "timestamp.txt").write_text(time.strftime(
                "%Y-%m-%d %H:%M:%S.000000 UTC", time.gmtime()))
            for path in (folder.parent.parent, folder.parent, folder, *folder.iterdir()):
                os.chmod(path, 0o2770 if path.is_dir() else 0o660)
        return {entry.name: "" for entry in entries}

    def grade_many(self, entries, now):
        began = time.monotonic()
        errors = super().grade_many(entries, now)
        self.batches.append((len(entries), time.monotonic() - began))
        print(f"  batch of {len(entries)} graded in {time.monotonic() - began:.1f} s"
              f"{'; errors: ' + repr(set(errors.values()) - {''}) if any(errors.values()) else ''}",
              flush=True)
        return errors

    def release(self, entry, now):
        return self.release_many([entry], now)[entry.name]

    def release_many(self, entries, now):
        """The real step's process, one per batch (nothing to release here); then the time."""
        self._exchange("release", entries)
        for entry in entries:
            self.released[entry.name] = time.time()
        return {entry.name: "" for entry in entries}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--window", type=float, default=60.0,
                        help="seconds over which the submissions arrive")
    parser.add_argument("--lesson", default="01_leaf_and_intermediate")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the steps run as the account nobody")
    os.environ["PATH"] = f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"
    base = Path(tempfile.mkdtemp(prefix="onsubmit-bench-"))
    os.chmod(base, 0o755)
    try:
        students = [f"s{n:03d}" for n in range(args.students)]
        settings = course(base, args.lesson, students)
        python = users_python(base / "python")
        start = time.time()
        arrivals = {f"{s}+{args.lesson}+{time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())}"
                    f".000000 UTC+{n:08x}": start + n * args.window / args.students
                    for n, s in enumerate(students)}
        queue, released = Queue(base / "queue.json"), {}
        seen: dict[str, float] = {}

        def look():
            now = time.time()
            arrived = {name: name.split("+")[0] for name, at in arrivals.items() if at <= now}
            for entry in queue.observe(arrived, now):
                seen[entry.name] = arrivals[entry.name]

        steps = RushSteps(settings, python, args.lesson, released, tick=look, poll=1.0)
        print(f"load before: {os.getloadavg()[0]:.2f}; {args.students} students submit "
              f"{args.lesson} within {args.window:g} s", flush=True)
        while len(released) < args.students:
            look()
            entry = queue.next_ready(time.time(), settings.on_submit)
            if entry is None:
                time.sleep(0.5)
                continue
            work(queue, entry, steps)
            if time.time() - start > 3600:
                print("stopped after an hour", flush=True)
                break
        waits = sorted(released[name] - seen[name] for name in released)
        done = sum(e.status == DONE for e in queue.entries)
        print(f"load after: {os.getloadavg()[0]:.2f}; {done} graded and released; batches "
              f"{[n for n, _ in steps.batches]}")
        p95 = waits[min(len(waits) - 1, round(0.95 * (len(waits) - 1)))]
        print(f"students={args.students} window={args.window:g} "
              f"median_s={statistics.median(waits):.1f} p95_s={p95:.1f} max_s={waits[-1]:.1f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
