"""The grader's side of running a notebook: the runner host, the clock, and trusted verdicts.

Student code never runs in this process. A grading worker starts a runner host
(`autograder.runner.host`, a new program that holds nothing of the grader's) and hands it, for
each notebook, the cells to run and the scenarios to observe. The host forks a confined
process for the notebook (`autograder.sandbox.confine`). What comes back on the notebook's pipe
is untrusted JSON: each message is size-capped and validated here, outputs keep only inert
MIME types, and time limits are kept on this process's clock (a per-cell limit that only a
genuine cell end re-arms, and a budget for the whole notebook), whatever the notebook sends.

Scores never come from the student's process. After the cells, the notebook's process runs the
lesson's scenarios (`scenarios/<lesson>.py`) against the student's answers, on inputs drawn for
this student from the course secret, and reports observations. A reference run (the solution
notebook's own cells, in the same kind of process, forked from the same warm state) reports the
expected observations and those of each typical mistake; `autograder.trusted.verdicts` compares them
here, and each test cell's outputs are replaced by the verdict, which is what nbgrader scores.

`ForkedExecute` is the nbgrader preprocessor that replaces nbgrader's `Execute` in
`Autograde.autograde_preprocessors`; everything else in autograding stays nbgrader's.
"""

from __future__ import annotations

from autograder import _imports  # noqa: F401 (first: a quicker jsonschema import)

import ast
import hashlib
import hmac
import html
import json
import math
import os
import re
import select
import signal
import socket
import subprocess
import symtable
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nbformat import NotebookNode, from_dict
from traitlets import Bool, Integer, Unicode

from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.sandbox.shell import TIMEOUT_ENAME, _ansi_red, error_output, timeout_output  # noqa: F401
from autograder.trusted.verdicts import (Check, Outcome, ReportError, ScenarioBroken, ScenarioRun,
                                 judge_exercise, one_line, read_outcome)

DEAD_ENAME = "DeadKernelError"
NOT_RUN_ENAME = "CellNotRunError"
CHECK_ENAME = "CheckFailed"
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
CHECKS_STOPPED_ENAME = "ChecksStopped"  # the run stopped while the scenarios ran its answers
# The names of the errors the grader writes into a notebook, which decide its status (a
# timeout, a death, cells not run): an error of the same name that a notebook reports (an
# exception class it named so) is renamed, so that it never decides a status or quotes the
# notebook's own words as the grader's.
GRADER_ENAMES = frozenset({TIMEOUT_ENAME, DEAD_ENAME, NOT_RUN_ENAME, CHECK_ENAME,
                           CHECKS_STOPPED_ENAME})
_STOP_ENAMES = {"timeout": (TIMEOUT_ENAME,), "oom": ("MemoryError",), "died": (DEAD_ENAME,)}
GRACE_SECONDS = 3.0  # after a cell's limit, how long its process has before it is killed
# A cell's limit is CPU time: kept inside the sandbox (a timer that stops the cell cleanly),
# and by the grader, which reads the CPU time of the notebook's whole process tree from its
# cgroup. The grader's wall clock allows this many times the limit (a loaded machine: it must
# never decide for a cell that computes), for cells that only wait.
WALL_FACTOR = 10
CPU_POLL_SECONDS = 0.25  # how often the grader reads the notebook's CPU time
GiB = 1 << 30
MAX_EVENTS_BYTES = 96 << 20  # all a notebook may send (outputs and observations)
MAX_MESSAGE_BYTES = 48 << 20
HOST_START_SECONDS = 180.0
_SAFE_MIME = ("text/plain", "image/png", "image/jpeg")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
# The HTML a lesson figure comes with (coursekit.figures): the grader drops it, as all HTML, and
# keeps its alt text, as plain text, for the feedback page's <img> of the PNG.
_FIGURE_HTML = re.compile(
    r'<img src="data:image/png;base64,[A-Za-z0-9+/=]*" alt="([^"<>]{1,4000})">')
# nbgrader's rule (ClearHiddenTests): a line that holds the begin delimiter starts a hidden
# region, one that holds the end delimiter ends it; both lines are hidden too.
HIDDEN_BEGIN, HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


# --------------------------------------------------------------------------------------------
# The runner host, seen from the worker

class HostError(RuntimeError):
    """The runner host could not be started or stopped answering."""


