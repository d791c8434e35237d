"""What the grader knows of a lesson, and what of it may enter a sandbox.

A lesson is its scenario module (`scenarios/<lesson>.py`), its mistakes and its solution
notebook's cells. Into a student's sandbox go only the cells the student wrote (without the
hidden-test regions of test cells) and, after them, the part of the scenario module the
scenarios need (never a mistake).
"""

from __future__ import annotations

import ast
import symtable
from dataclasses import dataclass
from pathlib import Path

from nbformat import NotebookNode

from autograder.nbgrader_glue import cells as cells_
from autograder.trusted.seeds import scenario_seed

# nbgrader's rule (ClearHiddenTests): a line that holds the begin delimiter starts a hidden
# region, one that holds the end delimiter ends it; both lines are hidden too.
HIDDEN_BEGIN, HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


@dataclass
class Lesson:
    """What the grader knows of a lesson: its scenarios, mistakes and reference cells."""

    name: str
    source: str  # the scenario module's source
    filename: str
    scenarios: list
    mistakes: list
    reference_cells: list[tuple[int, str]]
    prologue: list[str]  # sources of the cells before the first exercise
    student_source: str = ""  # what of the scenarios a student's sandbox gets
    epilogue: frozenset[str] = frozenset()  # sources of the code cells after the last test

    @classmethod
    def load(cls, root: Path, name: str) -> "Lesson":
        import nbformat

        from autograder.sandbox.observe import load_module
        from coursekit.scenarios import collect

        path = Path(root) / "scenarios" / f"{name}.py"
        source = path.read_text() if path.is_file() else ""
        scenarios, mistakes = collect(load_module(source, str(path))) if source else ([], [])
        nb = nbformat.read(Path(root) / "solutions" / name / f"{name}.ipynb", as_version=4)
        end, last = prologue_end(nb), last_test(nb)
        cells = [(i, c.source) for i, c in enumerate(nb.cells)
                 if c.cell_type == "code" and c.source.strip() and i < last
                 and not cells_.is_graded(c)]
        prologue = [c.source for c in nb.cells[:end] if c.cell_type == "code"
                    and c.source.strip()]
        epilogue = frozenset(c.source for c in nb.cells[last + 1:]
                             if c.cell_type == "code" and c.source.strip())
        return cls(name, source, str(path), scenarios, mistakes, cells, prologue,
                   sandbox_source(source) if source else "", epilogue)

    def graded_cells(self, nb: NotebookNode, cells: list[tuple[int, str]]
                     ) -> tuple[list[tuple[int, str]], list[int]]:
        """The cells worth running to grade `nb`, and the ones left out: the lesson's own code
        cells after its last test cell ("Going further"), unchanged, decide no grade (the
        reference run leaves them out too). A cell the student changed or added still runs."""
        last = last_test(nb)
        skipped = [i for i, source in cells if i > last and source in self.epilogue]
        return [(i, source) for i, source in cells if i not in skipped], skipped

    def for_exercise(self, exercise: str) -> list:
        return [s for s in self.scenarios if s.exercise == exercise]

    def runs(self, secret: bytes, student: str, submission: str) -> list[tuple[str, int]]:
        """(scenario, seed) of every scenario (a visible one's seed is 0)."""
        return [(s.name, 0 if s.visible else scenario_seed(secret, student, s.exercise, s.name,
                                                           submission))
                for s in self.scenarios]


def _decorator_name(decorator: "ast.expr") -> str:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")


def _globals_read(table: symtable.SymbolTable) -> set[str]:
    """The module-level names a function or class body (and what it nests) reads."""
    found = {symbol.get_name() for symbol in table.get_symbols()
             if symbol.is_declared_global() or (symbol.is_global() and symbol.is_referenced())}
    for child in table.get_children():
        found |= _globals_read(child)
    return found


