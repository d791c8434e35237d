"""What a cell's nbgrader metadata says, read in one place: its grading labels (`labels`), and
whether it is an answer, a test or neither. nbgrader keeps them under the cell's
`metadata.nbgrader` (`grade`, `solution`, `locked`, `grade_id`, `points`, `checksum`); the
notebook was sanitised before (`steps.DropFreeMetadata`), and these read it as nbgrader does."""

from __future__ import annotations


def labels(cell) -> dict:
    """The cell's nbgrader metadata ({} when it has none)."""
    return cell.get("metadata", {}).get("nbgrader", {})


def is_graded(cell) -> bool:
    """A cell nbgrader scores (a test, or an answer graded by hand)."""
    return bool(labels(cell).get("grade"))


def is_answer(cell) -> bool:
    return bool(labels(cell).get("solution"))


def is_test(cell) -> bool:
    """A test cell: graded, and no answer (of any cell type)."""
    meta = labels(cell)
    return bool(meta.get("grade")) and not meta.get("solution")


def is_exercise(cell) -> bool:
    """An answer or a test cell."""
    meta = labels(cell)
    return bool(meta.get("solution") or meta.get("grade"))


def tests_passed(nb) -> tuple[int, int]:
    """(test code cells that scored full points, test code cells), by nbgrader's own rule."""
    from nbgrader import utils

    passed = total = 0
    for cell in nb.cells:
        if utils.is_grade(cell) and not utils.is_solution(cell) and cell.cell_type == "code":
            total += 1
            score, points = utils.determine_grade(cell)
            passed += score is not None and score >= points
    return passed, total