class Host:
    """A runner host process and the socket to it."""

    def __init__(self, config: dict) -> None:
        self.config = config
        self.process: subprocess.Popen | None = None
        self.sock: socket.socket | None = None

    def start(self) -> None:
        ours, theirs = socket.socketpair()
        env = {key: value for key, value in os.environ.items()
               if key in ("PATH", "LANG", "LC_ALL", "HOME", "OMP_NUM_THREADS", "PYTHONPATH",
                          "NBFORMAT_VALIDATOR", "MPLBACKEND", "PYDEVD_DISABLE_FILE_VALIDATION")}
        self.process = subprocess.Popen(
            [sys.executable, "-s", "-B", "-m", "autograder.runner.host", str(theirs.fileno()),
             json.dumps(self.config)],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            env=env, start_new_session=True, cwd="/")
        theirs.close()
        self.sock = ours
        ours.settimeout(HOST_START_SECONDS)
        try:
            line = ours.recv(64)
        except OSError:
            line = b""
        ours.settimeout(None)
        if line != b"ready\n":
            self.stop()
            raise HostError("the runner host did not start")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.process is not None:
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def run(self, request: dict, *, timeout: float, budget: float) -> "Run":
        """Run one notebook: the host gets only a header; the cells, then (once the notebook
        has reported its last cell's end) the scenarios with their first runs, then (once it
        has reported those runs' outcomes) the later runs, go on a payload pipe that only the
        notebook's own process reads. Collect what it reports until the host says that its
        process has ended."""
        if not self.alive():
            self.stop()
            self.start()
        prologue = int(request.get("prologue") or 0)
        header = {"prologue_cells": request["cells"][:prologue], "timeout": request["timeout"],
                  "max_lines": request["max_lines"], "files_from": request.get("files_from")}
        events_r, events_w = os.pipe()
        control_r, control_w = os.pipe()
        payload_r, payload_w = os.pipe()
        try:
            socket.send_fds(self.sock, [(json.dumps(header) + "\n").encode()],
                            [events_w, control_w, payload_r])
        except OSError as err:
            for fd in (events_r, events_w, control_r, control_w, payload_r, payload_w):
                os.close(fd)
            self.stop()
            raise HostError(f"the runner host stopped answering ({err})") from None
        os.close(events_w)
        os.close(control_w)
        os.close(payload_r)
        writer = _Payload(payload_w, request)
        try:
            return _collect(events_r, control_r, request, timeout, budget, writer)
        finally:
            writer.close()
            os.close(events_r)
            os.close(control_r)


@dataclass
class Run:
    """What happened when a notebook was run, as established by the grader."""

    outcome: str = "ok"  # ok | timeout | died | exit | oom
    detail: str = ""
    cell: int | None = None  # index of the cell that timed out or where the process ended
    seconds: float = 0.0
    cell_seconds: float = 0.0  # running time the notebook reported for the cells it ran
    shared_seconds: float = 0.0  # running time of the shared prologue
    observe_seconds: float = 0.0  # the scenarios' run on its answers (the grader's clock)
    executed: dict[int, dict] = field(default_factory=dict)
    outcomes: dict[str, Any] | None = None  # scenario runs, as reported (untrusted)
    finished: bool = False
    pid: int | None = None
    budget_spent: bool = False
    forged: bool = False  # it sent a cell's end twice: its reports after that are void
    observing: bool = False  # every cell had ended and the scenarios were running its answers


def _lines(fd: int, buffer: bytearray) -> tuple[list[bytes], bool, int]:
    """Read what is there; return the complete lines that are not empty, whether the pipe has
    closed, and how many bytes were read (newlines included: a flood of empty lines counts
    too). Only the bytes just read are searched for a newline, so a line without end costs no
    rescanning, and lines are split in one pass."""
    chunk = os.read(fd, 1 << 20)
    if not chunk:
        return [], True, 0
    buffer += chunk
    if b"\n" not in chunk:
        return [], False, len(chunk)
    *complete, rest = buffer.split(b"\n")
    buffer[:] = rest
    return [bytes(line) for line in complete if line], False, len(chunk)


class _Payload:
    """Writes a notebook's payload from a thread (a pipe holds 64 KiB; a notebook may be
    larger): its cells at once, its scenarios only when `release()` says the cells are done,
    and the later runs (the hidden ones) only when `release_later()` says that the first
    runs' outcomes are in."""

    def __init__(self, fd: int, request: dict) -> None:
        import threading
        self.fd = fd
        self.ready = threading.Event()
        self.later_ready = threading.Event()
        self.closed = threading.Event()
        self.cells = (json.dumps({"cells": request["cells"]}) + "\n").encode()
        observe = request.get("observe")
        later = observe.get("later") if observe else None
        if observe:  # what the notebook reads first holds no later run's seed
            observe = dict({k: v for k, v in observe.items() if k != "later"},
                           more=bool(later))
        self.observe = (json.dumps({"observe": observe}) + "\n").encode()
        self.later = (json.dumps({"runs": later}) + "\n").encode() if later else None
        self.thread = threading.Thread(target=self._write, daemon=True)
        self.thread.start()

    def _send(self, data: bytes) -> bool:
        try:
            while data and not self.closed.is_set():
                data = data[os.write(self.fd, data):]
        except OSError:
            return False
        return not data

    def _write(self) -> None:
        if self._send(self.cells):
            self.ready.wait()
            if not self.closed.is_set() and self._send(self.observe) and self.later:
                self.later_ready.wait()
                if not self.closed.is_set():
                    self._send(self.later)
        self._close_fd()

    def _close_fd(self) -> None:
        try:
            os.close(self.fd)
        except OSError:
            pass

    def release(self) -> None:
        self.ready.set()

    def release_later(self) -> None:
        self.later_ready.set()

    def close(self) -> None:
        self.closed.set()
        self.ready.set()
        self.later_ready.set()
        self.thread.join(5)


