"""Generate the student notebooks in notebooks/ from the instructor notebooks in solutions/.

nbgrader's generate_assignment makes each student notebook; `finish_lesson` then gives it what
a student needs to find their way, the same way for every lesson:
- a navigation cell at the top (start page, previous and next lesson, how to run the notebook
  and start afresh) and one at the bottom (next lesson);
- the `raises-exception` tag on every test cell (and on an answer cell whose stub runs at top
  level), so that JupyterLab's Run All goes on past an unanswered exercise. nbgrader executes
  with errors allowed anyway: a failing test cell keeps its error output and scores 0;
- the points of each exercise in its heading ("### Exercise 2 — ... (3 points)"), from its test
  cell, unless the heading already names them.
Nothing in a graded or answer cell's source changes, so nbgrader's checksums stay valid.

`CourseRelease` does the same inside nbgrader, as the last step of its generate_assignment: the
class hub's formgrader adds it, so that its Generate button makes exactly these notebooks.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from coursekit.course import COURSE_ROOT, START_PAGE, heading_title, lessons_in
from coursekit.lab import course_intro
from coursekit.notebook import parse_cell_id

RUN_ON = "raises-exception"
NAV_TAG = "course-navigation"
_HEADING = re.compile(r"^(#{2,4})\s*Exercise\s+(\d+)\b(.*)$", re.M)
_TOP_LEVEL_STUB = re.compile(r"^raise NotImplementedError\(\)", re.M)

# Where a student's release folder points them: their own copies, opened by `make lab`.
RELEASE_START_PAGE = """# PyTorch autograd and hooks

These are the released lessons, the course's reference copies. Do not work in them: in the
course folder, run

    make lab

which copies each lesson into `work/` (your own copies, ignored by git) and opens the start page
with the lessons in order and your progress in each.
"""

# A lesson's time, at the end of its row in the README's lesson table: "(55 + 10 min)", core +
# Going further, on a CPU. That table is the one place the times are kept.
_README_TIME = re.compile(r"\((\d+)\s*\+\s*(\d+)\s*min\)\s*$")


def release_start_page(root: Path = COURSE_ROOT) -> str:
    """The release folder's START-HERE.md: where to work (`make lab`), and the lessons in order
    with each one's time, from the README's lesson table."""
    order, titles = lesson_titles(root / "solutions")
    _, teaches = course_intro(root)
    rows = []
    for name in order:
        number, title = titles[name]
        time = _README_TIME.search(teaches.get(name, ""))
        if not time:
            raise ReleaseError(f"README.md's lesson table gives no time for {name}: end its row "
                               "with (<core> + <Going further> min)")
        core, further = int(time[1]), int(time[2])
        rows.append(f"| {number} | [{title}]({name}/{name}.ipynb) | {core} min | {further} min "
                    f"| {core + further} min | CPU only |")
    return "\n".join([
        RELEASE_START_PAGE,
        "## The lessons and their times",
        "",
        "Each lesson has a core (its sections and exercises) and a \"Going further\" part after "
        "its summary.",
        "None needs a GPU.",
        "",
        "| lesson | title | core | Going further | total | hardware |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ])


class ReleaseError(Exception):
    """A solution notebook that the release cannot turn into a student notebook."""


def lessons(root: Path = COURSE_ROOT) -> list[str]:
    """Names of the lessons: the folders of solutions/ that hold a notebook of the same name."""
    return lessons_in(root / "solutions")


def lesson_titles(source: Path) -> tuple[list[str], dict[str, tuple[str, str]]]:
    """The lessons of the instructor notebooks' folder `source`, in order, and each one's
    (number, title)."""
    order = lessons_in(source)
    titles = {lesson: lesson_title(json.loads(
        (source / lesson / f"{lesson}.ipynb").read_text(encoding="utf-8")), lesson)
        for lesson in order}
    return order, titles


def nbgrader_command(*args: str) -> list[str]:
    """The nbgrader command line from this Python environment."""
    return [sys.executable, "-m", "nbgrader", *args]


def nbgrader_env() -> dict[str, str]:
    """The environment for nbgrader: this Python's bin first on PATH (nbgrader runs alembic)."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


# `nbgrader generate_assignment LESSON OPTIONS...` for each lesson, in one process (arguments:
# the number of lessons, the lessons, the options): a fresh app each time, as nbgrader's own
# command makes one; it stops at the first lesson that fails, with nbgrader's exit status.
_GENERATE_EACH = """
import sys
from nbgrader.apps.generateassignmentapp import GenerateAssignmentApp
count = int(sys.argv[1])
for name in sys.argv[2:2 + count]:
    app = GenerateAssignmentApp()
    app.initialize([name, *sys.argv[2 + count:]])
    app.start()
    GenerateAssignmentApp.clear_instance()
"""


