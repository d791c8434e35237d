"""Grading a class: from a folder or zip of submissions to grades.csv, feedback and the gradebook.

`grade_class` is what `python -m autograder grade` runs:

1. collect the notebooks (`autograder.intake.submissions`), tell their lessons, keep the newest of
   duplicates, and check each one (readable, the right lesson, no exercise cells missing);
2. record the lessons and students in nbgrader's gradebook and import each gradeable file
   into nbgrader's submitted/<student>/<lesson>/<lesson>.ipynb;
3. autograde them: engine "fork" (default) in warm workers, all cores, one forked process per
   notebook; engine "nbgrader" runs the `nbgrader autograde` command, one notebook at a time;
4. write OUT/grades.csv (one row per student and lesson), OUT/feedback/<student>/<lesson>.html
   and OUT/grading.log, and print a summary.
"""

from __future__ import annotations

import ast
import contextlib
import csv
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from autograder.trusted.autograde import GiB, Result, Settings, grade_submission, grading_config
from autograder.trusted.executor import submission_digest
from autograder.feedback.render import write_notice
from autograder.nbgrader_glue.inproc import (course_config, coursedir, forget_gradebook_lock,
                                        gradebook, install_gradebook_lock, register_lessons,
                                        safe_student_id)
from autograder.release import COURSE_ROOT, lessons as course_lessons
from autograder.intake.submissions import (MAX_NOTEBOOK_BYTES, STATE_FILE, Roster, RosterReport,
                                    Submission, _read_regular, apply_roster, cell_ids, check,
                                    collect, copy_regular_file,
                                    layout_summary, new_since, pick_newest,
                                    read_state, record_students, settle_renamed_students,
                                    spreadsheet_cell, student_records, write_state)
from autograder.text import one_line

STATUSES = ("graded", "missing", "invalid", "timeout", "error")
ENGINES = ("fork", "nbgrader")
CSV_HEADER = ["student_id", "lesson", "score", "max_score", "status", "reason"]
DEFAULT_MEMORY_LIMIT = 4 * GiB


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


@dataclass
class Report:
    results: list[Result]
    seconds: float
    out: Path
    skipped: list[str] = field(default_factory=list)
    jobs: int = 1
    engine: str = "fork"
    setup_seconds: float = 0.0  # reading and checking the class, before the first notebook
    intake: "Intake | None" = None  # how SUBMISSIONS was read (layout, roster, selection)
    warnings: list[str] = field(default_factory=list)  # e.g. limits weaker than asked
    # (student, lesson, what): hand-given grades of an earlier notebook, dropped for a new one
    manual_dropped: list[tuple[str, str, str]] = field(default_factory=list)
    course_root: Path = COURSE_ROOT

    def counts(self) -> Counter:
        return Counter(r.status for r in self.results)

    def summary(self, selection: bool = True) -> str:
        """What the run did, in a few lines; `selection`: with what it chose in submitted/
        (said already on a terminal, when grading began)."""
        counts = self.counts()
        notebooks = sum(counts[s] for s in ("graded", "invalid", "timeout", "error"))
        students = len({r.student_id for r in self.results if r.student_id})
        failed = counts["invalid"] + counts["timeout"] + counts["error"]
        per = f", {self.seconds / notebooks:.2f} s a notebook" if notebooks else ""
        lines = [f"Graded {counts['graded']} of {notebooks} notebooks from {students} students "
                 f"in {self.seconds:.1f} s ({self.engine} engine, {self.jobs} "
                 f"worker{'s' if self.jobs != 1 else ''}{per}); {failed} could not be graded.",
                 "  " + ", ".join(f"{s} {counts[s]}" for s in STATUSES)]
        lines += self.warnings
        if self.skipped:
            lines.append(f"  {len(self.skipped)} files skipped (see grading.log)")
        if self.intake is not None:
            lines += self.intake.summary_lines(selection)
        if self.manual_dropped:
            count = len(self.manual_dropped)
            lines.append(f"  Manual grades dropped for {count} new submission"
                         f"{'s' if count != 1 else ''}: they were given to an earlier notebook "
                         "(see grading.log)")
        lines.append(f"Grades: {self.out / 'grades.csv'}   feedback: {self.out / 'feedback'}   "
                     f"log: {self.out / 'grading.log'}")
        if (self.out / "report.html").is_file():
            lines.append(f"Class report: {self.out / 'report.html'}   items: "
                         f"{self.out / 'items.csv'}")
        lines.append(f"Gradebook: {formgrader_hint(self.course_root)}")
        return "\n".join(lines)