def _collect(events: int, control: int, request: dict, timeout: float, budget: float,
             payload: "_Payload | None" = None) -> Run:
    run = Run()
    started = time.monotonic()
    order = [index for index, _ in request["cells"]]
    prologue = int(request.get("prologue") or 0)
    position = 0  # the next cell whose end is awaited (into `order`)
    awaited_since = {}  # position -> when the grader began to await that cell's end
    # However the notebook reports, it never runs longer than every cell's limit together
    # (plus one limit for its observations), nor past the notebook's budget.
    wall = timeout * WALL_FACTOR + GRACE_SECONDS
    notebook_deadline = started + min(budget, (len(order) + 1) * wall)
    deadline = min(started + wall, notebook_deadline)
    ev_buf, ctl_buf = bytearray(), bytearray()
    received = 0
    events_open, control_open = True, True
    pid: int | None = None
    status: int | None = None
    oom = False
    limit_hit = False  # its memory reached the limit (then a stall or a death is memory's)
    oom_at: int | None = None
    killed = False
    observing, observing_since = False, 0.0
    # The scenario runs in two phases when the request has later runs (the hidden ones): their
    # seeds go to the notebook only once it has reported the first runs' outcomes, which are
    # kept as they were then (a later report cannot change them).
    observe = request.get("observe") or {}
    first_runs, later_runs = observe.get("runs") or [], observe.get("later") or []
    first: dict | None = None
    cpu_path: str | None = None  # the notebook's CPU time, from its cgroup (the host names it)
    cpu_since: dict[int, float] = {}  # position -> its CPU time when that cell was awaited
    cpu_checked = started  # when its CPU time was last read

    def mark(at: int) -> None:
        awaited_since[at] = time.monotonic()
        used = _cpu_seconds(cpu_path)
        if used is not None:
            cpu_since[at] = used

    def kill() -> None:
        nonlocal killed
        if pid and not killed:
            for target in (lambda: os.killpg(pid, signal.SIGKILL),
                           lambda: os.kill(pid, signal.SIGKILL)):
                try:
                    target()
                except (ProcessLookupError, PermissionError):
                    pass
        killed = True

    while control_open:
        watched = [fd for fd, is_open in ((events, events_open), (control, control_open))
                   if is_open]
        wait = max(0.0, deadline - time.monotonic()) if not killed else GRACE_SECONDS * 4
        if cpu_path and not killed:
            wait = min(wait, CPU_POLL_SECONDS)
        ready, _, _ = select.select(watched, [], [], wait)
        if not ready and killed:
            break  # the host never reported the end: give up on this run
        # The clocks are read on every pass, not only when the notebook is quiet: a notebook
        # that keeps its pipe busy is stopped on time all the same.
        now = time.monotonic()
        if not killed and (now >= deadline or now >= cpu_checked + CPU_POLL_SECONDS):
            over = now >= deadline
            if over:
                run.budget_spent = now >= notebook_deadline
            else:
                cpu_checked = now
                used = _cpu_seconds(cpu_path)
                if used is not None:
                    cell_over = used - cpu_since.get(position, 0.0) > timeout + GRACE_SECONDS
                    notebook_over = used > (len(order) + 1) * timeout + GRACE_SECONDS
                    over = cell_over or notebook_over
                    run.budget_spent = notebook_over and not cell_over
            if over:
                run.outcome = "timeout"
                run.cell = None if observing or position >= len(order) else order[position]
                kill()
                continue
        if not ready:
            continue
        if control in ready:
            lines, closed, _ = _lines(control, ctl_buf)
            control_open = not closed and len(ctl_buf) <= MAX_MESSAGE_BYTES
            for line in lines:
                message = _json(line)
                event = message.get("event")
                if event == "prologue":
                    for done in message.get("executed", [])[:prologue]:
                        if _valid_done(done):
                            run.executed[done["index"]] = _clean_done(done)
                            run.shared_seconds += _seconds(done.get("seconds"))
                    if prologue > position:
                        position = prologue
                        mark(position)
                elif event == "prologue-lost":
                    run.executed.clear()
                    run.shared_seconds = 0.0
                    position = 0
                elif event == "forked" and isinstance(message.get("pid"), int):
                    pid = message["pid"]
                    run.pid = pid
                    found = message.get("cpu_file")
                    # Its cgroup's, or (without one) the file its host keeps from /proc.
                    if isinstance(found, str) and ".." not in found and (
                            found.startswith("/sys/fs/cgroup/")
                            or os.path.basename(found).startswith("autograder-cpu-")):
                        cpu_path = found
                        mark(position)
                    if killed:
                        killed = False
                        kill()
                elif event == "oom" and oom_at is None:
                    oom_at = position  # the cell awaited when its memory ran out
                    oom = True
                elif event == "exited":
                    # Its process is reaped (its namespace gone with it): its pid may be
                    # another process's from now on, so it is never signalled again.
                    pid = None
                    status = message.get("status") if isinstance(message.get("status"),
                                                                 int) else None
                    oom = bool(message.get("oom"))
                    limit_hit = bool(message.get("memory_limit_hit"))
                    control_open = False
                elif event == "failed":
                    run.outcome, run.detail = "died", "the grader could not start it"
                    control_open = False
        if events_open and events in ready:
            lines, closed, size = _lines(events, ev_buf)
            events_open = not closed
            received += size
            if received > MAX_EVENTS_BYTES or len(ev_buf) > MAX_MESSAGE_BYTES \
                    or any(len(line) > MAX_MESSAGE_BYTES for line in lines):
                run.outcome, run.detail = "died", "it sent more output than the grader keeps"
                run.cell = order[position] if position < len(order) else None
                kill()
                events_open = False
                ev_buf.clear()
                lines = []
            for line in lines:
                try:
                    if run.finished:
                        continue
                    message = _json(line)
                    event = message.get("event")
                    if event == "done" and _valid_done(message) and \
                            message["index"] in order[:position]:
                        # A second end of a cell already ended: one of the two was forged by the
                        # notebook (to re-arm the clock). The grader awaited that cell from the
                        # earlier of the two, so it knows how long the cell really ran.
                        at = order.index(message["index"])
                        ran = time.monotonic() - awaited_since.get(at, started)
                        used = _cpu_seconds(cpu_path)
                        computed = used - cpu_since.get(at, 0.0) if used is not None else 0.0
                        run.cell = message["index"]
                        if ran > wall or computed > timeout:
                            run.outcome = "timeout"
                        else:
                            run.outcome = "died"
                            run.detail = "it reported a cell's end that its runner did not (forged)"
                        for later in order[at + 1:]:  # what it claimed after that is void
                            run.executed.pop(later, None)
                        run.outcomes = None
                        run.forged = True
                        kill()
                        events_open = False
                        break
                    if event == "done" and position < len(order) and _valid_done(message) \
                            and message["index"] == order[position] and not observing:
                        run.executed[message["index"]] = _clean_done(message)
                        run.cell_seconds += max(0.0, min(_seconds(message.get("seconds")),
                                                         timeout))
                        position += 1
                        mark(position)
                        if message.get("timed_out"):
                            run.outcome, run.cell = "timeout", message["index"]
                        else:  # the next cell's limit starts now (never past the budget)
                            deadline = min(time.monotonic() + wall, notebook_deadline)
                    elif event == "exit" and not observing:
                        run.outcome = "exit"
                        run.cell = order[position - 1] if position else None
                    elif event == "cells-done" and position >= len(order) and payload:
                        payload.release()  # every cell genuinely ended: now the scenarios
                    elif event == "observing" and position >= len(order) and not observing:
                        observing = run.observing = True
                        observing_since = time.monotonic()
                        mark(position)
                        deadline = min(time.monotonic() + wall, notebook_deadline)
                    elif event == "observing-timed-out" and observing and run.outcomes is None:
                        run.outcome, run.cell = "timeout", None  # its own timer: it loses by it
                        kill()
                    elif event == "observed" and observing and later_runs and payload \
                            and first is None and run.outcomes is None:
                        first = _outcomes_of(message.get("outcomes"), first_runs)
                        payload.release_later()  # only now do the later seeds leave the grader
                    elif event == "observations" and observing and run.outcomes is None:
                        run.observe_seconds = time.monotonic() - observing_since
                        outcomes = message.get("outcomes")
                        run.outcomes = ({**_outcomes_of(outcomes, later_runs), **(first or {})}
                                        if later_runs else _outcomes_of(outcomes, first_runs))
                    elif event == "end":
                        run.finished = True
                        kill()  # whatever it still runs ends now
                    elif event == "crash" and isinstance(message.get("detail"), str):
                        run.detail = message["detail"][-2000:]
                except Exception:  # noqa: BLE001 (a report shaped to break the grader)
                    run.outcome, run.detail = "died", "it sent a report the grader could not read"
                    run.cell = order[position] if position < len(order) else None
                    run.outcomes = None
                    kill()
                    events_open = False
                    break

        if not events_open and not killed and pid:
            kill()  # its pipe is closed: it has ended, or closed it; either way, stop it
    run.seconds = time.monotonic() - started
    if limit_hit and (run.outcome in ("timeout", "died") or not run.finished):
        oom = True  # the same verdict however busy the machine was
    if oom:
        if run.outcome == "timeout" and run.cell is not None:
            position = order.index(run.cell) if run.cell in order else position
        run.outcome = "oom"
        if oom_at is not None:
            position = min(position, oom_at)
        # Past the last cell, the memory ran out while the scenarios ran its answers: no cell
        # is to blame (the test cells say so).
        run.cell = (order[position] if position < len(order)
                    else None if run.observing else (order[-1] if order else None))
    elif not run.finished and run.outcome == "ok":
        run.outcome = "died"
        run.cell = order[position] if position < len(order) else None
        run.detail = (_describe_status(status) if status is not None
                      else "it was killed") + (f"\n{run.detail}" if run.detail else "")
    return run


