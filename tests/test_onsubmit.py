"""Feedback on submit's queue (hub/lib/coursehub/onsubmit.py), without a hub: which submission
is graded next, the per-hour and per-lesson limits, a retry and then a report, and a restart
that loses nothing and repeats no finished step. The steps are recorded, not run; the clock is
given, so no result depends on time or load."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import COURSE_ROOT

sys.path.insert(0, str(COURSE_ROOT / "hub" / "lib"))
from coursehub import settings as class_settings
from coursehub.onsubmit import (DONE, FAILED, PENDING, SUPERSEDED, WAITING, WORKING,
                                Queue, instructor_report, parse_name, student_status, work)
from coursehub.settings import ConfigError, OnSubmit
from coursehub.startpage import start_page

L1, L2 = "01_leaf_and_intermediate", "02_retain_grad"
T0 = 1_800_000_000.0  # a fixed moment; every test gives its own clock


def name(student: str, lesson: str, n: int) -> str:
    return f"{student}+{lesson}+2027-01-15 08:00:{n:02d}.000000 UTC+{n:08x}"


def mine(*names: str) -> dict[str, str]:
    """Inbound folders, each owned by the student its name gives (as the service finds them)."""
    return {n: n.split("+")[0] for n in names}


class Recorder:
    """Steps that record what they are asked to do; `errors[(name, step)]` lists the errors to
    return on successive tries (a missing entry: success)."""

    def __init__(self, errors: dict | None = None, crash_at: tuple | None = None):
        self.calls: list[tuple[str, str]] = []
        self.errors = errors or {}
        self.crash_at = crash_at

    def _step(self, step: str, entry, now: float) -> str:
        self.calls.append((entry.name, step))
        if self.crash_at == (entry.name, step):
            raise KeyboardInterrupt  # the service killed in the middle of this step
        if step == "grade":  # as Steps.grade: before the deadline the hidden checks wait
            entry.score, entry.withheld = "9 / 9", True
        if step == "feedback":
            entry.withheld = False
        tries = self.errors.get((entry.name, step), [])
        return tries.pop(0) if tries else ""

    def collect(self, entry, now):
        return self._step("collect", entry, now)

    def grade(self, entry, now):
        return self._step("grade", entry, now)

    def grade_many(self, entries, now):
        """As Steps.grade_many: the collected submissions of a lesson graded together."""
        return {entry.name: self._step("grade", entry, now) for entry in entries}

    def release(self, entry, now):
        return self._step("release", entry, now)

    def feedback(self, entry, now):
        return self._step("feedback", entry, now)


def run_all(queue: Queue, steps, now: float, limits: OnSubmit) -> None:
    """What the service's loop does at time `now` until nothing is ready."""
    while (entry := queue.next_ready(now, limits)) is not None:
        work(queue, entry, steps, clock=lambda: now)


def by_name(queue: Queue) -> dict:
    return {e.name: e for e in queue.entries}


def test_each_submission_is_collected_graded_and_released_once(tmp_path):
    queue, steps, limits = Queue(tmp_path / "q.json"), Recorder(), OnSubmit(enabled=True)
    ann, bob = name("ann", L1, 1), name("bob", L1, 2)
    queue.observe(mine(bob, ann), T0)
    run_all(queue, steps, T0, limits)
    # Both collected first, then graded together (one warm grading command), then released.
    assert steps.calls == [(n, s) for s in ("collect", "grade", "release") for n in (ann, bob)]
    assert {e.status for e in queue.entries} == {DONE}
    # Seen again at the next look: nothing new, nothing graded again.
    assert queue.observe(mine(ann, bob), T0 + 5) == []
    run_all(queue, steps, T0 + 5, limits)
    assert len(steps.calls) == 6
    saved = json.loads((tmp_path / "q.json").read_text())["entries"]
    assert [(e["name"], e["status"]) for e in saved] == [(ann, DONE), (bob, DONE)]


def test_names_submit_never_writes_are_ignored(tmp_path):
    queue = Queue(tmp_path / "q.json")
    odd = ["ann+01", "Ann Smith+01_x+t+r", "ann+../x+t+r", "ann+01+t+r+extra", ".hidden"]
    assert queue.observe({n: "ann" for n in odd}, T0) == []
    assert parse_name(name("ann", L1, 1)) == ("ann", L1)