def formgrader_hint(course_root: Path) -> str:
    """Where the formgrader shows the gradebook of `course_root`: on the class hub (a terminal
    of an instructor's server), its page; else the make target."""
    if os.environ.get("JUPYTERHUB_USER"):
        base = os.environ.get("JUPYTERHUB_BASE_URL", "/").rstrip("/")
        return f"the formgrader shows it at {base}/hub/user-redirect/formgrader."
    course = "" if course_root.resolve() == COURSE_ROOT.resolve() else f" COURSE={course_root}"
    return f"`make formgrader{course}` opens nbgrader's formgrader on it."


@dataclass
class Intake:
    """How SUBMISSIONS is read: its layout, the roster, which students, everything or only
    what is new (the course's submitted/), and what came of it."""

    layout: str = "auto"
    roster: Roster | None = None
    students: list[str] | None = None
    regrade_all: bool = False
    read_as: str = ""  # "Canvas export (12 notebooks)"
    refused: list[str] = field(default_factory=list)  # files refused: whose is unclear
    roster_report: RosterReport | None = None
    selection: str = ""  # what was selected in submitted/, and how to choose otherwise
    only_new: bool = False
    found: list[Submission] = field(default_factory=list)
    replace_ids: bool = False  # give the gradebook's records of this run's students its ids
    replaced: dict[str, str] = field(default_factory=dict)  # old id -> this run's

    def summary_lines(self, selection: bool = True) -> list[str]:
        lines = [f"  Read as: {self.read_as}"] if self.read_as else []
        if self.selection and selection:
            lines.append(f"  {self.selection}")
        if self.replaced:
            lines.append("  Ids replaced in the gradebook: " + ", ".join(
                f"{old} -> {new}" for old, new in sorted(self.replaced.items())))
        if self.refused:
            lines.append(f"  {len(self.refused)} notebooks refused: whose they are cannot be "
                         "told (see grades.csv rows without a student id)")
        if self.roster_report is not None:
            lines.append(f"  Roster: {len(self.roster_report.unknown)} ids not on it, "
                         f"{len(self.roster_report.absent)} of its students submitted nothing "
                         "(see report.html)")
        return lines


