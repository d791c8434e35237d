"""The class's students in nbgrader's gradebook: names, emails and LMS ids from a grading run,
and the same students found under other ids."""

from __future__ import annotations

import contextlib
from pathlib import Path

from autograder.intake.collect import Submission
from autograder.intake.roster import Roster, renamed_students, student_records
from autograder.nbgrader_glue.gradebook import gradebook
from autograder.nbgrader_glue.inproc import coursedir
from autograder.text import one_line


def record_students(config, records: dict[str, dict]) -> None:
    """Write the students' names, emails and LMS ids into nbgrader's gradebook."""
    fields = ("first_name", "last_name", "email", "lms_user_id")
    with gradebook(config) as gb:
        for student, record in sorted(records.items()):
            current = gb.update_or_create_student(student)
            values = {}
            for name in fields:
                value = one_line(record.get(name) or "", 128)
                if value and (record.get("overwrite") or not getattr(current, name)):
                    values[name] = value
            if values:
                gb.update_or_create_student(student, **values)



def settle_renamed_students(config, found: list[Submission], roster: Roster | None,
                            replace: bool, in_place: bool) -> dict[str, str]:
    """Before grading: when students of this run are in the gradebook under other ids, refuse
    (ValueError naming them; nothing is changed) or, with `replace`, give the gradebook's
    records and the course's folders this run's ids. Returns {old id: new id} replaced."""
    from nbgrader.api import SubmittedAssignment

    if not Path(config.CourseDirectory.db_url.removeprefix("sqlite:///")).is_file():
        return {}
    records = student_records(found, roster, set(roster.entries) if roster else None)
    with gradebook(config) as gb:
        held = [{"id": s.id, "lms_user_id": s.lms_user_id, "email": s.email}
                for s in gb.students]
        pairs = renamed_students(records, held)
        if not pairs:
            return {}
        named = "; ".join(f"{old} is {new} in this run (the same {why})"
                          for old, (new, why) in sorted(pairs.items()))
        if not replace or in_place:
            how = ("rename the students' folders in submitted/ to the gradebook's ids" if
                   in_place else "run again with --replace-ids to give the gradebook's records "
                   "this run's ids (their submissions and manual grades go with them), or "
                   "grade with the ids the gradebook has (the roster used then)")
            raise ValueError(f"{len(pairs)} students of this run are in the gradebook under "
                             f"other ids already: {named}. Grading them would give each one "
                             f"two rows in the formgrader and the exports. To go on, {how}. "
                             "Nothing was graded or changed.")
        lessons = {old: {s.assignment.name for s in gb.find_student(old).submissions}
                   for old in pairs}
        for old, (new, _) in sorted(pairs.items()):
            both = sorted(lessons[old] & {s.assignment.name for s in gb.db.query(
                SubmittedAssignment).filter(SubmittedAssignment.student_id == new)})
            if both:
                raise ValueError(f"{old} and {new} (one student: {named}) both have "
                                 f"{', '.join(both)} in the gradebook, so the ids cannot be "
                                 f"replaced: remove one of them (`nbgrader db student remove "
                                 f"{old} --force`) and grade again. Nothing was graded or "
                                 "changed.")
        for old, (new, _) in sorted(pairs.items()):
            record = gb.find_student(old)
            target = gb.update_or_create_student(new)
            for name in ("first_name", "last_name", "email", "lms_user_id"):
                if not getattr(target, name) and getattr(record, name):
                    setattr(target, name, getattr(record, name))
            gb.db.query(SubmittedAssignment).filter(SubmittedAssignment.student_id == old) \
                .update({SubmittedAssignment.student_id: new}, synchronize_session=False)
            gb.db.commit()
            gb.db.expire_all()
            gb.db.delete(gb.find_student(old))
            gb.db.commit()
    course = coursedir(config)
    for old, (new, _) in pairs.items():
        for step in (course.submitted_directory, course.autograded_directory,
                     course.feedback_directory):
            for lesson in lessons[old]:
                source = Path(course.format_path(step, old, lesson))
                target = Path(course.format_path(step, new, lesson))
                if source.is_dir() and not source.is_symlink() and not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    source.rename(target)
            with contextlib.suppress(OSError):
                Path(course.format_path(step, old, "x")).parent.rmdir()  # only when empty
    return {old: new for old, (new, _) in pairs.items()}

