"""Grading one submission: nbgrader's Autograde, the verdict, the gradebook and the feedback.

`grade_submission` runs in a grading worker with an engine that runs the notebook: `ForkEngine`
(engine "fork": nbgrader's Autograde converter in this process, with `ForkedExecute` in place
of Execute, in the worker's `GradingSession`), or `autograder.dispatch.nbgrader_engine`'s
(engine "nbgrader": the `nbgrader autograde` command, one unconfined kernel per notebook, kept
out of `trusted/`). Both engines then read the autograded notebook back, score it from the
gradebook and write its feedback the same way, so they differ only in how the cells were run
and where the verdict comes from.
"""

from __future__ import annotations

from autograder.nbgrader_glue import patches  # noqa: F401 (first: a quicker jsonschema import)

import shutil
import time
import warnings
from pathlib import Path

import nbformat
from traitlets.config import Config

from autograder.trusted import executor
from autograder.trusted.status import RunOutcome
from autograder.feedback.render import write_notice
from autograder.nbgrader_glue.cells import tests_passed
from autograder.nbgrader_glue.gradebook import scores, zero_grades
from autograder.nbgrader_glue.inproc import (autograde, autograde_preprocessors, captured_log,
                                        course_config, coursedir, generate_feedback)
from autograder.records import Status
from autograder.tasks import GradingOptions, Result


def grading_config(settings: GradingOptions) -> Config:
    """The course's nbgrader configuration with the grading command's limits."""
    extra = Config()
    extra.Execute.timeout = settings.timeout
    # The sandbox's limits are the worker's session's (its SandboxPolicy), never config.
    extra.ForkedExecute.share_prologue = settings.share_prologue
    extra.WithholdHiddenChecks.enabled = settings.withhold_hidden
    config = course_config(Path(settings.course_root), extra)
    if "max_lines" in config.LimitOutput:
        config.ForkedExecute.max_lines = config.LimitOutput.max_lines
    if settings.engine == "fork":
        config.Autograde.autograde_preprocessors = autograde_preprocessors(
            config, executor.ForkedExecute)
    return config


# --------------------------------------------------------------------------------------------
# One submission

class ForkEngine:
    """Engine "fork": nbgrader's Autograde in this process, its Execute step `ForkedExecute` in
    the worker's session; the verdict is the one the grader established from the run."""

    name = "fork"

    def __init__(self, session) -> None:
        self.session = session  # an autograder.trusted.session.GradingSession

    def run(self, config: Config, student: str, lesson: str, outcome: RunOutcome) -> str | None:
        """Autograde the submission; what went wrong (None: nothing). May raise."""
        # This notebook's ForkedExecute, which hands what it established to `outcome`.
        steps = [executor.ForkedExecute(config=config, session=self.session, outcome=outcome)
                 if step is executor.ForkedExecute else step
                 for step in config.Autograde.autograde_preprocessors]
        autograde(config, student, lesson, steps)
        return None

    def decided(self, outcome: RunOutcome) -> bool:
        """Whether the run was judged: a file whose run never was says nothing."""
        return outcome.decided

    def verdict(self, nb, outcome: RunOutcome) -> tuple[Status, str] | None:
        return None if outcome.status == "graded" else (outcome.status, outcome.reason)


def grade_submission(settings: GradingOptions, config: Config, student: str, lesson: str,
                     notes: list[str] | None, engine) -> Result:
    """Autograde the notebook in submitted/<student>/<lesson>/ with `engine` (`ForkEngine`, or
    `autograder.dispatch.nbgrader_engine.NbgraderCommand`), write its feedback, and say how it
    went. Never raises for a problem of the submission."""
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
            failure = engine.run(config, student, lesson, outcome)
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
        if not engine.decided(outcome):
            nb = None  # its run was never judged: whatever the file says is not a verdict
        if nb is None:
            result.status = "error"
            if failure == "dead kernel":
                result.reason = ("The Python kernel running the notebook died (os._exit, a crash "
                                 "or too much memory). The notebook scores 0; your instructor "
                                 "can review it.")
            elif outcome.grader_fault:
                result.reason = ("The grader could not judge this notebook: "
                                 f"{outcome.grader_fault}. A fault of the course's reference "
                                 "solution or of the grading machine, not of the notebook; "
                                 "your instructor can grade it again.")
            else:
                result.reason = ("The notebook could not be graded"
                                 + (f" ({failure.splitlines()[0][:200]})" if failure else "")
                                 + ". Your instructor can review it.")
        else:
            found = engine.verdict(nb, outcome)
            if found:
                result.status, result.reason = found
            else:
                passed, total = tests_passed(nb)
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

