"""Grading one submission: nbgrader's Autograde, the verdict, the gradebook and the feedback.

`grade_submission` runs in a grading worker (engine "fork": nbgrader's Autograde converter in
this process, with `ForkedExecute` in place of Execute) or in the main process (engine
"nbgrader": the `nbgrader autograde` command, one kernel per notebook). Both engines then
read the verdict from the autograded notebook the same way, so they differ only in how the
cells were run.
"""

from __future__ import annotations

from autograder.nbgrader_glue import patches  # noqa: F401 (first: a quicker jsonschema import)

import resource
import shutil
import subprocess
import time
import warnings
from pathlib import Path

import nbformat
from traitlets.config import Config

from autograder.trusted import executor, status
from autograder.trusted.notes import (CHECKS_STOPPED, CHECKS_STOPPED_ENAME, DEAD_ENAME,
                                      NOT_RUN_ENAME, TIMEOUT_ENAME)
from autograder.trusted.status import RunOutcome
from autograder.feedback.render import write_notice
from autograder.nbgrader_glue.gradebook import gradebook
from autograder.nbgrader_glue.inproc import (autograde, autograde_preprocessors, captured_log,
                                        course_config, coursedir, generate_feedback)
from autograder.release import nbgrader_command, nbgrader_env
from autograder.tasks import GradingOptions, Result

_MEMORY_WORDS = ("can't allocate memory", "not enough memory", "DefaultCPUAllocator",
                 "Cannot allocate memory", "out of memory")


def grading_config(settings: GradingOptions) -> Config:
    """The course's nbgrader configuration with the grading command's limits."""
    extra = Config()
    extra.Execute.timeout = settings.timeout
    extra.ForkedExecute.timeout = settings.timeout
    extra.ForkedExecute.memory_limit = settings.memory_limit
    extra.ForkedExecute.threads = settings.threads
    extra.ForkedExecute.share_prologue = settings.share_prologue
    extra.ForkedExecute.sandbox = settings.sandbox
    extra.ForkedExecute.notebook_timeout = settings.notebook_timeout
    extra.ForkedExecute.course_root = str(Path(settings.course_root).resolve())
    extra.WithholdHiddenChecks.enabled = settings.withhold_hidden
    config = course_config(Path(settings.course_root), extra)
    if "max_lines" in config.LimitOutput:
        config.ForkedExecute.max_lines = config.LimitOutput.max_lines
    if settings.engine == "fork":
        config.Autograde.autograde_preprocessors = autograde_preprocessors(
            config, executor.ForkedExecute)
    return config


# --------------------------------------------------------------------------------------------
# The verdict

def _is_memory_error(output) -> bool:
    ename, evalue = output.get("ename", ""), output.get("evalue", "")
    return ename in ("MemoryError", "OutOfMemoryError") or (
        ename == "RuntimeError" and any(word in evalue for word in _MEMORY_WORDS))


def verdict(nb, settings: GradingOptions) -> tuple[str, str] | None:
    """(status, reason) when a cell of the notebook autograded by `--engine nbgrader` shows
    that the run went wrong (that engine keeps no record of the run but the notebook)."""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") != "error":
                continue
            ename = output.get("ename")
            if ename == CHECKS_STOPPED_ENAME and output.get("evalue") in CHECKS_STOPPED:
                return status.checks_stopped(output.get("evalue"))
            if ename == TIMEOUT_ENAME:
                return status.timed_out(nb, index, settings.timeout)
            if ename == DEAD_ENAME:
                detail = output.get("traceback", [""])[-1].split("while this cell ran: ")[-1]
                return status.died(nb, index, detail)
            if _is_memory_error(output):
                return status.out_of_memory(nb, index, settings.memory_limit)
            if ename == NOT_RUN_ENAME and "exit()" in output.get("evalue", ""):
                return status.exited(nb, index)
    return None


def _tests_passed(nb) -> tuple[int, int]:
    from nbgrader import utils

    passed = total = 0
    for cell in nb.cells:
        if utils.is_grade(cell) and not utils.is_solution(cell) and cell.cell_type == "code":
            total += 1
            score, points = utils.determine_grade(cell)
            passed += score is not None and score >= points
    return passed, total


# --------------------------------------------------------------------------------------------
# The gradebook

def zero_grades(config: Config, student: str, lesson: str) -> None:
    """Autograder scores 0, flagged for manual review, for a run that went wrong."""
    from nbgrader.api import MissingEntry

    with gradebook(config) as gb:
        try:
            submission = gb.find_submission_notebook(lesson, lesson, student)
        except MissingEntry:
            return
        for grade in submission.grades:
            grade.auto_score = 0
            grade.needs_manual_grade = True
        gb.db.commit()


def scores(config: Config, student: str, lesson: str) -> tuple[float, float]:
    from nbgrader.api import MissingEntry

    with gradebook(config) as gb:
        try:
            submission = gb.find_submission(lesson, student)
            return float(submission.score), float(submission.max_score)
        except MissingEntry:
            return 0.0, float(gb.find_assignment(lesson).max_score)


