"""Run a notebook's code cells in a process forked for it, and record outputs as a kernel would.

nbgrader executes a submission in a fresh Jupyter kernel: a new process that imports torch and
everything else again, about 4 s before the first cell runs. Here a grading worker that has
already imported the course's libraries forks a child for each notebook. The child runs the
cells with IPython's InteractiveShell, as ipykernel does, and records their outputs in nbformat
shape: streams (including what C code writes to file descriptors 1 and 2), rich displays
(matplotlib figures through the inline backend), results and errors with IPython's tracebacks.

Every submission runs in its own process: the worker itself never runs student code, and
each child starts from the worker's state. With `share_prologue` (only with one thread per
notebook) the cells before the first exercise run once in a zygote process, forked from the
worker, and each notebook's child is forked from that zygote instead. Those cells are
student-edited code too: a zygote is shared only by notebooks whose prologue is exactly the
same, and whatever that code did (modules, globals, background threads) is the starting state
of each of them.

A notebook's process keeps descriptors 0-2 and its own channel to the worker and nothing else
that it inherited (not the worker's socket to the pool, nor other notebooks' channels); each
child of a zygote reports on a pipe of its own, and only the zygote reports on the zygote's
socket. As in plain nbgrader, where the kernel runs as the same user as the grader, a
notebook's process holds the notebook's own cells, hidden tests included, and could read what
that user can read (solutions/, gradebook.db).

The child runs in its own session under a memory limit (RLIMIT_AS), with a time limit per cell
(SIGALRM, then SIGKILL from the worker when the cell ignores it) and a cap on kept output.
When it dies (os._exit, a signal, the kernel's OOM killer), the cell it was running gets an
error output that says so. Reading stops at the child's "end" report or when it has exited,
even if a process it started keeps the pipe open; its process group is killed then.

`ForkedExecute` is the nbgrader preprocessor that replaces nbgrader's `Execute` in
`Autograde.autograde_preprocessors`; everything else in autograding stays nbgrader's.
"""

from __future__ import annotations

from autograder import _imports  # noqa: F401 (first: a quicker jsonschema import)

import atexit
import ctypes
import hashlib
import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from nbformat import NotebookNode, from_dict
from traitlets import Bool, Integer

from nbgrader.preprocessors import NbGraderPreprocessor

TIMEOUT_ENAME = "CellTimeoutError"
DEAD_ENAME = "DeadKernelError"
NOT_RUN_ENAME = "CellNotRunError"
GRACE_SECONDS = 3.0  # after SIGALRM, how long a cell has before its process is killed
ZYGOTE_ANSWER_SECONDS = 30.0  # for a zygote to report a fork or a child's exit
MAX_STREAM_BYTES = 4_000_000  # text kept per cell and stream; the rest is dropped
MAX_DISPLAY_BYTES = 20_000_000  # rich output kept per cell
GiB = 1 << 30
MAX_FILE_BYTES = 256 << 20  # no file a notebook writes (its captured output included) grows past this


class CellTimeout(BaseException):
    """Raised in a cell that runs past its time limit (a BaseException: `except Exception` in a
    student's loop does not swallow it)."""


def _ansi_red(text: str) -> str:
    return f"\x1b[0;31m{text}\x1b[0m"


def error_output(ename: str, evalue: str, message: str | None = None) -> dict:
    line = f"{_ansi_red(ename)}: {message or evalue}"
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": [line]}


# --------------------------------------------------------------------------------------------
# In the child: an InteractiveShell whose outputs go into a list instead of the terminal.

