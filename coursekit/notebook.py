"""What a student sees in the kernel of a lesson: failures that say what to do first.

`install()` runs when a lesson imports `coursekit.checks` (every lesson does, in its first code
cell) inside an IPython kernel. From then on:

- a test cell that reaches an unanswered exercise (the `raise NotImplementedError()` that stands
  under `# YOUR CODE HERE`) says "Exercise N is not answered yet" and what to do, instead of a
  traceback; so does a test cell whose answer cell has not run in this kernel;
- a failing check of `coursekit.checks`, or a failing `assert` written in a test cell itself,
  shows its message first, without the frames of the course's package; an error inside the
  student's own code keeps IPython's full traceback;
- a test cell whose answer cell failed the last time it ran, or was changed (in the saved
  notebook) since it ran, first shows a notice that the test checks an older definition.

Every one of these is still an error for the kernel (the reply's status is "error" and the cell
gets an error output), so Run All, nbgrader and Validate see the cell as failed.

JupyterLab sends each cell's metadata (with nbgrader's `grade_id`) along with its code; that is
how the kernel knows which exercise a cell belongs to. Without it (nbgrader, Validate, nbval),
messages name the function instead of the exercise, and no notice is shown.
"""

from __future__ import annotations

import ast
import json
import linecache
import os
import re
import textwrap
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["install", "CellId", "parse_cell_id", "exercise_of", "exercise_number", "is_stub_line",
           "CheckFailed", "render_failure", "STUB_COMMENT", "STUB_RAISE"]

# What nbgrader puts in place of a solution (nbgrader_config.py: ClearSolutions.code_stub).
STUB_COMMENT = "# YOUR CODE HERE"
STUB_RAISE = "raise NotImplementedError()"
# The grade id of an exercise's answer and test cells (docs/AUTHORING.md).
_EXERCISE_ID = re.compile(r"(?P<lesson>\d+)-ex(?P<number>\d+)-(?P<role>answer|test)")

_RED_BOLD = "\x1b[1;31m"
_BOLD = "\x1b[1m"
_RESET = "\x1b[0m"
# How a failure message marks its likely mistake, or a hint (coursekit.checks writes them).
MISTAKE_PREFIX = "  likely mistake: "
HINT_PREFIX = "  hint: "


class CellId(NamedTuple):
    """An exercise cell's grade id, "<lesson>-ex<number>-<role>" (role "answer" or "test")."""

    lesson: str
    number: int
    role: str

    @property
    def exercise(self) -> str:
        """The exercise's id, such as "01-ex2"."""
        return f"{self.lesson}-ex{self.number}"


def parse_cell_id(grade_id: str | None) -> CellId | None:
    """The parts of an exercise cell's grade id such as "01-ex2-test", or None for another id."""
    match = _EXERCISE_ID.fullmatch(grade_id or "")
    return CellId(match["lesson"], int(match["number"]), match["role"]) if match else None


def exercise_of(grade_id: str | None) -> str | None:
    """The exercise of an answer or test cell ("01-ex2" for "01-ex2-test"), or None."""
    cell = parse_cell_id(grade_id)
    return cell.exercise if cell else None


def exercise_number(grade_id: str | None) -> int | None:
    """The exercise number in a grade id such as "01-ex2-test", or None."""
    cell = parse_cell_id(grade_id)
    return cell.number if cell else None


def _answer_id(test_id: str) -> str | None:
    cell = parse_cell_id(test_id)
    return f"{cell.exercise}-answer" if cell and cell.role == "test" else None


def is_stub_line(filename: str, lineno: int) -> bool:
    """Whether line `lineno` of `filename` is the stub's `raise NotImplementedError()` that
    follows `# YOUR CODE HERE`."""
    line = linecache.getline(filename, lineno).strip()
    previous = linecache.getline(filename, lineno - 1).strip() if lineno > 1 else ""
    return line == STUB_RAISE and previous == STUB_COMMENT


