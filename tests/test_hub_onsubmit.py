"""Feedback on submit on the class hub, end to end in Chromium.

A hub whose class file says `feedback_on_submit = true`, at most 2 submissions graded per
student and hour. The instructor releases lesson 01 and does nothing more. Ann (every answer)
and Bob (half of them) submit; each sees their feedback in the Assignments tab, with the hidden
checks' results withheld (no deadline has passed). Ann submits again with an answer taken out
and sees the new, lower score. Cat submits three times: two are graded, and her start page
says when the third will be. The gradebook has the scores, and the instructors' report lists
every submission. A file of its own, so that it runs beside tests/test_hub.py under xdist;
needs what that file needs (root, npm, Chromium).
"""

from __future__ import annotations

import datetime
import json
import re
import subprocess
import time
from zoneinfo import ZoneInfo

import nbformat
import pytest

import browser_support as lab_page
from browser_support import REPO_ROOT
from notebook_support import grading
from test_hub import (LESSON, NOTEBOOK, ClassHub, assignment_list, browser,  # noqa: F401
                      formgrader_action, gradebook_scores, lesson_points, log_in,
                      open_lab_after_login, reload_lab, run_in_contexts, screenshot, sign_up,
                      solution_sources,
                      start_page_rows, wait_until)

pytestmark = [pytest.mark.browser, pytest.mark.hub]

PER_HOUR = 2
WITHHELD = "The hidden checks' results are shown after the deadline."


def answer_and_save(page, hub: ClassHub, student: str, answers: dict[str, str]) -> None:
    """Open the fetched lesson, type `answers` (grade id -> source) and save it."""
    path = hub.settings.home(student) / NOTEBOOK
    notebook = nbformat.read(path, as_version=4)
    page.goto(f"{hub.url}/user/{student}/lab/tree/{NOTEBOOK}")
    page.wait_for_function(f"() => document.querySelectorAll('.jp-NotebookPanel:not("
                           f".lm-mod-hidden) .jp-Notebook .jp-Cell').length == "
                           f"{len(notebook.cells)}", timeout=120_000)
    cells = lab_page.cells(page)
    for index, cell in enumerate(notebook.cells):
        if grading(cell).get("grade_id") in answers:
            lab_page.replace_cell_source(page, cells.nth(index), answers[grading(cell)["grade_id"]])
    page.keyboard.press("Escape")
    page.keyboard.press("ControlOrMeta+s")

    def saved() -> bool:
        try:  # the server may be writing the file this moment (empty, or half written)
            cells = nbformat.read(path, as_version=4).cells
        except (ValueError, nbformat.reader.NotJSONError):
            return False
        return all(c.source == answers[grading(c)["grade_id"]] for c in cells
                   if grading(c).get("grade_id") in answers)
    wait_until(saved, "saved answers")


def fetch(page, hub: ClassHub, student: str) -> None:
    assignment_list(page)
    page.locator("#released_assignments_list .list_item", has_text=LESSON) \
        .get_by_role("button", name="Fetch").click()
    page.locator("#fetched_assignments_list .list_item", has_text=LESSON).first.wait_for()
    assert (hub.settings.home(student) / NOTEBOOK).is_file()


def submit(page, count: int) -> None:
    """Submit from the Assignments tab; `count`: the student's submissions after this one."""
    assignment_list(page)
    page.locator("#fetched_assignments_list .list_item", has_text=LESSON).first \
        .get_by_role("button", name="Submit").click()
    wait_until(lambda: page.locator("#submitted_assignments_list .nested_list_item").count()
               == count, f"submission {count} in the list")


def fetch_new_feedback(page, hub: ClassHub, student: str, doc_image: str | None = None) -> float:
    """Refresh the Assignments tab until the newest submission's feedback is there to fetch
    (as a student would), fetch it, open it; the score it shows. `doc_image`: a screenshot of
    its first exercise's verdict for the docs."""
    reload_lab(page, hub, student)
    assignment_list(page)
    newest = page.locator("#submitted_assignments_list .nested_list_item").last
    deadline = time.monotonic() + 600
    while "feedback available to fetch" not in newest.inner_text():
        assert time.monotonic() < deadline, f"no feedback for {student} within 600 s"
        page.wait_for_timeout(3000)
        page.locator("#refresh_assignments_list").click()
        page.locator("#released_assignments_list_loading").wait_for(state="hidden")
    page.locator("#submitted_assignments_list .list_item", has_text=LESSON).first \
        .get_by_role("button", name="Fetch Feedback").click()
    newest.get_by_text("view feedback").wait_for()
    newest.get_by_text("view feedback").click()
    item = page.locator(".jp-DirListing-item", has_text=f"{LESSON}.html")
    item.wait_for()
    item.dblclick()
    viewer = page.frame_locator(".jp-HTMLViewer:not(.lm-mod-hidden) iframe").last
    header = viewer.get_by_text(re.compile(rf"{LESSON} \(Score: [\d.]+ / [\d.]+\)")).first
    header.wait_for()
    page_text = viewer.locator("body").inner_text()
    assert WITHHELD in page_text and "hidden check:" not in page_text
    if doc_image:
        viewer.get_by_text(WITHHELD).first.scroll_into_view_if_needed()
        screenshot(page, f"on-submit-{student}", doc_image=doc_image)
    return float(re.search(r"Score: ([\d.]+) /", header.inner_text()).group(1))