def release(release_dir: Path | None = None, names: list[str] | None = None,
            root: Path = COURSE_ROOT) -> Path:
    """Run nbgrader generate_assignment for each lesson into `release_dir` (notebooks/ by default)."""
    release_dir = Path(release_dir) if release_dir else root / "notebooks"
    with tempfile.TemporaryDirectory(prefix="release-") as scratch:
        # A scratch gradebook (releasing does not touch the instructors' gradebook.db) and a
        # scratch release folder: a lesson's folder in `release_dir` is replaced only once
        # nbgrader has made its new one (and nbgrader has nothing of its own to remove).
        fresh = Path(scratch) / "release"
        chosen = names or lessons(root)
        # One nbgrader process for all the lessons: starting nbgrader costs about 2.5 s of CPU,
        # three quarters of a lesson's generate_assignment (8 lessons: 6 s of CPU, not 25 s).
        subprocess.run(
            [sys.executable, "-c", _GENERATE_EACH, str(len(chosen)), *chosen, "--log-level=WARN",
             f"--CourseDirectory.root={root}",
             f"--CourseDirectory.release_directory={fresh}",
             f"--CourseDirectory.db_url=sqlite:///{scratch}/gradebook.db"],
            cwd=root, env=nbgrader_env(), check=True,
        )
        release_dir.mkdir(parents=True, exist_ok=True)
        for name in chosen:
            shutil.rmtree(release_dir / name, ignore_errors=True)
            shutil.move(fresh / name, release_dir / name)
    for leftover in release_dir.glob("*/.ipynb_checkpoints"):
        shutil.rmtree(leftover)
    order, titles = lesson_titles(root / "solutions")
    for name in names or order:
        finish_lesson(release_dir / name / f"{name}.ipynb", name, order, titles)
    (release_dir / START_PAGE).write_text(release_start_page(root), encoding="utf-8")
    return release_dir


# --- after nbgrader: what every student notebook gets ---------------------------------------

