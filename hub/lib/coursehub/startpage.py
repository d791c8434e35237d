"""A hub student's start page, START-HERE.md in their home folder: the course, its lessons in
order with what each released one teaches, which are released, where Fetch puts them, and the
student's progress in each fetched lesson. A lesson not yet released is a numbered row that
says so: its title, name and what it teaches come only with its release (the exchange's
outbound), never from the course's repository, which students do not see.

The student's server writes it when it starts and whenever it is opened (StartPageContents,
its contents manager), so it always shows what the exchange and the saved lessons hold now.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

from coursekit.course import START_PAGE, lessons_in
from coursekit.lab import course_intro, lesson_title
from coursekit.progress import exercise_results, progress_line

ASSIGNMENTS = "**Nbgrader ▸ Assignment List**"


def _notebook(path: Path) -> dict | None:
    try:
        with open(path, encoding="utf-8") as handle:
            notebook = json.load(handle)
    except (OSError, ValueError):
        return None
    return notebook if isinstance(notebook, dict) else None


def _lessons_in(folder: Path) -> list[str]:
    try:
        return lessons_in(folder)
    except OSError:
        return []


def _progress(notebook: dict | None) -> str:
    if notebook is None:
        return "cannot be read: is it a notebook?"
    results = exercise_results(notebook)
    return progress_line(results) if results else "fetched"


def _submissions(status_file: Path | None) -> list[str]:
    """The start page's lines on feedback on submit, from the service's file for the student."""
    if status_file is None:
        return []
    rows = submissions_status(status_file)
    lines = ["## Your submissions", "",
             "Each lesson you submit is graded within minutes and its feedback released to you: "
             f"click **Fetch Feedback** beside it in {ASSIGNMENTS}, which shows its state too. "
             "Times are in your own time zone.", ""]
    if not rows:
        return lines + ["Nothing submitted yet.", ""]
    lines += ["| Lesson | Submitted | State |", "|---|---|---|"]
    for row in rows:
        cells = [str(row.get(k, "")).replace("|", "/") for k in ("lesson", "submitted",
                                                                  "status")]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def start_page(home: Path, outbound: Path, repository: Path,
               status_file: Path | None = None) -> str:
    """The start page in Markdown for the student whose home folder is `home`, with the lessons
    released in the exchange's `outbound` folder, the course's README in `repository` and,
    with feedback on submit, their submissions' state from `status_file`."""
    intro, teaches = course_intro(repository)
    released = set(_lessons_in(outbound))
    # With feedback on submit, each lesson's row says where its newest submission is too: the
    # table is what the page shows first (its own section comes below the fold).
    states = {str(row.get("lesson", "")): str(row.get("status", "")).replace("|", "/")
              for row in submissions_status(status_file)}
    rows = []
    for name in sorted(released | set(teaches)):
        copy = home / name / f"{name}.ipynb"
        notebook = _notebook(copy) if copy.is_file() else None
        if copy.is_file() or name in released:
            # A lesson's title comes from the student's copy or from its release, never from
            # the course's repository.
            source = notebook or _notebook(outbound / name / f"{name}.ipynb")
            number, title = lesson_title(source or {}, name)
            if copy.is_file():
                lesson, progress = f"[{title}]({name}/{name}.ipynb)", _progress(notebook)
            else:
                lesson, progress = title, "released: **Fetch** it"
            if states.get(name):
                progress += f"; your submission: {states[name]}"
            rows.append(f"| {number} | {lesson} | {teaches.get(name, '')} | {progress} |")
        else:
            # Not released: only its place in the course. Neither its title, its folder's name
            # nor what it teaches is shown before the instructor releases it.
            rows.append(f"| {name[:2]} | — | | not released yet |")
    parts = ["# PyTorch autograd and hooks: start here", ""]
    if intro:
        parts += [intro, ""]
    parts += ["## Lessons", "",
              "Take them in order; each builds on the ones before. Your instructor releases "
              f"them. To get a released lesson, open {ASSIGNMENTS} (in the menu bar) and click "
              "**Fetch** beside it: it is copied into your home folder as "
              "`<lesson>/<lesson>.ipynb`, and its name below becomes a link to it.", ""]
    if rows:
        parts += ["| | Lesson | You will be able to | Your progress |", "|---|---|---|---|",
                  *rows, ""]
    else:
        parts += ["No lesson is released yet.", ""]
    parts += _submissions(status_file)
    parts += ["Progress counts the exercises whose test cell passed in your saved notebook; "
              "this page shows it each time you open it or save a lesson (**Ctrl+S**).", "",
              "## How to work", "",
              "1. Open a lesson and run its cells in order from the top: **Shift+Enter** runs "
              "one cell, **Run ▸ Run All Cells** runs them all.",
              "2. Each exercise has an answer cell that says `# YOUR CODE HERE`. Put your code "
              "there, run the cell, then run the test cell under it: it says what passed, or "
              "what was expected, what your code gave and the likely mistake.",
              "3. Stuck? Click **Hint 1** above the answer cell (then Hint 2...).",
              "4. If results stop making sense, start afresh with **Kernel ▸ Restart Kernel and "
              "Run All Cells**.",
              "5. **Validate** in the notebook's toolbar runs the whole lesson in a fresh kernel "
              "and sums up which exercises pass, and the points.",
              f"6. To hand a lesson in, save it and click **Submit** beside it in {ASSIGNMENTS}. "
              "You may submit as often as you like; the last submission counts. Once it is "
              "graded, **Fetch Feedback** there, then **view feedback** opens the folder of "
              "your feedback page.", ""]
    return "\n".join(parts)


