"""A student notebook with the solutions pasted in passes its visible tests; left blank, it fails them."""

from __future__ import annotations

import ast
import copy

import nbformat
from nbclient import NotebookClient

from conftest import read_notebook, solution_path, student_path
from notebook_support import answer_cells, grading, without_markers


def errors_of(cell: nbformat.NotebookNode) -> list[str]:
    return [f"{o.ename}: {o.evalue}" for o in cell.get("outputs", []) if o.output_type == "error"]


def defined_names(source: str) -> list[str]:
    """Names that a cell binds at top level (functions, classes, assignments, imports)."""
    names = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return names


def test_pasted_solutions_pass_and_blank_answers_fail(lesson, tmp_path):
    solutions = {grading(c)["grade_id"]: without_markers(c.source)
                 for c in answer_cells(read_notebook(solution_path(lesson)))}
    student = read_notebook(student_path(lesson))
    blank_reruns = []
    for index, cell in enumerate(student.cells):
        if grading(cell).get("solution") and cell.cell_type == "code":
            blank = copy.deepcopy(cell)
            cell.source = solutions[grading(cell)["grade_id"]]
            # Forget what the pasted answer defined, as in the kernel of a student who never
            # answered; then the unanswered cell runs.
            blank.source = (f"for _name in {defined_names(cell.source)!r}:\n"
                            "    globals().pop(_name, None)\n" + blank.source)
            test_cell = student.cells[index + 1]
            assert grading(test_cell).get("grade"), f"no test cell under {grading(cell)['grade_id']}"
            blank_reruns += [blank, copy.deepcopy(test_cell)]
    pasted_count = len(student.cells)
    # After the whole notebook has run with the solutions, each exercise is run once more as a
    # student who left it blank would: the unanswered cell, then its test cell.
    student.cells += blank_reruns
    NotebookClient(student, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()

    failures = [(grading(c).get("grade_id", c.source[:60]), errors_of(c))
                for c in student.cells[:pasted_count] if errors_of(c)]
    assert not failures, f"{lesson} with the solutions pasted in has failing cells: {failures}"
    for test_cell in student.cells[pasted_count + 1::2]:
        assert errors_of(test_cell), f"{grading(test_cell)['grade_id']} passes with a blank answer"


def test_nbgrader_scores_unanswered_exercises_zero_despite_the_run_all_tag(tmp_path):
    """The release tags test cells `raises-exception` so that JupyterLab's Run All goes on;
    nbgrader's executor (as `nbgrader autograde` and Validate run it) allows errors in every cell
    anyway and keeps them, so each unanswered exercise still scores 0."""
    from nbgrader.preprocessors import Execute
    from nbgrader.utils import determine_grade

    lesson = "03_tensor_hooks"  # a quick one
    student = read_notebook(student_path(lesson))
    tests = [c for c in student.cells if grading(c).get("grade")]
    assert tests and all("raises-exception" in c.metadata.get("tags", []) for c in tests)
    Execute(timeout=300).preprocess(student, {"metadata": {"path": str(tmp_path)}})
    assert all(c.execution_count for c in student.cells if c.cell_type == "code"), \
        "execution stopped before the end"
    for cell in tests:
        assert determine_grade(cell) == (0, grading(cell)["points"]), grading(cell)["grade_id"]
        error = next(o for o in cell.outputs if o.output_type == "error")
        assert error.ename == "NotImplementedError"
        assert "is not written yet" in error.traceback[0], error.traceback