def defined_names(source: str) -> tuple[str, ...]:
    """Names a cell binds at top level: functions, classes, assignments and imports."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [(a.asname or a.name).split(".")[0] for a in node.names]
    return tuple(names)


def _short_error(error: BaseException | None) -> str:
    if error is None:
        return "an error"
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    if isinstance(error, SyntaxError) and error.lineno:
        first = f"{error.msg} (line {error.lineno})"
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def _frames(tb) -> list:
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    return frames


@dataclass
class CellRun:
    """The last run of an answer cell, and the last run in which it succeeded."""
    source: str = ""
    when: float = 0.0
    ok: bool = False
    error: str | None = None
    ok_when: float | None = None
    names: tuple[str, ...] = ()


@dataclass
class _Tracker:
    shell: Any
    answers: dict[str, CellRun] = field(default_factory=dict)
    definers: dict[str, str] = field(default_factory=dict)  # name -> grade id of its answer cell
    current_id: str | None = None
    current_source: str = ""

    # --- events (IPython prints a traceback, on stderr, for a callback that raises: these never
    #     raise, since a test cell with stderr output scores 0 in nbgrader) --------------------

    def pre_run_cell(self, info) -> None:
        try:
            self._pre_run_cell(info)
        except Exception:  # noqa: BLE001
            self.current_id = None

    def post_run_cell(self, result) -> None:
        try:
            self._post_run_cell(result)
        except Exception:  # noqa: BLE001
            pass

    def _pre_run_cell(self, info) -> None:
        self.current_id, self.current_source = None, ""
        meta = getattr(info, "cell_meta", None) or {}
        nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
        grade_id = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
        self.current_id = grade_id if isinstance(grade_id, str) else None
        self.current_source = getattr(info, "raw_cell", "") or ""
        answer_id = _answer_id(self.current_id or "")
        if answer_id:
            notice = self.stale_notice(answer_id)
            if notice:
                _show_notice(notice)

    def _post_run_cell(self, result) -> None:
        grade_id = self.current_id
        if not grade_id or not grade_id.endswith("-answer"):
            return
        error = result.error_before_exec or result.error_in_exec
        run = self.answers.setdefault(grade_id, CellRun())
        run.source, run.when = self.current_source, time.time()
        run.ok, run.error = error is None, None if error is None else _short_error(error)
        run.names = defined_names(self.current_source)
        if run.ok:
            run.ok_when = run.when
            for name in run.names:
                self.definers[name] = grade_id

    # --- notices --------------------------------------------------------------------------

    def stale_notice(self, answer_id: str) -> str | None:
        """Why the test of `answer_id`'s exercise checks an older definition, or None."""
        run = self.answers.get(answer_id)
        if run is None:
            return None
        number = exercise_number(answer_id)
        if not run.ok:
            if run.ok_when is None:
                return (f"Exercise {number}'s answer cell failed when it last ran ({run.error}). "
                        "Fix the error shown under that cell and run it (Shift+Enter), then run "
                        "this test again.")
            return (f"This test checks an old version of your answer: Exercise {number}'s "
                    f"answer cell failed when it last ran ({run.error}), so what it defines is "
                    f"still the version that ran at {_clock(run.ok_when)}. Fix the answer cell "
                    "and run it (Shift+Enter), then run this test again.")
        saved, saved_when = _saved_source(answer_id)
        # Only a save after the run can hold an edit made after it.
        if saved is not None and saved_when > run.when and saved.strip() != run.source.strip():
            return (f"This test checks an old version of your answer: Exercise {number}'s "
                    f"answer cell was changed after it last ran (at {_clock(run.when)}). Run "
                    "the answer cell (Shift+Enter), then run this test again.")
        return None

    # --- exceptions -----------------------------------------------------------------------

    def handle(self, shell, etype, value, tb, tb_offset=None):
        """IPython's custom exception handler: a short message where one helps, IPython's
        traceback otherwise. Shows the result itself (IPython leaves that to the handler)."""
        try:
            lines = self.message_for(value, tb)
        except Exception:  # noqa: BLE001 (never let the presentation hide the real error)
            lines = None
        if lines is None:
            stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
        else:
            stb = lines
        shell._showtraceback(etype, value, stb)
        return stb

    def message_for(self, value: BaseException, tb) -> list[str] | None:
        frames = _frames(tb)
        if isinstance(value, CheckFailed):
            return value._render_traceback_()
        if not frames:
            return None
        last = frames[-1]
        filename, lineno = last.tb_frame.f_code.co_filename, last.tb_lineno
        in_cell = self._is_cell_file(filename)
        if isinstance(value, NotImplementedError) and in_cell and is_stub_line(filename, lineno):
            return self.unanswered(last.tb_frame.f_code)
        at_top_of_cell = in_cell and last.tb_frame.f_code.co_name == "<module>"
        if isinstance(value, NameError) and at_top_of_cell:
            return self.not_run(value)
        if isinstance(value, AssertionError) and at_top_of_cell and str(value).strip() \
                and _answer_id(self.current_id or ""):
            return render_failure(str(value), where=f"the assert on line {lineno} of this cell")
        return None

    def unanswered(self, code) -> list[str]:
        qualname = getattr(code, "co_qualname", code.co_name)
        owner = qualname.split(".")[0]
        grade_id = self.definers.get(owner) or (
            self.current_id if exercise_number(self.current_id) else None)
        number = exercise_number(grade_id)
        name = qualname if code.co_name != "<module>" else None
        head = (f"Exercise {number} is not answered yet." if number
                else (f"`{name}` is not written yet." if name else "This exercise is not answered yet."))
        place = f"in `{name}`" if name else "in the answer cell"
        advice = (f"Write your code {place} in place of `{STUB_COMMENT}` and `{STUB_RAISE}`, "
                  "run that cell (Shift+Enter), then run this test cell again.")
        return [f"{_RED_BOLD}{head}{_RESET}", *wrap(advice)]

    def not_run(self, value: NameError) -> list[str] | None:
        answer_id = _answer_id(self.current_id or "")
        if not answer_id:
            return None
        run = self.answers.get(answer_id)
        if run is not None and run.ok:
            return None  # the answer ran; a missing name is a real error
        number = exercise_number(answer_id)
        if run is None:
            head = f"Exercise {number}'s answer cell has not run yet ({value})."
            advice = ("Run the answer cell above (Shift+Enter), then this one; or run every "
                      "cell from the top with Run ▸ Run All Cells.")
        else:
            head = f"Exercise {number}'s answer cell failed when it last ran ({run.error})."
            advice = (f"So {value}. Fix the error shown under the answer cell and run it "
                      "(Shift+Enter), then run this test again.")
        return [f"{_RED_BOLD}{head}{_RESET}", *wrap(advice)]

    def _is_cell_file(self, filename: str) -> bool:
        known = getattr(getattr(self.shell, "compile", None), "_filename_map", {})
        return filename in known or filename.startswith("<ipython-input-")