def write_start_page(home: Path, outbound: Path, repository: Path,
                     status_file: Path | None = None) -> Path:
    """Write `home`/START-HERE.md (only when it changed); returns its path."""
    page = home / START_PAGE
    text = start_page(home, outbound, repository, status_file)
    try:
        if page.read_text(encoding="utf-8") == text:
            return page
    except OSError:
        pass
    temporary = page.with_name(f".{START_PAGE}.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(page)
    return page


def write_from_environment(home: Path) -> Path:
    """write_start_page with the exchange and repository the hub names in the environment
    (COURSE_EXCHANGE, COURSE_ID, COURSE_REPOSITORY, and COURSE_SUBMIT_STATUS with feedback on
    submit)."""
    outbound = Path(os.environ["COURSE_EXCHANGE"]) / os.environ["COURSE_ID"] / "outbound"
    status = os.environ.get("COURSE_SUBMIT_STATUS")
    return write_start_page(home, outbound, Path(os.environ["COURSE_REPOSITORY"]),
                            Path(status) if status else None)


MAX_STATUS_BYTES = 1 << 20  # the service's file for one student


def submissions_status(path: Path | None) -> list[dict]:
    """The rows of the service's file for the student (coursehub.submitqueue.student_status),
    or [] when there is none or it cannot be read."""
    if path is None:
        return []
    try:
        with open(path, "rb") as handle:
            rows = json.loads(handle.read(MAX_STATUS_BYTES + 1)[:MAX_STATUS_BYTES])
    except (OSError, ValueError):
        return []
    return [row for row in rows if isinstance(row, dict)] if isinstance(rows, list) else []


def _jupyter_server_extension_points():
    return [{"module": "coursehub.startpage"}]


def _load_jupyter_server_extension(server_app) -> None:
    """GET <base_url>coursekit/submissions: the student's submissions' state, which the
    coursekit-start-page Lab extension shows beside each submission in the Assignments tab."""
    from jupyter_server.base.handlers import APIHandler
    from jupyter_server.utils import url_path_join
    from tornado import web

    class Submissions(APIHandler):
        @web.authenticated
        def get(self):
            status = os.environ.get("COURSE_SUBMIT_STATUS")
            self.set_header("Cache-Control", "no-store")
            self.finish(json.dumps(submissions_status(Path(status) if status else None)))

    route = url_path_join(server_app.web_app.settings["base_url"], "coursekit", "submissions")
    server_app.web_app.add_handlers(".*$", [(route, Submissions)])


class StartPageContents(AsyncLargeFileManager):
    """Jupyter's contents manager, which writes the start page afresh before it is read."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        if content and path.strip("/") == START_PAGE:
            try:
                write_from_environment(Path(self.root_dir))
            except Exception as err:  # noqa: BLE001 (the page as it was is still worth showing)
                self.log.warning("coursehub: the start page was not updated: %s", err)
        return await super().get(path, content=content, type=type, format=format, **kwargs)
