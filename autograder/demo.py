"""Synthetic classes of submissions, generated from solutions/ and notebooks/.

- correct: the solution notebook;
- blank: the student notebook as released;
- partial: the student notebook with some answer cells taken from the solution;
- broken: what goes wrong in real classes (invalid JSON, another lesson's notebook, deleted or
  edited test cells, an endless loop, a crash, a duplicate, a file named after no lesson);
- mistaken: answers with the mistakes the lessons' checks name (from the course's
  tests/variants/, when it has them), so that the class report counts named mistakes.

`build_demo_class` writes the small class that `make demo` grades; `build_demo_course` the
course root it is graded in (demo/course: a copy of the lessons with a gradebook of its own,
so the course's own gradebook.db never sees the demo's students); `build_class` the mix of
correct, partly right and blank submissions that the benchmark grades.
"""

from __future__ import annotations

from autograder.nbgrader_glue import patches  # noqa: F401 (first: a quicker jsonschema import)

import copy
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import nbformat

from autograder.release import COURSE_ROOT, lessons as course_lessons


def _is_answer(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.cell_type == "code" and bool(meta.get("solution")) and not meta.get("grade")


def _is_test(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


class Lessons:
    """Solution and student notebooks of a course (student ones generated when not released)."""

    def __init__(self, root: Path = COURSE_ROOT, names: list[str] | None = None) -> None:
        self.root = Path(root)
        self.names = names or course_lessons(self.root)
        self.solutions = {n: nbformat.read(self.root / "solutions" / n / f"{n}.ipynb",
                                           as_version=4) for n in self.names}
        self.students = {}
        unreleased = [n for n in self.names
                      if not (self.root / "notebooks" / n / f"{n}.ipynb").is_file()]
        if unreleased:
            from autograder.nbgrader_glue.inproc import release_notebooks
            with tempfile.TemporaryDirectory(prefix="demo-release-") as scratch:
                release_notebooks(self.root, Path(scratch), unreleased)
                for n in unreleased:
                    self.students[n] = nbformat.read(Path(scratch) / n / f"{n}.ipynb",
                                                     as_version=4)
        for n in self.names:
            if n not in self.students:
                self.students[n] = nbformat.read(self.root / "notebooks" / n / f"{n}.ipynb",
                                                 as_version=4)

    def correct(self, lesson: str):
        return copy.deepcopy(self.solutions[lesson])

    def blank(self, lesson: str):
        return copy.deepcopy(self.students[lesson])

    def partial(self, lesson: str, keep: float = 0.5, seed: int = 0):
        """The student notebook with a share `keep` of its answers filled from the solution."""
        nb = self.blank(lesson)
        answers = {cell.metadata.nbgrader.grade_id: cell for cell in self.solutions[lesson].cells
                   if _is_answer(cell)}
        ids = [cell.metadata.nbgrader.grade_id for cell in nb.cells if _is_answer(cell)]
        rng = random.Random(seed)
        count = max(1, round(keep * len(ids))) if ids else 0
        if len(ids) > 1:
            count = min(count, len(ids) - 1)  # partly right: never all of them
        filled = set(rng.sample(ids, count)) if ids else set()
        for cell in nb.cells:
            if _is_answer(cell) and cell.metadata.nbgrader.grade_id in filled:
                cell.source = answers[cell.metadata.nbgrader.grade_id].source
        return nb

    def with_answer(self, lesson: str, source: str, base: str = "blank"):
        """A notebook whose first answer cell is replaced by `source`."""
        nb = self.correct(lesson) if base == "correct" else self.blank(lesson)
        for cell in nb.cells:
            if _is_answer(cell):
                cell.source = source
                break
        return nb

    def with_answers(self, lesson: str, sources: dict[str, str]):
        """The correct notebook with `sources` (answer cell grade id -> code) added at the end
        of those answer cells: what they define replaces the solution's definitions."""
        nb = self.correct(lesson)
        for cell in nb.cells:
            if _is_answer(cell) and cell.metadata.nbgrader.grade_id in sources:
                cell.source = cell.source.rstrip() + "\n\n" + \
                    sources[cell.metadata.nbgrader.grade_id].strip() + "\n"
        return nb

    def without_first_test(self, lesson: str):
        nb = self.correct(lesson)
        for index, cell in enumerate(nb.cells):
            if _is_test(cell):
                del nb.cells[index]
                break
        return nb

    def with_edited_test(self, lesson: str):
        """The correct notebook whose first test cell was emptied (nbgrader restores it)."""
        nb = self.correct(lesson)
        for cell in nb.cells:
            if _is_test(cell):
                cell.source = "# tests removed by the student\npass"
                break
        return nb


def _write(nb, path: Path, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def build_class(dest: Path, root: Path = COURSE_ROOT, students: int = 20,
                names: list[str] | None = None, seed: int = 0) -> dict[str, str]:
    """A class of `students` with correct, partly right and blank notebooks for every lesson
    (in turn: correct, partial, partial, blank); return {student: kind}."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    course = Lessons(root, names)
    kinds = {}
    for number in range(1, students + 1):
        student = f"student{number:03d}"
        kind = ("correct", "partial", "partial", "blank")[(number - 1) % 4]
        kinds[student] = kind
        for index, lesson in enumerate(course.names):
            if kind == "correct":
                nb = course.correct(lesson)
            elif kind == "blank":
                nb = course.blank(lesson)
            else:
                nb = course.partial(lesson, keep=0.5, seed=seed + 1000 * number + index)
            _write(nb, dest / student / f"{lesson}.ipynb")
    return kinds


def named_mistakes(variants: Path | None, lesson: str) -> dict[str, list[str]]:
    """The answers of `variants/<lesson>.py` (the course's tests/variants/) that the checks
    must fail with a named mistake, by exercise: {"01-ex1": [source, ...], ...}."""
    path = Path(variants) / f"{lesson}.py" if variants else None
    if path is None or not path.is_file():
        return {}
    import runpy

    found: dict[str, list[str]] = {}
    for entry in runpy.run_path(str(path)).get("VARIANTS", []):
        if entry.get("expect") == "fail" and entry.get("mistake"):
            found.setdefault(entry["exercise"], []).append(entry["source"])
    return found


def build_demo_class(dest: Path, root: Path = COURSE_ROOT,
                     names: list[str] | None = None, variants: Path | None = None) -> Path:
    """The small class `make demo` grades: correct, partial, blank and broken students, and,
    with `variants` (the course's tests/variants/), two who make the mistakes the checks name:
    "mistaken" the first one of every exercise, "mistaken-2" the same in odd-numbered
    exercises and another in the others (so the report has mistakes made twice and once)."""
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    course = Lessons(root, names)
    lessons = course.names
    for index, lesson in enumerate(lessons):
        # nbgrader's own layout, and names as learning systems and browsers leave them
        _write(course.correct(lesson), dest / "correct" / lesson / f"{lesson}.ipynb")
        _write(course.partial(lesson, seed=index),
               dest / "partial" / f"partial_1234_{lesson} (1).ipynb")
        _write(course.blank(lesson), dest / "blank" / f"{lesson}.ipynb")
        mistakes = named_mistakes(variants, lesson)
        if mistakes:
            first = {f"{ex}-answer": sources[0] for ex, sources in mistakes.items()}
            other = {}
            for ex, sources in mistakes.items():
                even = int(ex.rsplit("ex", 1)[-1]) % 2 == 0
                other[f"{ex}-answer"] = sources[1] if even and len(sources) > 1 else sources[0]
            _write(course.with_answers(lesson, first), dest / "mistaken" / f"{lesson}.ipynb")
            _write(course.with_answers(lesson, other), dest / "mistaken-2" / f"{lesson}.ipynb")
    # Duplicates: an old blank copy and a newer correct one; the newest wins.
    now = time.time()
    _write(course.blank(lessons[0]), dest / "duplicate" / f"{lessons[0]}.ipynb", now - 3600)
    _write(course.correct(lessons[0]), dest / "duplicate" / f"{lessons[0]} (1).ipynb", now)
    # Broken submissions: one lesson each for student "broken" (then "broken-2", ...).
    text = nbformat.writes(course.correct(lessons[0]))
    other = lessons[1] if len(lessons) > 1 else None
    cases = [
        ("invalid JSON", lambda lesson: text[: len(text) // 2]),
        ("another lesson", (lambda lesson: nbformat.writes(course.correct(
            other if lesson != other else lessons[0]))) if other else None),
        ("deleted test cell", lambda lesson: nbformat.writes(course.without_first_test(lesson))),
        ("edited test cell", lambda lesson: nbformat.writes(course.with_edited_test(lesson))),
        ("endless loop", lambda lesson: nbformat.writes(
            course.with_answer(lesson, "while True:\n    pass"))),
        ("crash", lambda lesson: nbformat.writes(
            course.with_answer(lesson, "import os\nos._exit(1)"))),
    ]
    cases = [case for case in cases if case[1] is not None]
    for i, (_, make) in enumerate(cases):
        student = "broken" if i < len(lessons) else f"broken-{i // len(lessons) + 1}"
        lesson = lessons[i % len(lessons)]
        path = dest / student / f"{lesson}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(make(lesson), encoding="utf-8")
    (dest / "broken" / "my homework.ipynb").write_text(
        nbformat.writes(course.blank(lessons[-1])), encoding="utf-8")
    return dest


# Names for the demo's roster; the one who submits nothing shows in the report.
DEMO_NAMES = {"correct": "Ada Lovelace", "partial": "Alan Turing", "blank": "Grace Hopper",
              "duplicate": "Edsger Dijkstra", "broken": "Barbara Liskov",
              "mistaken": "Margaret Hamilton", "mistaken-2": "John McCarthy"}
MORE_NAMES = ["Donald Knuth", "John Backus", "Frances Allen", "Tony Hoare", "Niklaus Wirth",
              "Radia Perlman", "Ken Thompson"]
NO_SHOW = ("no-show", "Katherine Johnson")


def build_demo_course(dest: Path, root: Path = COURSE_ROOT,
                      names: list[str] | None = None) -> Path:
    """A course root for the demo at `dest`: the course's nbgrader_config.py and the lessons'
    solutions/, notebooks/ and scenarios/, copied; its own gradebook.db, course secret,
    submitted/, autograded/ and feedback/ start empty (an earlier demo's are removed)."""
    dest, root = Path(dest).resolve(), Path(root).resolve()
    if dest == root or dest in root.parents:
        raise ValueError(f"the demo's course folder {dest} must not be the course root or "
                         "contain it")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    shutil.copy2(root / "nbgrader_config.py", dest / "nbgrader_config.py")
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__")
    for lesson in names or course_lessons(root):
        for folder in ("solutions", "notebooks"):
            if (root / folder / lesson).is_dir():
                shutil.copytree(root / folder / lesson, dest / folder / lesson, ignore=ignore)
        scenarios = root / "scenarios" / f"{lesson}.py"  # the checks the grader scores with
        if scenarios.is_file():
            (dest / "scenarios").mkdir(exist_ok=True)
            shutil.copy2(scenarios, dest / "scenarios" / scenarios.name)
    return dest


def write_demo_roster(path: Path, students: list[str]) -> Path:
    """A roster (id, name, email) for the demo's `students`, and one who submitted nothing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    others = iter(MORE_NAMES * (len(students) // len(MORE_NAMES) + 1))
    people = [(student, DEMO_NAMES.get(student) or next(others)) for student in students]
    lines = ["id,name,email"]
    lines += [f"{student},{name},{student}@example.org" for student, name in [*people, NO_SHOW]]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