class _Recorder:
    """Collects the outputs of the cell being run, in nbformat's JSON shape."""

    def __init__(self, max_lines: int) -> None:
        self.max_lines = max_lines
        self.reset()

    def reset(self) -> None:
        self.outputs: list[dict] = []
        self.clear_pending = False
        self.stream_bytes = {"stdout": 0, "stderr": 0}
        self.stream_lines = {"stdout": 0, "stderr": 0}
        self.display_bytes = 0
        self.truncated = set()

    def _before_output(self) -> None:
        if self.clear_pending:
            self.outputs.clear()
            self.clear_pending = False

    def stream(self, name: str, text: str) -> None:
        if not text:
            return
        # Keep a little more than LimitOutput shows, so that its truncation is nbgrader's.
        if self.stream_lines[name] > self.max_lines + 1 or \
                self.stream_bytes[name] > MAX_STREAM_BYTES:
            if name not in self.truncated:
                self.truncated.add(name)
                self._append_stream(name, "\n... output truncated by the grader ...\n")
            return
        self.stream_bytes[name] += len(text)
        self.stream_lines[name] += text.count("\n")
        self._append_stream(name, text)

    def _append_stream(self, name: str, text: str) -> None:
        self._before_output()
        last = self.outputs[-1] if self.outputs else None
        if last is not None and last["output_type"] == "stream" and last["name"] == name:
            last["text"] += text
        else:
            self.outputs.append({"output_type": "stream", "name": name, "text": text})

    def _rich(self, output: dict) -> None:
        size = sum(len(str(v)) for v in output.get("data", {}).values())
        if self.display_bytes + size > MAX_DISPLAY_BYTES:
            self.stream("stderr", "... display output dropped by the grader (too large) ...\n")
            return
        self.display_bytes += size
        self._before_output()
        self.outputs.append(output)

    def display(self, data: dict, metadata: dict | None, transient: dict | None,
                update: bool) -> None:
        display_id = (transient or {}).get("display_id")
        if update and display_id is not None:
            for output in self.outputs:  # update_display_data replaces in place
                if output.get("_display_id") == display_id:
                    output["data"], output["metadata"] = _jsonable(data), _jsonable(metadata or {})
            return
        output = {"output_type": "display_data", "data": _jsonable(data),
                  "metadata": _jsonable(metadata or {})}
        if display_id is not None:
            output["_display_id"] = display_id
        self._rich(output)

    def result(self, data: dict, metadata: dict, execution_count: int) -> None:
        self._rich({"output_type": "execute_result", "data": _jsonable(data),
                    "metadata": _jsonable(metadata), "execution_count": execution_count})

    def error(self, ename: str, evalue: str, traceback_lines: list[str]) -> None:
        self._before_output()
        self.outputs.append({"output_type": "error", "ename": ename, "evalue": evalue,
                             "traceback": list(traceback_lines)})

    def clear(self, wait: bool) -> None:
        if wait:
            self.clear_pending = True
        else:
            self.outputs.clear()
            self.clear_pending = False

    def take(self) -> list[dict]:
        outputs = self.outputs
        for output in outputs:
            output.pop("_display_id", None)
        self.reset()
        return outputs


def _jsonable(value: Any) -> Any:
    """Display data as JSON would carry it (what a kernel sends over ZMQ)."""
    return json.loads(json.dumps(value, default=str))


_recorder: _Recorder | None = None


