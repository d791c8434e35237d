"""Command line: `python -m autograder release|execute|grade|demo|export`."""

from __future__ import annotations

from autograder.nbgrader_glue import patches  # noqa: F401 (first: a quicker jsonschema import)

import argparse
import os
import sys
from pathlib import Path

from autograder import execute, release
from autograder.tasks import DEFAULT_MEMORY_LIMIT, ENGINES, GradingOptions
from autograder.units import parse_memory



def memory_size(text: str) -> int:
    """--memory-limit: a size as `autograder.units.parse_memory` reads it, in bytes."""
    try:
        return parse_memory(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


LAYOUTS = ("auto", "folders", "nbgrader", "canvas", "moodle", "blackboard")
EXPORT_FORMATS = ("canvas", "moodle", "csv")
EXIT_NO_SANDBOX = 3  # nothing graded: this machine cannot confine notebooks
EXIT_REFUSED = 4  # graded, but some notebooks were refused: whose they are cannot be told
EXIT_NO_CLUSTER = 5  # nothing graded: the Dask cluster cannot be reached or cannot grade


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
    parser.add_argument("--roster", type=Path, metavar="CSV",
                        help="the class list (id,name,email): names and emails go into the "
                             "gradebook; the report lists ids not on it and students on it "
                             "who submitted nothing")
    parser.add_argument("--notebook-timeout", type=int, default=600,
                        help="seconds a whole notebook may run (default: 600)")
    parser.add_argument("--cluster", metavar="ADDRESS", default=None,
                        help="grade on the workers of a running Dask scheduler, e.g. "
                             "tls://HOST:8786 (see docs/SCALE.md)")
    parser.add_argument("--cluster-tls", nargs=3, metavar=("CA", "CERT", "KEY"), default=(),
                        help="the cluster's CA certificate, and this client's certificate "
                             "and key (mutual TLS, required for a tls:// scheduler)")
    parser.add_argument("--insecure-cluster", action="store_true",
                        help="allow a tcp:// scheduler (no TLS): anyone who reaches it can "
                             "attach a worker; only for a cluster no one else can reach")
    parser.add_argument("--no-sandbox", dest="sandbox", action="store_false",
                        help="run student code unconfined, as plain nbgrader does: UNSAFE, "
                             "only for submissions you trust (see docs/GRADING.md)")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None,
                          help="always show the progress bar")
    progress.add_argument("--no-progress", dest="progress", action="store_false",
                          help="never show the progress bar (default: only on a terminal, "
                               "not under CI)")