def _outcomes_of(reported: Any, runs: list) -> dict:
    """Of a report's outcomes, those of `runs` (keyed "<scenario>/<seed>", and below that for
    a mistake's); {} when the report is not a dict."""
    if not isinstance(reported, dict):
        return {}
    prefixes = {f"{name}/{seed}" for name, seed in runs}
    return {key: value for key, value in reported.items()
            if isinstance(key, str) and key.split("/mistake/")[0] in prefixes}


def _json(line: bytes) -> dict:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return {}
    return message if isinstance(message, dict) else {}


def _cpu_seconds(path: str | None) -> float | None:
    """CPU time used so far by a notebook's processes, from its cgroup (cgroup v1's
    cpuacct.usage in ns, or v2's cpu.stat usage_usec); None where there is none."""
    if not path:
        return None
    try:
        text = open(path).read()
    except OSError:
        return None
    if path.endswith("cpuacct.usage"):
        return int(text.strip()) / 1e9 if text.strip().isdigit() else None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec" and value.strip().isdigit():
            return int(value) / 1e6
    return None


def _valid_done(message: Any) -> bool:
    return (isinstance(message, dict) and isinstance(message.get("index"), int)
            and isinstance(message.get("outputs"), list))


def _seconds(value: Any) -> float:
    """A reported duration: a finite number of seconds, else 0 (reports are untrusted)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return max(0.0, float(value))
    return 0.0


def _clean_done(message: dict) -> dict:
    count = message.get("execution_count")
    return {"outputs": [o for o in (_clean_output(x) for x in message["outputs"][:500])
                        if o is not None],
            "execution_count": count if isinstance(count, int) and 0 <= count < 10**9
            else None}


def _text(value: Any, limit: int = 4_000_000) -> str:
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


def _output_bytes(output: dict) -> int:
    escapes = sum(text.count("\x1b") for text in _output_texts(output))
    if output["output_type"] in ("stream", "error"):
        size = sum(map(len, _output_texts(output)))
    else:
        size = sum(len(v) for v in output["data"].values())
    return size + ESCAPE_COST_BYTES * escapes


def _within(outputs: list[dict], left: int) -> tuple[list[dict], int]:
    """The outputs that fit in the `left` bytes of the notebook's budget, and what is left of
    it after them (below 0 once it is spent: nothing more is kept). The first output that does
    not fit is replaced by a note. The feedback page grows several times over an output's size
    (escaping, highlighting), and its making has no limit of its own."""
    kept = []
    for output in outputs:
        if left < 0:
            break
        left -= _output_bytes(output) + OUTPUT_COST_BYTES
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


def _clean_output(output: Any) -> dict | None:
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
        ename = _text(output.get("ename"), 200)
        if ename in GRADER_ENAMES:  # only the grader writes its notes (a status is read from them)
            ename += " (raised by the notebook)"
        return _without_escapes({"output_type": "error", "ename": ename,
                                 "evalue": _text(output.get("evalue"), 20_000),
                                 "traceback": [_text(t, 20_000) for t in trace[:200]]
                                 if isinstance(trace, list) else []})
    if kind in ("display_data", "execute_result"):
        raw = output.get("data") if isinstance(output.get("data"), dict) else {}
        data = {}
        for mime in _SAFE_MIME:
            value = _text(raw.get(mime), 20_000_000)
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
            count = output.get("execution_count")
            cleaned["execution_count"] = count if isinstance(count, int) else None
        return _without_escapes(cleaned) if "text/plain" in data else cleaned
    return None


def _figure_alt(value: Any) -> str:
    """The alt text of a figure's reported HTML, as printable text; "" for any other HTML."""
    match = _FIGURE_HTML.fullmatch(_text(value, 20_000_000))
    alt = html.unescape(match[1]) if match else ""
    return " ".join("".join(c if c.isprintable() else " " for c in alt).split())


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return f"it was ended by {_signal_name(sig)}"
    code = os.WEXITSTATUS(status)
    if code > 128:
        sig = code - 128
        if sig == signal.SIGKILL:
            return ("it was killed (SIGKILL), which usually means it ran out of memory or "
                    "something killed it")
        return f"it was ended by {_signal_name(sig)}"
    return f"it exited with code {code} (os._exit or a crash)"


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