def test_a_newer_submission_replaces_one_not_yet_graded(tmp_path):
    queue, steps, limits = Queue(tmp_path / "q.json"), Recorder(), OnSubmit(enabled=True)
    first, second = name("ann", L1, 1), name("ann", L1, 2)
    queue.observe(mine(first), T0)
    queue.observe(mine(first, second), T0 + 1)
    run_all(queue, steps, T0 + 2, limits)
    assert [n for n, _ in steps.calls] == [second] * 3
    assert by_name(queue)[first].status == SUPERSEDED
    # Once one is graded, the next submission is graded too.
    third = name("ann", L1, 3)
    queue.observe(mine(third), T0 + 60)
    run_all(queue, steps, T0 + 60, limits)
    assert by_name(queue)[third].status == DONE


def test_the_hourly_limit_makes_the_rest_wait_and_says_until_when(tmp_path):
    queue, steps = Queue(tmp_path / "q.json"), Recorder()
    limits = OnSubmit(enabled=True, per_hour=2)
    subs = [name("ann", lesson, n) for n, lesson in enumerate([L1, L2, L1], 1)]
    for minute, submission in enumerate(subs):
        now = T0 + 600 * minute
        queue.observe(mine(submission), now)
        run_all(queue, steps, now, limits)
    waiting = by_name(queue)[subs[2]]
    assert waiting.status == WAITING and waiting.until == T0 + 3600
    assert "at most 2 submissions of yours an hour" in waiting.note
    # T0 (08:00) + 1 h, in words
    assert "joins the grading queue at 2027-01-15 09:00:00 UTC" in waiting.note
    # Another student is not held up by ann's limit.
    queue.observe(mine(name("bob", L1, 9)), T0 + 1300)
    run_all(queue, steps, T0 + 1300, limits)
    assert by_name(queue)[name("bob", L1, 9)].status == DONE
    [row] = [r for r in student_status(queue, "ann") if r["lesson"] == L1]
    assert row["status"].startswith("waiting: the class grades at most 2")
    run_all(queue, steps, T0 + 3599, limits)
    assert waiting.status == WAITING
    run_all(queue, steps, T0 + 3600, limits)
    assert waiting.status == DONE


def test_the_per_lesson_limit_leaves_the_last_one_to_the_instructor(tmp_path):
    deadline = datetime.datetime(2027, 2, 1, 12, 0, tzinfo=datetime.timezone.utc)
    limits = OnSubmit(enabled=True, per_lesson=1, deadlines={L1: deadline})
    queue, steps = Queue(tmp_path / "q.json"), Recorder()
    queue.observe(mine(name("ann", L1, 1)), T0)
    run_all(queue, steps, T0, limits)
    queue.observe(mine(name("ann", L1, 2), name("ann", L2, 3)), T0 + 10)
    run_all(queue, steps, T0 + 10, limits)
    waiting, other = by_name(queue)[name("ann", L1, 2)], by_name(queue)[name("ann", L2, 3)]
    assert other.status == DONE  # the limit is per lesson
    assert waiting.status == WAITING and waiting.until is None
    assert "grades your last submission after the deadline (2027-02-01 12:00:00 UTC)" \
        in waiting.note


def test_a_failing_step_is_tried_again_then_reported_and_the_queue_goes_on(tmp_path):
    bad, good = name("ann", L1, 1), name("bob", L1, 2)
    steps = Recorder(errors={(bad, "grade"): ["grading ended with status 1: disk full",
                                              "grading ended with status 1: disk full"]})
    queue, limits = Queue(tmp_path / "q.json"), OnSubmit(enabled=True)
    queue.observe(mine(bad, good), T0)
    run_all(queue, steps, T0, limits)
    assert steps.calls == [(bad, "collect"), (good, "collect"), (bad, "grade"), (good, "grade"),
                           (good, "release"), (bad, "grade")]
    assert by_name(queue)[bad].status == FAILED and by_name(queue)[good].status == DONE
    report = instructor_report(queue)
    assert "## Could not be graded on submit" in report
    assert "- `ann`, `01_leaf_and_intermediate`" in report and "disk full" in report
    assert student_status(queue, "ann")[0]["status"].startswith("could not be graded")


