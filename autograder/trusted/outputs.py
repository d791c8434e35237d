"""A notebook's outputs as the grader keeps them: inert content only, within the budget.

What a notebook reports of its cells is untrusted: each output is rebuilt here from its
reported fields (capped as `autograder.protocol` says), keeping only plain text and raster
images (HTML, SVG, JavaScript and Markdown outputs keep their plain-text form), colour codes
only as many as the feedback page can afford, and a notebook's outputs only up to a budget.
"""

from __future__ import annotations

import html
import re
from typing import Any

from autograder import protocol
from autograder.text import one_line
from autograder.grader_notes import GRADER_ENAMES

# Of a notebook's outputs, the grader keeps this much in its autograded notebook and feedback
# (a lesson's own outputs, figures included, are under 2 MiB).
MAX_KEPT_OUTPUT_BYTES = 16 << 20
# What each output costs of that budget besides its own bytes: the feedback page and the
# grader's memory grow with the number of outputs too (so at most about 2,000 are kept; a
# lesson has under 40).
OUTPUT_COST_BYTES = 8 << 10
# Terminal colour codes (ANSI escape sequences) become HTML in the feedback page, and nbconvert's
# converter copies the rest of an output's text at each one (quadratic). An output keeps them
# while it has at most MAX_OUTPUT_ESCAPES and their number times its length is at most
# ESCAPE_WORK (a colourful traceback has a few hundred in 10 KB); otherwise all are removed,
# with a note. Each kept one counts ESCAPE_COST_BYTES of the budget (the HTML it becomes).
MAX_OUTPUT_ESCAPES = 2000
ESCAPE_WORK = 1 << 24
ESCAPE_COST_BYTES = 256
_ESCAPE = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]?)?")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
# The HTML a lesson figure comes with (coursekit.figures): the grader drops it, as all HTML, and
# keeps its alt text, as plain text, for the feedback page's <img> of the PNG.
_FIGURE_HTML = re.compile(
    r'<img src="data:image/png;base64,[A-Za-z0-9+/=]*" alt="([^"<>]{1,4000})">')


def clean_done(message: dict) -> dict:
    """A cell's reported end as the grader keeps it: its cleaned outputs and its count."""
    outputs = (clean_output(x) for x in message["outputs"][:protocol.MAX_OUTPUTS])
    return {"outputs": [o for o in outputs if o is not None],
            "execution_count": _count(message.get("execution_count"))}


def _count(value: Any) -> int | None:
    """A reported execution count that nbformat can write (an int, not a bool, in range);
    else None: a notebook sets its own, and `True` made its autograded notebook invalid."""
    ok = isinstance(value, int) and not isinstance(value, bool) \
        and 0 <= value < protocol.MAX_EXECUTION_COUNT
    return value if ok else None


def _text(value: Any, limit: int = protocol.MAX_TEXT_CHARS) -> str:
    """A reported text, at most `limit` characters, that UTF-8 can write: a lone surrogate
    (which a Python string may hold, and JSON carries as `\\udcff`) becomes `?`; nbformat
    could not write the notebook, and the whole submission went ungraded."""
    if isinstance(value, list):
        value = "".join(v for v in value if isinstance(v, str))
    if not isinstance(value, str):
        return ""
    return value[:limit].encode("utf-8", "replace").decode("utf-8")


def _output_texts(output: dict) -> list[str]:
    """The texts of a cleaned output that the feedback page shows through its ANSI converter."""
    if output["output_type"] == "stream":
        return [output["text"]]
    if output["output_type"] == "error":
        return [output["evalue"], *output["traceback"]]
    return [output["data"].get("text/plain", "")]


def output_bytes(output: dict) -> int:
    """What an output costs of the notebook's budget (its colour codes at their HTML's size)."""
    escapes = sum(text.count("\x1b") for text in _output_texts(output))
    if output["output_type"] in ("stream", "error"):
        size = sum(map(len, _output_texts(output)))
    else:
        size = sum(len(v) for v in output["data"].values())
    return size + ESCAPE_COST_BYTES * escapes


