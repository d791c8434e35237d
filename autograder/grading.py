"""Grading a class: from a folder or zip of submissions to grades.csv, feedback and the gradebook.

`grade_class` is what `python -m autograder grade` runs:

1. collect the notebooks (`autograder.intake`), tell their lessons, keep the newest of
   duplicates, and check each one (readable, the right lesson, no exercise cells missing);
2. record the lessons and students in nbgrader's gradebook and import each gradeable file
   into nbgrader's submitted/<student>/<lesson>/<lesson>.ipynb;
3. autograde them: engine "fork" (default) in warm workers, all cores, one forked process per
   notebook; engine "nbgrader" runs the `nbgrader autograde` command, one notebook at a time;
4. write OUT/grades.csv (one row per student and lesson), OUT/feedback/<student>/<lesson>.html
   and OUT/grading.log, and print a summary.

Its parts: `autograder.plan` (steps 1 and the rows decided before grading), `course_records`
(step 2), `dispatch` (step 3: the local pool or a Dask cluster), `outputs` (step 4).
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

from autograder.course_records import prepare_course, remove_folder, within
from autograder.intake.collect import collect
from autograder.intake.roster import student_records
from autograder.intake.validate import cell_ids
from autograder.nbgrader_glue.students import record_students, settle_renamed_students
from autograder.text import one_line
from autograder.nbgrader_glue.gradebook import forget_gradebook_lock, install_gradebook_lock
from autograder.nbgrader_glue.inproc import course_config, register_lessons
from autograder.outputs import Progress, Report, write_class_report, write_grades, write_log
from autograder.plan import Intake, plan_tasks, remember_graded, roster_rows, take_in
from autograder.release import lessons as course_lessons
from autograder.tasks import ENGINES, GradingOptions, Result
from autograder.trusted.autograde import grade_submission, grading_config

UNSAFE_WARNING = ("WARNING: grading WITHOUT the sandbox. Student code runs as you, with your "
                  "files, your network and your processes in reach, as in plain nbgrader. "
                  "Do this only for submissions you trust.")


class SandboxUnavailable(RuntimeError):
    """This machine cannot confine notebooks; the message says why and what to do."""


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover (not Linux)
        return os.cpu_count() or 1


def read_solutions(root: Path, names: list[str]) -> dict:
    """Each lesson's solution notebook (None where it cannot be read), read once per run."""
    import nbformat

    notebooks = {}
    for name in names:
        try:
            notebooks[name] = nbformat.read(root / "solutions" / name / f"{name}.ipynb",
                                            as_version=4)
        except Exception:  # noqa: BLE001
            notebooks[name] = None
    return notebooks


