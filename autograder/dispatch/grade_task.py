"""A grading worker's two steps, the same in the local pool, the resident grader and a cluster:
`warm_worker` once when it starts (its session: the runner host, the sandbox's policy), then
`grade_task` for each notebook it is handed; and, in the command, `record_failure` for a task no
worker could grade."""

from __future__ import annotations

import os
import traceback
from pathlib import Path

from autograder.tasks import GradingOptions, Result, Task

# Set in a grading worker before anything is imported that reads them.
WORKER_ENV = (("NBFORMAT_VALIDATOR", "fastjsonschema"),
              ("MPLBACKEND", "module://matplotlib_inline.backend_inline"),
              ("PYDEVD_DISABLE_FILE_VALIDATION", "1"))


def worker_environment() -> None:
    """A grading worker's environment defaults (the faster validator, the inline backend)."""
    for name, value in WORKER_ENV:
        os.environ.setdefault(name, value)


def warm_worker(options: GradingOptions, config, preload: list[str] | tuple[str, ...] = (),
                feedback_required: bool = False):
    """Warm this grading worker for `options`: its session (for the fork engine, with its
    runner host started now, while the class is read) and the feedback exporter (a failure to
    warm it raises only with `feedback_required`: a cluster's worker then refuses to grade).
    Returns the `GradingSession` that `grade_task` takes; None for the nbgrader engine."""
    from autograder.nbgrader_glue.inproc import warm_feedback
    from autograder.trusted.session import GradingSession

    session = None
    if options.engine == "fork":
        session = GradingSession.for_options(options, preload)
        session.host()
    try:
        warm_feedback(config)
    except Exception:
        if feedback_required:
            if session is not None:
                session.close()
            raise
    return session


def grade_task(session, options: GradingOptions, config, task: Task) -> Result:
    """Grade one task in a warm grading worker, in its `session` (`warm_worker`); never raises:
    the submission's orchestrator from the task to its Result (the engine runs it, nbgrader's
    steps score it, the gradebook and the feedback page record it)."""
    from autograder.trusted.autograde import ForkEngine, grade_submission

    try:
        if options.engine == "nbgrader":
            from autograder.dispatch.nbgrader_engine import NbgraderCommand

            engine = NbgraderCommand(options)
        else:
            if task.classmates:
                session.set_class({task.lesson: dict(task.classmates)})
            engine = ForkEngine(session)
        return grade_submission(options, config, task.student, task.lesson, list(task.notes),
                                engine)
    except BaseException:  # noqa: BLE001 (grade_submission should not raise; be safe)
        return Result(student_id=task.student, lesson=task.lesson, status="error",
                      reason="The notebook could not be graded (an error in the grader).",
                      log=traceback.format_exc())


def record_failure(options: GradingOptions, result: Result) -> None:
    """For a submission no worker could grade: the autograder's scores in the gradebook set to
    0 and flagged for review, and a feedback page that says why, as for other errors."""
    try:
        from autograder.nbgrader_glue.gradebook import scores, zero_grades
        from autograder.trusted.autograde import grading_config
        from autograder.feedback.render import write_notice

        config = grading_config(options)
        zero_grades(config, result.student_id, result.lesson)
        result.score, result.max_score = scores(config, result.student_id, result.lesson)
    except Exception as err:  # noqa: BLE001 (the batch goes on)
        result.log += f"\nERROR reading the gradebook: {err}"
    try:
        # Written over any page the worker wrote before it died: the page says what the row says.
        page = Path(options.out) / "feedback" / result.student_id / f"{result.lesson}.html"
        write_notice(page, student=result.student_id, lesson=result.lesson,
                     status=result.status, reason=result.reason, score=result.score,
                     max_score=result.max_score)
    except Exception as err:  # noqa: BLE001
        result.log += f"\nERROR writing the feedback page: {err}"