class _Stream:
    """sys.stdout / sys.stderr of the child: text goes to the recorder."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, name: str, fd: int) -> None:
        self.name = name
        self._fd = fd

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if _recorder is not None:
            _recorder.stream(self.name, text)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._fd

    def readable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    @property
    def closed(self) -> bool:
        return False


def make_shell():
    """Create the InteractiveShell that forked children run cells with (call once per worker)."""
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    class RecordingDisplayHook(DisplayHook):
        def start_displayhook(self):
            pass

        def write_output_prompt(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            if _recorder is not None:
                _recorder.result(format_dict, md_dict or {}, self.shell.execution_count)

        def finish_displayhook(self):
            pass

    class RecordingDisplayPublisher(DisplayPublisher):
        def publish(self, data, metadata=None, source=None, *, transient=None, update=False,
                    **kwargs):
            if _recorder is not None:
                _recorder.display(data, metadata, transient, update)

        def clear_output(self, wait=False):
            if _recorder is not None:
                _recorder.clear(wait)

    class GradingShell(InteractiveShell):
        displayhook_class = RecordingDisplayHook
        display_pub_class = RecordingDisplayPublisher

        def _showtraceback(self, etype, evalue, stb):
            if _recorder is not None:
                _recorder.error(etype.__name__, str(evalue), stb)

        def enable_gui(self, gui=None):
            pass

    config = Config()
    config.HistoryManager.enabled = False
    config.InteractiveShell.colors = "linux"
    config.InteractiveShell.autoindent = False
    config.InteractiveShell.xmode = "Context"
    shell = GradingShell.instance(config=config)
    return shell


_PRISTINE_WARNING_FILTERS = list(warnings.filters)


def prepare_worker(preload: list[str] | tuple[str, ...] = ()) -> None:
    """Set up a grading worker before any fork: the shell, the inline matplotlib backend, the
    modules the lessons import, and the lazy parts of IPython and matplotlib that every
    notebook would otherwise load again (traceback formatting, fonts)."""
    import importlib
    import io

    _PRISTINE_WARNING_FILTERS[:] = list(warnings.filters)
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shell = make_shell()
        for name in preload:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 (a notebook's own import will report it)
                pass
        try:
            import matplotlib
            matplotlib.use("module://matplotlib_inline.backend_inline")
            import matplotlib_inline.backend_inline  # noqa: F401 (hooks figures into the shell)
            import matplotlib.pyplot as plt
            figure = plt.figure(figsize=(1, 1))
            figure.gca().plot([0, 1], [0, 1], label="x")
            figure.gca().set_title("warm-up")
            figure.savefig(io.BytesIO(), format="png")
            plt.close(figure)
        except ImportError:  # pragma: no cover (matplotlib is a course dependency)
            pass
        try:
            raise ValueError("warm-up")
        except ValueError:
            etype, value, tb = sys.exc_info()
            shell.InteractiveTB.structured_traceback(etype, value, tb)
        shell.display_formatter.format(1.5)


def _set_parent_death_signal() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the parent
    except (OSError, AttributeError):  # pragma: no cover (not Linux)
        pass


def _close_inherited(keep: tuple[int, ...]) -> None:
    """In a freshly forked process that will run student code: close every inherited descriptor
    but 0-2 and `keep` (the worker's socket to the pool, other notebooks' channels, ...). Each
    one is replaced by /dev/null rather than closed, so that its number is not reused while a
    Python object that still names it exists."""
    kept = {0, 1, 2, *keep}
    null = os.open(os.devnull, os.O_RDWR)
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # pragma: no cover (no /proc)
        fds = list(range(3, max(kept | {null}) + 256))
    for fd in fds:
        if fd in kept or fd == null:
            continue
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    os.close(null)


class _Channel:
    """JSON lines to the worker, on a pipe or a socket."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            written = os.write(self.fd, data)
            data = data[written:]


def _on_alarm(signum, frame):
    raise CellTimeout()


def _enter_process(memory_limit: int, threads: int) -> None:
    """Make this freshly forked process a notebook's: own session, limits, no terminal."""
    import resource

    os.setsid()
    _set_parent_death_signal()
    if memory_limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Output without end from C code or a subprocess (`yes`) must not fill the disk: past the
    # limit a write fails (EFBIG) instead of killing the process.
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull)
    if threads > 0:  # this notebook's share of the cores (no oversubscription)
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[name] = str(threads)
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(threads)
    # The worker silences warnings while nbgrader works; a notebook sees Python's defaults.
    warnings.filters[:] = _PRISTINE_WARNING_FILTERS
    warnings._filters_mutated()
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _capture_output() -> dict:
    """sys.stdout/stderr to the recorder; file descriptors 1 and 2 (C code) to fresh files,
    read after each cell."""
    captures = {}
    for fd, name in ((1, "stdout"), (2, "stderr")):
        handle = tempfile.TemporaryFile()
        os.dup2(handle.fileno(), fd)
        captures[name] = [handle, 0]
    sys.stdout = _Stream("stdout", 1)
    sys.stderr = _Stream("stderr", 2)
    sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
    return captures