# --------------------------------------------------------------------------------------------
# Scenarios and the course secret (trusted side)

def course_secret(root: Path) -> bytes:
    """The course's secret for drawing each student's inputs: `<root>/.autograder/secret`,
    created on first use (never in git, never in a notebook, never in a sandbox)."""
    folder = Path(root) / ".autograder"
    path = folder / "secret"
    try:
        return bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError):
        pass
    folder.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(os.urandom(32).hex())
    return bytes.fromhex(path.read_text().strip())


def scenario_seed(secret: bytes, student: str, exercise: str, scenario: str,
                  submission: str) -> int:
    """The seed of a hidden scenario's inputs: drawn for this student and this submission
    (`submission`: its content's digest), so a re-grade of the same file draws the same inputs
    and any changed file other ones (what one submission learns of its inputs is of no use
    to the next)."""
    digest = hmac.new(secret, f"{student}\0{exercise}\0{scenario}\0{submission}".encode(),
                      hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") & ((1 << 62) - 1)


def submission_digest(content: bytes) -> str:
    """The digest of a submitted notebook's content, which its hidden inputs are drawn for."""
    return hashlib.sha256(content).hexdigest()


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

    @classmethod
    def load(cls, root: Path, name: str) -> "Lesson":
        import nbformat

        from autograder.sandbox.observe import load_module
        from coursekit.scenarios import collect

        path = Path(root) / "scenarios" / f"{name}.py"
        source = path.read_text() if path.is_file() else ""
        scenarios, mistakes = collect(load_module(source, str(path))) if source else ([], [])
        nb = nbformat.read(Path(root) / "solutions" / name / f"{name}.ipynb", as_version=4)
        end = prologue_end(nb)
        cells = [(i, c.source) for i, c in enumerate(nb.cells)
                 if c.cell_type == "code" and c.source.strip()
                 and not c.get("metadata", {}).get("nbgrader", {}).get("grade")]
        prologue = [c.source for c in nb.cells[:end] if c.cell_type == "code"
                    and c.source.strip()]
        return cls(name, source, str(path), scenarios, mistakes, cells, prologue,
                   sandbox_source(source) if source else "")

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
    return ast.unparse(tree)


def prologue_end(nb: NotebookNode) -> int:
    """Index of the notebook's first exercise cell (answer or test): the prologue ends there."""
    for index, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") or meta.get("grade"):
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


class References:
    """Reference outcomes (the solution's and each mistake's), per lesson and seed, computed
    in runs of the solution notebook's own cells and kept for the worker's lifetime."""

    def __init__(self) -> None:
        self.outcomes: dict[tuple[str, str], Any] = {}

    def ensure(self, host: Host, lesson: Lesson, runs: list[tuple[str, int]], *,
               timeout: float, budget: float, max_lines: int) -> None:
        missing = sorted({(n, s) for n, s in runs
                          if (lesson.name, f"{n}/{s}") not in self.outcomes})
        if not missing:
            return
        request = {"cells": lesson.reference_cells,
                   "prologue": len(lesson.prologue), "timeout": timeout,
                   "max_lines": max_lines, "files_from": None,
                   "observe": {"source": lesson.source, "filename": lesson.filename,
                               "runs": missing, "mistakes": True}}
        run = host.run(request, timeout=timeout, budget=budget)
        if run.outcomes is None:
            raise ScenarioBroken(f"the reference run of {lesson.name} did not finish "
                                 f"({run.outcome}: {one_line(run.detail, 300)})")
        for key, value in run.outcomes.items():
            self.outcomes[(lesson.name, key)] = value

    def get(self, lesson: str, key: str) -> Any:
        return self.outcomes.get((lesson, key))


# --------------------------------------------------------------------------------------------
# nbgrader's Execute, replaced

LAST_RUN: Run | None = None  # the latest run in this process, for timing reports
LAST_CHECKS: list[dict] = []  # the latest verdicts in this process, for reports


class ForkedExecute(NbGraderPreprocessor):
    """nbgrader's Execute step: the notebook runs confined, forked from the runner host, and
    each test cell's outputs become the trusted verdict on its exercise."""

    timeout = Integer(60, help="Seconds a cell may run.").tag(config=True)
    notebook_timeout = Integer(600, help="Seconds the whole notebook may run.").tag(config=True)
    memory_limit = Integer(4 * GiB, help="Memory of the notebook's processes, in bytes "
                                         "(0: no limit).").tag(config=True)
    max_lines = Integer(1000, help="Lines of a cell's stream output kept.").tag(config=True)
    threads = Integer(1, help="Threads for torch and OpenMP in the notebook.").tag(config=True)
    share_prologue = Bool(True, help="Run the lesson's unchanged worked examples once for all "
                                     "notebooks that have them.").tag(config=True)
    sandbox = Bool(True, help="Confine each notebook (namespaces, cgroup).").tag(config=True)
    course_root = Unicode("", help="The course root (scenarios/, solutions/).").tag(config=True)

    _host: Host | None = None
    preload: list[str] = []
    _lessons: dict[str, Lesson] = {}
    _references = References()
    _students: dict[str, dict[str, str]] = {}

    @classmethod
    def set_class(cls, students: dict[str, dict[str, str]]) -> None:
        """The students of each lesson in this run, each with the digest of the submission
        graded (`submission_digest`): reference outcomes are computed for all of them at once.
        The student about to be graded is always among them."""
        cls._students = {lesson: dict(ids) for lesson, ids in students.items()}

    def submission(self, lesson: str, student: str, cells: list[tuple[int, str]]) -> str:
        """The digest of the student's submission as the class run read it; graded outside
        one (nbgrader itself), that of the cells run."""
        known = self._students.get(lesson, {}).get(student)
        return known if known else submission_digest(json.dumps(cells).encode())

    def host(self) -> Host:
        cls = type(self)
        if cls._host is None:
            cls._host = Host(host_config(self.memory_limit, self.threads, self.sandbox,
                                         cls.preload))
            cls._host.start()
        return cls._host

    def lesson(self, name: str) -> Lesson:
        cls = type(self)
        if name not in cls._lessons:
            cls._lessons[name] = Lesson.load(Path(self.course_root), name)
        return cls._lessons[name]

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        global LAST_RUN, LAST_CHECKS
        info = resources.get("nbgrader", {})
        name, student = info.get("assignment", ""), info.get("student", "")
        root = Path(self.course_root)
        lesson = self.lesson(name)
        secret = course_secret(root)
        cells = []
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            meta = cell.get("metadata", {}).get("nbgrader", {})
            source = strip_hidden(cell.source) if meta.get("grade") else cell.source
            if source.strip():
                cells.append((index, source))
        for cell in nb.cells:  # what nbclient does before running a cell
            if cell.cell_type == "code":
                cell.outputs = []
                cell.execution_count = None
        end = prologue_end(nb)
        prologue = [source for index, source in cells if index < end]
        shared = self.share_prologue and prologue and prologue == lesson.prologue
        digest = self.submission(name, student, cells)
        runs = lesson.runs(secret, student, digest)
        visible = {s.name for s in lesson.scenarios if s.visible}
        files = resources.get("metadata", {}).get("path")
        # The hidden runs' seeds reach the notebook only after it has reported the visible
        # runs' outcomes (whose found values its feedback quotes).
        request = {"cells": cells, "prologue": len(prologue) if shared else 0,
                   "timeout": self.timeout, "max_lines": self.max_lines,
                   "files_from": _lesson_files(root, name),
                   "observe": {"source": lesson.student_source, "filename": "<scenarios>",
                               "runs": [r for r in runs if r[0] in visible],
                               "later": [r for r in runs if r[0] not in visible],
                               "mistakes": False} if lesson.scenarios else None}
        del files
        host = self.host()
        run = host.run(request, timeout=self.timeout, budget=self.notebook_timeout)
        self._apply(nb, cells, run)
        checks = self._verdicts(nb, lesson, student, digest, secret, run)
        LAST_RUN, LAST_CHECKS = run, checks
        return nb, resources

    def _apply(self, nb: NotebookNode, cells: list[tuple[int, str]], run: Run) -> None:
        stopped = False
        left = MAX_KEPT_OUTPUT_BYTES  # of the outputs kept, in bytes
        for index, _ in cells:
            cell = nb.cells[index]
            done = run.executed.get(index)
            if done is not None and not (run.cell == index and run.outcome == "oom"):
                kept, left = _within(done["outputs"], left)
                cell.outputs = [from_dict(o) for o in kept]
                cell.execution_count = done["execution_count"]
                if run.cell == index and run.outcome == "timeout":
                    cell.outputs.append(from_dict(timeout_output(self.timeout)))
                continue
            if not stopped and run.cell == index and run.outcome == "timeout":
                cell.outputs = [from_dict(timeout_output(self.timeout))]
            elif not stopped and run.cell == index and run.outcome == "oom":
                cell.outputs = [from_dict(error_output(
                    "MemoryError", "out of memory",
                    "The notebook's processes used more memory than the limit while this "
                    "cell ran, and were stopped."))]
            elif not stopped and run.cell == index and run.outcome == "died":
                cell.outputs = [from_dict(error_output(
                    DEAD_ENAME, "the process running the notebook ended",
                    "The process running this notebook ended while this cell ran: "
                    + (run.detail.splitlines() or ["it ended"])[0] + "."))]
            else:
                cell.outputs = [from_dict(_not_run_output(run))]
            stopped = True

    def _verdicts(self, nb: NotebookNode, lesson: Lesson, student: str, digest: str,
                  secret: bytes, run: Run) -> list[dict]:
        rows: list[dict] = []
        tests = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"
                 and c.get("metadata", {}).get("nbgrader", {}).get("grade")
                 and not c.get("metadata", {}).get("nbgrader", {}).get("solution")]
        if not tests:
            return rows
        outcomes = run.outcomes if isinstance(run.outcomes, dict) else {}
        stopped = checks_stopped(run)
        if lesson.scenarios:
            everyone = dict(self._students.get(lesson.name, {}), **{student: digest})
            runs = [r for who in sorted(everyone) for r in lesson.runs(secret, who,
                                                                        everyone[who])]
            self._references.ensure(self.host(), lesson, runs, timeout=self.timeout,
                                    budget=self.notebook_timeout, max_lines=self.max_lines)
        mistakes = list(enumerate(lesson.mistakes))
        for index, cell in tests:
            grade_id = cell.metadata["nbgrader"].get("grade_id", "")
            exercise = grade_id.rsplit("-test", 1)[0]
            scenarios = lesson.for_exercise(exercise)
            judged: list[ScenarioRun] = []
            for scenario in scenarios:
                seed = 0 if scenario.visible else scenario_seed(secret, student, exercise,
                                                                scenario.name, digest)
                key = f"{scenario.name}/{seed}"
                reference = read_outcome(self._references.get(lesson.name, key))
                wrong = []
                for i, known in mistakes:
                    if known.exercise == exercise:
                        raw = self._references.get(lesson.name, f"{key}/mistake/{i}")
                        wrong.append((known, None if raw is None else read_outcome(raw)))
                if run.outcomes is None:
                    student_outcome = Outcome(stopped=CHECKS_STOPPED[stopped] if stopped else (
                        "not checked: the notebook stopped before its answers could be "
                        "checked (see the first cell that did not finish)"))
                else:
                    try:
                        student_outcome = read_outcome(outcomes.get(key))
                    except ReportError:
                        student_outcome = read_outcome({"unreportable": "its report was malformed"})
                judged.append(ScenarioRun(scenario, reference, student_outcome, wrong))
            checks = judge_exercise(judged)
            rows += [c.row(grade_id) for c in checks]
            # Where the run stopped at this cell (time, memory, a death), the grader's own
            # note of it stays in front of the verdict: the notebook's status comes from it.
            stop = [o for o in cell.outputs if run.cell == index and o.get("ename") in
                    _STOP_ENAMES.get(run.outcome, ())]
            _verdict_outputs(cell, exercise, checks, run)
            cell.outputs = stop + list(cell.outputs)
        if stopped:  # the notebook's status comes from the first test cell's note of it
            _, cell = tests[0]
            note = error_output(CHECKS_STOPPED_ENAME, stopped, checks_stopped_text(stopped))
            cell.outputs = [from_dict(note)] + list(cell.outputs)
        return rows


