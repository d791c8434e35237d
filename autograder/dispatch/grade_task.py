"""One task: graded in a warm grading process (a local worker or a cluster's), or recorded as
an error in the command when no process could grade it."""

from __future__ import annotations

import traceback
from pathlib import Path

from autograder.tasks import GradingOptions, Result, Task


def grade_task(options: GradingOptions, config, task: Task) -> Result:
    """Grade one task in a warm grading process; never raises."""
    from autograder.trusted import executor
    from autograder.trusted.autograde import grade_submission

    try:
        if task.classmates:
            executor.ForkedExecute.set_class({task.lesson: dict(task.classmates)})
        return grade_submission(options, config, task.student, task.lesson, list(task.notes))
    except BaseException:  # noqa: BLE001 (grade_submission should not raise; be safe)
        return Result(student_id=task.student, lesson=task.lesson, status="error",
                      reason="The notebook could not be graded (an error in the grader).",
                      log=traceback.format_exc())


def record_failure(options: GradingOptions, result: Result) -> None:
    """For a submission no worker could grade: the autograder's scores in the gradebook set to
    0 and flagged for review, and a feedback page that says why, as for other errors."""
    try:
        from autograder.trusted.autograde import grading_config, scores, zero_grades
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