def test_one_failure_then_success_is_graded(tmp_path):
    sub = name("ann", L1, 1)
    steps = Recorder(errors={(sub, "release"): ["Feedback not released for ann"]})
    queue, limits = Queue(tmp_path / "q.json"), OnSubmit(enabled=True)
    queue.observe(mine(sub), T0)
    run_all(queue, steps, T0, limits)
    assert [s for _, s in steps.calls] == ["collect", "grade", "release", "release"]
    assert by_name(queue)[sub].status == DONE and by_name(queue)[sub].note == ""


def test_a_restart_loses_nothing_and_repeats_no_finished_step(tmp_path):
    path = tmp_path / "q.json"
    first, second = name("ann", L1, 1), name("bob", L1, 2)
    queue, limits = Queue(path), OnSubmit(enabled=True)
    queue.observe(mine(first, second), T0)
    crashing = Recorder(crash_at=(first, "grade"))
    with pytest.raises(KeyboardInterrupt):
        run_all(queue, crashing, T0, limits)
    assert json.loads(path.read_text())["entries"][0]["status"] == WORKING
    # The service starts again: from its file only.
    again = Queue.load(path)
    assert [(e.name, e.status, e.step) for e in again.entries] == \
        [(first, PENDING, "grade"), (second, PENDING, "grade")]
    steps = Recorder()
    again.observe(mine(first, second), T0 + 30)
    run_all(again, steps, T0 + 30, limits)
    assert steps.calls == [(first, "grade"), (second, "grade"), (first, "release"),
                           (second, "release")]
    # And once more: everything is done, nothing runs.
    steps = Recorder()
    third = Queue.load(path)
    third.observe(mine(first, second), T0 + 60)
    run_all(third, steps, T0 + 60, limits)
    assert steps.calls == [] and {e.status for e in third.entries} == {DONE}


def test_the_start_page_shows_the_student_their_submissions(tmp_path):
    queue, limits = Queue(tmp_path / "q.json"), OnSubmit(enabled=True, per_hour=1)
    queue.observe(mine(name("ann", L1, 1)), T0)
    run_all(queue, Recorder(), T0, limits)
    queue.observe(mine(name("ann", L2, 2)), T0 + 60)
    run_all(queue, Recorder(), T0 + 60, limits)
    status = tmp_path / "ann.json"
    status.write_text(json.dumps(student_status(queue, "ann")))
    home, outbound = tmp_path / "home", tmp_path / "outbound"
    home.mkdir()
    outbound.mkdir()
    page = start_page(home, outbound, COURSE_ROOT, status)
    assert "## Your submissions" in page
    assert f"| {L1} | 2027-01-15 08:00:00 UTC | graded: 9 / 9; click Fetch Feedback" in page
    assert f"| {L2} | 2027-01-15 08:01:00 UTC | waiting: the class grades at most 1 " \
        "submissions of yours an hour; this one joins the grading queue at 2027-01-15 09:00:00 " \
        "UTC |" in page
    assert "## Your submissions" not in start_page(home, outbound, COURSE_ROOT)
    # Its lesson's row says it too: the table is what the page shows first (the newcomer's
    # students read "not started" there while their submission was graded).
    (outbound / L1).mkdir()
    shutil.copy(COURSE_ROOT / "notebooks" / L1 / f"{L1}.ipynb", outbound / L1)
    row = next(line for line in start_page(home, outbound, COURSE_ROOT, status).splitlines()
               if line.startswith("| 01 |"))
    assert "| released: **Fetch** it; your submission: graded: 9 / 9; click Fetch Feedback " \
        "in the Assignments tab (this score counts the hidden checks too" in row, row