def main(argv: list[str] | None = None, resident=None) -> int:
    """The command; `resident`: a resident grader's warm workers, for `grade` (its runs)."""
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    release_parser = commands.add_parser("release", help="regenerate notebooks/ from solutions/")
    release_parser.add_argument("lessons", nargs="*", help="lessons to release (default: all)")
    execute_parser = commands.add_parser(
        "execute", help="re-run solution notebooks and store their outputs (for maintainers)")
    execute_parser.add_argument("lessons", nargs="*", help="lessons to execute (default: all)")
    grade_parser = commands.add_parser(
        "grade", help="grade a folder or zip of submissions (see docs/GRADING.md)",
        description="Grade SUBMISSIONS, a folder or a .zip: <student>/<lesson>.ipynb, "
                    "nbgrader's <student>/<lesson>/<lesson>.ipynb, or a Canvas, Moodle or "
                    "Blackboard export. Writes nbgrader's gradebook, OUT/grades.csv, "
                    "OUT/feedback/<student>/<lesson>.html, OUT/report.html and OUT/items.csv. "
                    "Exit status 4: some notebooks were refused because whose they are cannot "
                    "be told (the rest is graded).")
    grade_parser.add_argument("submissions", type=Path, metavar="SUBMISSIONS")
    grade_parser.add_argument("--out", "-o", type=Path, required=True, metavar="OUT",
                              help="folder for grades.csv, feedback/, report.html, items.csv "
                                   "and grading.log")
    grade_parser.add_argument("--layout", choices=LAYOUTS, default="auto",
                              help="how SUBMISSIONS is laid out: student folders (nbgrader's "
                                   "too), a Canvas, Moodle or Blackboard export (default: "
                                   "told apart entry by entry)")
    grade_parser.add_argument("--students", nargs="+", metavar="ID",
                              help="grade only these students")
    grade_parser.add_argument("--all", dest="regrade_all", action="store_true",
                              help="in the course's submitted/, grade every notebook, not "
                                   "only those new or changed since the last run")
    grade_parser.add_argument("--replace-ids", action="store_true",
                              help="students of this run whom the gradebook has under other "
                                   "ids (the same LMS user id or email): give its records this "
                                   "run's ids (default: say so and grade nothing)")
    grade_parser.add_argument("--withhold-hidden-checks", dest="withhold_hidden",
                              action="store_true",
                              help="feedback that shows the visible examples' results only "
                                   "(before a deadline; the score still counts every check)")
    _add_grading_options(grade_parser)
    demo_parser = commands.add_parser(
        "demo", help="build a small class of synthetic submissions and grade it")
    demo_parser.add_argument("--dir", type=Path, default=None,
                             help="where the class and its grades go (default: demo/ in the "
                                  "course root)")
    demo_parser.add_argument("--build-only", action="store_true",
                             help="write the submissions, do not grade them")
    _add_grading_options(demo_parser)
    export_parser = commands.add_parser(
        "export", help="write the gradebook's grades for Canvas, Moodle or as CSV",
        description="Write the grades of the course's gradebook (manual grades and late "
                    "penalties included) in a learning system's import format.")
    export_parser.add_argument("--to", choices=EXPORT_FORMATS, required=True,
                               help="canvas: Canvas's gradebook import CSV; moodle: Moodle's "
                                    "grade import CSV; csv: one row per student and lesson")
    export_parser.add_argument("--out", "-o", type=Path, default=None, metavar="FILE",
                               help="the file to write (default: grading/export-<format>.csv "
                                    "in the course root, which git ignores)")
    export_parser.add_argument("--course-root", type=Path, default=None,
                               help="nbgrader's course root (default: the course the current "
                                    "folder is in: the nearest folder up with an "
                                    "nbgrader_config.py or a gradebook.db)")
    export_parser.add_argument("--lessons", nargs="+", metavar="LESSON",
                               help="lessons to export (default: all in the gradebook)")
    export_parser.add_argument("--roster", type=Path, metavar="CSV",
                               help="the class list: its students are exported too, and its "
                                    "columns section, sis_user_id, sis_login_id (Canvas), "
                                    "idnumber (Moodle) and lms_id fill those columns")
    export_parser.add_argument("--column", action="append", metavar="LESSON=HEADER",
                               help="the column title of a lesson (repeatable), e.g. for an "
                                    "existing Canvas assignment 'Lesson 1 (12345)'")
    export_parser.add_argument("--missing", choices=("blank", "zero"), default="blank",
                               help="a lesson not submitted: blank (the LMS keeps what it has, "
                                    "default) or zero")
    export_parser.add_argument("--merge", action="store_true",
                               help="students of the gradebook who share a Canvas user id "
                                    "(Moodle: an email) get one row, per lesson the latest "
                                    "submission (default: refuse, naming them)")
    args = parser.parse_args(argv)
    if args.command == "release":
        out = release.release(names=args.lessons or None)
        print(f"Student notebooks written to {out}")
    elif args.command == "execute":
        for name, seconds in execute.execute_solutions(args.lessons or None).items():
            print(f"{name}: executed in {seconds:.1f} s")
    elif args.command == "export":
        return _export(args)
    elif args.command in ("grade", "demo"):
        return _grade(args, resident)
    return 0