# Why checking a notebook's answers stopped, by kind (the kind is what the autograded notebook
# records; the text is looked up, never read back from the notebook).
CHECKS_STOPPED = {
    "timeout": "its answers were still running on the grader's inputs when the time limit ran "
               "out (an endless loop on some input?)",
    "budget": "the notebook's time budget ran out while its answers ran on the grader's inputs",
    "oom": "its answers ran out of memory on the grader's inputs",
    "died": "the process running the notebook ended while its answers ran on the grader's "
            "inputs",
}


def checks_stopped(run: Run) -> str | None:
    """The kind of stop (a key of CHECKS_STOPPED) when the run ended while the scenarios ran
    the notebook's answers, after every cell had ended: no cell is to blame, and no check
    could be decided."""
    if not run.observing or run.outcomes is not None or run.outcome == "ok":
        return None
    if run.outcome == "timeout":
        return "budget" if run.budget_spent else "timeout"
    return "oom" if run.outcome == "oom" else "died"


def checks_stopped_text(kind: str) -> str:
    return f"Every cell ran, then checking the answers stopped: {CHECKS_STOPPED[kind]}."


def _lesson_files(root: Path, name: str) -> str | None:
    """The lesson's own data files (what the released folder holds besides the notebook)."""
    folder = root / "notebooks" / name
    if not folder.is_dir():
        return None
    extra = [p for p in folder.iterdir() if p.name != f"{name}.ipynb"
             and not p.name.startswith(".") and not p.is_symlink()]
    return str(folder) if extra else None