def _enter_folder(cwd: str, previous: str | None = None) -> None:
    os.chdir(cwd)
    if previous and previous in sys.path:
        sys.path.remove(previous)
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def _run_here(cells: list[tuple[int, str]], channel: _Channel, timeout: float, max_lines: int,
              captures: dict) -> str:
    """Run `cells` in this process's shell, reporting each; return ok, timeout or exit."""
    global _recorder
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    _recorder = _Recorder(max_lines)
    for index, source in cells:
        channel.send({"event": "start", "index": index})
        timed_out = False
        count = shell.execution_count
        began = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            result = shell.run_cell(source, store_history=True)
            signal.setitimer(signal.ITIMER_REAL, 0)
            count = result.execution_count or count
            if isinstance(result.error_in_exec, CellTimeout):
                timed_out = True
        except CellTimeout:  # raised outside the cell's code (in a hook, for example)
            timed_out = True
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        seconds = time.perf_counter() - began
        for name, capture in captures.items():
            handle, seen = capture
            size = os.fstat(handle.fileno()).st_size
            if size > seen:
                handle.seek(seen)
                data = handle.read(min(size - seen, MAX_STREAM_BYTES))
                capture[1] = size
                _recorder.stream(name, data.decode("utf-8", "replace"))
        outputs = _recorder.take()
        for output in outputs:
            if output["output_type"] == "execute_result":
                output["execution_count"] = count
        if timed_out:
            outputs = [o for o in outputs
                       if not (o["output_type"] == "error" and o["ename"] == "CellTimeout")]
            outputs.append(timeout_output(timeout))
        channel.send({"event": "done", "index": index, "outputs": outputs,
                      "execution_count": count, "timed_out": timed_out, "seconds": seconds})
        if timed_out:
            return "timeout"
        if getattr(shell, "exit_now", False):
            channel.send({"event": "exit", "index": index})
            return "exit"
    return "ok"


def _report_crash(channel_fd: int) -> None:
    try:
        os.write(channel_fd, (json.dumps({"event": "crash", "detail": traceback.format_exc()})
                              + "\n").encode())
    except OSError:
        pass


def _enter_forked(fd: int, memory_limit: int, threads: int, folder: str) -> tuple:
    """First steps of a forked process that runs notebook code: keep only its own channel,
    apply the limits, capture output, move into `folder`; return (channel, captures)."""
    _close_inherited((fd,))
    channel = _Channel(fd)
    _enter_process(memory_limit, threads)
    captures = _capture_output()
    _enter_folder(folder)
    return channel, captures


def _child_main(cells: list[tuple[int, str]], cwd: str, timeout: float, memory_limit: int,
                max_lines: int, write_fd: int, threads: int = 0) -> None:
    """Run in the forked child: execute the cells, report each one on `write_fd`, never return."""
    code = 0
    try:
        channel, captures = _enter_forked(write_fd, memory_limit, threads, cwd)
        _run_here(cells, channel, timeout, max_lines, captures)
        channel.send({"event": "end"})
    except BaseException:  # noqa: BLE001 (report anything, then leave)
        code = 70
        _report_crash(write_fd)
    finally:
        os._exit(code)


def _zygote_main(prologue: list[tuple[int, str]], scratch: str, timeout: float,
                 memory_limit: int, max_lines: int, sock_fd: int, threads: int) -> None:
    """A process that runs a lesson's prologue (the cells before its first exercise), then
    forks a child for each notebook that shares it; never returns."""
    code = 0
    try:
        channel, captures = _enter_forked(sock_fd, memory_limit, threads, scratch)
        before = sorted(os.listdir(scratch))
        outcome = _run_here(prologue, channel, timeout, max_lines, captures)
        clean = sorted(os.listdir(scratch)) == before  # a prologue that writes files is not shared
        channel.send({"event": "prologue", "outcome": outcome, "clean": clean})
        if outcome != "ok" or not clean:
            return
        # Each request comes with the write end of a pipe of its own: the notebook's child
        # reports there, never on this socket, so nothing it writes is read as another run's.
        requests = socket.socket(fileno=os.dup(sock_fd))
        buffer, fds = b"", []
        while True:
            data, received, _, _ = socket.recv_fds(requests, 1 << 20, 8)
            fds += received
            if not data:
                return
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                request = json.loads(line)
                if not fds:
                    raise RuntimeError("a request without its channel")
                channel_fd = fds.pop(0)
                pid = os.fork()
                if pid == 0:
                    _grandchild_main(request, scratch, timeout, max_lines, channel_fd)
                os.close(channel_fd)
                channel.send({"event": "forked", "pid": pid})
                _, status = os.waitpid(pid, 0)
                channel.send({"event": "exited", "pid": pid, "status": status})
    except BaseException:  # noqa: BLE001
        code = 70
        _report_crash(sock_fd)
    finally:
        os._exit(code)


