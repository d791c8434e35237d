"""Each paragraph of the grader's once per feedback page: where it first applies.

The verdict of a test cell (`trusted.notes.verdict_outputs`) writes, under each failing check,
what was measured, the likely mistake, the relation and the hint, and then an error naming the
first of them; a lesson's cells after its last exercise each get the same note, and so does
each cell that a stop left unrun. On the page a student reads, each of these is said where it
first applies, and a later one says where to look instead. The autograded notebook (what
nbgrader scores and the instructor sees) keeps every line.

Within a test cell, every line of a check that repeats one said above it goes (a failing check
left with none of its own says which check above says it); across the page, the hints (advice,
the same for every exercise it fits) and the grader's notes on cells that did not run.
"""

from __future__ import annotations

import re

from nbformat import NotebookNode

from autograder.nbgrader_glue import cells
from autograder.grader_notes import (CHECK_ENAME, NOT_RUN_ENAME, WITHHELD_NOTE, ansi_red,
                                     not_graded_output)

_SUMMARY = re.compile(r"^Exercise (\S+): \d+ of \d+ (?:checks|visible examples) passed\b")
_CHECK = re.compile(r"^([✓✗]) (?:visible example|hidden check): (.*)$")
_DETAIL = re.compile(r"^    (- |likely mistake: |relation: |hint: )(.*)$")
NOT_GRADED = not_graded_output()["text"]
NOT_GRADED_AGAIN = "(Not run by the grader either: see the note above.)\n"


def say_once(nb: NotebookNode) -> NotebookNode:
    """`nb` with the grader's repeated paragraphs said once (see the module)."""
    hints: set[str] = set()
    seen_not_graded = seen_withheld = False
    not_run: set[str] = set()
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        for output in cell.get("outputs", []):
            kind = output.get("output_type")
            text = output.get("text", "") if kind == "stream" else ""
            # The grader's own notes only: a student's cell may print the same words.
            if kind == "stream" and text == NOT_GRADED and len(cell.outputs) == 1:
                if seen_not_graded:
                    output.text = NOT_GRADED_AGAIN
                seen_not_graded = True
            elif kind == "stream" and _SUMMARY.match(text) and cells.is_graded(cell):
                output.text, said = _verdict_once(text, hints, seen_withheld)
                seen_withheld = seen_withheld or WITHHELD_NOTE in text
                _error_once(cell, said)
            elif kind == "error" and output.get("ename") == NOT_RUN_ENAME:
                why = output.get("evalue", "")
                if why in not_run:
                    output.traceback = [f"{ansi_red(NOT_RUN_ENAME)}: not run either ({why}, "
                                        "as said above)."]
                not_run.add(why)
    return nb


def _verdict_once(text: str, hints: set[str], withheld_said: bool) -> tuple[str, set[str]]:
    """A verdict's text with each repeated line left out (and the note on withheld checks,
    when the page said it already); and the details it says."""
    said: dict[str, str] = {}  # a detail said in this cell -> the check it was said under
    out: list[str] = []
    title, failed, own, repeats = "", False, 0, ""

    def close() -> None:
        if failed and not own and repeats:
            out.append(f"    - the same as under “{repeats}” above")

    for line in text.rstrip("\n").split("\n"):
        check = _CHECK.match(line)
        detail = _DETAIL.match(line)
        if check:
            close()
            title, failed, own, repeats = check.group(2), check.group(1) == "✗", 0, ""
        elif detail:
            prefix, words = detail.groups()
            if words in said:
                repeats = repeats or said[words]
                continue
            if prefix == "hint: " and words in hints:
                continue
            said[words] = title
            hints.update([words] if prefix == "hint: " else [])
            own += 1
        elif withheld_said and line == WITHHELD_NOTE:
            continue
        out.append(line)
    close()
    return "\n".join(out) + "\n", set(said)


def _error_once(cell: NotebookNode, said: set[str]) -> None:
    """The cell's error that names the first failing check's message, when the verdict above
    said it: it points there instead of saying it again."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error" and output.get("ename") == CHECK_ENAME \
                and _said_above(str(output.get("evalue", "")), said):
            output.evalue = "not right yet: see the first ✗ above"
            output.traceback = [f"{ansi_red(CHECK_ENAME)}: {output.evalue}"]


def _said_above(evalue: str, said: set[str]) -> bool:
    """Whether an error's message (one line, cut at 300 characters with "...") is one of the
    details said above."""
    words = " ".join(evalue.split())
    start = words[:-3] if words.endswith("...") else None
    return any(" ".join(w.split()) == words or start and w.startswith(start) for w in said)