def within(outputs: list[dict], left: int) -> tuple[list[dict], int]:
    """The outputs that fit in the `left` bytes of the notebook's budget, and what is left of
    it after them (below 0 once it is spent: nothing more is kept). The first output that does
    not fit is replaced by a note. The feedback page grows several times over an output's size
    (escaping, highlighting), and its making has no limit of its own."""
    kept = []
    for output in outputs:
        if left < 0:
            break
        left -= output_bytes(output) + OUTPUT_COST_BYTES
        kept.append(output if left >= 0 else {
            "output_type": "stream", "name": "stdout",
            "text": f"[output cut: the grader keeps {MAX_KEPT_OUTPUT_BYTES >> 20} MiB of a "
                    f"notebook's output, each of its outputs counted as at least "
                    f"{OUTPUT_COST_BYTES >> 10} KiB and each colour code as "
                    f"{ESCAPE_COST_BYTES} bytes]\n"})
    return kept, left


def _without_escapes(output: dict) -> dict:
    """`output` with its colour codes removed, and a note, when it holds more than an output
    may keep (see MAX_OUTPUT_ESCAPES)."""
    texts = _output_texts(output)
    count = sum(text.count("\x1b") for text in texts)
    length = max(1, sum(map(len, texts)))
    if count <= MAX_OUTPUT_ESCAPES and count * length <= ESCAPE_WORK:
        return output
    note = (f"[{count} terminal colour codes (ANSI escape sequences) removed from this output: "
            f"the grader keeps at most {min(MAX_OUTPUT_ESCAPES, ESCAPE_WORK // length)} in an "
            f"output of its length]")
    if output["output_type"] == "stream":
        text = _ESCAPE.sub("", output["text"])
        output["text"] = text + ("" if text.endswith("\n") or not text else "\n") + note + "\n"
    elif output["output_type"] == "error":
        output["evalue"] = _ESCAPE.sub("", output["evalue"])
        output["traceback"] = [_ESCAPE.sub("", line) for line in output["traceback"]] + [note]
    else:
        output["data"]["text/plain"] = _ESCAPE.sub("", output["data"]["text/plain"]) + \
            "\n" + note
    return output


def _figure_alt(value: Any) -> str:
    """The alt text of a figure's reported HTML, as printable text; "" for any other HTML."""
    match = _FIGURE_HTML.fullmatch(_text(value, protocol.MAX_DATA_CHARS))
    alt = html.unescape(match[1]) if match else ""
    return " ".join("".join(c if c.isprintable() else " " for c in alt).split())


def clean_output(output: Any) -> dict | None:
    """An output of a notebook as the grader keeps it: only inert content (plain text and
    raster images; HTML, SVG, JavaScript and Markdown outputs keep their plain-text form),
    and colour codes only as many as the feedback page can afford."""
    if not isinstance(output, dict):
        return None
    kind = output.get("output_type")
    if kind == "stream":
        name = output.get("name")
        return _without_escapes({"output_type": "stream", "name": name if name in (
            "stdout", "stderr") else "stdout", "text": _text(output.get("text"))})
    if kind == "error":
        trace = output.get("traceback")
        ename = _text(output.get("ename"), protocol.MAX_ENAME_CHARS)
        # Only the grader writes its notes: a name that reads as one of theirs is the notebook's.
        if "".join(one_line(ename).split()) in GRADER_ENAMES:
            ename += " (raised by the notebook)"
        lines = trace[:protocol.MAX_TRACEBACK_LINES] if isinstance(trace, list) else []
        return _without_escapes({"output_type": "error", "ename": ename,
                                 "evalue": _text(output.get("evalue"), protocol.MAX_EVALUE_CHARS),
                                 "traceback": [_text(t, protocol.MAX_EVALUE_CHARS)
                                               for t in lines]})
    if kind in ("display_data", "execute_result"):
        raw = output.get("data") if isinstance(output.get("data"), dict) else {}
        data = {}
        for mime in protocol.SAFE_MIME:
            value = _text(raw.get(mime), protocol.MAX_DATA_CHARS)
            if not value:
                continue
            if mime != "text/plain" and not _BASE64.fullmatch(value):
                continue
            data[mime] = value
        if not data:
            data["text/plain"] = "<output not shown>"
        alt = _figure_alt(raw.get("text/html")) if "image/png" in data else ""
        cleaned = {"output_type": kind, "data": data,
                   "metadata": {"image/png": {"alt": alt}} if alt else {}}
        if kind == "execute_result":
            cleaned["execution_count"] = _count(output.get("execution_count"))
        return _without_escapes(cleaned) if "text/plain" in data else cleaned
    return None

