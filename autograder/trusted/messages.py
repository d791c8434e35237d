"""What a sandbox reports, read by the grader: its pipes, their messages, and the clocks.

A notebook's process writes JSON lines on its events pipe and its runner host on the control
pipe (`autograder.protocol` lists every message and cap). `Messages` reads both: each message
is size-capped and validated, outputs keep only inert content (`autograder.trusted.outputs`),
and the time limits are kept on this process's clock and the notebook's CPU time (a per-cell
limit that only a genuine cell end re-arms, and a budget for the whole notebook), whatever the
notebook sends. The result is a `Run`: what happened, as the grader established it.
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import signal
import time
from typing import Any, Callable

from autograder import protocol
from autograder.intake.jsonscan import scan
from autograder.trusted.outputs import clean_done
from autograder.trusted.payload import Payload
from autograder.trusted.run import Run

GRACE_SECONDS = 3.0  # after a cell's limit, how long its process has before it is killed
# A cell's limit is CPU time: kept inside the sandbox (a timer that stops the cell cleanly),
# and by the grader, which reads the CPU time of the notebook's whole process tree from its
# cgroup. The grader's wall clock allows this many times the limit (a loaded machine: it must
# never decide for a cell that computes), for cells that only wait.
WALL_FACTOR = 10
CPU_POLL_SECONDS = 0.25  # how often the grader reads the notebook's CPU time
_NEWLINES = re.compile(rb"\n{2,}")


def read_lines(fd: int, buffer: bytearray) -> tuple[list[bytes], bool, int]:
    """Read what is there; return the complete lines that are not empty, whether the pipe has
    closed, and how many bytes were read (newlines included: a flood of empty lines counts
    too). Only the bytes just read are searched for a newline, so a line without end costs no
    rescanning, and lines are split in one pass."""
    chunk = os.read(fd, protocol.READ_BYTES)
    if not chunk:
        return [], True, 0
    if b"\n" not in chunk:
        buffer += chunk
        return [], False, len(chunk)
    # Runs of newlines become one first: a flood of empty lines costs no object per line.
    buffer += _NEWLINES.sub(b"\n", chunk)
    *complete, rest = buffer.split(b"\n")
    buffer[:] = rest
    return [bytes(line) for line in complete if line], False, len(chunk)


class Messages:
    """Reads one notebook's events and control pipes until its host says it has ended: one
    method per message (`autograder.protocol`), the clocks checked on every pass."""

    def __init__(self, request: dict, timeout: float, budget: float,
                 payload: Payload | None = None) -> None:
        self.run = Run()
        self.timeout = timeout
        self.payload = payload
        self.started = time.monotonic()
        self.order = [index for index, _ in request["cells"]]
        self.prologue = int(request.get("prologue") or 0)
        self.position = 0  # the next cell whose end is awaited (into `order`)
        self.awaited_since: dict[int, float] = {}  # position -> when its end was awaited
        # However the notebook reports, it never runs longer than every cell's limit together
        # (plus one limit for its observations), nor past the notebook's budget.
        self.wall = timeout * WALL_FACTOR + GRACE_SECONDS
        self.notebook_deadline = self.started + min(budget, (len(self.order) + 1) * self.wall)
        self.deadline = min(self.started + self.wall, self.notebook_deadline)
        self.received = 0
        self.events_open = self.control_open = True
        self.pid: int | None = None
        self.status: int | None = None
        self.oom = False
        self.limit_hit = False  # its memory reached the limit (then a stall or a death is memory's)
        self.oom_at: int | None = None
        self.killed = False
        self.observing_since = 0.0
        # The scenario runs in two phases when the request has later runs (the hidden ones):
        # their seeds go to the notebook only once it has reported the first runs' outcomes,
        # which are kept as they were then (a later report cannot change them).
        observe = request.get("observe") or {}
        self.first_runs = observe.get("runs") or []
        self.later_runs = observe.get("later") or []
        self.first: dict | None = None
        self.cpu_path: str | None = None  # the notebook's CPU time (the host names the file)
        self.cpu_since: dict[int, float] = {}  # position -> its CPU time when it was awaited
        self.cpu_checked = self.started  # when its CPU time was last read
        self.on_control: dict[str, Callable[[dict], None]] = {
            protocol.PROLOGUE: self.prologue_ran, protocol.PROLOGUE_LOST: self.prologue_lost,
            protocol.FORKED: self.forked, protocol.OOM: self.out_of_memory,
            protocol.EXITED: self.exited, protocol.FAILED: self.failed}
        self.on_event: dict[str, Callable[[dict], None]] = {
            protocol.DONE: self.done, protocol.EXIT: self.exit,
            protocol.CELLS_DONE: self.cells_done, protocol.OBSERVING: self.observing,
            protocol.OBSERVING_TIMED_OUT: self.observing_timed_out,
            protocol.OBSERVED: self.observed, protocol.OBSERVATIONS: self.observations,
            protocol.END: self.end, protocol.CRASH: self.crash}

    # ---------------------------------------------------------------------------------------
    # The loop

    def collect(self, events: int, control: int) -> Run:
        """Read both pipes until the host reports the end (or, once the notebook is killed,
        until it stays silent); then settle the outcome."""
        ev_buf, ctl_buf = bytearray(), bytearray()
        while self.control_open:
            watched = [fd for fd, is_open in ((events, self.events_open),
                                              (control, self.control_open)) if is_open]
            wait = (max(0.0, self.deadline - time.monotonic()) if not self.killed
                    else GRACE_SECONDS * 4)
            if self.cpu_path and not self.killed:
                wait = min(wait, CPU_POLL_SECONDS)
            ready, _, _ = select.select(watched, [], [], wait)
            if not ready and self.killed:
                break  # the host never reported the end: give up on this run
            # The clocks are read on every pass, not only when the notebook is quiet: a
            # notebook that keeps its pipe busy is stopped on time all the same.
            if self.check_clocks(time.monotonic()) or not ready:
                continue
            if control in ready:
                lines, closed, _ = read_lines(control, ctl_buf)
                self.control_open = not closed and len(ctl_buf) <= protocol.MAX_MESSAGE_BYTES
                for line in lines:
                    message = _json(line)
                    handler = self.on_control.get(_event(message))
                    if handler is not None:
                        handler(message)
            if self.events_open and events in ready:
                lines, closed, size = read_lines(events, ev_buf)
                self.events_open = not closed
                self.received += size
                if self.received > protocol.MAX_EVENTS_BYTES \
                        or len(ev_buf) > protocol.MAX_MESSAGE_BYTES \
                        or any(len(line) > protocol.MAX_MESSAGE_BYTES for line in lines):
                    self.stop("died", "it sent more output than the grader keeps")
                    ev_buf.clear()
                    lines = []
                self.notebook_lines(lines)
            if not self.events_open and not self.killed and self.pid:
                self.kill()  # its pipe is closed: it has ended, or closed it; stop it either way
        return self.settle()

    def notebook_lines(self, lines: list[bytes]) -> None:
        """The notebook's messages, in order; one the grader cannot read stops it."""
        for line in lines:
            if self.run.finished:
                continue
            try:
                message = _message(line)
                if message is None:
                    self.stop("died", "it sent more output than the grader keeps")
                    break
                handler = self.on_event.get(_event(message))
                if handler is not None:
                    handler(message)
            except Exception:  # noqa: BLE001 (a report shaped to break the grader)
                self.stop("died", "it sent a report the grader could not read")
                self.run.outcomes = None
            if not self.events_open:
                break

    def check_clocks(self, now: float) -> bool:
        """Past the cell's or the notebook's wall clock, or past its CPU time: a timeout (the
        notebook is killed, and True returned)."""
        run = self.run
        if self.killed or (now < self.deadline and now < self.cpu_checked + CPU_POLL_SECONDS):
            return False
        over = now >= self.deadline
        if over:
            run.budget_spent = now >= self.notebook_deadline
        else:
            self.cpu_checked = now
            used = _cpu_seconds(self.cpu_path)
            if used is not None:
                cell_over = (used - self.cpu_since.get(self.position, 0.0)
                             > self.timeout + GRACE_SECONDS)
                notebook_over = used > (len(self.order) + 1) * self.timeout + GRACE_SECONDS
                over = cell_over or notebook_over
                run.budget_spent = notebook_over and not cell_over
        if over:
            run.outcome = "timeout"
            run.cell = (None if run.observing or self.position >= len(self.order)
                        else self.order[self.position])
            self.kill()
        return over

    def mark(self, at: int) -> None:
        """The grader begins to await the end of the cell at position `at`."""
        self.awaited_since[at] = time.monotonic()
        used = _cpu_seconds(self.cpu_path)
        if used is not None:
            self.cpu_since[at] = used

    def kill(self) -> None:
        if self.pid and not self.killed:
            for target in (lambda: os.killpg(self.pid, signal.SIGKILL),
                           lambda: os.kill(self.pid, signal.SIGKILL)):
                try:
                    target()
                except (ProcessLookupError, PermissionError):
                    pass
        self.killed = True

    def stop(self, outcome: str, detail: str) -> None:
        """End the run at the awaited cell, reading nothing more it sends."""
        self.run.outcome, self.run.detail = outcome, detail
        self.run.cell = (self.order[self.position] if self.position < len(self.order)
                         else None)
        self.kill()
        self.events_open = False

    def settle(self) -> Run:
        """The outcome once the pipes are done: memory's when it reached the limit, a death
        when the notebook never said it had finished."""
        run, order, position = self.run, self.order, self.position
        run.seconds = time.monotonic() - self.started
        if self.limit_hit and (run.outcome in ("timeout", "died") or not run.finished):
            self.oom = True  # the same verdict however busy the machine was
        if self.oom:
            if run.outcome == "timeout" and run.cell is not None:
                position = order.index(run.cell) if run.cell in order else position
            run.outcome = "oom"
            if self.oom_at is not None:
                position = min(position, self.oom_at)
            # Past the last cell, the memory ran out while the scenarios ran its answers: no
            # cell is to blame (the test cells say so).
            run.cell = (order[position] if position < len(order)
                        else None if run.observing else (order[-1] if order else None))
        elif not run.finished and run.outcome == "ok":
            run.outcome = "died"
            run.cell = order[position] if position < len(order) else None
            run.detail = (_describe_status(self.status) if self.status is not None
                          else "it was killed") + (f"\n{run.detail}" if run.detail else "")
        return run

    # ---------------------------------------------------------------------------------------
    # The runner host's messages (control pipe)

    def prologue_ran(self, message: dict) -> None:
        for done in message.get("executed", [])[:self.prologue]:
            if _valid_done(done):
                self.run.executed[done["index"]] = clean_done(done)
                self.run.shared_seconds += _seconds(done.get("seconds"))
        if self.prologue > self.position:
            self.position = self.prologue
            self.mark(self.position)

    def prologue_lost(self, message: dict) -> None:
        self.run.executed.clear()
        self.run.shared_seconds = 0.0
        self.position = 0

    def forked(self, message: dict) -> None:
        if not isinstance(message.get("pid"), int):
            return
        self.pid = self.run.pid = message["pid"]
        found = message.get("cpu_file")
        # Its cgroup's, or (without one) the file its host keeps from /proc.
        if isinstance(found, str) and ".." not in found and (
                found.startswith("/sys/fs/cgroup/")
                or os.path.basename(found).startswith("autograder-cpu-")):
            self.cpu_path = found
            self.mark(self.position)
        if self.killed:  # asked before its pid was known
            self.killed = False
            self.kill()

    def out_of_memory(self, message: dict) -> None:
        if self.oom_at is None:
            self.oom_at = self.position  # the cell awaited when its memory ran out
            self.oom = True

    def exited(self, message: dict) -> None:
        # Its process is reaped (its namespace gone with it): its pid may be another
        # process's from now on, so it is never signalled again.
        self.pid = None
        self.status = message.get("status") if isinstance(message.get("status"), int) else None
        self.oom = bool(message.get("oom"))
        self.limit_hit = bool(message.get("memory_limit_hit"))
        self.control_open = False

    def failed(self, message: dict) -> None:
        self.run.outcome, self.run.detail = "died", "the grader could not start it"
        self.control_open = False

    # ---------------------------------------------------------------------------------------
    # The notebook's messages (events pipe: untrusted)

    def done(self, message: dict) -> None:
        run, order = self.run, self.order
        if not _valid_done(message):
            return
        if message["index"] in order[:self.position]:
            # A second end of a cell already ended: one of the two was forged by the notebook
            # (to re-arm the clock). The grader awaited that cell from the earlier of the two,
            # so it knows how long the cell really ran.
            at = order.index(message["index"])
            ran = time.monotonic() - self.awaited_since.get(at, self.started)
            used = _cpu_seconds(self.cpu_path)
            computed = used - self.cpu_since.get(at, 0.0) if used is not None else 0.0
            run.cell = message["index"]
            if ran > self.wall or computed > self.timeout:
                run.outcome = "timeout"
            else:
                run.outcome = "died"
                run.detail = "it reported a cell's end that its runner did not (forged)"
            for later in order[at + 1:]:  # what it claimed after that is void
                run.executed.pop(later, None)
            run.outcomes = None
            run.forged = True
            self.kill()
            self.events_open = False
            return
        if self.position < len(order) and message["index"] == order[self.position] \
                and not run.observing:
            run.executed[message["index"]] = clean_done(message)
            run.cell_seconds += max(0.0, min(_seconds(message.get("seconds")), self.timeout))
            self.position += 1
            self.mark(self.position)
            if message.get("timed_out"):
                run.outcome, run.cell = "timeout", message["index"]
            else:  # the next cell's limit starts now (never past the budget)
                self.deadline = min(time.monotonic() + self.wall, self.notebook_deadline)

    def exit(self, message: dict) -> None:
        if not self.run.observing:
            self.run.outcome = "exit"
            self.run.cell = self.order[self.position - 1] if self.position else None

    def cells_done(self, message: dict) -> None:
        if self.position >= len(self.order) and self.payload:
            self.payload.release()  # every cell genuinely ended: now the scenarios

    def observing(self, message: dict) -> None:
        if self.position >= len(self.order) and not self.run.observing:
            self.run.observing = True
            self.observing_since = time.monotonic()
            self.mark(self.position)
            self.deadline = min(time.monotonic() + self.wall, self.notebook_deadline)

    def observing_timed_out(self, message: dict) -> None:
        if self.run.observing and self.run.outcomes is None:
            self.run.outcome, self.run.cell = "timeout", None  # its own timer: it loses by it
            self.kill()

    def observed(self, message: dict) -> None:
        if self.run.observing and self.later_runs and self.payload \
                and self.first is None and self.run.outcomes is None:
            self.first = _outcomes_of(message.get("outcomes"), self.first_runs)
            self.payload.release_later()  # only now do the later seeds leave the grader

    def observations(self, message: dict) -> None:
        run = self.run
        if run.observing and run.outcomes is None:
            run.observe_seconds = time.monotonic() - self.observing_since
            outcomes = message.get("outcomes")
            # The fresh starts of the first (visible) runs come last, with the later runs'.
            fresh = {key: value for key, value in _outcomes_of(outcomes, self.first_runs).items()
                     if key.endswith("/fresh")}
            run.outcomes = ({**_outcomes_of(outcomes, self.later_runs), **fresh,
                             **(self.first or {})}
                            if self.later_runs else _outcomes_of(outcomes, self.first_runs))

    def end(self, message: dict) -> None:
        self.run.finished = True
        self.kill()  # whatever it still runs ends now

    def crash(self, message: dict) -> None:
        if isinstance(message.get("detail"), str):
            self.run.detail = message["detail"][-protocol.MAX_CRASH_CHARS:]


