"""The grader's house rules on its own code: no module in autograder/ over 500 lines, and no
import circle among the modules of autograder/ and coursekit/ (imports in functions count)."""

from __future__ import annotations

import ast
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


def test_no_module_of_the_grader_is_over_500_lines():
    lengths = {str(path.relative_to(REPO)): len(path.read_text(encoding="utf-8").splitlines())
               for path in sorted((REPO / "autograder").rglob("*.py"))}
    over = {name: lines for name, lines in lengths.items() if lines > MAX_LINES}
    assert not over, "modules over 500 lines (split them by concern): " + ", ".join(
        f"{name} ({lines})" for name, lines in over.items())


def test_no_import_circle_among_the_packages():
    modules = _modules()
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    circles = _circles(graph)
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


# What runs beside student code (the sandbox, the unconfined host that forks it, the wire
# format) may import only each other and coursekit; what takes files in runs no student code
# and judges nothing. The folders are the trust boundary only while these hold. (Importing the
# package `autograder` itself, an empty __init__, is allowed everywhere.)
BESIDE_STUDENT_CODE = ("autograder.sandbox", "autograder.runner", "autograder.protocol")
BOUNDARIES = {
    BESIDE_STUDENT_CODE: BESIDE_STUDENT_CODE + ("coursekit",),
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