def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _nbgrader(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def lesson_title(notebook: dict, name: str) -> tuple[str, str]:
    """(number, title) from the lesson's "# Lesson 01 — Title" heading."""
    found = heading_title(notebook)
    if found is not None:
        return found
    raise ReleaseError(f"{name}: no heading '# Lesson NN — Title' in a markdown cell; the "
                       "navigation between lessons needs it.")


def _link(name: str) -> str:
    return f"../{name}/{name}.ipynb"


def navigation_cells(name: str, order: list[str], titles: dict[str, tuple[str, str]]
                     ) -> tuple[dict, dict]:
    """The markdown cells for the top and the bottom of lesson `name`."""
    index = order.index(name)
    previous = order[index - 1] if index > 0 else None
    following = order[index + 1] if index + 1 < len(order) else None

    def label(lesson: str) -> str:
        number, title = titles[lesson]
        return f"Lesson {number}: {title}"

    top = [f"[⌂ Start page](../{START_PAGE})"]
    if previous:
        top.append(f"[← {label(previous)}]({_link(previous)})")
    if following:
        top.append(f"[{label(following)} →]({_link(following)})")
    top_text = (" &nbsp;·&nbsp; ".join(top) + "\n\n"
                "> **How to run this notebook.** Run the cells in order from the top: "
                "**Shift+Enter** runs one, **Run ▸ Run All Cells** runs them all (an exercise "
                "you have not answered yet says so, and the run goes on). Write each answer "
                "where it says `# YOUR CODE HERE`, run that cell, then the test cell under it. "
                "If results stop making sense, start afresh with **Kernel ▸ Restart Kernel "
                "and Run All Cells**. **Validate** (in the toolbar) runs the whole notebook in a "
                "fresh kernel and sums up which exercises pass.")
    if following:
        bottom_text = (f"---\n\n**Next:** [{label(following)} →]({_link(following)})"
                       f" &nbsp;·&nbsp; [⌂ Start page](../{START_PAGE})")
    else:
        bottom_text = (f"---\n\nThis is the last lesson of the course. "
                       f"[⌂ Back to the start page](../{START_PAGE})")
    if previous:
        bottom_text += f" &nbsp;·&nbsp; [← {label(previous)}]({_link(previous)})"

    def cell(cell_id: str, text: str) -> dict:
        return {"cell_type": "markdown", "id": cell_id,
                "metadata": {"editable": False, "deletable": False, "tags": [NAV_TAG]},
                "source": text}

    return cell("course-navigation-top", top_text), cell("course-navigation-bottom", bottom_text)


def _add_tag(cell: dict, tag: str) -> None:
    tags = cell.setdefault("metadata", {}).setdefault("tags", [])
    if tag not in tags:
        tags.append(tag)


def _points_text(points: float) -> str:
    return f"{points:g} point" + ("" if points == 1 else "s")


def _heading_with_points(cells: list, answer_index: int, number: int, points: float,
                         where: str) -> None:
    """Add "(N points)" to the "### Exercise N" heading above the answer cell at
    `answer_index`, searching back to the previous exercise's cells."""
    for index in range(answer_index - 1, -1, -1):
        cell = cells[index]
        if cell["cell_type"] == "code" and _nbgrader(cell):
            break
        if cell["cell_type"] != "markdown":
            continue
        source = _source(cell)
        headings = list(_HEADING.finditer(source))
        if not headings:
            continue
        heading = headings[-1]
        if int(heading[2]) != number:
            raise ReleaseError(f"{where}: the heading above it says 'Exercise {heading[2]}', its "
                               f"grade id says exercise {number}; make them agree.")
        if "point" in heading[3].lower():
            return
        line = heading[0].rstrip()
        cell["source"] = (source[:heading.start()] + f"{line} ({_points_text(points)})"
                          + source[heading.start() + len(heading[0]):])
        return
    raise ReleaseError(f"{where}: no markdown heading '### Exercise {number} — ...' above the "
                       "answer cell.")


def finish_lesson(path: Path, name: str, order: list[str],
                  titles: dict[str, tuple[str, str]]) -> None:
    """Post-process the student notebook at `path` (see the module's docstring)."""
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    finish_notebook(notebook, name, order, titles)
    nbformat.write(notebook, path)


def finish_notebook(notebook, name: str, order: list[str],
                    titles: dict[str, tuple[str, str]]) -> None:
    """Give the student notebook `notebook` of lesson `name` (an nbformat node, changed in
    place) navigation, points in its headings and the Run All tags."""
    import nbformat

    cells = [c for c in notebook.cells if NAV_TAG not in c.get("metadata", {}).get("tags", [])]
    answers: dict[str, int] = {}
    for index, cell in enumerate(cells):
        meta = _nbgrader(cell)
        if cell.cell_type != "code" or not meta:
            continue
        grade_id = meta.get("grade_id", "")
        if meta.get("solution"):
            answers[grade_id] = index
            if _TOP_LEVEL_STUB.search(cell.source):
                _add_tag(cell, RUN_ON)
        if meta.get("grade"):
            _add_tag(cell, RUN_ON)
            cell_id = parse_cell_id(grade_id)
            is_test = cell_id is not None and cell_id.role == "test"
            answer_id = f"{cell_id.exercise}-answer" if is_test else None
            if answer_id in answers:
                _heading_with_points(cells, answers[answer_id], cell_id.number,
                                     float(meta.get("points", 0)), f"{name}: {answer_id}")
    top, bottom = navigation_cells(name, order, titles)
    notebook.cells = [nbformat.from_dict(top), *cells, nbformat.from_dict(bottom)]


@functools.cache
def _course_release_class():
    """nbgrader's preprocessor `CourseRelease`, made on first use (the grader imports this
    module and need not import nbgrader's preprocessors for it)."""
    from nbgrader.preprocessors import NbGraderPreprocessor

    class CourseRelease(NbGraderPreprocessor):
        """The last step of nbgrader's generate_assignment: what `make release` adds to each
        lesson (finish_notebook), with the lessons of the course's source folder."""

        def preprocess(self, nb, resources):
            converter = self.parent
            while converter is not None and not hasattr(converter, "coursedir"):
                converter = converter.parent
            if converter is None:
                raise ReleaseError("CourseRelease runs inside nbgrader's generate_assignment only")
            course = converter.coursedir
            source = Path(course.root) / course.source_directory
            order, titles = lesson_titles(source)
            name = resources["nbgrader"]["assignment"]
            if name not in order:
                raise ReleaseError(f"{name}: not a lesson of {source} (a folder holding "
                                   f"{name}.ipynb)")
            finish_notebook(nb, name, order, titles)
            return nb, resources

    return CourseRelease


def __getattr__(name: str):
    if name == "CourseRelease":
        return _course_release_class()
    raise AttributeError(name)