def lesson_imports(solutions: dict, names: list[str]) -> list[str]:
    """Modules the lessons' solution notebooks import (for the workers to load once)."""
    modules: list[str] = []
    for name in names:
        nb = solutions.get(name)
        if nb is None:
            continue
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            try:
                tree = ast.parse(cell.source)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    modules += [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    modules.append(node.module)
    base = ["torch", "numpy", "matplotlib.pyplot", "coursekit", "coursekit.checks"]
    return list(dict.fromkeys(base + modules))


@contextlib.contextmanager
def course_lock(root: Path, echo=print):
    """One grading run at a time on a course root, for the whole run: an exclusive flock on
    the course root folder itself (no lock file a notebook could delete; the descriptor is
    not inherited by the workers, which are new programs). The `filelock` package cannot
    lock a folder: it needs the lock file this avoids."""
    fd = os.open(root, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if echo:
                echo(f"Another grading run is using the course at {root}; waiting for it to "
                     "finish ...")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor drops the lock


def grade_class(submissions: Path, options: GradingOptions, *, intake: Intake | None = None,
                progress: bool | None = None, echo=print, resident=None) -> Report:
    """Grade every submission in `submissions` (a folder or a .zip) into `options.out`; see
    the module's doc. `intake`: the layout, roster and selection of students (default:
    detected, none, all); `progress`: the progress bar (default: on a terminal, not under CI);
    `resident`: the warm workers of a resident grader (autograder.dispatch.resident) to grade
    with and keep, instead of workers of this run's own."""
    started = time.monotonic()
    if not options.out:
        raise ValueError("no OUT folder given: say where grades.csv and the feedback go")
    submissions, out = Path(submissions).resolve(), Path(options.out).resolve()
    root = Path(options.course_root).resolve()
    if options.engine not in ENGINES:
        raise ValueError(f"unknown engine {options.engine!r} (choose from {', '.join(ENGINES)})")
    if not submissions.exists():
        raise FileNotFoundError(f"{submissions} does not exist")
    if out == submissions or out in submissions.parents:
        raise ValueError("OUT must not be the submissions folder or contain it")
    if not (root / "solutions").is_dir():
        raise FileNotFoundError(f"{root} has no solutions/ folder: is it the course root?")
    # Grading writes the course's autograded/ and feedback/ (and submitted/ when importing):
    # SUBMISSIONS must not be among them, since the submissions are never modified.
    if within(root, submissions) or any(within(submissions, root / step)
                                        for step in ("autograded", "feedback")):
        raise ValueError("SUBMISSIONS must not be the course root, contain it, or be in its "
                         "autograded/ or feedback/ folder (grading rewrites those); grade "
                         "submitted/ or a folder outside the course instead")
    known = course_lessons(root)
    unknown = [name for name in options.lessons if name not in known]
    if unknown:
        raise ValueError(f"unknown lesson(s) {', '.join(unknown)}; the course has "
                         f"{', '.join(known) or 'no lessons'}")
    cluster, fork, sandbox = options.cluster, options.engine == "fork", options.sandbox
    if cluster and (not fork or not sandbox):
        raise ValueError("--cluster grades with the fork engine, always in the sandbox: leave "
                         "out --engine nbgrader and --no-sandbox")
    # nbgrader's own command grades one notebook at a time, as instructors run it.
    options = replace(options, course_root=str(root), out=str(out),
                      jobs=max(1, options.jobs or default_jobs()) if fork else 1,
                      timeout=options.timeout or _course_timeout(root))
    os.environ.setdefault("NBFORMAT_VALIDATOR", "fastjsonschema")
    warnings.filterwarnings("ignore", module="nbformat")
    weaker = None
    if fork and sandbox:
        from autograder.sandbox.probe import check_available
        from autograder.sandbox.limits import weaker_limits
        problem = None if cluster else check_available()  # a cluster's workers check theirs
        if problem:
            raise SandboxUnavailable(problem)
        weaker = None if cluster else weaker_limits(options.memory_limit)
        if weaker and echo:
            echo(weaker)
    elif echo:
        echo(UNSAFE_WARNING)

    remote = None
    if cluster:  # before anything is written: a scheduler or workers that cannot grade stop here
        from autograder.dispatch.cluster import connect
        remote = connect(options, lesson_imports(read_solutions(root, known), known), echo)
    try:
        with course_lock(root, echo):
            report = _grade_locked(submissions, options, intake or Intake(),
                                   remote or resident, progress, echo, started)
            if echo:  # take_in said what was selected, and the start the weaker limits
                echo(report.summary(selection=False))
            report.warnings += [weaker] if weaker else []
            write_log(out / "grading.log", report)
            return report
    finally:
        if remote is not None:
            remote.close()


def _copy_selected(submitted: Path, target: Path, students: list[str],
                   other_lessons: list[str]) -> None:
    """Copy of the course's submitted/ only the folders of `students`, less their folders of
    `other_lessons` (links stay links): a grading of some students reads, and its set-up time
    counts, nothing of the others' (a classmate's bulky submissions are not copied at each
    grading, its time shared out among the students graded)."""
    target.mkdir()
    for name in sorted(set(students)):
        path = submitted / name
        if name in ("", ".", "..") or name != path.name or not os.path.lexists(path):
            continue
        if path.is_symlink():
            os.symlink(os.readlink(path), target / name)
        elif path.is_dir():
            shutil.copytree(path, target / name, symlinks=True,
                            ignore=lambda folder, names, top=str(path):
                            [n for n in names if folder == top and n in other_lessons])
        else:
            shutil.copy2(path, target / name, follow_symlinks=False)


def _course_timeout(root: Path) -> int:
    """The course's time limit per cell, from nbgrader_config.py."""
    return int(course_config(root).Execute.get("timeout", 60) or 60)


def _grade_locked(submissions: Path, options: GradingOptions, intake: Intake, remote,
                  progress: bool | None, echo, started: float) -> Report:
    """The run, while it holds the course: read the class, prepare the course, grade the
    tasks in the workers (`remote`: a cluster's, or a resident grader's, kept after the run),
    write grades.csv and the report."""
    resident = remote if getattr(remote, "resident", False) else None
    remote = None if resident else remote
    root, out = Path(options.course_root), Path(options.out)
    known = course_lessons(root)
    out.mkdir(parents=True, exist_ok=True)
    remove_folder(out / "feedback")
    scratch = Path(tempfile.mkdtemp(prefix="autograder-grade-"))
    pool = None
    # Grading nbgrader's own submitted/ (after `nbgrader collect`): each lesson's
    # submitted/<student>/<lesson>/<lesson>.ipynb is graded where it is, nothing there is
    # removed or rewritten; the files are read from a copy.
    in_place = submissions.is_dir() and within(submissions, root / "submitted")
    try:
        source = submissions
        if within(submissions, root / "submitted"):
            source = scratch / "class"
            if submissions.is_dir() and submissions == root / "submitted" and intake.students:
                _copy_selected(submissions, source, intake.students,
                               [name for name in known if options.lessons and
                                name not in options.lessons])
            elif submissions.is_dir():
                shutil.copytree(submissions, source, symlinks=True)  # links stay links
            else:
                source.mkdir()
                source = Path(shutil.copy(submissions, source))
        found, skipped = collect(source, known, scratch, exclude=out, layout=intake.layout)
        if in_place:  # where each file lies in submitted/, for grading it there
            for sub in found:
                sub.original = submissions / sub.path.relative_to(source)
        found, findings = take_in(found, intake, root, in_place, bool(options.lessons), echo)
        findings.replaced = settle_renamed_students(course_config(root), found, intake.roster,
                                                    intake.replace_ids, in_place)
        chosen = list(options.lessons) or \
            [name for name in known if any(s.lesson == name for s in found)]
        # One worker per core at most, and each notebook gets its share of the cores.
        workers = max(1, min(len(remote.accepted) if remote else options.jobs,
                             sum(1 for s in found if s.lesson in chosen)))
        fork = options.engine == "fork"
        options = replace(options, lock_path=str(scratch / "gradebook.lock"),
                          threads=max(1, default_jobs() // workers) if fork else 0)
        if resident is not None and fork:  # its workers' lock and threads, for all its runs
            options = replace(options, lock_path=resident.lock_path, threads=resident.threads)
        install_gradebook_lock(options.lock_path)
        config = grading_config(options)
        solutions = read_solutions(root, known)
        if remote is not None:  # the cluster's workers, checked and warmed by connect()
            pool = remote.bind(options)
        elif resident is not None and fork:  # warm from earlier runs, or started now
            pool = resident.pool_for(options, lesson_imports(solutions, known))
            pool.start(workers)
        elif fork:
            from autograder.dispatch.pool import WorkerPool
            pool = WorkerPool(options, lesson_imports(solutions, chosen))
            pool.start(workers)
        specs = register_lessons(config, chosen) if chosen else {}
        lesson_ids = {name: set(specs[name].graded_ids) if name in specs
                      else set(cell_ids(solutions[name])) if solutions[name] is not None
                      else set() for name in known}

        results, tasks = plan_tasks(found, chosen, specs, lesson_ids, skipped,
                                    root / "submitted" if in_place else None)
        results = roster_rows(results, intake, findings, chosen, specs)
        # Lesson by lesson: a worker then runs a lesson's shared prologue once.
        tasks.sort(key=lambda t: (chosen.index(t.lesson), t.student))
        tasks, dropped = prepare_course(config, root, results, tasks, out, submissions,
                                        in_place)
        named = {r.student_id for r in results if r.student_id} | {t.student for t in tasks}
        record_students(config, student_records(found, intake.roster, named))

        prepared = time.monotonic()
        bar = Progress(len(tasks), progress)

        def collect_result(result: Result) -> None:
            results.append(result)
            bar.update(result)

        if pool is not None:
            pool.run(tasks, collect_result)
        else:
            from autograder.dispatch.nbgrader_engine import NbgraderCommand

            for task in tasks:  # --engine nbgrader: one at a time, in this process
                collect_result(grade_submission(options, config, task.student, task.lesson,
                                                list(task.notes), NbgraderCommand(options)))
        bar.finish()
    except BaseException:
        if pool is not None:  # interrupted (Ctrl-C) or failed: stop the workers now
            pool.kill()
        raise
    finally:
        if pool is not None and resident is not None:
            pool.write_trace()  # its workers stay warm for the next run
        elif pool is not None:
            pool.close()
        forget_gradebook_lock()  # its file goes with the scratch folder
        shutil.rmtree(scratch, ignore_errors=True)

    order = {name: i for i, name in enumerate(known)}
    for result in results:  # one line each: nothing can forge a CSV row or a log line
        result.reason = one_line(result.reason)
    results.sort(key=lambda r: (r.student_id, r.lesson == "", order.get(r.lesson, 1 << 20),
                                r.lesson, r.reason))
    report = Report(results=results, seconds=time.monotonic() - started, out=out,
                    skipped=skipped, jobs=workers if fork else 1, engine=options.engine,
                    setup_seconds=prepared - started, findings=findings, manual_dropped=dropped,
                    course_root=root)
    write_grades(out / "grades.csv", results)
    if in_place:
        remember_graded(root, findings, results, chosen)
    write_class_report(out, results, chosen, root, findings, skipped, dropped)
    return report
