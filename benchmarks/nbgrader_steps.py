"""Time nbgrader's own steps of grading one notebook, in process, without running its code.

    .venv/bin/python benchmarks/nbgrader_steps.py [--repeat 3] [--lessons 03_tensor_hooks ...]

In a scratch copy of the course, each lesson's student notebook is submitted and autograded
with the course's Autograde converter as the grading command runs it (`autograder.nbgrader_glue.
inproc.autograde`), nbgrader's Execute replaced by a step that gives each cell the outputs it
has in the solution notebook (so the later steps see a notebook of realistic size, and no code
runs), then its feedback page is written as the grading command writes it. It prints the
seconds per notebook of the two converters and of each preprocessor.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autograder.nbgrader_glue import patches  # noqa: E402,F401 (first: a quicker jsonschema import)

import nbformat  # noqa: E402
from nbconvert.preprocessors import Preprocessor  # noqa: E402
from nbgrader.preprocessors import NbGraderPreprocessor  # noqa: E402

from autograder.demo import build_demo_course  # noqa: E402
from autograder.nbgrader_glue.gradebook import install_gradebook_lock  # noqa: E402
from autograder.nbgrader_glue.inproc import (autograde, autograde_preprocessors,  # noqa: E402
                                             course_config, generate_feedback,
                                             register_lessons)
from autograder.release import lessons as course_lessons  # noqa: E402

SECONDS: dict[str, list[float]] = defaultdict(list)


class SolutionOutputs(NbGraderPreprocessor):
    """Stands in for Execute: each code cell gets the outputs of the solution's cell of the
    same source (none when the student's differs)."""

    def preprocess(self, nb, resources):
        lesson = resources["nbgrader"]["assignment"]
        solution = nbformat.read(REPO / "solutions" / lesson / f"{lesson}.ipynb", as_version=4)
        outputs = {cell.source: cell.get("outputs", []) for cell in solution.cells
                   if cell.cell_type == "code"}
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = nbformat.from_dict(outputs.get(cell.source, []))
        return nb, resources


def timed_preprocessors() -> None:
    """Record each preprocessor's seconds, by class name."""
    call = Preprocessor.__call__

    def __call__(self, nb, resources):
        started = time.perf_counter()
        try:
            return call(self, nb, resources)
        finally:
            SECONDS[type(self).__name__].append(time.perf_counter() - started)

    Preprocessor.__call__ = __call__


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="students per lesson")
    parser.add_argument("--lessons", nargs="*", default=None)
    args = parser.parse_args()
    lessons = args.lessons or course_lessons(REPO)
    timed_preprocessors()
    with tempfile.TemporaryDirectory(prefix="nbgrader-steps-") as scratch:
        root = build_demo_course(Path(scratch) / "course", REPO, lessons)
        config = course_config(root)
        install_gradebook_lock(Path(scratch) / "gradebook.lock")  # as a worker does
        register_lessons(config, lessons)
        SECONDS.clear()
        config.Autograde.autograde_preprocessors = autograde_preprocessors(config,
                                                                           SolutionOutputs)
        whole: list[float] = []
        feedback: list[float] = []
        for lesson in lessons:
            for number in range(args.repeat + 1):  # the first of each lesson warms up
                student = f"s{number}"
                folder = root / "submitted" / student / lesson
                folder.mkdir(parents=True, exist_ok=True)
                shutil.copy(root / "notebooks" / lesson / f"{lesson}.ipynb", folder)
                before = {name: len(times) for name, times in SECONDS.items()}
                started = time.perf_counter()
                autograde(config, student, lesson)
                graded = time.perf_counter()
                generate_feedback(config, student, lesson)
                if number:
                    whole.append(graded - started)
                    feedback.append(time.perf_counter() - graded)
                else:  # the warm-up is not counted
                    for name, times in SECONDS.items():
                        del times[before.get(name, 0):]
            print(f"{lesson}: autograde {statistics.median(whole[-args.repeat:]):.3f} s, "
                  f"feedback {statistics.median(feedback[-args.repeat:]):.3f} s per notebook")
    count = len(whole)
    print(f"autograde converter: {statistics.mean(whole):.3f} s per notebook ({count} notebooks)")
    print(f"feedback converter: {statistics.mean(feedback):.3f} s per notebook")
    for name, times in sorted(SECONDS.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {name:28s} {sum(times) / count:.4f} s per notebook")
    return 0


if __name__ == "__main__":
    sys.exit(main())