def test_students_are_told_as_their_grading_starts_not_only_once_it_is_done(tmp_path):
    """A first-time instructor's class: the students' state is published each time a step
    starts or ends, so that while a batch is graded its students read "being graded now"
    (they went on reading "0 ahead of you" until their feedback came)."""
    queue, limits = Queue(tmp_path / "q.json"), OnSubmit(enabled=True)
    ann, bob = name("ann", L1, 1), name("bob", L1, 2)
    queue.observe(mine(ann, bob), T0)
    published: dict[str, str] = {}
    while_graded: dict[str, str] = {}

    def publish() -> None:  # what the service writes to each student's status file
        published.update({s: student_status(queue, s, T0)[0]["status"] for s in ("ann", "bob")})

    class Watching(Recorder):
        def grade_many(self, entries, now):
            while_graded.update(published)
            return super().grade_many(entries, now)

    steps = Watching()
    while (entry := queue.next_ready(T0, limits)) is not None:
        work(queue, entry, steps, clock=lambda: T0, changed=publish)
    assert (ann, "grade") in steps.calls and (bob, "grade") in steps.calls
    assert while_graded == {s: "received at 2027-01-15 08:00:00 UTC, being graded now"
                            for s in ("ann", "bob")}, while_graded
    assert published["bob"].startswith("graded: 9 / 9; click Fetch Feedback"), published


def test_the_class_file_reads_feedback_on_submit(tmp_path):
    path = tmp_path / "class.toml"
    path.write_text('[accounts]\nadmins = ["a"]\n[feedback]\nfeedback_on_submit = true\n'
                    'per_hour = 3\nhidden_before_deadline = true\ncluster = "tls://10.9.8.7:86"\n'
                    f'[feedback.deadlines]\n{L1} = 2027-02-01T13:00:00+01:00\n'
                    f'{L2} = "2027-02-08T12:00:00Z"\n')
    on_submit = class_settings.load(path).on_submit
    assert on_submit.enabled and on_submit.per_hour == 3 and on_submit.per_lesson == 10
    assert on_submit.hidden_before_deadline and on_submit.cluster == "tls://10.9.8.7:86"
    assert on_submit.deadline(L1) == datetime.datetime(2027, 2, 1, 12, 0,
                                                       tzinfo=datetime.timezone.utc)
    assert on_submit.deadline(L2).day == 8 and on_submit.deadline("03_tensor_hooks") is None
    assert not class_settings.load(COURSE_ROOT / "hub" / "class.toml").on_submit.enabled


@pytest.mark.parametrize("text, complaint", [
    ("feedback_on_submit = 1\n", "must be true or false"),
    ("per_hour = 0\n", "per_hour must be a whole number above 0"),
    ("cluster = 8786\n", "cluster must be a scheduler's address"),
    (f"[feedback.deadlines]\n{L1} = \"friday\"\n", "is not a date and time"),
    (f"[feedback.deadlines]\n{L1} = 2027-02-01T13:00:00\n", "has no time zone"),
    ("deadline = 1\n", "unknown keys ['deadline']"),
])
def test_a_wrong_feedback_section_says_what_is_wrong(tmp_path, text, complaint):
    path = tmp_path / "class.toml"
    path.write_text('[accounts]\nadmins = ["a"]\n[feedback]\n' + text)
    with pytest.raises(ConfigError) as caught:
        class_settings.load(path)
    assert complaint in str(caught.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="gives files to root's group (root only)")
def test_publishing_follows_no_link_an_instructor_plants(tmp_path):
    """The service runs as root and writes its report into the course folder, which
    instructors may change: a link planted where it writes is replaced, never followed."""
    from coursehub.onsubmit import REPORT_FILE, publish

    path = tmp_path / "class.toml"
    path.write_text('[hub]\nstate_dir = "state"\n[accounts]\nadmins = ["a"]\n'
                    'instructors_group = "root"\n')
    settings = class_settings.load(path)
    (settings.queue_dir / "students").mkdir(parents=True)
    settings.course_dir.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("precious")
    for name in (REPORT_FILE, f".{REPORT_FILE}.tmp"):
        (settings.course_dir / name).symlink_to(victim)
    queue = Queue(tmp_path / "q.json")
    queue.observe(mine(name_of("root")), T0)
    written = {}
    publish(queue, settings, written)
    assert victim.read_text() == "precious"
    report = settings.course_dir / REPORT_FILE
    assert not report.is_symlink() and "| `root` | " in report.read_text()
    assert oct(report.stat().st_mode & 0o777) == oct(0o640)
    student = settings.queue_dir / "students" / "root.json"
    assert json.loads(student.read_text())[0]["status"] == \
        "received at 2027-01-15 08:00:00 UTC, grading: 0 ahead of you"
    # Written again only when it changes.
    report.write_text("edited")
    publish(queue, settings, written)
    assert report.read_text() == "edited"