# --------------------------------------------------------------------------------------------
# The nbgrader engine

def _limit_memory(limit: int):
    def apply() -> None:
        if limit > 0:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def nbgrader_autograde(settings: GradingOptions, student: str, lesson: str) -> str | None:
    """`nbgrader autograde` for one submission; None, or what went wrong."""
    root = settings.course_root
    command = nbgrader_command("autograde", lesson, "--student", student, "--force",
                               f"--CourseDirectory.root={root}",
                               f"--Execute.timeout={settings.timeout}")
    try:
        done = subprocess.run(command, cwd=root, env=nbgrader_env(), capture_output=True,
                              text=True, preexec_fn=_limit_memory(settings.memory_limit),
                              timeout=60 * settings.timeout + 300)
    except subprocess.TimeoutExpired:
        return "nbgrader autograde did not finish"
    from autograder.nbgrader_glue.inproc import LOG
    for line in done.stderr.splitlines():
        LOG.info("nbgrader: %s", line)
    if done.returncode == 0:
        return None
    text = done.stderr
    if "DeadKernelError" in text or "Kernel died" in text or "kernel died" in text:
        return "dead kernel"
    return f"nbgrader autograde failed (exit code {done.returncode})"


# --------------------------------------------------------------------------------------------
# One submission

def grade_submission(settings: GradingOptions, config: Config, student: str, lesson: str,
                     notes: list[str] | None = None) -> Result:
    """Autograde the notebook in submitted/<student>/<lesson>/, write its feedback, and say
    how it went. Never raises for a problem of the submission."""
    started = time.monotonic()
    result = Result(student_id=student, lesson=lesson, notes=list(notes or []))
    course = coursedir(config)
    autograded = Path(course.format_path(course.autograded_directory, student, lesson)) \
        / f"{lesson}.ipynb"
    out_feedback = Path(settings.out) / "feedback" / student / f"{lesson}.html"
    outcome = RunOutcome()
    with captured_log() as log, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        failure = None
        try:
            if settings.engine == "nbgrader":
                failure = nbgrader_autograde(settings, student, lesson)
            else:
                # This notebook's ForkedExecute, which hands what it established to `outcome`.
                steps = [executor.ForkedExecute(config=config, outcome=outcome)
                         if step is executor.ForkedExecute else step
                         for step in config.Autograde.autograde_preprocessors]
                autograde(config, student, lesson, steps)
        except Exception as err:  # noqa: BLE001 (nbgrader raises several kinds)
            failure = f"{type(err).__name__}: {err}".strip().rstrip(":")
        result.run_seconds = outcome.cell_seconds
        result.shared_seconds = outcome.shared_seconds
        result.observe_seconds = outcome.observe_seconds
        result.checks = list(outcome.checks)
        nb = None
        if autograded.is_file():
            try:
                nb = nbformat.read(autograded, as_version=4)
            except Exception:  # noqa: BLE001
                nb = None
        if settings.engine != "nbgrader" and not outcome.decided:
            nb = None  # its run was never judged: whatever the file says is not a verdict
        if nb is None:
            result.status = "error"
            if failure == "dead kernel":
                result.reason = ("The Python kernel running the notebook died (os._exit, a crash "
                                 "or too much memory). The notebook scores 0; your instructor "
                                 "can review it.")
            else:
                result.reason = ("The notebook could not be graded"
                                 + (f" ({failure.splitlines()[0][:200]})" if failure else "")
                                 + ". Your instructor can review it.")
        else:
            found = verdict(nb, settings) if settings.engine == "nbgrader" else (
                None if outcome.status == "graded" else (outcome.status, outcome.reason))
            if found:
                result.status, result.reason = found
            else:
                passed, total = _tests_passed(nb)
                result.reason = f"Graded: {passed} of {total} tests passed."
        if result.notes:
            result.reason = " ".join([result.reason, *result.notes])
        try:
            if result.status != "graded":
                zero_grades(config, student, lesson)
            result.score, result.max_score = scores(config, student, lesson)
        except Exception as err:  # noqa: BLE001
            log.records.append(f"ERROR reading the gradebook: {err}")
        try:
            out_feedback.parent.mkdir(parents=True, exist_ok=True)
            if nb is not None:
                shutil.copyfile(generate_feedback(config, student, lesson), out_feedback)
            else:
                raise FileNotFoundError("no autograded notebook")
        except Exception as err:  # noqa: BLE001
            if nb is not None:
                log.records.append(f"ERROR generating feedback: {err}")
            write_notice(out_feedback, student=student, lesson=lesson, status=result.status,
                         reason=result.reason, score=result.score, max_score=result.max_score)
        result.log = log.text()
    result.seconds = time.monotonic() - started
    return result

