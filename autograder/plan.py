"""A grading run's plan: which submissions it takes (roster, --students, what is new in the
course's submitted/), the rows decided before grading (missing, invalid) and the tasks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from autograder.intake.collect import Submission, layout_summary, pick_newest
from autograder.intake.digests import submission_digest
from autograder.intake.files import MAX_NOTEBOOK_BYTES, read_regular
from autograder.intake.roster import Roster, RosterReport, apply_roster
from autograder.intake.state import STATE_FILE, new_since, read_state, write_state
from autograder.intake.validate import check
from autograder.nbgrader_glue.gradebook import submissions
from autograder.nbgrader_glue.inproc import course_config, safe_student_id
from autograder.records import KEPT_IN_GRADEBOOK
from autograder.tasks import Result, Task

MAX_TIMESTAMP_BYTES = 1024  # nbgrader's timestamp.txt holds one line of about 30 characters


@dataclass(frozen=True)
class Intake:
    """How the instructor asked SUBMISSIONS to be read: its layout, the roster, which students,
    everything or only what is new (the course's submitted/), and whether the gradebook's
    records of this run's students take the ids of this run. (What came of it: `Findings`.)"""

    layout: str = "auto"
    roster: Roster | None = None
    students: list[str] | None = None
    regrade_all: bool = False
    replace_ids: bool = False  # give the gradebook's records of this run's students its ids


@dataclass
class Findings:
    """What came of reading SUBMISSIONS (take_in, then the gradebook's ids settled)."""

    read_as: str = ""  # "Canvas export (12 notebooks)"
    refused: list[str] = field(default_factory=list)  # files refused: whose is unclear
    roster_report: RosterReport | None = None
    selection: str = ""  # what was selected in submitted/, and how to choose otherwise
    only_new: bool = False
    found: list[Submission] = field(default_factory=list)
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


def take_in(found: list[Submission], intake: Intake, root: Path, in_place: bool,
            lessons_named: bool, echo) -> tuple[list[Submission], Findings]:
    """The submissions to grade: roster ids given, --students kept, and in the course's
    submitted/ only what is new since the last run (unless lessons, students or --all say);
    and what came of reading them."""
    findings = Findings()
    if intake.roster is not None:
        findings.roster_report = apply_roster(found, intake.roster)
    if intake.students:
        wanted = set(intake.students)
        absent = sorted(wanted - {s.student for s in found})
        found = [s for s in found if s.student in wanted]
        if absent and echo:
            echo(f"No notebook of {', '.join(absent)} in SUBMISSIONS.")
    findings.refused = [s.shown for s in found if s.refused]
    findings.read_as = layout_summary(found)
    if not in_place:
        return found, findings
    state = read_state(root / "autograded" / STATE_FILE)
    held = gradebook_submissions(root)
    new, unchanged = new_since(found, state, lambda student, lesson: (student, lesson) in held)
    if lessons_named or intake.students or intake.regrade_all:
        findings.found = found
        return found, findings
    findings.only_new, findings.found = True, new
    students = len({s.student for s in new if s.student})
    narrow = ("To grade them again: --all; to grade some: --lessons LESSON ... or "
              "--students ID ...")
    if new:
        findings.selection = (f"submitted/: {len(new)} notebook{'s' if len(new) != 1 else ''} "
                              f"of {students} student{'s' if students != 1 else ''} new or "
                              f"changed since the last run are graded; {len(unchanged)} "
                              f"unchanged keep their grades. {narrow}")
    else:
        findings.selection = (f"submitted/: nothing new since the last run; {len(unchanged)} "
                              f"unchanged notebooks keep their grades. {narrow}")
    if echo:
        echo(findings.selection)
    return new, findings


def gradebook_submissions(root: Path) -> set[tuple[str, str]]:
    """(student, lesson) of every submission in the course's gradebook."""
    if not (root / "gradebook.db").is_file():
        return set()
    return submissions(course_config(root))


def remember_graded(root: Path, findings: Findings, results: list[Result],
                    chosen: list[str]) -> None:
    """Record what this run graded in submitted/ (content digests), for the next run."""
    status = {(r.student_id, r.lesson): r.status for r in results}
    state = read_state(root / "autograded" / STATE_FILE)
    for sub in findings.found:
        if sub.digest and (sub.lesson in chosen or sub.lesson is None or sub.problem):
            kept = status.get((sub.student, sub.lesson)) in KEPT_IN_GRADEBOOK
            state[sub.shown] = {"digest": sub.digest, "graded": kept}
    write_state(root / "autograded" / STATE_FILE, state)


def roster_rows(results: list[Result], intake: Intake, findings: Findings,
                chosen: list[str], specs: dict) -> list[Result]:
    """A `missing` row per lesson for each roster student with nothing in SUBMISSIONS; none
    at all when grading only what is new in submitted/ (a lesson not there is no news)."""
    if findings.only_new:
        return [r for r in results if r.status != "missing"]
    if findings.roster_report is None:
        return results
    have = {r.student_id for r in results if r.student_id}
    for entry in findings.roster_report.absent:
        if entry.id in have or (intake.students and entry.id not in intake.students):
            continue
        for lesson in chosen:
            results.append(Result(student_id=entry.id, lesson=lesson, status="missing",
                                  max_score=specs[lesson].max_score,
                                  reason="No notebook for this lesson in this batch (a student "
                                         "on the roster who submitted nothing)."))
    return results


def plan_tasks(found: list[Submission], chosen: list[str], specs: dict, lesson_ids: dict,
               skipped: list[str], submitted: Path | None = None
               ) -> tuple[list[Result], list[Task]]:
    """Rows decided before grading (missing, invalid) and the tasks for the workers.
    `submitted`: the course's submitted/ folder when grading it in place."""
    results: list[Result] = []
    tasks: list[Task] = []
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
            digest = submission_digest(read_regular(chosen_file.path, MAX_NOTEBOOK_BYTES))
            timestamp, stamp_note = _timestamp_file(chosen_file)
            notes += [stamp_note] if stamp_note else []
            tasks.append(Task(student=student, lesson=lesson, digest=digest,
                              path=str(chosen_file.path), timestamp=timestamp,
                              notes=tuple(notes)))
    return results, tasks


def _timestamp_file(submission: Submission) -> tuple[str | None, str | None]:
    """nbgrader's timestamp.txt beside a notebook in its layout (<student>/<lesson>/), when it
    holds a time nbgrader reads (else a note saying it was ignored), and None without one."""
    from autograder.nbgrader_glue.exchange import nbgrader_time

    folder = submission.path.parent
    stamp = folder / "timestamp.txt"
    in_lesson_folder = submission.layout == "folders" and len(Path(submission.shown).parts) > 2
    if not (in_lesson_folder and stamp.is_file() and not stamp.is_symlink()):
        return None, None
    try:
        nbgrader_time(read_regular(stamp, MAX_TIMESTAMP_BYTES).decode("utf-8").strip())
    except Exception:  # noqa: BLE001 (ValueError, OverflowError, a file past the limit, ...)
        return None, ("Its timestamp.txt was ignored: it holds no submission time as nbgrader "
                      "writes one (no late penalty was computed from it).")
    return str(stamp), None