def name_of(student: str) -> str:
    return name(student, L1, 1)


def test_late_is_judged_by_the_collected_timestamp(tmp_path):
    from autograder.nbgrader_glue.exchange import utc_text
    from coursehub.onsubmit import submitted_after

    deadline = datetime.datetime(2027, 2, 1, 12, 0, tzinfo=datetime.timezone.utc)
    stamp = tmp_path / "timestamp.txt"
    for moment, late in ((datetime.datetime(2027, 2, 1, 11, 59, 59), False),
                         (datetime.datetime(2027, 2, 1, 12, 0, 0, 1), True)):
        stamp.write_text(utc_text(moment))
        assert submitted_after(stamp, deadline) is late
    stamp.write_text("yesterday")
    with pytest.raises(ValueError):
        submitted_after(stamp, deadline)


def test_the_hub_runs_the_service_only_when_the_class_turns_it_on(tmp_path):
    from traitlets.config import Config

    from coursehub.hubconfig import configure

    path = tmp_path / "class.toml"
    for enabled in (False, True):
        path.write_text('[accounts]\nadmins = ["a"]\n[feedback]\n'
                        f'feedback_on_submit = {str(enabled).lower()}\n')
        c = Config()
        configure(c, class_settings.load(path))
        services = {s["name"]: s for s in c.JupyterHub.services}
        assert ("feedback-on-submit" in services) is enabled
        assert "idle-culler" in services
    command = services["feedback-on-submit"]["command"]
    assert command[1:4] == ["-m", "coursehub.onsubmit", "serve"]
    assert command[command.index("--config") + 1] == str(path.resolve())


def test_at_the_deadline_the_full_feedback_of_the_last_graded_one_is_released_once(tmp_path):
    deadline = datetime.datetime.fromtimestamp(T0 + 7200, datetime.timezone.utc)
    limits = OnSubmit(enabled=True, deadlines={L1: deadline})
    path = tmp_path / "q.json"
    queue, steps = Queue(path), Recorder()
    first, second = name("ann", L1, 1), name("ann", L1, 2)
    queue.observe(mine(first), T0)
    run_all(queue, steps, T0, limits)
    queue.observe(mine(second), T0 + 60)
    run_all(queue, steps, T0 + 60, limits)
    run_all(queue, steps, T0 + 7199, limits)
    assert len(steps.calls) == 6
    before = student_status(queue, "ann")[0]["status"]
    assert "hidden checks' results come after the deadline" in before
    # What the score counts is said plainly: the hidden checks too.
    assert "this score counts the hidden checks too" in before
    # At the deadline: the newest graded submission's full feedback, made and released; the
    # service stopped between the two picks up at the release.
    crashing = Recorder(crash_at=(second, "release"))
    with pytest.raises(KeyboardInterrupt):
        run_all(queue, crashing, T0 + 7200, limits)
    assert crashing.calls == [(second, "feedback"), (second, "release")]
    again, steps = Queue.load(path), Recorder()
    run_all(again, steps, T0 + 7300, limits)
    run_all(again, steps, T0 + 9000, limits)
    assert steps.calls == [(second, "release")]
    assert [e.withheld for e in again.entries] == [True, False]  # the first was replaced
    assert student_status(again, "ann")[0]["status"] == \
        "graded: 9 / 9; click Fetch Feedback in the Assignments tab"


# --------------------------------------------------------------------------------------------
# The real steps, as the service runs them: as `nobody` with the instructors' group (root's
# here), on a course folder of real files and a real gradebook.

