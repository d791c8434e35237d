"""Run a notebook's code cells in a process forked for it, and record outputs as a kernel would.

nbgrader executes a submission in a fresh Jupyter kernel: a new process that imports torch and
everything else again, about 4 s before the first cell runs. Here a grading worker that has
already imported the course's libraries forks a child for each notebook. The child runs the
cells with IPython's InteractiveShell, as ipykernel does, and records their outputs in nbformat
shape: streams (including what C code writes to file descriptors 1 and 2), rich displays
(matplotlib figures through the inline backend), results and errors with IPython's tracebacks.

Every submission still runs alone in a clean process: the worker never runs student code, so
each child starts from the same state. The child runs in its own session under a memory limit
(RLIMIT_AS), with a time limit per cell (SIGALRM, then SIGKILL from the worker when the cell
ignores it) and a cap on kept output. When it dies (os._exit, a signal, the kernel's OOM
killer), the cell it was running gets an error output that says so.

`ForkedExecute` is the nbgrader preprocessor that replaces nbgrader's `Execute` in
`Autograde.autograde_preprocessors`; everything else in autograding stays nbgrader's.
"""

from __future__ import annotations

from autograder import _imports  # noqa: F401 (first: a quicker jsonschema import)

import ctypes
import json
import os
import select
import signal
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any

from nbformat import NotebookNode, from_dict
from traitlets import Integer

from nbgrader.preprocessors import NbGraderPreprocessor

TIMEOUT_ENAME = "CellTimeoutError"
DEAD_ENAME = "DeadKernelError"
NOT_RUN_ENAME = "CellNotRunError"
GRACE_SECONDS = 3.0  # after SIGALRM, how long a cell has before its process is killed
MAX_STREAM_BYTES = 4_000_000  # text kept per cell and stream; the rest is dropped
MAX_DISPLAY_BYTES = 20_000_000  # rich output kept per cell
GiB = 1 << 30


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
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the worker
    except (OSError, AttributeError):  # pragma: no cover (not Linux)
        pass