class Progress:
    """A one-line progress bar on a terminal; silent under CI or when stderr is not a tty."""

    def __init__(self, total: int, enabled: bool | None = None, stream=None) -> None:
        self.stream = stream or sys.stderr
        if enabled is None:
            ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
            enabled = not ci and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.enabled, self.total, self.done = enabled, total, 0
        self.started = time.monotonic()
        self.counts: Counter = Counter()

    def update(self, result: Result) -> None:
        self.done += 1
        self.counts[result.status] += 1
        if not self.enabled or not self.total:
            return
        width = 30
        filled = int(width * self.done / self.total)
        elapsed = time.monotonic() - self.started
        eta = elapsed / self.done * (self.total - self.done)
        bad = self.done - self.counts["graded"]
        self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                          f"notebooks, {bad} not graded, {elapsed:.0f} s, ~{eta:.0f} s left ")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled and self.total:
            self.stream.write("\n")
            self.stream.flush()


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


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
        # nbgrader makes its output read-only; a second pass clears what was left.
        if path.exists():
            for dirpath, _, filenames in os.walk(path):
                os.chmod(dirpath, 0o755)
                for filename in filenames:
                    os.chmod(os.path.join(dirpath, filename), 0o644)
            shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def course_lock(root: Path, echo=print):
    """One grading run at a time on a course root, for the whole run: an exclusive flock on
    the course root folder itself (no lock file a notebook could delete; the descriptor is
    not inherited by the workers, which are new programs)."""
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


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def grade_class(submissions: Path, out: Path, *, course_root: Path = COURSE_ROOT,
                jobs: int | None = None, lessons: list[str] | None = None,
                engine: str = "fork", timeout: int | None = None,
                memory_limit: int = DEFAULT_MEMORY_LIMIT, progress: bool | None = None,
                share_prologue: bool = True, sandbox: bool = True,
                notebook_timeout: int = 600, echo=print, intake: Intake | None = None,
                cluster: str | None = None, withhold_hidden: bool = False) -> Report:
    """Grade every submission in `submissions` (a folder or a .zip); see the module's doc.
    `intake`: the layout, roster and selection of students (default: detected, none, all);
    `cluster`: a Dask scheduler's address, whose workers grade the notebooks;
    `withhold_hidden`: feedback without the hidden checks' results (before a deadline)."""
    started = time.monotonic()
    submissions, out = Path(submissions).resolve(), Path(out).resolve()
    root = Path(course_root).resolve()
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")
    if not submissions.exists():
        raise FileNotFoundError(f"{submissions} does not exist")
    if out == submissions or out in submissions.parents:
        raise ValueError("OUT must not be the submissions folder or contain it")
    if not (root / "solutions").is_dir():
        raise FileNotFoundError(f"{root} has no solutions/ folder: is it the course root?")
    # Grading writes the course's autograded/ and feedback/ (and submitted/ when importing):
    # SUBMISSIONS must not be among them, since the submissions are never modified.
    if _within(root, submissions) or any(_within(submissions, root / step)
                                         for step in ("autograded", "feedback")):
        raise ValueError("SUBMISSIONS must not be the course root, contain it, or be in its "
                         "autograded/ or feedback/ folder (grading rewrites those); grade "
                         "submitted/ or a folder outside the course instead")
    known = course_lessons(root)
    unknown = [name for name in lessons or [] if name not in known]
    if unknown:
        raise ValueError(f"unknown lesson(s) {', '.join(unknown)}; the course has "
                         f"{', '.join(known) or 'no lessons'}")
    jobs = max(1, jobs or default_jobs())
    if engine == "nbgrader":
        jobs = 1  # nbgrader's own command, one notebook at a time, as instructors run it
    os.environ.setdefault("NBFORMAT_VALIDATOR", "fastjsonschema")
    warnings.filterwarnings("ignore", module="nbformat")
    weaker = None
    if cluster and (engine != "fork" or not sandbox):
        raise ValueError("--cluster grades with the fork engine, always in the sandbox: leave "
                         "out --engine nbgrader and --no-sandbox")
    if engine == "fork" and sandbox:
        from autograder.sandbox.confine import check_available, weaker_limits
        problem = None if cluster else check_available()  # a cluster's workers check theirs
        if problem:
            raise SandboxUnavailable(problem)
        weaker = None if cluster else weaker_limits(memory_limit)
        if weaker and echo:
            echo(weaker)
    elif echo:
        echo(UNSAFE_WARNING)

    remote = None
    if cluster:  # before anything is written: a scheduler or workers that cannot grade stop here
        from autograder.dispatch.cluster import connect
        remote = connect(cluster, root, timeout=timeout or _course_timeout(root),
                         memory_limit=memory_limit, share_prologue=share_prologue,
                         notebook_timeout=notebook_timeout,
                         preload=lesson_imports(read_solutions(root, known), known),
                         withhold_hidden=withhold_hidden, echo=echo)
    try:
        with course_lock(root, echo):
            return _grade_class(submissions, out, root, known, jobs, lessons, engine, timeout,
                                memory_limit, progress, share_prologue, echo, started,
                                sandbox, notebook_timeout, intake or Intake(),
                                [weaker] if weaker else [], remote, withhold_hidden)
    finally:
        if remote is not None:
            remote.close()


def _course_timeout(root: Path) -> int:
    """The course's time limit per cell, from nbgrader_config.py."""
    return int(course_config(root).Execute.get("timeout", 60) or 60)


