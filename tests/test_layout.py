"""The grader's house rules on its own code: no module in autograder/, coursekit/ or hub/lib/ over
500 lines, no import circle among the modules of autograder/ and coursekit/ (imports in
functions count), imports that run only downward along the grader's stages, and the fences of
the trust boundary and of nbgrader's glue."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("autograder", "coursekit")
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the packages (a package is its __init__)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of the packages that `name` imports, anywhere in its file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from package import module` imports the module; `from module import name`
            # imports the module that holds the name.
            targets.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules
                           else base for alias in node.names)
    return {target for target in targets if target in modules and target != name}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each group of modules that import each other (Tarjan's strongly
    connected components), as a path that starts and ends at the same module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_path_within(graph, group) for group in groups]


def _path_within(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """A shortest circle from the group's first module back to it, inside the group."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & members):
            if target == start:
                return paths[node] + [start]
            if target not in paths:
                paths[target] = paths[node] + [target]
                queue.append(target)
    raise AssertionError(f"no circle through {start}")  # a strongly connected group has one


def test_the_circle_finder_reports_a_real_circle_and_nothing_else():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert _circles(graph) == [["a", "b", "c", "a"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_imports_are_read_in_functions_and_relative_ones_too(tmp_path):
    (tmp_path / "one.py").write_text("def f():\n    from .two import g\n    import pkg.three\n")
    modules = {"pkg.one": tmp_path / "one.py", "pkg.two": tmp_path / "two.py",
               "pkg.three": tmp_path / "three.py"}
    assert _imported("pkg.one", tmp_path / "one.py", modules) == {"pkg.two", "pkg.three"}


# The 500-line rule holds for the grader, the course's own library and the class hub's.
LINE_RULED = ("autograder", "coursekit", "hub/lib")


def _over_500_lines(root: Path, folders: tuple[str, ...]) -> dict[str, int]:
    lengths = {str(path.relative_to(root)): len(path.read_text(encoding="utf-8").splitlines())
               for folder in folders for path in sorted((root / folder).rglob("*.py"))}
    return {name: lines for name, lines in lengths.items() if lines > MAX_LINES}


def test_no_module_of_the_grader_the_course_library_or_the_hub_is_over_500_lines():
    over = _over_500_lines(REPO, LINE_RULED)
    assert not over, "modules over 500 lines (split them by concern): " + ", ".join(
        f"{name} ({lines})" for name, lines in over.items())


def test_a_hub_module_over_500_lines_is_reported(tmp_path):
    (tmp_path / "hub" / "lib" / "coursehub").mkdir(parents=True)
    (tmp_path / "hub" / "lib" / "coursehub" / "long.py").write_text("x = 1\n" * 501)
    (tmp_path / "coursekit").mkdir()
    (tmp_path / "coursekit" / "short.py").write_text("x = 1\n" * 500)
    assert _over_500_lines(tmp_path, LINE_RULED) == {"hub/lib/coursehub/long.py": 501}


def test_no_import_circle_among_the_packages():
    modules = _modules()
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    circles = _circles(graph)
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


# What runs beside student code (the sandbox, the unconfined host that forks it, the wire
# format) may import only each other, coursekit and `autograder.units` (sizes of memory: the
# standard library only); what takes files in runs no student code and judges nothing. The
# folders are the trust boundary only while these hold. (Importing the package `autograder`
# itself, an empty __init__, is allowed everywhere.)
BESIDE_STUDENT_CODE = ("autograder.sandbox", "autograder.runner", "autograder.protocol")
BOUNDARIES = {
    BESIDE_STUDENT_CODE: BESIDE_STUDENT_CODE + ("coursekit", "autograder.units"),
    ("autograder.intake",): ("autograder.intake", "autograder.text", "autograder.nbgrader_glue"),
}


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def _crossings(modules: dict[str, Path]) -> list[str]:
    found = []
    for sides, allowed in BOUNDARIES.items():
        for name, path in modules.items():
            if _within(name, sides):
                found += [f"{name} imports {target}"
                          for target in sorted(_imported(name, path, modules))
                          if target != "autograder" and not _within(target, allowed)]
    return found


def test_each_side_of_the_boundary_imports_only_what_it_may():
    crossings = _crossings(_modules())
    assert not crossings, "imports across the trust boundary: " + "; ".join(crossings)


def test_a_sandbox_module_that_imports_the_judging_side_is_a_crossing(tmp_path):
    (tmp_path / "shell.py").write_text("from autograder.trusted.verdicts import judge\n")
    modules = {"autograder.sandbox.shell": tmp_path / "shell.py",
               "autograder.trusted.verdicts": tmp_path / "verdicts.py"}
    assert _crossings(modules) == [
        "autograder.sandbox.shell imports autograder.trusted.verdicts"]


# nbgrader is touched from nbgrader_glue/ only. What still touches it elsewhere is listed here,
# each with why; a new module that opens the gradebook or imports nbgrader outside the glue
# fails the tests below until it goes through the glue (or is listed, with its reason).
GLUE = "autograder.nbgrader_glue"
GRADEBOOK_OUTSIDE_GLUE = {
    "autograder.course_records": "readies the gradebook for a run (students, stale "
    "submissions) in one session with the copies it makes into submitted/",
    "autograder.dispatch.cluster_checks": "checks a cluster worker's returned record against "
    "the command's gradebook and writes it in the same session",
    "autograder.report.class_report": "the report's per-cell fallback reads grades with "
    "SQLAlchemy queries across assignments, in one session",
    "coursehub.students": "the class hub's service adds its accounts to the gradebook",
}
NBGRADER_OUTSIDE_GLUE = {
    **GRADEBOOK_OUTSIDE_GLUE,
    "autograder.trusted.executor": "ForkedExecute is an nbgrader preprocessor (Execute replaced)",
    "autograder.release": "the release's own steps are nbgrader preprocessors",
    "autograder.feedback.render": "finds nbgrader's feedback template in its package",
    "autograder.feedback.head": "finds nbgrader's feedback template in its package",
    "autograder.intake.validate": "checks a notebook's grading labels with nbgrader's own "
    "metadata validator before nbgrader reads it",
    "coursehub.submitsteps": "runs nbgrader's collect and release_feedback for the hub's "
    "submissions in its own process (exchange_steps)",
}


def _nbgrader_touches(path: Path) -> tuple[bool, bool]:
    """(opens the gradebook, imports nbgrader) for the module at `path`."""
    opens = imports = False
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            imports |= any(a.name.split(".")[0] == "nbgrader" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = {alias.name for alias in node.names}
            imports |= node.module.split(".")[0] == "nbgrader"
            opens |= (node.module == f"{GLUE}.gradebook" and "gradebook" in names) or (
                node.module == "nbgrader.api" and "Gradebook" in names)
        elif isinstance(node, ast.Attribute) and node.attr == "Gradebook":
            opens = True
    return opens, imports


def _glue_crossings(modules: dict[str, Path]) -> list[str]:
    found = []
    for name, path in modules.items():
        if name == GLUE or name.startswith(GLUE + "."):
            continue
        opens, imports = _nbgrader_touches(path)
        if opens and name not in GRADEBOOK_OUTSIDE_GLUE:
            found.append(f"{name} opens nbgrader's gradebook")
        elif imports and name not in NBGRADER_OUTSIDE_GLUE:
            found.append(f"{name} imports nbgrader")
    return found


def _hub_modules() -> dict[str, Path]:
    return {f"coursehub.{p.stem}": p
            for p in sorted((REPO / "hub" / "lib" / "coursehub").glob("*.py"))}


def test_nbgrader_is_touched_only_in_its_glue():
    crossings = _glue_crossings({**_modules(), **_hub_modules()})
    assert not crossings, ("nbgrader outside autograder/nbgrader_glue/ (add a function to the "
                           "glue, e.g. nbgrader_glue/gradebook.py): " + "; ".join(crossings))


def test_every_module_let_past_the_glue_still_needs_it():
    """The lists above hold only modules that still touch nbgrader, each the way it says."""
    modules = {**_modules(), **_hub_modules()}
    for name in NBGRADER_OUTSIDE_GLUE:
        opens, imports = _nbgrader_touches(modules[name])
        assert opens if name in GRADEBOOK_OUTSIDE_GLUE else imports, (
            f"{name} no longer touches nbgrader that way: take it off the list")


def test_a_gradebook_opened_outside_the_glue_is_a_crossing(tmp_path):
    (tmp_path / "a.py").write_text("from autograder.nbgrader_glue.gradebook import gradebook\n")
    (tmp_path / "b.py").write_text("import nbgrader.api\nnbgrader.api.Gradebook('x')\n")
    (tmp_path / "c.py").write_text("from nbgrader.api import MissingEntry\n")
    (tmp_path / "d.py").write_text("from autograder.nbgrader_glue.gradebook import scores\n")
    modules = {f"autograder.{n}": tmp_path / f"{n}.py" for n in "abcd"}
    assert _glue_crossings(modules) == [
        "autograder.a opens nbgrader's gradebook", "autograder.b opens nbgrader's gradebook",
        "autograder.c imports nbgrader"]


# A cell's nbgrader labels (metadata.nbgrader) are read in nbgrader_glue/cells.py; these modules
# still read them themselves, each for a reason.
_READS_LABELS = re.compile(r"""metadata["']?\W{0,12}(\.get\(|\[)["']nbgrader["']""")
LABELS_OUTSIDE_GLUE = {
    "autograder.intake.validate": "checks a file's labels before nbgrader parses it (intake "
    "trusts nothing, nbgrader_glue included)",
    "autograder.feedback.head": "a reviewer's comment on the feedback page",
    "autograder.release": "the release's own steps build the student notebooks' labels",
    "autograder.demo": "builds the demo class's answers from the solution notebooks",
    "coursekit.notebook": "the course's own library, imported in the students' kernels, which "
    "never imports the grader",
    "coursekit.progress": "the course's own library (a student's progress in `make lab`)",
}


def test_cell_labels_are_read_in_one_module():
    modules = _modules()
    found = sorted(name for name, path in modules.items()
                   if not name.startswith(GLUE + ".")
                   and _READS_LABELS.search(path.read_text(encoding="utf-8")))
    assert found == sorted(LABELS_OUTSIDE_GLUE), (
        "read a cell's nbgrader labels with autograder.nbgrader_glue.cells (or list the module "
        f"here with its reason): {sorted(set(found) ^ set(LABELS_OUTSIDE_GLUE))}")


# The stages of the grader, lowest first: a module imports only modules of its own stage or
# below, so that each stage can be read, tested and trusted without the ones above it. The
# ground floor holds what every stage uses and that uses no stage (coursekit is the course's own
# library, which never imports the grader). A new folder or top-level module gets its stage here.
STAGES = (
    ("autograder", "autograder.text", "autograder.units", "autograder.grader_notes",
     "autograder.protocol", "autograder.records", "coursekit"),
    ("autograder.sandbox",),
    # Whether the sandbox can run here, asked by the grader and `make setup`: what runs beside
    # student code never imports it.
    ("autograder.sandbox.probe",),
    ("autograder.runner",),
    ("autograder.release",),
    ("autograder.intake",),
    ("autograder.nbgrader_glue",),
    ("autograder.feedback", "autograder.report"),
    ("autograder.tasks",),
    ("autograder.trusted",),
    ("autograder.plan", "autograder.course_records", "autograder.outputs"),
    ("autograder.dispatch",),
    # The resident grader runs the grading command (`__main__`) in its warm process.
    ("autograder.grading", "autograder.execute", "autograder.demo", "autograder.__main__",
     "autograder.dispatch.resident"),
)
# The imports that run upward, each with why it stays.
UPWARD = {
    ("autograder.intake.validate", "autograder.nbgrader_glue.patches"):
        "checks a notebook's labels with nbgrader's validator, and imports the patches first so "
        "that jsonschema is imported the quicker way",
    ("autograder.nbgrader_glue.inproc", "autograder.feedback.render"):
        "gives nbgrader's feedback pass the course's HTML exporter (the page is feedback's)",
}


def _stage(name: str) -> int | None:
    """The stage of module `name` (the one whose longest prefix names it), or None."""
    matches = [(len(prefix), index) for index, prefixes in enumerate(STAGES)
               for prefix in prefixes if _within(name, (prefix,))]
    return max(matches)[1] if matches else None


def _upward(modules: dict[str, Path]) -> list[str]:
    found = []
    for name, path in modules.items():
        for target in sorted(_imported(name, path, modules)):
            if _stage(target) > _stage(name) and (name, target) not in UPWARD:
                found.append(f"{name} imports {target}")
    return found


def test_every_module_has_a_stage():
    unplaced = sorted(name for name in _modules() if _stage(name) is None)
    assert not unplaced, f"give these modules a stage in tests/test_layout.py STAGES: {unplaced}"


def test_imports_run_only_downward_along_the_stages():
    upward = _upward(_modules())
    assert not upward, ("imports that run upward along the stages (move the code a stage down, "
                        "or list the import in UPWARD with its reason): " + "; ".join(upward))


def test_every_upward_import_let_through_still_exists():
    modules = _modules()
    gone = [pair for pair in UPWARD
            if pair[0] not in modules or pair[1] not in _imported(pair[0], modules[pair[0]],
                                                                     modules)]
    assert not gone, f"take these off UPWARD, they no longer import upward: {gone}"


def test_a_feedback_module_that_imports_the_judging_side_runs_upward(tmp_path):
    (tmp_path / "once.py").write_text("from autograder.trusted.verdicts import Check\n")
    (tmp_path / "verdicts.py").write_text("from autograder.text import one_line\n")
    (tmp_path / "text.py").write_text("")
    modules = {"autograder.feedback.once": tmp_path / "once.py",
               "autograder.trusted.verdicts": tmp_path / "verdicts.py",
               "autograder.text": tmp_path / "text.py"}
    assert _upward(modules) == ["autograder.feedback.once imports autograder.trusted.verdicts"]


# The course's conventions (where it is, its start page, which folders are lessons, how a
# lesson's title is written) are defined in coursekit/course.py, which the release, the lab and
# the hub import; a module that defines one of them again fails here.
CONVENTIONS = ("COURSE_ROOT", "START_PAGE", "LESSON_HEADING", "lessons_in", "heading_title")


def _conventions_defined(modules: dict[str, Path]) -> list[str]:
    found = []
    for name, path in modules.items():
        for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
            targets = ([t.id for t in node.targets if isinstance(t, ast.Name)]
                       if isinstance(node, ast.Assign) else
                       [node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else [])
            found += [f"{name} defines {target}" for target in targets if target in CONVENTIONS]
    return found


def test_the_course_conventions_are_defined_once():
    defined = _conventions_defined({**_modules(), **_hub_modules()})
    assert defined == [f"coursekit.course defines {c}" for c in CONVENTIONS], (
        "import the course's conventions from coursekit.course instead of defining them again: "
        + "; ".join(d for d in defined if not d.startswith("coursekit.course ")))