def _grade(args: argparse.Namespace, resident=None) -> int:
    from autograder.grading import grade_class
    from autograder.intake.roster import read_roster
    from autograder.plan import Intake

    course_root = args.course_root
    try:
        roster = read_roster(args.roster) if args.roster else None
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.command == "demo":
        from autograder.demo import build_demo_class, build_demo_course, write_demo_roster
        demo_dir = (args.dir or args.course_root / "demo").resolve()
        try:
            course_root = build_demo_course(demo_dir / "course", args.course_root, args.lessons)
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        # The course's tests/variants/ (answers with named mistakes) give the demo two
        # students who make them.
        submissions = build_demo_class(demo_dir / "submissions", course_root, args.lessons,
                                       variants=args.course_root / "tests" / "variants")
        students = sorted(p.name for p in submissions.iterdir() if p.is_dir())
        roster_path = write_demo_roster(demo_dir / "roster.csv", students)
        roster = roster or read_roster(roster_path)
        print(f"Demo class written to {submissions} (its own course: {course_root})")
        if args.build_only:
            return 0
        out = demo_dir / "out"
        intake = Intake(roster=roster)
    else:
        submissions, out = args.submissions, args.out
        layout = "folders" if args.layout == "nbgrader" else args.layout
        intake = Intake(layout=layout, roster=roster, students=args.students,
                        regrade_all=args.regrade_all, replace_ids=args.replace_ids)
    options = GradingOptions(course_root=str(course_root), out=str(out), engine=args.engine,
                             timeout=args.timeout or 0, memory_limit=args.memory_limit,
                             notebook_timeout=args.notebook_timeout,
                             share_prologue=args.share_prologue, sandbox=args.sandbox,
                             withhold_hidden=getattr(args, "withhold_hidden", False),
                             jobs=args.jobs or 0, lessons=tuple(args.lessons or ()),
                             cluster=args.cluster or "",
                             cluster_tls=tuple(args.cluster_tls or ()),
                             insecure_cluster=args.insecure_cluster)
    try:
        report = grade_class(submissions, options, intake=intake, progress=args.progress,
                             resident=resident)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:
        from autograder.dispatch.cluster_worker import ClusterError
        from autograder.grading import SandboxUnavailable
        if isinstance(err, ClusterError):
            print(f"error: nothing was graded: {err}", file=sys.stderr)
            return EXIT_NO_CLUSTER
        if not isinstance(err, SandboxUnavailable):
            raise
        print(f"error: nothing was graded. {err}", file=sys.stderr)
        return EXIT_NO_SANDBOX
    if args.command == "demo":
        shown = os.path.relpath(course_root) if not os.path.relpath(course_root).startswith("..") \
            else str(course_root)
        print(f"The demo has a course root of its own, {course_root}, with its own "
              "gradebook.db; the course's gradebook was not touched. `make formgrader "
              f"COURSE={shown}` opens nbgrader's formgrader on it.")
    if report.findings is not None and report.findings.refused:
        print(f"error: {len(report.findings.refused)} notebooks were not graded because whose "
              "they are cannot be told (see the rows without a student id in grades.csv); "
              "everything else was graded.", file=sys.stderr)
        return EXIT_REFUSED
    return 0


def _export(args: argparse.Namespace) -> int:
    from autograder.nbgrader_glue.export import (EXPORT_FOLDER, export, find_course_root,
                                                 parse_columns)
    from autograder.intake.roster import read_roster

    try:
        args.course_root = args.course_root or find_course_root(Path.cwd())
        out = args.out or args.course_root / EXPORT_FOLDER / f"export-{args.to}.csv"
        roster = read_roster(args.roster) if args.roster else None
        done = export(args.to, out, course_root=args.course_root, lessons=args.lessons,
                      roster=roster, columns=parse_columns(args.column), missing=args.missing,
                      merge=args.merge)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for warning in done.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"{done.students} students, {done.lessons} lessons written to {done.path} "
          f"({args.to} format)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