def _grandchild_main(request: dict, scratch: str, timeout: float, max_lines: int,
                     channel_fd: int) -> None:
    """A notebook's process forked from a zygote: the prologue has run; run the rest and
    report on `channel_fd`, its own pipe to the worker."""
    code = 0
    sock_fd = channel_fd
    try:
        _close_inherited((channel_fd,))  # the zygote's socket and its duplicate among them
        channel = _Channel(channel_fd)
        os.setsid()
        _set_parent_death_signal()
        captures = _capture_output()
        _enter_folder(request["cwd"], previous=scratch)
        _run_here([tuple(cell) for cell in request["cells"]], channel, timeout, max_lines,
                  captures)
        channel.send({"event": "end"})
    except BaseException:  # noqa: BLE001
        code = 70
        _report_crash(sock_fd)
    finally:
        os._exit(code)


def timeout_output(timeout: float) -> dict:
    return error_output(TIMEOUT_ENAME, "",
                        f"This cell ran for more than {timeout:g} s, the time limit per cell, "
                        "and was stopped.")


@dataclass
class Run:
    """What happened when a notebook was run."""

    outcome: str = "ok"  # ok | timeout | died | exit
    detail: str = ""
    cell: int | None = None  # index of the cell that timed out or where the process ended
    seconds: float = 0.0  # from the fork to the child's end
    cell_seconds: float = 0.0  # running time of the cells run for this notebook
    shared_seconds: float = 0.0  # running time of its prologue, run once and shared
    executed: dict[int, dict] = field(default_factory=dict)
    finished: bool = False
    killed_for_time: bool = False
    pid: int | None = None


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig == signal.SIGKILL:
            return (f"it was killed ({name}), which usually means it ran out of memory "
                    "or something killed it")
        return f"it was ended by {name}"
    return f"it exited with code {os.WEXITSTATUS(status)} (os._exit or a crash)"


class _Reader:
    """JSON-line events from a file descriptor, with the per-cell deadline."""

    def __init__(self, fd: int, timeout: float) -> None:
        self.fd, self.timeout, self.buffer = fd, timeout, b""
        self.closed = False

    def collect(self, run: Run, kill, until: str | None = None, exit_fd: int | None = None,
                exited: bool = False) -> dict | None:
        """Read events into `run` until end of file, the event "end" or the event `until`
        (returned). A cell that outlives its deadline is killed with `kill(pid)`; then reading
        goes on briefly for the last messages. `exit_fd` becomes readable when the process
        has ended (`exited`: it already has): then only what it left in the pipe is read, so
        that a process it started and that keeps the pipe open does not hold the worker."""
        current: int | None = None
        deadline: float | None = None
        drain_until = time.monotonic() + GRACE_SECONDS
        while True:
            line = self._line()
            while line is None and not self.closed:
                if exited:
                    if time.monotonic() > drain_until:
                        return None
                    ready, _, _ = select.select([self.fd], [], [], 0)
                    if not ready:
                        return None  # the process has ended and left nothing more
                else:
                    wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                    watched = [self.fd] if exit_fd is None else [self.fd, exit_fd]
                    ready, _, _ = select.select(watched, [], [], wait)
                    if not ready:
                        if run.killed_for_time:
                            return None  # nothing more came after the kill
                        run.killed_for_time = True
                        run.outcome, run.cell = "timeout", current
                        kill(run.pid)
                        deadline = time.monotonic() + GRACE_SECONDS
                        continue
                    if exit_fd is not None and exit_fd in ready:
                        exited = True
                        drain_until = time.monotonic() + GRACE_SECONDS
                        if self.fd not in ready:
                            continue
                chunk = os.read(self.fd, 1 << 20)
                if not chunk:
                    self.closed = True
                    break
                self.buffer += chunk
                line = self._line()
            if line is None:
                return None
            try:
                message = json.loads(line)
            except ValueError:
                continue
            event = message.get("event")
            if event == until:
                return message
            if event == "start":
                current = message["index"]
                if not run.killed_for_time:
                    deadline = time.monotonic() + self.timeout + GRACE_SECONDS
            elif event == "done":
                run.executed[message["index"]] = message
                run.cell_seconds += float(message.get("seconds", 0.0))
                current = None
                if not run.killed_for_time:  # until the next "start" (or "end")
                    deadline = time.monotonic() + self.timeout + GRACE_SECONDS
                if message.get("timed_out"):
                    run.outcome, run.cell = "timeout", message["index"]
            elif event == "exit":
                run.outcome, run.cell = "exit", message["index"]
            elif event == "end":
                run.finished = True
                return message
            elif event == "crash":
                run.detail = message.get("detail", "")
            if run.outcome != "ok" and run.cell is None:
                run.cell = current

    def wait_for(self, event: str, seconds: float) -> dict | None:
        """The next message `event`, skipping others; None after `seconds` or at end of file."""
        deadline = time.monotonic() + seconds
        while True:
            line = self._line()
            if line is None:
                wait = deadline - time.monotonic()
                if self.closed or wait <= 0:
                    return None
                ready, _, _ = select.select([self.fd], [], [], wait)
                if not ready:
                    return None
                chunk = os.read(self.fd, 1 << 20)
                if not chunk:
                    self.closed = True
                self.buffer += chunk
                continue
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("event") == event:
                return message

    def _line(self) -> bytes | None:
        if b"\n" not in self.buffer:
            return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line