def status(hub: ClassHub, student: str) -> str:
    """What the service tells `student` about lesson 01 (their start page shows it)."""
    path = hub.settings.queue_dir / "students" / f"{student}.json"
    try:
        rows = json.loads(path.read_text())
    except (OSError, ValueError):
        return ""
    return next((row["status"] for row in rows if row["lesson"] == LESSON), "")


def graded(hub: ClassHub, student: str) -> int:
    """How many of `student`'s submissions the service has graded, from its queue."""
    try:
        entries = json.loads((hub.settings.queue_dir / "queue.json").read_text())["entries"]
    except (OSError, ValueError):
        return 0
    return sum(e["student"] == student and e["status"] == "done" for e in entries)


ZONE = "Asia/Kolkata"


def submission_state(page) -> str:
    """What the Assignments tab says beside the newest submission (coursekit-start-page)."""
    assignment_list(page)
    state = page.locator("#submitted_assignments_list .coursekit-submission-state").first
    state.wait_for(timeout=30_000)
    return state.inner_text()


def waiting_until(hub: ClassHub, student: str) -> float:
    """When the service promised `student`'s waiting submission a place in the queue."""
    entries = json.loads((hub.settings.queue_dir / "queue.json").read_text())["entries"]
    return next(e["until"] for e in entries if e["student"] == student
                and e["status"] == "waiting")


def local_time(moment: float) -> str:
    """`moment` as the start page shows it to a reader in ZONE."""
    shown = datetime.datetime.fromtimestamp(moment, ZoneInfo(ZONE))
    today = datetime.datetime.now(ZoneInfo(ZONE)).date()
    return (f"{shown:%Y-%m-%d} " if shown.date() != today else "") + \
        f"{shown:%H:%M:%S} (your time)"


@pytest.fixture
def class_hub():
    hub = ClassHub(students=("ann", "bob", "cat"),
                   extra=f"[feedback]\nfeedback_on_submit = true\nper_hour = {PER_HOUR}\n")
    try:
        yield hub
    finally:
        hub.remove()


def test_students_get_feedback_when_they_submit(browser, class_hub):
    run_in_contexts(browser, lambda new_context: _run(class_hub, browser, new_context),
                    "on-submit-last")