def _verdict_outputs(cell: NotebookNode, exercise: str, checks: list[Check], run: Run) -> None:
    """Replace a test cell's outputs with the trusted verdict on its exercise."""
    number = exercise.rsplit("ex", 1)[-1]
    if not checks:
        cell.outputs = [from_dict(error_output(
            CHECK_ENAME, "no trusted checks",
            f"Exercise {number} has no checks the grader can run; your instructor will "
            "grade it by hand."))]
        return
    passed = [c for c in checks if c.passed]
    lines = []
    for check in checks:
        kind = "visible example" if check.visible else "hidden check"
        mark = "✓" if check.passed else "✗"
        lines.append(f"{mark} {kind}: {check.title}")
        if not check.passed:
            for problem in check.problems[:4]:
                lines.append(f"    - {problem}")
            if check.mistake:
                lines.append(f"    likely mistake: {check.mistake}")
            lines += [f"    relation: {fact}" for fact in check.relations[:2]]
            lines += [f"    hint: {hint}" for hint in check.hints[:2]]
    summary = (f"Exercise {number}: {len(passed)} of {len(checks)} checks passed "
               "(checked by the grader on inputs drawn for you).")
    stream = {"output_type": "stream", "name": "stdout",
              "text": summary + "\n" + "\n".join(lines) + "\n"}
    outputs = [from_dict(stream)]
    if len(passed) != len(checks):
        first = next(c for c in checks if not c.passed)
        message = first.mistake or (first.relations or first.problems or ["a check failed"])[0]
        outputs.append(from_dict(error_output(CHECK_ENAME, one_line(message, 300),
                                              f"Exercise {number} is not right yet: "
                                              + one_line(message, 300))))
    cell.outputs = outputs