def _finish(run: Run, status: int | None, current: int | None = None) -> Run:
    if not run.finished and run.outcome == "ok":
        run.outcome = "died"
        run.cell = run.cell if run.cell is not None else current
        detail = (_describe_status(status) if status is not None
                  else "it was killed together with the process it was forked from")
        run.detail = detail + (f"\n{run.detail}" if run.detail else "")
    return run


def run_cells(cells: list[tuple[int, str]], cwd: str, *, timeout: float, memory_limit: int,
              max_lines: int, threads: int = 0) -> Run:
    """Fork a child that runs `cells` (index, source) in `cwd`; collect what it reports."""
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child, measured through the tests)
        os.close(read_fd)
        _child_main(cells, cwd, timeout, memory_limit, max_lines, write_fd, threads)
    os.close(write_fd)
    run = Run(pid=pid)
    reader = _Reader(read_fd, timeout)
    try:
        exit_fd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # pragma: no cover (Linux before 5.3)
        exit_fd = None
    try:
        reader.collect(run, lambda _: _kill_group(pid), exit_fd=exit_fd)
    finally:
        os.close(read_fd)
        if exit_fd is not None:
            os.close(exit_fd)
        # The child has reported its end, exited, closed its pipe or been killed: whatever it
        # still runs, and what it started in the background, ends now (an exit status already
        # there stays as it is).
        _kill_group(pid)
        _, status = os.waitpid(pid, 0)
        run.seconds = time.monotonic() - started
    return _finish(run, status, _started_not_done(run, cells))


def _started_not_done(run: Run, cells: list[tuple[int, str]]) -> int | None:
    """The cell the process was running when it ended: the first one not reported done."""
    for index, _ in cells:
        if index not in run.executed:
            return index
    return None


def _kill_group(pid: int | None) -> None:
    if not pid:
        return
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


# --------------------------------------------------------------------------------------------
# Prologues shared through a zygote process

