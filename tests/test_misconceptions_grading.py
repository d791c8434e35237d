"""The misconception suite through the grading command (the tests are the grader's specification).

Every variant of tests/variants/<lesson>.py (a typical wrong answer, or a valid alternative)
is graded by `python -m autograder grade` with the sandbox on, as CI grades: a wrong answer
must score 0 on its exercise's test cell, with the feedback under that cell naming its mistake;
a valid alternative must keep full marks. tests/test_scenarios.py checks the same variants in
this process; this module checks that the grader itself, across the sandbox, agrees.

To keep the grading short, a notebook holds one variant of each exercise of its lesson (round
r: the r-th variant of every exercise, the reference answer where an exercise has no more), so
a lesson needs as many notebooks as its exercise with the most variants, and one grading
command grades every lesson's notebooks at once. Two answers in one notebook share its global
names: `plan_rounds` keeps apart the variants that could change each other's behaviour (one
binds a name that the other, or the other exercise's reference or scenarios, reads), and does
not judge an exercise in a notebook where another exercise's variant replaces a name it reads.
Every exercise of every notebook is judged (reference answers included), so an interaction
that the plan did not foresee shows as a failure.
"""

from __future__ import annotations

import ast
import builtins
import csv
import html
import importlib.util
import os
import re
import shutil
import subprocess
import symtable
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import nbformat
import pytest

from autograder.release import COURSE_ROOT, lessons

import scenario_support as support

LESSONS = lessons(COURSE_ROOT)
VARIANTS_DIR = COURSE_ROOT / "tests" / "variants"
MIN_WRONG = 10  # wrong answers with a named mistake or relation, per exercise
MIN_VALID = 3  # valid alternatives, per exercise
# A fixed course secret: the hidden scenarios' inputs are drawn from it (per student), so a
# run of this module grades the same inputs every time.
SECRET = "6d69736365707469" * 8


# --------------------------------------------------------------------------------------------
# The course's exercises and variants

def _answer_cells(nb) -> dict[str, str]:
    """exercise -> the source of its answer cell, in notebook order."""
    cells = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution") and not meta.get("grade"):
            cells[meta["grade_id"].rsplit("-answer", 1)[0]] = cell.source
    return cells


@lru_cache(maxsize=None)
def references(lesson: str) -> dict[str, str]:
    nb = nbformat.read(COURSE_ROOT / "solutions" / lesson / f"{lesson}.ipynb", as_version=4)
    return _answer_cells(nb)


