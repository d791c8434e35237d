"""The course's records before a run grades: its files in submitted/, stale grades and
folders removed, hand-given grades of an earlier notebook dropped, students recorded."""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import replace
from pathlib import Path

from autograder.feedback.render import write_notice
from autograder.intake.digests import notebook_digest
from autograder.intake.files import copy_regular_file
from autograder.intake.state import STATE_FILE, read_notebooks, write_notebooks
from autograder.text import one_line
from autograder.nbgrader_glue.gradebook import gradebook
from autograder.nbgrader_glue.inproc import coursedir, safe_student_id
from autograder.tasks import Result, Task


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


def prepare_course(config, root: Path, results: list[Result], tasks: list[Task],
                   out: Path, submissions: Path | None = None, in_place: bool = False
                   ) -> tuple[list[Task], list[tuple[str, str, str]]]:
    """Students in the gradebook; the files to grade in submitted/; stale grades removed.

    A lesson a student has no notebook for in this batch ("missing") is left alone: an
    earlier submission, its grades (manual ones too) and files stay. An invalid submission
    replaces the earlier one. A notebook other than the one graded before loses the grades
    given to that one by hand; the same notebook graded again keeps them. Nothing in
    SUBMISSIONS is removed or written: graded in place (the course's submitted/), submitted/
    is left as it is. Returns the tasks, with a note where grades were dropped, and
    (student, lesson, what) for each submission's dropped grades."""
    from nbgrader.api import MissingEntry

    def untouchable(path: Path) -> bool:
        return submissions is not None and (within(path, submissions)
                                            or within(submissions, path))

    course = coursedir(config)
    # Which notebook the gradebook's grades were given to: nbgrader's copy in submitted/
    # (what it graded last) while it is there to be replaced, else this grader's record.
    record_path = root / "autograded" / STATE_FILE
    record = read_notebooks(record_path)
    before, now = {}, {}
    for task in tasks:
        key = (task.student, task.lesson)
        now[key] = notebook_digest(task.path)
        before[key] = record.get(key[0], {}).get(key[1])
        copy = Path(course.format_path(course.submitted_directory, *key)) / f"{key[1]}.ipynb"
        if not in_place and not untouchable(copy.parent):
            with contextlib.suppress(OSError):
                before[key] = notebook_digest(copy)
    named = [r for r in results if r.student_id and r.lesson and safe_student_id(r.student_id)]
    replaced = [(r.student_id, r.lesson) for r in named if r.status != "missing"]
    replaced += [(t.student, t.lesson) for t in tasks]
    steps = [course.autograded_directory, course.feedback_directory]
    if not in_place:
        steps.insert(0, course.submitted_directory)
    for student, lesson in replaced:
        for step in steps:
            folder = Path(course.format_path(step, student, lesson))
            if not untouchable(folder):
                remove_folder(folder)
    for task in tasks:
        target = Path(course.format_path(course.submitted_directory, task.student,
                                         task.lesson)) / f"{task.lesson}.ipynb"
        if in_place or untouchable(target.parent):
            continue  # graded where it is
        target.parent.mkdir(parents=True, exist_ok=True)
        copy_regular_file(task.path, target)  # never through a symbolic link
        if task.timestamp:  # nbgrader's submission time, for late penalties
            copy_regular_file(task.timestamp, target.parent / "timestamp.txt")
    with gradebook(config) as gb:
        for student in sorted({r.student_id for r in named} | {t.student for t in tasks}):
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
        dropped, noted = [], []
        for task in tasks:
            key = (task.student, task.lesson)
            what = drop_manual_grades(gb, *key) if before[key] != now[key] else []
            if what:
                dropped.append((*key, ", ".join(what)))
                task = replace(task, notes=(
                    *task.notes, "Manual grades given to an earlier submission were dropped "
                    "(this is another notebook): " + ", ".join(what) + "."))
            noted.append(task)
            record.setdefault(key[0], {})[key[1]] = now[key]
    write_notebooks(record_path, record)
    for result in results:
        if result.lesson and result.student_id:
            write_notice(out / "feedback" / result.student_id / f"{result.lesson}.html",
                         student=result.student_id, lesson=result.lesson, status=result.status,
                         reason=result.reason, score=result.score, max_score=result.max_score)
    return noted, dropped


def remove_folder(path: Path) -> None:
    """Remove a folder nbgrader may have made read-only; nothing when it is absent."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
        # nbgrader makes its output read-only; a second pass clears what was left.
        if path.exists():
            for dirpath, _, filenames in os.walk(path):
                os.chmod(dirpath, 0o755)
                for filename in filenames:
                    os.chmod(os.path.join(dirpath, filename), 0o644)
            shutil.rmtree(path, ignore_errors=True)


def within(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or inside it."""
    return path == folder or folder in path.parents