def wrap(text: str, width: int = 88) -> list[str]:
    """`text` as lines of at most `width` characters, each a line of its own (JupyterLab wraps
    error output in the middle of words)."""
    if len(text) <= width:
        return [text]
    indent = re.match(r"\s*", text)[0]
    follow = indent + ("    " if text.lstrip().startswith("likely mistake:") else "")
    return textwrap.wrap(text, width, subsequent_indent=follow, break_long_words=False,
                         break_on_hyphens=False) or [text]


def _clock(when: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(when or 0))


def _saved_source(grade_id: str) -> tuple[str | None, float]:
    """The source of the cell with `grade_id` in the notebook file this kernel belongs to, as
    last saved (JupyterLab tells the kernel its notebook in JPY_SESSION_NAME), and when it was
    saved."""
    path = os.environ.get("JPY_SESSION_NAME", "")
    if not path.endswith(".ipynb") or not os.path.isfile(path):
        return None, 0.0
    try:
        saved_when = os.path.getmtime(path)
        with open(path, encoding="utf-8") as handle:
            cells = json.load(handle).get("cells", [])
    except (OSError, ValueError):
        return None, 0.0
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if isinstance(meta, dict) and meta.get("grade_id") == grade_id:
            source = cell.get("source", "")
            return ("".join(source) if isinstance(source, list) else str(source)), saved_when
    return None, 0.0


def _show_notice(text: str) -> None:
    """A notice above a test cell's output: plain text for nbgrader, a yellow box in JupyterLab."""
    import html

    from IPython.display import display

    display({
        "text/plain": f"Note: {text}",
        "text/html": ('<div class="coursekit-notice" style="border-left: 4px solid #d9a300; '
                      'background: #fff8dc; color: #333; padding: 6px 10px; margin: 2px 0;">'
                      f"<b>Note:</b> {html.escape(text)}</div>"),
    }, raw=True)


_HANDLED = (NotImplementedError, NameError, AssertionError)


def render_failure(message: str, where: str | None = None) -> list[str]:
    """A failure message as the lines a notebook shows: its first line in bold red, then the
    likely mistake, then the rest (expected, found, ...), then where the check is."""
    lines = message.rstrip().splitlines() or ["The check failed."]
    head, rest = lines[0], lines[1:]
    mistakes = [line for line in rest if line.startswith((MISTAKE_PREFIX, HINT_PREFIX))]
    others = [line for line in rest if not line.startswith((MISTAKE_PREFIX, HINT_PREFIX))]
    head, *more = wrap(head)
    shown = [f"{_RED_BOLD}{head}{_RESET}", *more]
    for line in mistakes + others:
        # Values (expected:, found:) keep their layout; sentences are wrapped.
        shown += [line] if line.startswith(("  expected:", "  found:")) else wrap(line)
    if where:
        shown.append(f"(failed: {where})")
    return shown


class CheckFailed(AssertionError):
    """A check in a test cell failed: the message says what was expected, what was found and
    the likely mistake. IPython shows the message, not a traceback through the course's package."""

    def _render_traceback_(self) -> list[str]:
        return render_failure(str(self), _check_location(self.__traceback__))


def _check_location(tb) -> str | None:
    """Where the failing check was called: the last frame outside this package."""
    package = os.path.dirname(os.path.abspath(__file__))
    caller = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if not code.co_filename.startswith(package):
            caller = (code, tb.tb_lineno)
        tb = tb.tb_next
    if caller is None:
        return None
    code, lineno = caller
    if code.co_name == "<module>":
        return f"the check on line {lineno} of this cell"
    return f"the check on line {lineno} of `{code.co_name}`"


def install(shell=None) -> bool:
    """Install the handler and the notices in `shell` (the running IPython kernel by default).
    Does nothing outside a Jupyter kernel, or when already installed; returns whether the
    handler is installed now."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
        if shell is None or type(shell).__name__ != "ZMQInteractiveShell":
            return False
    tracker = getattr(shell, "_coursekit_tracker", None)
    if tracker is None:
        tracker = _Tracker(shell)
        shell._coursekit_tracker = tracker
        shell.events.register("pre_run_cell", tracker.pre_run_cell)
        shell.events.register("post_run_cell", tracker.post_run_cell)
    if shell.custom_exceptions != _HANDLED:
        shell.set_custom_exc(_HANDLED, tracker.handle)
    return True