@lru_cache(maxsize=None)
def variants(lesson: str) -> tuple[dict, ...]:
    path = VARIANTS_DIR / f"{lesson}.py"
    if not path.exists():
        return ()
    spec = importlib.util.spec_from_file_location(f"grading_variants_{lesson}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return tuple(module.VARIANTS)


@lru_cache(maxsize=None)
def scenario_uses(lesson: str) -> dict[str, frozenset[str]]:
    """exercise -> the notebook names its scenarios read (their `uses`)."""
    import scenario_support
    from coursekit.scenarios import collect

    if not scenario_support.scenario_path(lesson).exists():
        return {}
    scenarios, _ = collect(scenario_support.scenario_module(lesson))
    uses: dict[str, set[str]] = {}
    for s in scenarios:
        uses.setdefault(s.exercise, set()).update(s.uses)
    return {exercise: frozenset(names) for exercise, names in uses.items()}


# --------------------------------------------------------------------------------------------
# Which answers can share a notebook

def bound_names(source: str) -> frozenset[str]:
    """Global names an answer cell binds (defs, classes, assignments), imports left out: an
    import binds a module under its usual name, which every cell of the lesson agrees on."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return frozenset()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, (ast.Store, ast.Del)):
                names.add(inner.id)
            elif isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(inner.name)
    return frozenset(names)


def read_names(source: str) -> frozenset[str]:
    """Global names an answer cell reads, at its top level or from inside its functions."""
    try:
        table = symtable.symtable(source, "<answer>", "exec")
    except SyntaxError:
        return frozenset()
    names = set()

    def walk(table) -> None:
        module = table.get_type() == "module"
        for symbol in table.get_symbols():
            if symbol.is_referenced() and (module or symbol.is_global()):
                names.add(symbol.get_name())
        for child in table.get_children():
            walk(child)

    walk(table)
    return frozenset(n for n in names if not hasattr(builtins, n))


@dataclass
class Answer:
    """What fills one exercise's answer cell in a notebook: a variant, or the reference."""

    exercise: str
    source: str
    variant: dict | None = None
    bound: frozenset[str] = frozenset()
    reads: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return self.variant["name"] if self.variant else "reference"


@dataclass
class Round:
    """One notebook of a lesson: an answer per exercise, and the exercises not judged in it."""

    answers: dict[str, Answer] = field(default_factory=dict)
    unjudged: set[str] = field(default_factory=set)


def _answer(exercise: str, source: str, variant: dict | None, uses: frozenset[str]) -> Answer:
    return Answer(exercise, source, variant, bound_names(source), read_names(source) | uses)


def plan_rounds(order: list[str], reference: dict[str, str], listed: list[dict],
                uses: dict[str, frozenset[str]] | None = None) -> list[Round]:
    """Place the variants `listed` into as few notebooks as can hold them (first fit, in the
    order listed). `order`: the exercises in notebook order; `reference`: their reference
    answers; `uses`: the names each exercise's scenarios read.

    A variant v of exercise A and a variant w of exercise B share no notebook when either
    binds a global name the other reads, or reads a name the other exercise's reference binds
    (it relies on that reference). Where v binds a name that B's reference binds or that B's
    reference or scenarios read, B is not judged in v's notebook (its reference is graded
    there, but its score is v's doing) and no variant of B goes there; `collisions` reports
    the first kind, which also puts v's own verdict at the mercy of the cell order."""
    uses = uses or {}
    empty: frozenset[str] = frozenset()
    refs = {e: _answer(e, reference[e], None, uses.get(e, empty)) for e in order}
    unknown = sorted({v["exercise"] for v in listed} - set(order))
    if unknown:
        raise ValueError(f"variants name exercises the lesson does not have: {unknown}")

    def breaks(v: Answer, exercise: str) -> bool:
        return exercise != v.exercise and bool(v.bound & (refs[exercise].reads
                                                          | refs[exercise].bound))

    def clash(v: Answer, w: Answer) -> bool:
        return bool(v.bound & w.reads or w.bound & v.reads
                    or v.reads & refs[w.exercise].bound or w.reads & refs[v.exercise].bound)

    rounds: list[Round] = []
    for variant in listed:
        v = _answer(variant["exercise"], variant["source"], variant,
                    uses.get(variant["exercise"], empty))
        for candidate in rounds:
            if v.exercise in candidate.answers or v.exercise in candidate.unjudged:
                continue
            others = list(candidate.answers.values())
            if any(clash(v, w) or breaks(v, w.exercise) or breaks(w, v.exercise)
                   for w in others):
                continue
            chosen = candidate
            break
        else:
            chosen = Round()
            rounds.append(chosen)
        chosen.answers[v.exercise] = v
        chosen.unjudged |= {e for e in order if breaks(v, e)}
    for each in rounds:
        for exercise in order:
            each.answers.setdefault(exercise, refs[exercise])
        each.answers = {e: each.answers[e] for e in order}
    return rounds


def collisions(reference: dict[str, str], listed: list[dict]) -> list[str]:
    """Variants that bind a global name that another exercise's reference answer binds: in a
    notebook, whichever cell runs later replaces the other's definition."""
    bound = {e: bound_names(source) for e, source in reference.items()}
    found = []
    for v in listed:
        for exercise, names in bound.items():
            shared = bound_names(v["source"]) & names if exercise != v["exercise"] else set()
            if shared:
                found.append(f"{v['exercise']} {v['name']} defines {', '.join(sorted(shared))}, "
                             f"which the answer to {exercise} defines: rename it")
    return found


@lru_cache(maxsize=None)
def lesson_rounds(lesson: str) -> list[Round]:
    reference = references(lesson)
    return plan_rounds(list(reference), reference, list(variants(lesson)),
                       scenario_uses(lesson))


# --------------------------------------------------------------------------------------------
# Fast checks of the suite itself and of the plan

@pytest.mark.parametrize("lesson", LESSONS)
def test_every_exercise_has_enough_variants(lesson):
    listed = variants(lesson)
    problems = []
    for exercise in references(lesson):
        mine = [v for v in listed if v["exercise"] == exercise]
        named = [v for v in mine if v["expect"] == "fail"
                 and (v.get("mistake") or v.get("relation"))]
        valid = [v for v in mine if v["expect"] == "pass"]
        if len(named) < MIN_WRONG:
            problems.append(f"{exercise} has {len(named)} wrong answers with a named mistake "
                            "or relation "
                            f"in tests/variants/{lesson}.py; it needs at least {MIN_WRONG}")
        if len(valid) < MIN_VALID:
            problems.append(f"{exercise} has {len(valid)} valid alternatives in "
                            f"tests/variants/{lesson}.py; it needs at least {MIN_VALID}")
    for v in listed:
        if v["expect"] not in ("pass", "fail"):
            problems.append(f"{v['exercise']} {v['name']}: expect is {v['expect']!r}, "
                            "not 'pass' or 'fail'")
    names = [(v["exercise"], v["name"]) for v in listed]
    problems += [f"{e} has two variants named {n!r}" for e, n in sorted(set(names))
                 if names.count((e, n)) > 1]
    assert not problems, "\n".join(problems)


def _v(exercise: str, name: str, source: str, expect: str = "fail") -> dict:
    return dict(exercise=exercise, name=name, expect=expect, mistake=None, source=source)


def test_plan_packs_one_variant_of_each_exercise_per_notebook():
    reference = {"e1": "def f(x):\n    return x\n", "e2": "def g(x):\n    return -x\n"}
    listed = [_v("e1", "a", "def f(x):\n    return 2 * x\n"),
              _v("e1", "b", "def f(x):\n    return 3 * x\n"),
              _v("e2", "c", "def g(x):\n    return x\n")]
    rounds = plan_rounds(["e1", "e2"], reference, listed)
    assert [[a.name for a in r.answers.values()] for r in rounds] == [["a", "c"],
                                                                      ["b", "reference"]]
    assert all(not r.unjudged for r in rounds)


def test_plan_keeps_a_dependent_exercise_apart_from_wrong_answers_it_uses():
    # e2's reference calls e1's function: a wrong f changes g, so e2 is not judged where a
    # variant of e1 sits, and e2's variants go where e1 holds its reference.
    reference = {"e1": "def f(x):\n    return x\n", "e2": "def g(x):\n    return f(x) + 1\n"}
    listed = [_v("e1", "a", "def f(x):\n    return 2 * x\n"),
              _v("e2", "c", "def g(x):\n    return f(x)\n")]
    rounds = plan_rounds(["e1", "e2"], reference, listed, {"e2": frozenset({"g"})})
    assert len(rounds) == 2
    first, second = rounds
    assert first.answers["e1"].name == "a" and first.unjudged == {"e2"}
    assert second.answers["e1"].name == "reference" and second.answers["e2"].name == "c"
    assert not second.unjudged


def test_plan_keeps_apart_answers_that_share_a_global_helper():
    # Both define a global `hook`: the later cell would replace the earlier one's helper.
    reference = {"e1": "def f(x):\n    return x\n", "e2": "def g(x):\n    return x\n"}
    listed = [_v("e1", "a", "def hook(x):\n    return x\ndef f(x):\n    return hook(x)\n"),
              _v("e2", "c", "def hook(x):\n    return -x\ndef g(x):\n    return hook(x)\n"),
              _v("e2", "d", "def g(x):\n    return 2 * x\n")]
    rounds = plan_rounds(["e1", "e2"], reference, listed)
    assert [[a.name for a in r.answers.values()] for r in rounds] == [["a", "d"],
                                                                      ["reference", "c"]]


def test_plan_reports_a_variant_that_redefines_another_exercise_s_name():
    reference = {"e1": "def f(x):\n    return x\n",
                 "e2": "def helper(x):\n    return x\ndef g(x):\n    return helper(x)\n"}
    listed = [_v("e1", "a", "def helper(x):\n    return 2 * x\n"
                            "def f(x):\n    return helper(x)\n"),
              _v("e2", "c", "def g(x):\n    return x\n")]
    assert collisions(reference, listed) == [
        "e1 a defines helper, which the answer to e2 defines: rename it"]
    rounds = plan_rounds(["e1", "e2"], reference, listed)
    assert rounds[0].unjudged == {"e2"} and rounds[0].answers["e2"].name == "reference"
    assert rounds[1].answers["e2"].name == "c"


@pytest.mark.parametrize("lesson", LESSONS)
def test_no_variant_redefines_another_exercise_s_names(lesson):
    found = collisions(references(lesson), list(variants(lesson)))
    assert not found, "\n".join(found)


def test_plan_of_the_course_places_every_variant_once():
    for lesson in LESSONS:
        rounds = lesson_rounds(lesson)
        placed = [(a.exercise, a.name) for r in rounds for a in r.answers.values() if a.variant]
        assert sorted(placed) == sorted((v["exercise"], v["name"]) for v in variants(lesson))
        most = max((sum(v["exercise"] == e for v in variants(lesson))
                    for e in references(lesson)), default=0)
        assert len(rounds) >= most


# --------------------------------------------------------------------------------------------
# Grading every round of every lesson with one command

@dataclass
class Graded:
    """What the grading command gave one exercise of one notebook."""

    student: str
    lesson: str
    status: str  # the notebook's status in grades.csv
    total: float  # the notebook's score in grades.csv
    score: float | None  # the test cell's points, from the gradebook
    max_score: float
    notebook_score: float | None  # nbgrader.utils.determine_grade on the autograded cell
    cell_text: str  # the autograded test cell's outputs, as text
    feedback_text: str  # the feedback page's outputs under this test cell
    mistakes: list[str]  # "likely mistake" lines of the test cell
    relations: list[str]  # "relation" lines of the test cell


def _student(r: int) -> str:
    return f"round{r + 1:02d}"


def _outputs_text(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        elif output.get("output_type") == "error":
            parts.append(f"{output.get('ename', '')}: {output.get('evalue', '')}")
            parts.extend(output.get("traceback", []))
        else:
            parts.append(str(output.get("data", {}).get("text/plain", "")))
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(parts))


def _page_text(page: str) -> str:
    page = re.sub(r"(?s)<(style|script|head)\b.*?</\1>", "", page)
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def _feedback_outputs(page: str, grade_id: str) -> str:
    """The text of the outputs shown under test cell `grade_id` on an nbgrader feedback page
    (not the cell's source, which quotes the visible checks' own messages)."""
    start = page.find(f'<a name="{grade_id}"></a>')
    if start < 0:
        return ""
    end = page.find('<div class="cell ', start)
    end = len(page) if end < 0 else end
    outputs = page.find('<div class="output_wrapper">', start, end)
    return _page_text(page[outputs:end]) if outputs >= 0 else ""


def grade_rounds(tmp: Path, names: list[str], secret: str = SECRET, jobs: int = 2
                 ) -> dict[tuple[str, str, str], Graded]:
    """Grade every round of the lessons `names` with one `python -m autograder grade` (with
    `jobs` workers) in a copy of the course at `tmp` whose secret is `secret`; return
    (student, lesson, exercise) -> Graded."""
    from autograder.demo import Lessons, _write

    root = tmp / "course"
    root.mkdir()
    for name in ("solutions", "notebooks", "scenarios"):
        if (COURSE_ROOT / name).is_dir():
            shutil.copytree(COURSE_ROOT / name, root / name,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    shutil.copy(COURSE_ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    (root / ".autograder").mkdir(mode=0o700)
    (root / ".autograder" / "secret").write_text(secret)
    course = Lessons(root, names)
    submissions = tmp / "class"
    plans = {lesson: lesson_rounds(lesson) for lesson in course.names if variants(lesson)}
    for lesson, rounds in plans.items():
        for r, each in enumerate(rounds):
            nb = course.blank(lesson)
            for cell in nb.cells:
                meta = cell.get("metadata", {}).get("nbgrader", {})
                if cell.cell_type == "code" and meta.get("solution") and not meta.get("grade"):
                    cell.source = each.answers[meta["grade_id"].rsplit("-answer", 1)[0]].source
            _write(nb, submissions / _student(r) / f"{lesson}.ipynb")
    out = tmp / "out"
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
         "--course-root", str(root), "--jobs", str(jobs), "--lessons", *plans],
        capture_output=True, text=True, env=dict(os.environ, CI="true"), timeout=1200)
    assert done.returncode == 0, done.stdout + done.stderr
    return read_graded(root, out, plans)


def read_graded(root: Path, out: Path, plans: dict[str, list[Round]]
                ) -> dict[tuple[str, str, str], Graded]:
    """What a grading run (course root `root`, output folder `out`) gave each exercise of the
    notebooks of `plans`."""
    from nbgrader.api import Gradebook
    from nbgrader.utils import determine_grade

    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        statuses = {(row["student_id"], row["lesson"]): row for row in csv.DictReader(handle)}

    results = {}
    gradebook = Gradebook(f"sqlite:///{root / 'gradebook.db'}")
    try:
        for lesson, rounds in plans.items():
            for r in range(len(rounds)):
                student = _student(r)
                row = statuses[(student, lesson)]
                nb = nbformat.read(root / "autograded" / student / lesson / f"{lesson}.ipynb",
                                   as_version=4)
                cells = {c.metadata.nbgrader.grade_id: c for c in nb.cells
                         if c.cell_type == "code" and c.get("metadata", {}).get(
                             "nbgrader", {}).get("grade")}
                points = {g.name: (g.score, g.max_score) for g in
                          gradebook.find_submission_notebook(lesson, lesson, student).grades}
                page = (out / "feedback" / student / f"{lesson}.html").read_text(
                    encoding="utf-8")
                for grade_id, cell in cells.items():
                    exercise = grade_id.rsplit("-test", 1)[0]
                    text = _outputs_text(cell)
                    score, max_score = points[grade_id]
                    results[(student, lesson, exercise)] = Graded(
                        student, lesson, row["status"], float(row["score"]), score, max_score,
                        determine_grade(cell)[0], text, _feedback_outputs(page, grade_id),
                        re.findall(r"likely mistake: (.+)", text),
                        re.findall(r"relation: (.+)", text))
    finally:
        gradebook.close()
    return results


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[tuple[str, str, str], Graded]:
    return grade_rounds(tmp_path_factory.mktemp("misconceptions"), LESSONS)


@pytest.mark.slow
def test_grades_csv_adds_up_the_test_cells(graded):
    """grades.csv's score of each notebook is the sum of its test cells' points, which the
    tests below read from the gradebook (and check against the autograded notebook)."""
    totals: dict[tuple[str, str], float] = {}
    for (student, lesson, _), got in graded.items():
        totals[(student, lesson)] = totals.get((student, lesson), 0.0) + (got.score or 0.0)
    for (student, lesson, _), got in graded.items():
        assert got.total == pytest.approx(totals[(student, lesson)]), (student, lesson)
    assert len(totals) == sum(len(lesson_rounds(lesson)) for lesson in LESSONS)


def _cases() -> list[tuple[str, int, str]]:
    return [(lesson, r, exercise) for lesson in LESSONS if variants(lesson)
            for r, each in enumerate(lesson_rounds(lesson)) for exercise in each.answers]


CASES = _cases()


def _case_id(case: tuple[str, int, str]) -> str:
    lesson, r, exercise = case
    return f"{exercise}-{lesson_rounds(lesson)[r].answers[exercise].name}"


def _neighbours(lesson: str, r: int, exercise: str) -> str:
    others = [f"{e}: {a.name}" for e, a in lesson_rounds(lesson)[r].answers.items()
              if e != exercise]
    return f"(notebook {_student(r)}/{lesson}.ipynb, beside {', '.join(others)})"


def cell_said(lesson: str, exercise: str, variant: dict) -> str | None:
    """What the test cell says of the wrong answer `variant` (run in this process), where its
    lesson declares its cell checks (the graded page says at least that)."""
    if support.cell_words_gap(exercise, variant["name"]):
        return None
    namespace = support.variant_namespace(lesson, exercise, variant["source"])
    said = support.cell_message(*support.run_test_cell(lesson, exercise, namespace))
    return support.CELL_QUOTES_VALUES.get((exercise, variant["name"]), said)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_variant_through_the_grading_command(graded, case):
    lesson, r, exercise = case
    plan = lesson_rounds(lesson)[r]
    if exercise in plan.unjudged:
        pytest.skip("another exercise's answer in this notebook replaces a name this one reads")
    answer = plan.answers[exercise]
    got = graded[(_student(r), lesson, exercise)]
    where = _neighbours(lesson, r, exercise)
    assert got.status == "graded", f"the notebook was not graded ({got.status}) {where}"
    assert got.score is not None and got.max_score > 0, f"no points recorded {where}"
    # The gradebook's points are nbgrader's verdict on the autograded cell.
    assert got.notebook_score == got.score, (got.notebook_score, got.score)
    expect = answer.variant["expect"] if answer.variant else "pass"
    if expect == "pass":
        assert got.score == got.max_score, \
            f"{answer.name} lost points on {exercise} {where}:\n{got.cell_text}"
        return
    assert got.score == 0, f"{answer.name} kept {got.score} points on {exercise} {where}:\n" \
                           f"{got.cell_text}"
    phrase = answer.variant.get("mistake")
    if phrase:
        assert any(phrase.lower() in m.lower() for m in got.mistakes), \
            f"expected a mistake naming {phrase!r} {where}, got {got.mistakes}:\n{got.cell_text}"
        assert phrase.lower() in got.feedback_text.lower(), \
            f"the feedback page does not name {phrase!r} under {exercise}-test {where}"
    said = cell_said(lesson, exercise, answer.variant)
    if said:
        assert support.normalised(said) in support.normalised(got.feedback_text), \
            f"the feedback page does not say what the test cell said, {said!r} {where}"
    phrase = answer.variant.get("relation")
    if phrase:
        assert any(phrase.lower() in m.lower() for m in got.relations), \
            f"expected a relation saying {phrase!r} {where}, got {got.relations}:\n" \
            f"{got.cell_text}"
        assert phrase.lower() in got.feedback_text.lower(), \
            f"the feedback page does not say {phrase!r} under {exercise}-test {where}"