def _run(hub: ClassHub, browser, new_context) -> None:
    ann, bob, cat = hub.students
    points = lesson_points()
    full = sum(points.values())
    solutions = solution_sources()
    ids = list(points)
    half = ids[: len(ids) // 2]
    hub.start()
    for name in hub.accounts:
        sign_up(browser, hub, name)
    admin = log_in(new_context(), hub, hub.admin)
    admin.wait_for_url(re.compile(r"/hub/authorize$"))
    for name in (hub.instructor, *hub.students):
        with admin.expect_navigation():
            admin.locator(f"a[href='/hub/authorize/{name}']").click()

    # The instructor releases lesson 01, and that is all they do.
    teacher_context = new_context()
    # Cat's browser is in India (UTC+05:30): the hub's times are shown to her in her own.
    logins = {name: log_in(teacher_context if name == hub.instructor else
                           new_context(timezone_id=ZONE) if name == cat else new_context(), hub,
                           name) for name in (hub.instructor, *hub.students)}
    pages = {name: open_lab_after_login(page, name) for name, page in logins.items()}
    grader = teacher_context.new_page()
    grader.goto(f"{hub.url}/hub/user-redirect/formgrader")
    assert "Successfully created the student version" in \
        formgrader_action(grader, LESSON, "assign")
    assert "Successfully released" in formgrader_action(grader, LESSON, "release")

    # Ann and Bob answer and submit; each sees their feedback without the instructor.
    answers = {ann: {i: solutions[i] for i in ids}, bob: {i: solutions[i] for i in half}}
    expected = {ann: full, bob: sum(points[i] for i in half)}
    assert 0 < expected[bob] < full
    for student in (ann, bob, cat):
        fetch(pages[student], hub, student)
    # Cat, a hostile classmate, makes a folder in Ann's name in inbound (every student may
    # write there): it is refused, charged to nobody, and fails none of Ann's submissions.
    inbound = hub.settings.exchange_dir / hub.settings.course_id / "inbound"
    forged = f"{ann}+{LESSON}+2027-01-01 00:00:00.000000 UTC+forged"
    subprocess.run(["runuser", "-u", cat, "--", "mkdir", str(inbound / forged)], check=True,
                   cwd="/")
    for student in (ann, bob):
        answer_and_save(pages[student], hub, student, answers[student])
        submit(pages[student], 1)
    # At once, beside the submission: received (to the second, in her time), then the result.
    assert re.match(r"Feedback on submit: (received at \d\d:\d\d:\d\d \(your time\), "
                    r"(grading: \d+ ahead of you|being graded now)|graded: )",
                    submission_state(pages[ann])), submission_state(pages[ann])
    for student in (ann, bob):
        image = "hub-feedback-on-submit.png" if student == bob else None
        assert fetch_new_feedback(pages[student], hub, student, image) == expected[student]
    assert gradebook_scores(hub, (ann, bob)) == expected
    # The instructor's autograded copy keeps the hidden checks that the feedback held back.
    autograded = (hub.settings.course_dir / "autograded" / bob / NOTEBOOK).read_text()
    assert "hidden check:" in autograded

    # Ann takes her last answer out and submits again: she sees the new result.
    unanswered = nbformat.read(REPO_ROOT / "notebooks" / NOTEBOOK, as_version=4)
    stub = next(c.source for c in unanswered.cells if grading(c).get("grade_id") == ids[-1])
    answer_and_save(pages[ann], hub, ann, {ids[-1]: stub})
    submit(pages[ann], 2)
    lower = full - points[ids[-1]]
    assert fetch_new_feedback(pages[ann], hub, ann) == lower
    assert gradebook_scores(hub, (ann,)) == {ann: lower}

    # Cat submits three times: two are graded within the hour, the third waits, and her start
    # page says until when.
    for count in range(1, PER_HOUR + 1):
        submit(pages[cat], count)
        wait_until(lambda: graded(hub, cat) == count, f"cat's grade {count}", timeout=600)
        assert status(hub, cat).startswith("graded")
    submit(pages[cat], PER_HOUR + 1)
    wait_until(lambda: status(hub, cat).startswith("waiting"), "cat's wait")
    rows = start_page_rows(pages[cat], reload=(hub, cat))
    pages[cat].locator(".jp-MarkdownViewer:not(.lm-mod-hidden) h2",
                       has_text="Your submissions").scroll_into_view_if_needed()
    screenshot(pages[cat], "on-submit-waiting", doc_image="hub-on-submit-waiting.png")
    text = pages[cat].locator(".jp-MarkdownViewer:not(.lm-mod-hidden)").inner_text()
    promise = f"this one joins the grading queue at {local_time(waiting_until(hub, cat))}"
    assert re.search(rf"{LESSON}\s.*waiting: the class grades at most {PER_HOUR} submissions "
                     rf"of yours an hour; {re.escape(promise)}", text), text
    assert "Feedback on submit: waiting: " in submission_state(pages[cat])
    assert promise in submission_state(pages[cat])
    # Lesson 02 is not fetched: the link to it says where to fetch it, instead of a silent 404.
    pages[cat].goto(f"{hub.url}/user/{cat}/lab/tree/{NOTEBOOK}")
    pages[cat].locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-RenderedMarkdown a",
                       has_text="Lesson 02").first.click()
    note = pages[cat].locator(".coursekit-not-fetched").first
    note.wait_for()
    assert "Lesson 02 is not in your home folder yet: fetch it from the Assignments tab" in \
        note.inner_text()
    # The lesson's row says it too, above the fold: the table is what the page shows first.
    assert "your submission: waiting: the class grades at most" in rows["01"], rows

    # The instructors' report lists every graded submission; nothing failed.
    report = (hub.settings.course_dir / "on-submit.md").read_text()
    assert "Could not be graded" not in report
    assert f"- `{forged}`: `it is named for {ann} but belongs to {cat}`" in report
    assert report.count("| done |") == 3 + PER_HOUR and "| waiting |" in report
    # The class report is current: each student's latest result (Ann's second), each linked
    # to the feedback page they got.
    page = (hub.settings.course_dir / "on-submit" / "report.html").read_text()
    for student, score in ((ann, lower), (bob, expected[bob])):
        assert re.search(rf'<tr><td>{student}</td>.*?<a href="feedback/{student}/{LESSON}.html">'
                         rf"{score:g}/{full:g}</a>", page), f"{student}'s row"
        assert (hub.settings.course_dir / "on-submit" / "feedback" / student /
                f"{LESSON}.html").is_file()
    assert f"<tr><td>{cat}</td>" in page
    assert "feedback-on-submit" in (hub.settings.hub_dir / "jupyterhub.log").read_text()
    hub.stop()