def _grade_class(submissions: Path, out: Path, root: Path, known: list[str], jobs: int,
                 lessons: list[str] | None, engine: str, timeout: int | None,
                 memory_limit: int, progress: bool | None, share_prologue: bool, echo,
                 started: float, sandbox: bool = True, notebook_timeout: int = 600,
                 intake: Intake | None = None, warnings: list[str] | None = None,
                 remote=None, withhold_hidden: bool = False) -> Report:
    intake = intake or Intake()
    out.mkdir(parents=True, exist_ok=True)
    _remove(out / "feedback")
    scratch = Path(tempfile.mkdtemp(prefix="autograder-grade-"))
    pool = None
    # Grading nbgrader's own submitted/ (after `nbgrader collect`): each lesson's
    # submitted/<student>/<lesson>/<lesson>.ipynb is graded where it is, nothing there is
    # removed or rewritten; the files are read from a copy.
    in_place = submissions.is_dir() and _within(submissions, root / "submitted")
    try:
        source = submissions
        if _within(submissions, root / "submitted"):
            source = scratch / "class"
            if submissions.is_dir():
                shutil.copytree(submissions, source, symlinks=True)  # links stay links
            else:
                source.mkdir()
                source = Path(shutil.copy(submissions, source))
        found, skipped = collect(source, known, scratch, exclude=out, layout=intake.layout)
        if in_place:  # where each file lies in submitted/, for grading it there
            for sub in found:
                sub.original = submissions / sub.path.relative_to(source)
        found = _take_in(found, intake, root, in_place, bool(lessons), echo)
        intake.replaced = settle_renamed_students(course_config(root), found, intake.roster,
                                                  intake.replace_ids, in_place)
        chosen = list(lessons) if lessons else \
            [name for name in known if any(s.lesson == name for s in found)]
        # One worker per core at most, and each notebook gets its share of the cores.
        workers = max(1, min(len(remote.accepted) if remote else jobs,
                             sum(1 for s in found if s.lesson in chosen)))
        settings = Settings(course_root=str(root), out=str(out), engine=engine,
                            timeout=int(timeout or 0), memory_limit=int(memory_limit),
                            lock_path=str(scratch / "gradebook.lock"),
                            threads=max(1, default_jobs() // workers) if engine == "fork" else 0,
                            share_prologue=share_prologue, sandbox=sandbox,
                            notebook_timeout=int(notebook_timeout),
                            withhold_hidden=withhold_hidden)
        install_gradebook_lock(settings.lock_path)
        if not timeout:  # the course's limit, from nbgrader_config.py
            settings.timeout = _course_timeout(root)
        config = grading_config(settings)
        solutions = read_solutions(root, known)
        if remote is not None:  # the cluster's workers, checked and warmed by connect()
            pool = remote.bind(settings)
        elif engine == "fork":
            from autograder.dispatch.pool import WorkerPool
            pool = WorkerPool(settings, jobs, lesson_imports(solutions, chosen))
            pool.start(workers)
        specs = register_lessons(config, chosen) if chosen else {}
        lesson_ids = {name: set(specs[name].graded_ids) if name in specs
                      else set(cell_ids(solutions[name])) if solutions[name] is not None
                      else set() for name in known}

        results, tasks = _plan(found, chosen, specs, lesson_ids, skipped,
                               root / "submitted" if in_place else None)
        results = _roster_rows(results, intake, chosen, specs)
        # Lesson by lesson: a worker then runs a lesson's shared prologue once.
        tasks.sort(key=lambda t: (chosen.index(t["lesson"]), t["student"]))
        dropped = _prepare_course(config, root, results, tasks, out, submissions, in_place)
        named = {r.student_id for r in results if r.student_id} | {t["student"] for t in tasks}
        record_students(config, student_records(found, intake.roster, named))

        prepared = time.monotonic()
        bar = Progress(len(tasks), progress)

        def collect_result(result: Result) -> None:
            results.append(result)
            bar.update(result)

        if engine == "fork":
            pool.run(tasks, collect_result)
        else:
            for task in tasks:
                collect_result(grade_submission(settings, config, task["student"],
                                                task["lesson"], task["notes"]))
        bar.finish()
    except BaseException:
        if pool is not None:  # interrupted (Ctrl-C) or failed: stop the workers now
            pool.kill()
        raise
    finally:
        if pool is not None:
            pool.close()
        forget_gradebook_lock()  # its file goes with the scratch folder
        shutil.rmtree(scratch, ignore_errors=True)

    order = {name: i for i, name in enumerate(known)}
    for result in results:  # one line each: nothing can forge a CSV row or a log line
        result.reason = one_line(result.reason)
    results.sort(key=lambda r: (r.student_id, r.lesson == "", order.get(r.lesson, 1 << 20),
                                r.lesson, r.reason))
    report = Report(results=results, seconds=time.monotonic() - started, out=out,
                    skipped=skipped, jobs=workers if engine == "fork" else 1, engine=engine,
                    setup_seconds=prepared - started, intake=intake,
                    warnings=list(warnings or []),
                    manual_dropped=dropped, course_root=root)
    write_grades(out / "grades.csv", results)
    if in_place:
        _remember_graded(root, intake, results, chosen)
    _write_class_report(out, results, chosen, root, intake, skipped, dropped)
    _write_log(out / "grading.log", report)
    if echo:
        echo(report.summary(selection=False))  # _take_in said what was selected
    return report


def _plan(found: list[Submission], chosen: list[str], specs: dict, lesson_ids: dict,
          skipped: list[str], submitted: Path | None = None) -> tuple[list[Result], list[dict]]:
    """Rows decided before grading (missing, invalid) and the tasks for the workers.
    `submitted`: the course's submitted/ folder when grading it in place."""
    results: list[Result] = []
    tasks: list[dict] = []
    students = sorted({s.student for s in found if s.student and not s.problem})
    for sub in found:
        if sub.problem:
            results.append(Result(student_id="", lesson=sub.lesson or "", status="invalid",
                                  reason=sub.problem,
                                  max_score=specs[sub.lesson].max_score
                                  if sub.lesson in specs else 0.0))
        elif not sub.student:
            results.append(Result(student_id="", lesson=sub.lesson or "", status="invalid",
                                  reason=f"'{sub.shown}' is not in a student's folder: each "
                                         "student's notebooks go in a folder named after the "
                                         "student id.",
                                  max_score=specs[sub.lesson].max_score
                                  if sub.lesson in specs else 0.0))
    for student in students:
        mine = [s for s in found if s.student == student and not s.problem]
        unrecognised = [s for s in mine if s.lesson is None]
        for sub in unrecognised:
            results.append(Result(
                student_id=student, lesson="", status="invalid",
                reason=f"Could not tell which lesson '{sub.shown}' is from its name: name it "
                       "after the lesson (for example "
                       f"{chosen[0] if chosen else 'the lesson name'}.ipynb)."))
        for sub in mine:
            if sub.lesson is not None and sub.lesson not in chosen:
                skipped.append(f"{sub.shown}: lesson {sub.lesson} is not among those graded")
        for lesson in chosen:
            spec = specs[lesson]
            files = [s for s in mine if s.lesson == lesson]
            if not safe_student_id(student):
                if files:
                    results.append(Result(student_id=student, lesson=lesson, status="invalid",
                                          max_score=spec.max_score,
                                          reason=f"The folder name '{student}' cannot be used as "
                                                 "a student id (spaces at its ends, a leading "
                                                 "dot, or one of * ? [ ] \\)."))
                continue
            if not files:
                hint = ""
                if unrecognised:
                    hint = (" (" + ", ".join(f"'{s.shown}'" for s in unrecognised)
                            + " could not be matched to a lesson)")
                results.append(Result(student_id=student, lesson=lesson, status="missing",
                                      max_score=spec.max_score,
                                      reason=f"No notebook for this lesson in this batch{hint}."))
                continue
            notes = []
            if submitted is not None:  # graded in place: only nbgrader's own file name
                own = [s for s in files
                       if s.original == submitted / student / lesson / f"{lesson}.ipynb"]
                others = ", ".join(f"'{s.shown}'" for s in files if s not in own)
                if not own:
                    results.append(Result(
                        student_id=student, lesson=lesson, status="invalid",
                        max_score=spec.max_score,
                        reason=f"In the course's submitted/ folder only "
                               f"{student}/{lesson}/{lesson}.ipynb is graded, where it is; "
                               f"{others} left unchanged and not graded (rename it there, or "
                               "grade a copy of the folder kept outside the course)."))
                    continue
                if others:
                    notes.append(f"{others} ignored: in submitted/ {lesson}.ipynb is graded.")
                files = own
            chosen_file, duplicate_note = pick_newest(files)
            notes += [duplicate_note] if duplicate_note else []
            status, reason, more = check(chosen_file.path, lesson, spec, lesson_ids,
                                         chosen_file)
            notes += more
            if status is not None:
                results.append(Result(student_id=student, lesson=lesson, status=status,
                                      max_score=spec.max_score,
                                      reason=" ".join([reason, *notes])))
                continue
            tasks.append({"student": student, "lesson": lesson, "notes": notes,
                          "path": str(chosen_file.path), "digest": submission_digest(
                              _read_regular(chosen_file.path, MAX_NOTEBOOK_BYTES)),
                          "timestamp": _timestamp_file(chosen_file)})
    return results, tasks


def _timestamp_file(submission: Submission) -> str | None:
    """nbgrader's timestamp.txt beside a notebook in its layout (<student>/<lesson>/)."""
    folder = submission.path.parent
    stamp = folder / "timestamp.txt"
    in_lesson_folder = submission.layout == "folders" and len(Path(submission.shown).parts) > 2
    return str(stamp) if in_lesson_folder and stamp.is_file() and not stamp.is_symlink() \
        else None


# In the course's autograded/ folder: the digest of the notebook whose grades the gradebook
# holds, per student and lesson (hand-given grades belong to that notebook only).
NOTEBOOKS_FILE = ".autograder-notebooks.json"


def notebook_digest(path: str | os.PathLike) -> str:
    """sha256 of a regular file's bytes (never read through a symbolic link)."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _read_notebooks(path: Path) -> dict[str, dict[str, str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8")).get("notebooks", {})
        return {str(student): {str(lesson): str(digest) for lesson, digest in lessons.items()}
                for student, lessons in data.items() if isinstance(lessons, dict)}
    except (OSError, ValueError, AttributeError):
        return {}


def _write_notebooks(path: Path, notebooks: dict[str, dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps({"version": 1, "notebooks": notebooks}, indent=0,
                                    sort_keys=True), encoding="utf-8")
    os.replace(temporary, path)


def drop_manual_grades(gb, student: str, lesson: str) -> list[str]:
    """Clear the points, extra credit and comments given by hand to `student`'s `lesson` in
    the gradebook `gb`; return what was cleared, described."""
    from nbgrader.api import MissingEntry

    try:
        submission = gb.find_submission(lesson, student)
    except MissingEntry:
        return []
    dropped = []
    for notebook in submission.notebooks:
        for grade in notebook.grades:
            if grade.manual_score is not None:
                dropped.append(f"{grade.name} {grade.manual_score:g} points")
            if grade.extra_credit:
                dropped.append(f"{grade.name} {grade.extra_credit:g} extra credit")
            grade.manual_score, grade.extra_credit = None, None
        for comment in notebook.comments:
            if comment.manual_comment:
                dropped.append(f"{comment.name} comment "
                               f"\"{one_line(comment.manual_comment, 120)}\"")
            comment.manual_comment = None
    gb.db.commit()
    return dropped


def _prepare_course(config, root: Path, results: list[Result], tasks: list[dict],
                    out: Path, submissions: Path | None = None,
                    in_place: bool = False) -> list[tuple[str, str, str]]:
    """Students in the gradebook; the files to grade in submitted/; stale grades removed.

    A lesson a student has no notebook for in this batch ("missing") is left alone: an
    earlier submission, its grades (manual ones too) and files stay. An invalid submission
    replaces the earlier one. A notebook other than the one graded before loses the grades
    given to that one by hand; the same notebook graded again keeps them. Nothing in
    SUBMISSIONS is removed or written: graded in place (the course's submitted/), submitted/
    is left as it is. Returns (student, lesson, what) for each submission's dropped grades."""
    from nbgrader.api import MissingEntry

    def untouchable(path: Path) -> bool:
        return submissions is not None and (_within(path, submissions)
                                            or _within(submissions, path))

    course = coursedir(config)
    # Which notebook the gradebook's grades were given to: nbgrader's copy in submitted/
    # (what it graded last) while it is there to be replaced, else this grader's record.
    record_path = root / "autograded" / NOTEBOOKS_FILE
    record = _read_notebooks(record_path)
    before, now = {}, {}
    for task in tasks:
        key = (task["student"], task["lesson"])
        now[key] = notebook_digest(task["path"])
        before[key] = record.get(key[0], {}).get(key[1])
        copy = Path(course.format_path(course.submitted_directory, *key)) / f"{key[1]}.ipynb"
        if not in_place and not untouchable(copy.parent):
            with contextlib.suppress(OSError):
                before[key] = notebook_digest(copy)
    named = [r for r in results if r.student_id and r.lesson and safe_student_id(r.student_id)]
    replaced = [(r.student_id, r.lesson) for r in named if r.status != "missing"]
    replaced += [(t["student"], t["lesson"]) for t in tasks]
    steps = [course.autograded_directory, course.feedback_directory]
    if not in_place:
        steps.insert(0, course.submitted_directory)
    for student, lesson in replaced:
        for step in steps:
            folder = Path(course.format_path(step, student, lesson))
            if not untouchable(folder):
                _remove(folder)
    for task in tasks:
        target = Path(course.format_path(course.submitted_directory, task["student"],
                                         task["lesson"])) / f"{task['lesson']}.ipynb"
        if in_place or untouchable(target.parent):
            continue  # graded where it is
        target.parent.mkdir(parents=True, exist_ok=True)
        copy_regular_file(task["path"], target)  # never through a symbolic link
        if task.get("timestamp"):  # nbgrader's submission time, for late penalties
            copy_regular_file(task["timestamp"], target.parent / "timestamp.txt")
    with gradebook(config) as gb:
        for student in sorted({r.student_id for r in named} | {t["student"] for t in tasks}):
            gb.update_or_create_student(student)
        for result in named:
            try:
                if result.status == "missing":  # kept: say so
                    gb.find_submission(result.lesson, result.student_id)
                    result.reason += " The submission graded earlier stays in the gradebook."
                else:  # not graded this time: no stale submission left behind
                    gb.remove_submission(result.lesson, result.student_id)
            except MissingEntry:
                pass
        dropped = []
        for task in tasks:
            key = (task["student"], task["lesson"])
            what = drop_manual_grades(gb, *key) if before[key] != now[key] else []
            if what:
                dropped.append((*key, ", ".join(what)))
                task["notes"] = [*task.get("notes", []),
                                 "Manual grades given to an earlier submission were dropped "
                                 "(this is another notebook): " + ", ".join(what) + "."]
            record.setdefault(key[0], {})[key[1]] = now[key]
    _write_notebooks(record_path, record)
    for result in results:
        if result.lesson and result.student_id:
            write_notice(out / "feedback" / result.student_id / f"{result.lesson}.html",
                         student=result.student_id, lesson=result.lesson, status=result.status,
                         reason=result.reason, score=result.score, max_score=result.max_score)
    return dropped


# --------------------------------------------------------------------------------------------
# Reading the class (layout, roster, what is new in submitted/) and the class report

def _take_in(found: list[Submission], intake: Intake, root: Path, in_place: bool,
             lessons_named: bool, echo) -> list[Submission]:
    """The submissions to grade: roster ids given, --students kept, and in the course's
    submitted/ only what is new since the last run (unless lessons, students or --all say)."""
    if intake.roster is not None:
        intake.roster_report = apply_roster(found, intake.roster)
    if intake.students:
        wanted = set(intake.students)
        absent = sorted(wanted - {s.student for s in found})
        found = [s for s in found if s.student in wanted]
        if absent and echo:
            echo(f"No notebook of {', '.join(absent)} in SUBMISSIONS.")
    intake.refused = [s.shown for s in found if s.refused]
    intake.read_as = layout_summary(found)
    if not in_place:
        return found
    state = read_state(root / "autograded" / STATE_FILE)
    held = _gradebook_submissions(root)
    new, unchanged = new_since(found, state, lambda student, lesson: (student, lesson) in held)
    if lessons_named or intake.students or intake.regrade_all:
        intake.found = found
        return found
    intake.only_new, intake.found = True, new
    students = len({s.student for s in new if s.student})
    narrow = ("To grade them again: --all; to grade some: --lessons LESSON ... or "
              "--students ID ...")
    if new:
        intake.selection = (f"submitted/: {len(new)} notebook{'s' if len(new) != 1 else ''} "
                            f"of {students} student{'s' if students != 1 else ''} new or changed "
                            f"since the last run are graded; {len(unchanged)} unchanged keep "
                            f"their grades. {narrow}")
    else:
        intake.selection = (f"submitted/: nothing new since the last run; {len(unchanged)} "
                            f"unchanged notebooks keep their grades. {narrow}")
    if echo:
        echo(intake.selection)
    return new


def _gradebook_submissions(root: Path) -> set[tuple[str, str]]:
    """(student, lesson) of every submission in the course's gradebook."""
    from nbgrader.api import SubmittedAssignment

    if not (root / "gradebook.db").is_file():
        return set()
    with gradebook(course_config(root)) as gb:
        return {(s.student.id, s.assignment.name) for s in gb.db.query(SubmittedAssignment)}


def _remember_graded(root: Path, intake: Intake, results: list[Result],
                     chosen: list[str]) -> None:
    """Record what this run graded in submitted/ (content digests), for the next run."""
    status = {(r.student_id, r.lesson): r.status for r in results}
    state = read_state(root / "autograded" / STATE_FILE)
    for sub in intake.found:
        if sub.digest and (sub.lesson in chosen or sub.lesson is None or sub.problem):
            kept = status.get((sub.student, sub.lesson)) in ("graded", "timeout", "error")
            state[sub.shown] = {"digest": sub.digest, "graded": kept}
    write_state(root / "autograded" / STATE_FILE, state)


def _roster_rows(results: list[Result], intake: Intake, chosen: list[str],
                 specs: dict) -> list[Result]:
    """A `missing` row per lesson for each roster student with nothing in SUBMISSIONS; none
    at all when grading only what is new in submitted/ (a lesson not there is no news)."""
    if intake.only_new:
        return [r for r in results if r.status != "missing"]
    if intake.roster_report is None:
        return results
    have = {r.student_id for r in results if r.student_id}
    for entry in intake.roster_report.absent:
        if entry.id in have or (intake.students and entry.id not in intake.students):
            continue
        for lesson in chosen:
            results.append(Result(student_id=entry.id, lesson=lesson, status="missing",
                                  max_score=specs[lesson].max_score,
                                  reason="No notebook for this lesson in this batch (a student "
                                         "on the roster who submitted nothing)."))
    return results


def _write_class_report(out: Path, results: list[Result], chosen: list[str], root: Path,
                        intake: Intake, skipped: list[str],
                        manual_dropped: list[tuple[str, str, str]] = ()) -> None:
    """OUT/report.html and OUT/items.csv (a failure there is logged, never fatal)."""
    from autograder.report.class_report import checks_of, gradebook_cell_grades, write_report

    try:
        with_checks = {r.lesson for r in results if checks_of(r)}
        cells = gradebook_cell_grades(course_config(root),
                                      [r for r in results if r.lesson not in with_checks])
        note = f"Read as: {intake.read_as}." if intake.read_as else ""
        write_report(out, results, lessons=chosen, cell_grades=cells,
                     roster=intake.roster_report, note=note,
                     manual_dropped=list(manual_dropped))
    except Exception as err:  # noqa: BLE001 (grades and feedback are written already)
        skipped.append(one_line(f"report.html: not written ({type(err).__name__}: {err})"))


def write_grades(path: Path, results: list[Result]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_HEADER)
        writer.writeheader()
        for result in results:
            row = {key: spreadsheet_cell(one_line(value)) if isinstance(value, str) else value
                   for key, value in result.row().items()}
            row["score"] = f"{row['score']:g}"
            row["max_score"] = f"{row['max_score']:g}"
            writer.writerow(row)


def _write_log(path: Path, report: Report) -> None:
    lines = [report.summary(),
             f"Set-up (reading, checking and importing the class) took "
             f"{report.setup_seconds:.1f} s of {report.seconds:.1f} s.", ""]
    if report.skipped:
        lines += ["Skipped files:", *[f"  {one_line(item)}" for item in report.skipped], ""]
    if report.manual_dropped:
        lines += ["Manual grades dropped (given to an earlier notebook than the one graded now):",
                  *[f"  {one_line(student)} / {lesson}: manual grades dropped: {one_line(what)}"
                    for student, lesson, what in report.manual_dropped], ""]
    for result in report.results:
        lines.append(f"== {one_line(result.student_id) or '?'} / {result.lesson or '?'}: "
                     f"{result.status}, "
                     f"{result.score:g}/{result.max_score:g}, {result.seconds:.2f} s "
                     f"(cells {result.run_seconds:.2f} s, scenarios {result.observe_seconds:.2f} s, "
                     f"shared {result.shared_seconds:.2f} s)")
        if result.reason:
            lines.append(f"   {one_line(result.reason)}")
        for line in result.log.splitlines():
            if "not recognized by" in line:  # traitlets noise about shared config sections
                continue
            if line.startswith(("WARNING", "ERROR")) or not line[:1].isupper():
                lines.append(f"   {one_line(line)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