def sandbox_source(source: str) -> str:
    """What of a scenario module goes into a student's sandbox: its imports, its `@scenario`
    functions and the module-level definitions they reach (by name, transitively); never a
    `@mistake`, nor a helper that only mistakes use, nor comments and docstrings."""
    tree = ast.parse(source)
    tables: dict[str, list[symtable.SymbolTable]] = {}
    for child in symtable.symtable(source, "<scenarios>", "exec").get_children():
        tables.setdefault(child.get_name(), []).append(child)
    statements = []  # (node, names it binds, module-level names it reads, kind)
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            statements.append((node, set(), set(), "import"))
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            # Decorators, defaults, bases and annotations are read in the module's scope.
            outer = list(node.decorator_list)
            if isinstance(node, ast.ClassDef):
                outer += node.bases + [keyword.value for keyword in node.keywords]
            else:
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                outer += node.args.defaults + [d for d in node.args.kw_defaults if d]
                outer += [a.annotation for a in arguments if a.annotation] + \
                    ([node.returns] if node.returns else [])
            reads = {n.id for part in outer for n in ast.walk(part) if isinstance(n, ast.Name)}
            for table in tables.get(node.name, []):
                reads |= _globals_read(table)
            kinds = {_decorator_name(d) for d in node.decorator_list}
            kind = "mistake" if "mistake" in kinds else "scenario" if "scenario" in kinds else ""
            statements.append((node, {node.name}, reads, kind))
            continue
        names = [n for n in ast.walk(node) if isinstance(n, ast.Name)]
        statements.append((node, {n.id for n in names if isinstance(n.ctx, ast.Store)},
                           {n.id for n in names if isinstance(n.ctx, ast.Load)}, ""))
    reached: set[str] = set()
    wanted = [name for _, bound, _, kind in statements if kind == "scenario" for name in bound]
    while wanted:
        name = wanted.pop()
        if name in reached:
            continue
        reached.add(name)
        for _, bound, reads, kind in statements:
            if name in bound and kind != "mistake":
                wanted += sorted(reads - reached)
    tree.body = [node for node, bound, _, kind in statements
                 if kind == "import" or (kind != "mistake" and bound & reached)]
    _strip_docstrings(tree)
    return ast.unparse(tree)


def _strip_docstrings(tree: ast.Module) -> None:
    """Remove the docstring of the module and of every function and class in it (`ast.unparse`
    keeps them: they are statements); a body left empty gets `pass`."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]


def last_test(nb: NotebookNode) -> int:
    """The index of the notebook's last test cell (nbgrader's graded cells that are not
    answers), or the notebook's length when it has none: nothing comes after it."""
    tests = [i for i, c in enumerate(nb.cells) if cells_.is_test(c)]
    return tests[-1] if tests else len(nb.cells)


def prologue_end(nb: NotebookNode) -> int:
    """Index of the notebook's first exercise cell (answer or test): the prologue ends there."""
    for index, cell in enumerate(nb.cells):
        if cells_.is_exercise(cell):
            return index
    return len(nb.cells)


def strip_hidden(source: str) -> str:
    """The source without its hidden-test regions, by nbgrader's own rule; a region begun and
    never ended runs to the end of the cell (never into the sandbox)."""
    parts = source.split("\n")  # as nbgrader splits (not at other line breaks: \u2028, ...)
    kept, hidden = [], False
    for line in [part + "\n" for part in parts[:-1]] + [parts[-1]]:
        if HIDDEN_BEGIN in line:
            hidden = True
        elif HIDDEN_END in line and hidden:
            hidden = False
        elif not hidden:
            kept.append(line)
    return "".join(kept)


def lesson_files(root: Path, name: str) -> str | None:
    """The lesson's own data files (what the released folder holds besides the notebook)."""
    folder = root / "notebooks" / name
    if not folder.is_dir():
        return None
    extra = [p for p in folder.iterdir() if p.name != f"{name}.ipynb"
             and not p.name.startswith(".") and not p.is_symlink()]
    return str(folder) if extra else None