class _Zygote:
    """A forked process that has run a prologue and forks a child for each notebook."""

    def __init__(self, prologue: list[str], *, timeout: float, memory_limit: int,
                 max_lines: int, threads: int) -> None:
        self.timeout = timeout
        self.scratch = tempfile.mkdtemp(prefix="autograder-prologue-")
        ours, theirs = socket.socketpair()
        cells = list(enumerate(prologue))
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (measured through the tests)
            ours.close()
            _zygote_main(cells, self.scratch, timeout, memory_limit, max_lines,
                         theirs.fileno(), threads)
        theirs.close()
        self.pid, self.sock = pid, ours
        self.reader = _Reader(ours.fileno(), timeout)
        self.prologue = Run(pid=pid)
        end = self.reader.collect(self.prologue, lambda _: _kill_group(pid), until="prologue")
        self.prologue.seconds = time.monotonic() - started
        self.ok = bool(end and end.get("outcome") == "ok" and end.get("clean"))
        self.used = False
        self.group = ""
        if not self.ok:
            self.close()

    def run(self, cells: list[tuple[int, str]], cwd: str) -> Run | None:
        """Run `cells` in a child of the zygote; None if the zygote itself has gone."""
        started = time.monotonic()
        run = Run()
        read_fd, write_fd = os.pipe()  # this run's own channel
        try:
            try:
                socket.send_fds(self.sock, [(json.dumps({"cells": cells, "cwd": cwd})
                                             + "\n").encode()], [write_fd])
            finally:
                os.close(write_fd)
            forked = self.reader.wait_for("forked", ZYGOTE_ANSWER_SECONDS)
            pid = forked.get("pid") if forked else None
            if not isinstance(pid, int) or pid <= 0 or not _child_of(pid, self.pid):
                self.close()  # the zygote did not answer, or not as it does
                return None
            run.pid = pid
            # The zygote's socket becomes readable when it reports the child's exit.
            reader = _Reader(read_fd, self.timeout)
            reader.collect(run, lambda _: _kill_group(pid), exit_fd=self.sock.fileno(),
                           exited=bool(self.reader.buffer))
        except OSError:
            self.close()
            return None
        finally:
            os.close(read_fd)
        _kill_group(pid)  # what it still runs, and what it started in the background
        exited = self.reader.wait_for("exited", ZYGOTE_ANSWER_SECONDS)
        if exited is None or exited.get("pid") != pid:
            self.close()  # it did not report the exit: it is not used again
            status = None
        else:
            status = exited.get("status")
        run.seconds = time.monotonic() - started
        self.used = True
        return _finish(run, status, _started_not_done(run, cells))

    def close(self) -> None:
        self.ok = False
        try:
            self.sock.close()
        except OSError:
            pass
        _kill_group(self.pid)
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        shutil.rmtree(self.scratch, ignore_errors=True)


def _child_of(pid: int, parent: int) -> bool:
    """Whether `pid` is a child of `parent` (True when that cannot be told: it has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1]) == parent
    except (OSError, ValueError, IndexError):
        return True


_ZYGOTES: "OrderedDict[str, _Zygote]" = OrderedDict()
MAX_ZYGOTES = 2  # per worker and lesson: the usual prologue and one a student changed


def _close_zygotes() -> None:
    while _ZYGOTES:
        _ZYGOTES.popitem()[1].close()


atexit.register(_close_zygotes)


def _prologue_end(nb: NotebookNode) -> int:
    """Index of the notebook's first exercise cell (answer or test): the prologue ends there."""
    for index, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") or meta.get("grade"):
            return index
    return len(nb.cells)


def _run_shared(cells, nb, cwd, *, timeout, memory_limit, max_lines, threads,
                group: str = "") -> Run | None:
    end = _prologue_end(nb)
    prologue = [(i, source) for i, source in cells if i < end]
    rest = [(i, source) for i, source in cells if i >= end]
    if not prologue:
        return None
    key = hashlib.sha256(json.dumps([[s for _, s in prologue], timeout, memory_limit,
                                     max_lines, threads]).encode()).hexdigest()
    zygote = _ZYGOTES.get(key)
    built = zygote is None
    if built:
        # Notebooks come lesson by lesson: another lesson's zygote will not be needed again.
        for other in [k for k, z in _ZYGOTES.items() if z.group != group]:
            _ZYGOTES.pop(other).close()
        while len(_ZYGOTES) >= MAX_ZYGOTES:
            _ZYGOTES.popitem(last=False)[1].close()
        zygote = _Zygote([s for _, s in prologue], timeout=timeout, memory_limit=memory_limit,
                         max_lines=max_lines, threads=threads)
        zygote.group = group
        if not zygote.ok:
            return None  # the prologue timed out, died or wrote files: run it all in one child
        _ZYGOTES[key] = zygote
    _ZYGOTES.move_to_end(key)
    run = zygote.run(rest, cwd)
    if run is None or not zygote.ok:  # a zygote that went wrong is not used again
        _ZYGOTES.pop(key, None)
    if run is None:
        return None
    for position, (index, _) in enumerate(prologue):
        run.executed[index] = zygote.prologue.executed[position]
    if built:
        run.cell_seconds += zygote.prologue.cell_seconds
        run.seconds += zygote.prologue.seconds
    else:
        run.shared_seconds = zygote.prologue.cell_seconds
    return run


