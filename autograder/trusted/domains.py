"""The "Graded on: ..." line of an exercise's verdict: what its hidden checks draw from.

Each exercise declares its domain once in its scenario module, `domain("02-ex1", "...")`
(coursekit.drawing); the statement cell of the exercise ends with the same line. The verdict
on the feedback page shows it above the exercise's hidden checks. The declarations are read
from the module's source as literals (nothing is executed here).
"""

from __future__ import annotations

import ast
import functools

from nbformat import NotebookNode

from autograder.grader_notes import verdict_record
from coursekit.drawing import GRADED_ON


@functools.lru_cache(maxsize=32)
def declared(source: str) -> dict[str, str]:
    """exercise -> domain text, from the module-level `domain("ex", "text")` calls of a
    scenario module's source (calls whose arguments are not two strings are skipped)."""
    found: dict[str, str] = {}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) else None
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", "") == "domain"
                and len(call.args) == 2 and not call.keywords):
            continue
        exercise, text = call.args
        if isinstance(exercise, ast.Constant) and isinstance(text, ast.Constant) \
                and isinstance(exercise.value, str) and isinstance(text.value, str):
            found[exercise.value] = " ".join(text.value.split())
    return found


def add_domain_line(cell: NotebookNode, text: str | None) -> None:
    """Put "Graded on: <text>" into a test cell's verdict (the stream `verdict_outputs`
    wrote), on the line above its first hidden check; nothing when there is no text or no
    hidden check."""
    if not text:
        return
    for output in cell.get("outputs", []):
        if output.get("output_type") != "stream":
            continue
        lines = output.get("text", "").split("\n")
        at = next((i for i, line in enumerate(lines)
                   if line[:2] in ("✓ ", "✗ ") and line[2:].startswith("hidden check")), None)
        if at is not None:
            lines.insert(at, GRADED_ON + text)
            output["text"] = "\n".join(lines)
            record = verdict_record(cell)
            if record is not None:  # the verdict's data says where the line stands too
                record["domain_line"] = GRADED_ON + text
            return
