"""Command line: `python -m autograder release|execute|grade|demo`."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from autograder import execute, release

_UNITS = {"": 1 << 30, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}


def memory_size(text: str) -> int:
    """'4G', '512M', '2.5GiB' or '4' (GiB) in bytes; '0' or 'none' for no limit."""
    if text.strip().lower() in ("0", "none", "off"):
        return 0
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a memory size: {text!r} (try 4G or 512M)")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


ENGINES = ("fork", "nbgrader")  # as autograder.grading, without importing nbgrader here
DEFAULT_MEMORY_LIMIT = 4 << 30


def _add_grading_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", "-j", type=int, default=None,
                        help="notebooks graded at once (default: all cores)")
    parser.add_argument("--lessons", nargs="+", metavar="LESSON",
                        help="lessons to grade (default: every lesson found in SUBMISSIONS)")
    parser.add_argument("--course-root", type=Path, default=release.COURSE_ROOT,
                        help="nbgrader's course root (default: this repository)")
    parser.add_argument("--engine", choices=ENGINES, default="fork",
                        help="fork: warm workers and a forked process per notebook (fast); "
                             "nbgrader: the `nbgrader autograde` command per notebook (slow)")
    parser.add_argument("--timeout", type=int, default=None,
                        help="seconds a cell may run (default: Execute.timeout of "
                             "nbgrader_config.py)")
    parser.add_argument("--memory-limit", type=memory_size, default=DEFAULT_MEMORY_LIMIT,
                        help="memory each notebook may use, e.g. 4G or 512M; 0 for no limit "
                             "(default: 4G)")
    parser.add_argument("--no-prologue-sharing", dest="share_prologue", action="store_false",
                        help="run every notebook from its first cell in its own process "
                             "(default: the cells before a lesson's first exercise run once "
                             "for all notebooks that have them unchanged)")
    parser.add_argument("--notebook-timeout", type=int, default=600,
                        help="seconds a whole notebook may run (default: 600)")
    parser.add_argument("--no-sandbox", dest="sandbox", action="store_false",
                        help="run student code unconfined, as plain nbgrader does: UNSAFE, "
                             "only for submissions you trust (see docs/GRADING.md)")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None,
                          help="always show the progress bar")
    progress.add_argument("--no-progress", dest="progress", action="store_false",
                          help="never show the progress bar (default: only on a terminal, "
                               "not under CI)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    release_parser = commands.add_parser("release", help="regenerate notebooks/ from solutions/")
    release_parser.add_argument("lessons", nargs="*", help="lessons to release (default: all)")
    execute_parser = commands.add_parser(
        "execute", help="re-run solution notebooks and store their outputs (for maintainers)")
    execute_parser.add_argument("lessons", nargs="*", help="lessons to execute (default: all)")
    grade_parser = commands.add_parser(
        "grade", help="grade a folder or zip of submissions (see docs/GRADING.md)",
        description="Grade SUBMISSIONS (<student>/<lesson>.ipynb or "
                    "<student>/<lesson>/<lesson>.ipynb, a folder or a .zip): nbgrader's gradebook, "
                    "OUT/grades.csv and OUT/feedback/<student>/<lesson>.html.")
    grade_parser.add_argument("submissions", type=Path, metavar="SUBMISSIONS")
    grade_parser.add_argument("--out", "-o", type=Path, required=True, metavar="OUT",
                              help="folder for grades.csv, feedback/ and grading.log")
    _add_grading_options(grade_parser)
    demo_parser = commands.add_parser(
        "demo", help="build a small class of synthetic submissions and grade it")
    demo_parser.add_argument("--dir", type=Path, default=None,
                             help="where the class and its grades go (default: demo/ in the "
                                  "course root)")
    demo_parser.add_argument("--build-only", action="store_true",
                             help="write the submissions, do not grade them")
    _add_grading_options(demo_parser)
    args = parser.parse_args(argv)
    if args.command == "release":
        out = release.release(names=args.lessons or None)
        print(f"Student notebooks written to {out}")
    elif args.command == "execute":
        for name, seconds in execute.execute_solutions(args.lessons or None).items():
            print(f"{name}: executed in {seconds:.1f} s")
    elif args.command in ("grade", "demo"):
        from autograder.grading import grade_class
        if args.command == "demo":
            from autograder.demo import build_demo_class
            demo_dir = args.dir or args.course_root / "demo"
            submissions = build_demo_class(demo_dir / "submissions", args.course_root,
                                           args.lessons)
            print(f"Demo class written to {submissions}")
            if args.build_only:
                return 0
            out = demo_dir / "out"
        else:
            submissions, out = args.submissions, args.out
        try:
            grade_class(submissions, out, course_root=args.course_root, jobs=args.jobs,
                        lessons=args.lessons, engine=args.engine, timeout=args.timeout,
                        memory_limit=args.memory_limit, progress=args.progress,
                        share_prologue=args.share_prologue, sandbox=args.sandbox,
                        notebook_timeout=args.notebook_timeout)
        except (FileNotFoundError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        except RuntimeError as err:
            from autograder.grading import SandboxUnavailable
            if not isinstance(err, SandboxUnavailable):
                raise
            print(f"error: nothing was graded. {err}", file=sys.stderr)
            return 3
        if args.command == "demo":
            print("Open the gradebook with `make formgrader` (nbgrader's formgrader in "
                  "JupyterLab, from the course root).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