def _child_main(cells: list[tuple[int, str]], cwd: str, timeout: float, memory_limit: int,
                max_lines: int, write_fd: int, threads: int = 0) -> None:
    """Run in the forked child: execute the cells, report each one on `write_fd`, never return."""
    global _recorder
    code = 0
    try:
        os.setsid()
        _set_parent_death_signal()
        channel = os.fdopen(write_fd, "wb", buffering=0)

        def send(message: dict) -> None:
            channel.write((json.dumps(message) + "\n").encode())

        import resource
        if memory_limit > 0:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        # File descriptors 0-2: no input; output of C code goes to files read after each cell.
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        captures = {}
        for fd, name in ((1, "stdout"), (2, "stderr")):
            handle = tempfile.TemporaryFile()
            os.dup2(handle.fileno(), fd)
            captures[name] = (handle, 0)
        sys.stdin = open(os.devnull)
        sys.stdout = _Stream("stdout", 1)
        sys.stderr = _Stream("stderr", 2)
        sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr

        if threads > 0:  # this notebook's share of the cores (no oversubscription)
            for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
                os.environ[name] = str(threads)
            if "torch" in sys.modules:
                sys.modules["torch"].set_num_threads(threads)
        # The worker silences warnings while nbgrader works; a notebook sees Python's defaults.
        warnings.filters[:] = _PRISTINE_WARNING_FILTERS
        warnings._filters_mutated()
        os.chdir(cwd)
        if cwd not in sys.path:
            sys.path.insert(0, cwd)
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        _recorder = _Recorder(max_lines)

        def on_alarm(signum, frame):
            raise CellTimeout()

        signal.signal(signal.SIGALRM, on_alarm)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for index, source in cells:
            send({"event": "start", "index": index})
            timed_out = False
            signal.setitimer(signal.ITIMER_REAL, timeout)
            count = shell.execution_count
            began = time.perf_counter()
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
            for name, (handle, seen) in list(captures.items()):
                size = os.fstat(handle.fileno()).st_size
                if size > seen:
                    handle.seek(seen)
                    data = handle.read(min(size - seen, MAX_STREAM_BYTES))
                    captures[name] = (handle, size)
                    _recorder.stream(name, data.decode("utf-8", "replace"))
            outputs = _recorder.take()
            for output in outputs:
                if output["output_type"] == "execute_result":
                    output["execution_count"] = count
            if timed_out:
                outputs = [o for o in outputs
                           if not (o["output_type"] == "error" and o["ename"] == "CellTimeout")]
                outputs.append(timeout_output(timeout))
            send({"event": "done", "index": index, "outputs": outputs,
                  "execution_count": count, "timed_out": timed_out,
                  "seconds": time.perf_counter() - began})
            if timed_out:
                break
            if getattr(shell, "exit_now", False):
                send({"event": "exit", "index": index})
                break
        send({"event": "end"})
    except BaseException:  # noqa: BLE001 (report anything, then leave)
        code = 70
        try:
            os.write(write_fd, (json.dumps({"event": "crash",
                                            "detail": traceback.format_exc()}) + "\n").encode())
        except OSError:
            pass
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
    cell_seconds: float = 0.0  # the cells' own running time
    executed: dict[int, dict] = field(default_factory=dict)


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
    run = Run()
    buffer = b""
    current: int | None = None
    deadline: float | None = None
    finished = False
    killed_for_time = False
    try:
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([read_fd], [], [], wait)
            if not ready:  # the cell ignored SIGALRM: kill the process
                killed_for_time = True
                _kill_group(pid)
                break
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                event = message.get("event")
                if event == "start":
                    current = message["index"]
                    deadline = time.monotonic() + timeout + GRACE_SECONDS
                elif event == "done":
                    run.executed[message["index"]] = message
                    run.cell_seconds += float(message.get("seconds", 0.0))
                    current, deadline = None, None
                    if message.get("timed_out"):
                        run.outcome, run.cell = "timeout", message["index"]
                elif event == "exit":
                    run.outcome, run.cell = "exit", message["index"]
                elif event == "end":
                    finished = True
                elif event == "crash":
                    run.detail = message.get("detail", "")
    finally:
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
        _kill_group(pid)  # whatever the notebook started in the background
        run.seconds = time.monotonic() - started
    if killed_for_time:
        run.outcome, run.cell = "timeout", current
    elif not finished and run.outcome == "ok":
        run.outcome, run.cell = "died", current
        run.detail = _describe_status(status) + (f"\n{run.detail}" if run.detail else "")
    return run


def _kill_group(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


def execute_notebook(nb: NotebookNode, cwd: str, *, timeout: float, memory_limit: int,
                     max_lines: int = 1000, threads: int = 0) -> Run:
    """Run the code cells of `nb` in a forked child and store their outputs in `nb`."""
    cells = [(i, cell.source) for i, cell in enumerate(nb.cells)
             if cell.cell_type == "code" and cell.source.strip()]
    for cell in nb.cells:  # what nbclient does before running a cell
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    run = run_cells(cells, cwd, timeout=timeout, memory_limit=memory_limit, max_lines=max_lines,
                    threads=threads)
    stopped_at = None
    for index, _ in cells:
        cell = nb.cells[index]
        done = run.executed.get(index)
        if done is not None:
            cell.outputs = [from_dict(o) for o in done["outputs"]]
            cell.execution_count = done["execution_count"]
            continue
        if stopped_at is None:
            stopped_at = index
            if run.outcome == "timeout":
                cell.outputs = [from_dict(timeout_output(timeout))]
            elif run.outcome == "died" and run.cell == index:
                cell.outputs = [from_dict(error_output(
                    DEAD_ENAME, "the process running the notebook ended",
                    "The process running this notebook ended while this cell ran: "
                    + run.detail.splitlines()[0] + "."))]
            else:
                cell.outputs = [from_dict(_not_run_output(run))]
        else:
            cell.outputs = [from_dict(_not_run_output(run))]
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

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        cwd = resources.get("metadata", {}).get("path") or os.getcwd()
        run = execute_notebook(nb, cwd, timeout=self.timeout, memory_limit=self.memory_limit,
                               max_lines=self.max_lines, threads=self.threads)
        global LAST_RUN
        LAST_RUN = run
        return nb, resources