@pytest.fixture(scope="module")
def nobodys_python():
    """The Python the hub gives the service's steps, which `nobody` can run (built under /tmp
    when .venv's own lies in a private folder, as pyenv's under /root)."""
    from coursehub.runtime import PythonError, users_python

    if os.geteuid() != 0:
        pytest.skip("the steps run as nobody: root only")
    base = tempfile.mkdtemp(prefix="onsubmit-python-")
    os.chmod(base, 0o755)
    try:
        python = users_python(Path(base) / "python")
    except PythonError as err:
        shutil.rmtree(base, ignore_errors=True)
        pytest.skip(f"the account nobody can run no Python of this clone: {err}")
    yield python
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def hub_course(nobodys_python, monkeypatch):
    """A class's state folder whose course folder the steps can use as `nobody` with group
    root: nbgrader_config.py, lessons 01 and 02's solutions, a gradebook with both lessons."""
    from nbgrader.api import Gradebook

    # nbgrader's gradebook runs alembic by name, from this Python's folder
    monkeypatch.setenv("PATH", f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    base = tempfile.mkdtemp(prefix="onsubmit-")  # /tmp: nobody can pass; tmp_path cannot
    os.chmod(base, 0o755)
    config = os.path.join(base, "class.toml")
    with open(config, "w") as handle:
        handle.write('[hub]\nstate_dir = "state"\n[accounts]\nadmins = ["a"]\n'
                     'instructors_group = "root"\n[feedback]\nfeedback_on_submit = true\n')
    settings = class_settings.load(Path(config))
    course = settings.course_dir
    course.mkdir(parents=True)
    os.chmod(settings.state_dir, 0o711)
    shutil.copy2(COURSE_ROOT / "nbgrader_config.py", course)
    for lesson in (L1, L2):
        shutil.copytree(COURSE_ROOT / "solutions" / lesson, course / "solutions" / lesson)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for lesson in (L1, L2):
            gradebook.add_assignment(lesson)
        for student in ("ann", "bob"):
            gradebook.add_student(student)
    for path in [course, *course.rglob("*")]:
        os.chown(path, 0, 0)
        os.chmod(path, 0o2770 if path.is_dir() else 0o660)
    yield settings, nobodys_python
    shutil.rmtree(base, ignore_errors=True)


def _graded(course, student: str, lesson: str, score: float, status: str = "graded",
            reason: str = "") -> None:
    """What one grading on submit leaves behind: its grades.csv (by the grading command's own
    writer) and the student's feedback page, in its output and in nbgrader's feedback/ folder."""
    from autograder.grading import write_grades
    from autograder.trusted.autograde import Result

    out = course / "on-submit" / f"{student}+{lesson}"
    out.mkdir(parents=True, exist_ok=True)
    write_grades(out / "grades.csv", [Result(student, lesson, score, 9.0, status, reason)])
    for page in (course / "feedback" / student / lesson / f"{lesson}.html",
                 out / "feedback" / student / f"{lesson}.html"):
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(f"<!DOCTYPE html><title>{student} {lesson} {score:g}</title>")
    for path in [course / "on-submit", course / "feedback", *(course / "on-submit").rglob("*"),
                 *(course / "feedback").rglob("*")]:
        os.chmod(path, 0o2770 if path.is_dir() else 0o660)


def _students_table(report) -> dict[str, list[str]]:
    """The report's students table: student -> the text of each lesson's cell and the total."""
    table = re.search(r'<table class="students">.*?</table>', report.read_text(), re.S)[0]
    rows = re.findall(r"<tr><td>([^<]*)</td><td class=\"look\">[^<]*</td>(.*?)</tr>", table)
    return {student: re.findall(r"<td[^>]*>(?:<a[^>]*>)?([^<]*)", cells)
            for student, cells in rows}


def test_the_class_report_is_written_again_after_each_grading_with_every_latest_result(
        hub_course):
    from coursehub.onsubmit import Steps

    settings, python = hub_course
    course = settings.course_dir
    steps = Steps(settings, python)
    _graded(course, "ann", L1, 9.0)
    steps.class_report()  # as the service does after a grading: as nobody, group root
    report = course / "on-submit" / "report.html"
    assert _students_table(report) == {"ann": ["9/9", "", "9/9"]}
    _graded(course, "bob", L1, 4.0)
    _graded(course, "bob", L2, 0.0, status="error", reason="the kernel died")
    steps.class_report()
    assert _students_table(report) == {"bob": ["4/9", "error", "4/18"],  # needs a look: first
                                       "ann": ["9/9", "", "9/9"]}
    # Ann submits lesson 01 again: her newest result replaces the first, and the link beside
    # it opens the feedback page she got this time.
    _graded(course, "ann", L1, 7.0)
    steps.class_report()
    assert _students_table(report)["ann"] == ["7/9", "", "7/9"]
    page = course / "on-submit" / "feedback" / "ann" / f"{L1}.html"
    assert f'href="feedback/ann/{L1}.html"' in report.read_text()
    assert page.read_text() == f"<!DOCTYPE html><title>ann {L1} 7</title>"
    items = (course / "on-submit" / "items.csv").read_text()
    assert items.startswith("lesson,exercise,cell,check,visibility")
    assert report.stat().st_uid == 65534  # written by nobody, for the instructors' group
    assert report.stat().st_gid == 0 and report.stat().st_mode & 0o040


def test_the_deadline_becomes_the_gradebooks_due_date_and_a_later_submission_is_late(
        hub_course):
    from nbgrader.api import Gradebook

    from autograder.nbgrader_glue.exchange import utc_text
    from coursehub.onsubmit import Entry, Steps

    deadline = datetime.datetime(2027, 2, 1, 12, 0, tzinfo=datetime.timezone.utc)
    settings, python = hub_course
    settings.on_submit.deadlines[L1] = deadline
    course = settings.course_dir
    steps = Steps(settings, python)
    late, seconds_late = {}, {}
    for student, moment in (("ann", datetime.datetime(2027, 2, 1, 11, 59, 59)),
                            ("bob", datetime.datetime(2027, 2, 1, 12, 0, 30))):
        stamp = course / "submitted" / student / L1 / "timestamp.txt"
        stamp.parent.mkdir(parents=True)
        stamp.write_text(utc_text(moment))  # as the course's collect writes it
        for path in (stamp, stamp.parent, stamp.parent.parent, course / "submitted"):
            os.chmod(path, 0o2770 if path.is_dir() else 0o660)
        entry = Entry(name(student, L1, 1), student, L1, seen=T0)
        assert steps.due_date(entry) == ""  # the real step: `nbgrader db assignment add`
        late[student] = entry.late
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
            assert gradebook.find_assignment(L1).duedate == deadline.replace(tzinfo=None)
            # nbgrader counts lateness from that due date: bob's half a minute, ann none.
            submission = gradebook.update_or_create_submission(L1, student, timestamp=moment)
            seconds_late[student] = submission.total_seconds_late
    assert late == {"ann": False, "bob": True}
    assert seconds_late == {"ann": 0, "bob": 30}


def test_the_class_report_copies_feedback_pages_through_no_link(tmp_path, monkeypatch):
    """Links planted in the course folder (an instructor's to change) are never followed: not
    where a feedback page is copied to, and not a feedback page that is a link."""
    from coursehub.onsubmit import class_report

    monkeypatch.setenv("PATH", f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    shutil.copy2(COURSE_ROOT / "nbgrader_config.py", course)
    for lesson in (L1, L2):
        shutil.copytree(COURSE_ROOT / "solutions" / lesson, course / "solutions" / lesson)
    victim, secret = tmp_path / "victim.html", tmp_path / "secret.html"
    victim.write_text("precious")
    secret.write_text("the instructors' eyes only")
    _graded(course, "ann", L1, 9.0)
    _graded(course, "bob", L1, 3.0)
    target = course / "on-submit" / "feedback" / "ann" / f"{L1}.html"
    target.parent.mkdir(parents=True)
    target.symlink_to(victim)
    bobs = course / "feedback" / "bob" / L1 / f"{L1}.html"
    bobs.unlink()
    bobs.symlink_to(secret)
    report = class_report(course)
    assert victim.read_text() == "precious"
    assert not target.is_symlink() and target.read_text() == \
        f"<!DOCTYPE html><title>ann {L1} 9</title>"
    # Bob's page is a link: the page his own grading wrote is copied instead.
    copied = course / "on-submit" / "feedback" / "bob" / f"{L1}.html"
    assert "eyes only" not in copied.read_text()
    assert _students_table(report) == {"ann": ["9/9", "", "9/9"], "bob": ["3/9", "", "3/9"]}