def execute_notebook(nb: NotebookNode, cwd: str, *, timeout: float, memory_limit: int,
                     max_lines: int = 1000, threads: int = 0, share_prologue: bool = False,
                     group: str = "") -> Run:
    """Run the code cells of `nb` in a forked child and store their outputs in `nb`.

    With `share_prologue` the cells before the first exercise run once in a zygote process
    for all the notebooks that have exactly the same ones (a lesson's worked examples), and
    each notebook's child is forked from it; only with one thread per notebook (a process
    that used an OpenMP thread pool cannot safely fork)."""
    cells = [(i, cell.source) for i, cell in enumerate(nb.cells)
             if cell.cell_type == "code" and cell.source.strip()]
    for cell in nb.cells:  # what nbclient does before running a cell
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    run = None
    if share_prologue and threads == 1:
        run = _run_shared(cells, nb, cwd, timeout=timeout, memory_limit=memory_limit,
                          max_lines=max_lines, threads=threads, group=group)
    if run is None:
        run = run_cells(cells, cwd, timeout=timeout, memory_limit=memory_limit,
                        max_lines=max_lines, threads=threads)
    stopped = False
    for index, _ in cells:
        cell = nb.cells[index]
        done = run.executed.get(index)
        if done is not None:
            cell.outputs = [from_dict(o) for o in done["outputs"]]
            cell.execution_count = done["execution_count"]
            continue
        if not stopped and run.cell == index and run.outcome == "timeout":
            cell.outputs = [from_dict(timeout_output(timeout))]
        elif not stopped and run.cell == index and run.outcome == "died":
            cell.outputs = [from_dict(error_output(
                DEAD_ENAME, "the process running the notebook ended",
                "The process running this notebook ended while this cell ran: "
                + run.detail.splitlines()[0] + "."))]
        else:
            cell.outputs = [from_dict(_not_run_output(run))]
        stopped = True
    return run


def _not_run_output(run: Run) -> dict:
    why = {"timeout": "an earlier cell ran past the time limit",
           "died": "the process running the notebook ended",
           "exit": "an earlier cell called exit()"}.get(run.outcome, "the run stopped")
    return error_output(NOT_RUN_ENAME, why, f"This cell was not run: {why}.")


LAST_RUN: Run | None = None  # the latest run in this process, for timing reports


class ForkedExecute(NbGraderPreprocessor):
    """nbgrader's Execute step, run in a process forked from a warm grading worker."""

    timeout = Integer(60, help="Seconds a cell may run.").tag(config=True)
    memory_limit = Integer(4 * GiB, help="Address space of the grading process, in bytes "
                                         "(0: no limit).").tag(config=True)
    max_lines = Integer(1000, help="Lines of a cell's stream output kept.").tag(config=True)
    threads = Integer(0, help="Threads for torch and OpenMP in the notebook (0: their "
                              "default, one per core).").tag(config=True)
    share_prologue = Bool(True, help="Run the cells before the first exercise once for all "
                                     "notebooks that have the same ones.").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        cwd = resources.get("metadata", {}).get("path") or os.getcwd()
        run = execute_notebook(nb, cwd, timeout=self.timeout, memory_limit=self.memory_limit,
                               max_lines=self.max_lines, threads=self.threads,
                               share_prologue=self.share_prologue,
                               group=resources.get("nbgrader", {}).get("assignment", ""))
        global LAST_RUN
        LAST_RUN = run
        return nb, resources