def collect(events: int, control: int, request: dict, timeout: float, budget: float,
            payload: Payload | None = None) -> Run:
    """What the notebook of `request` did, read from its events and control pipes."""
    return Messages(request, timeout, budget, payload).collect(events, control)


def _outcomes_of(reported: Any, runs: list) -> dict:
    """Of a report's outcomes, those of `runs` (keyed "<scenario>/<seed>", and below that for
    a mistake's, or for the run on a fresh start, "<scenario>/<seed>/fresh"); {} when the
    report is not a dict."""
    if not isinstance(reported, dict):
        return {}
    prefixes = {f"{name}/{seed}" for name, seed in runs}
    return {key: value for key, value in reported.items()
            if isinstance(key, str) and (key.split("/mistake/")[0] in prefixes or
                                         key.endswith("/fresh") and key[:-6] in prefixes)}


def _caps(line: bytes) -> tuple[int, int, int]:
    """(bytes, containers and values, containers) a notebook's line may hold, by the event it
    claims at its start: the outcomes get the most, a cell's end less, any other a few."""
    start = line[:40]
    if any(start.startswith(b'{"event": "%s"' % e.encode()) for e in protocol.OUTCOMES_EVENTS):
        return (protocol.MAX_MESSAGE_BYTES, protocol.MAX_OUTCOMES_VALUES,
                protocol.MAX_OUTCOMES_CONTAINERS)
    if start.startswith(b'{"event": "%s"' % protocol.DONE.encode()):
        return protocol.MAX_MESSAGE_BYTES, protocol.MAX_DONE_VALUES, protocol.MAX_DONE_CONTAINERS
    return (protocol.MAX_OTHER_EVENT_BYTES, protocol.MAX_OTHER_EVENT_VALUES,
            protocol.MAX_OTHER_EVENT_VALUES)


def _message(line: bytes) -> dict | None:
    """A notebook's message, counted before it is parsed: None when it holds more than its
    event may (the notebook is stopped); {} when it is no message (nested deeper than any)."""
    most_bytes, most_values, most_containers = _caps(line)
    found = scan(line, most_values, protocol.MAX_MESSAGE_DEPTH, max_containers=most_containers)
    if found.over == "depth":
        return {}
    return None if found.over or len(line) > most_bytes else _json(line)


def _json(line: bytes) -> dict:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return {}
    return message if isinstance(message, dict) else {}


def _event(message: dict) -> str:
    """The name of a message's event; "" when it names none."""
    event = message.get("event")
    return event if isinstance(event, str) else ""


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


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"it was ended by {_signal_name(os.WTERMSIG(status))}"
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