_VERDICT_SUMMARY = re.compile(r"^Exercise (\S+): \d+ of \d+ checks passed \(checked by the "
                              r"grader on inputs drawn for you\)\.$")
_CHECK_LINE = re.compile(r"^([✓✗]) (visible example|hidden check): ")
WITHHELD_NOTE = "The hidden checks' results are shown after the deadline."


def withhold_hidden_checks(cell: NotebookNode) -> None:
    """Remove the hidden checks' lines from a test cell's verdict (_verdict_outputs' text),
    counting the visible examples only; its error names a failed visible example, or goes."""
    stream = next((o for o in cell.get("outputs", []) if o.get("output_type") == "stream"
                   and _VERDICT_SUMMARY.match(o.get("text", "").split("\n", 1)[0])), None)
    if stream is None:
        return
    summary, *lines = stream.text.rstrip("\n").split("\n")
    number = _VERDICT_SUMMARY.match(summary).group(1)
    kept, keep, counts = [], False, [0, 0]
    failed: list[list[str]] = []  # per failed visible example: its mistake, then its problems
    for line in lines:
        check = _CHECK_LINE.match(line)
        if check:
            keep = check.group(2) == "visible example"
            if keep:
                counts[1] += 1
                counts[0] += check.group(1) == "✓"
                if check.group(1) == "✗":
                    failed.append([])
        elif keep and failed and line.startswith("    likely mistake: "):
            failed[-1].insert(0, line.removeprefix("    likely mistake: "))
        elif keep and failed and line.startswith("    - "):
            failed[-1].append(line.removeprefix("    - "))
        if keep:
            kept.append(line)
    failed_message = failed[0][0] if failed and failed[0] else None
    stream.text = (f"Exercise {number}: {counts[0]} of {counts[1]} visible examples passed.\n"
                   f"{WITHHELD_NOTE}\n" + "".join(f"{line}\n" for line in kept))
    outputs = [o for o in cell.outputs if not (o.get("output_type") == "error"
                                              and o.get("ename") == CHECK_ENAME)]
    if counts[0] < counts[1]:
        message = one_line(failed_message or "a visible example failed", 300)
        outputs.append(from_dict(error_output(
            CHECK_ENAME, message, f"Exercise {number} is not right yet: {message}")))
    cell.outputs = outputs


def _not_run_output(run: Run) -> dict:
    why = {"timeout": "an earlier cell ran past the time limit",
           "died": "the process running the notebook ended",
           "oom": "the notebook ran out of memory",
           "exit": "an earlier cell called exit()"}.get(run.outcome, "the run stopped")
    if run.budget_spent:
        why = "the notebook ran past its time budget"
    return error_output(NOT_RUN_ENAME, why, f"This cell was not run: {why}.")


def host_config(memory_limit: int, threads: int, sandbox: bool,
                preload: list[str] = ()) -> dict:
    """What the runner host needs: limits, the modules to import once, the folders its
    notebooks may read (this Python's environment and the course's shared package)."""
    import coursekit
    from autograder.sandbox.confine import python_paths
    readonly = python_paths() + [str(Path(coursekit.__file__).resolve().parent)]
    course_parent = str(Path(coursekit.__file__).resolve().parent.parent)
    # The course root itself is on sys.path when the grader runs from it: never expose it.
    readonly = [p for p in readonly if os.path.realpath(p) != os.path.realpath(course_parent)]
    return {"memory_limit": memory_limit, "threads": max(1, threads), "sandbox": sandbox,
            "readonly": readonly, "max_processes": 64,
            "preload": list(dict.fromkeys(["torch", "numpy", "matplotlib.pyplot", "coursekit",
                                           "coursekit.checks", "coursekit.scenarios",
                                           *preload]))}


def shutdown() -> None:
    if ForkedExecute._host is not None:
        ForkedExecute._host.stop()
        ForkedExecute._host = None
