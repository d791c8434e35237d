"""Inside the sandbox: run a notebook's cells with IPython and record outputs as a kernel would.

The notebook's process runs its cells with IPython's InteractiveShell, as ipykernel does, and
records their outputs in nbformat's shape: streams (including what C code writes to file
descriptors 1 and 2), rich displays (matplotlib figures through the inline backend), results
and errors with IPython's tracebacks. Each cell's outputs go to the grader as JSON lines on the
process's own pipe. The grader treats all of it as untrusted data.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
import warnings
from typing import Any

from autograder import protocol



class CellTimeout(BaseException):
    """Raised in a cell that runs past its time limit (a BaseException: `except Exception` in a
    student's loop does not swallow it)."""


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
                self.stream_bytes[name] > protocol.MAX_STREAM_BYTES:
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
        if len(self.outputs) >= protocol.MAX_OUTPUTS and not self.clear_pending:  # kept: no more
            if "display" not in self.truncated:
                self.truncated.add("display")
                self.stream("stderr", "... more displays dropped by the grader ...\n")
            return
        size = sum(len(str(v)) for v in output.get("data", {}).values())
        if self.display_bytes + size > protocol.MAX_DISPLAY_BYTES:
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
                    output["data"] = _kept_data(data)
            return
        output = {"output_type": "display_data", "data": _kept_data(data), "metadata": {}}
        if display_id is not None:
            output["_display_id"] = display_id
        self._rich(output)

    def result(self, data: dict, metadata: dict, execution_count: int) -> None:
        self._rich({"output_type": "execute_result", "data": _kept_data(data),
                    "metadata": {}, "execution_count": execution_count})

    def error(self, ename: str, evalue: str, traceback_lines: list[str]) -> None:
        self._before_output()
        self.outputs.append({"output_type": "error", "ename": ename, "evalue": evalue,
                             "traceback": list(traceback_lines)[:protocol.MAX_TRACEBACK_LINES]})

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


# The display types the grader reads (text/html only for a figure's alt text); an output's
# metadata is never read, so none is sent. What a notebook displays stays a few flat strings
# per output, far within the grader's caps on a cell's end (`protocol.MAX_DONE_VALUES`).
_SENT_MIME = (*protocol.SAFE_MIME, "text/html")


def _kept_data(data: Any) -> dict:
    """Of a display's data, the strings of the types the grader reads."""
    if not isinstance(data, dict):
        return {}
    return {mime: value for mime, value in data.items()
            if mime in _SENT_MIME and isinstance(value, str)}


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


def prepare(preload: list[str] | tuple[str, ...] = ()) -> None:
    """Set up the process that forks notebooks, before any fork: the shell, the inline matplotlib backend, the
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
        try:  # Hypothesis's one-off set-up, paid here rather than by each notebook's first draw
            from coursekit.drawing import warm_up
            warm_up()
        except Exception:  # noqa: BLE001 (a notebook's own draw will report it)
            pass
        try:
            raise ValueError("warm-up")
        except ValueError:
            etype, value, tb = sys.exc_info()
            shell.InteractiveTB.structured_traceback(etype, value, tb)
        shell.display_formatter.format(1.5)


def close_inherited(keep: tuple[int, ...]) -> None:
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


class Channel:
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


def enter_process(threads: int) -> None:
    """Make this freshly forked process a notebook's: no terminal, its share of the cores,
    Python's default warnings, the time-limit signal."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull)
    sys.dont_write_bytecode = True
    if threads > 0:  # this notebook's share of the cores (no oversubscription)
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[name] = str(threads)
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(threads)
    warnings.filters[:] = _PRISTINE_WARNING_FILTERS
    warnings._filters_mutated()
    # A cell's limit is CPU time (the process's own, ITIMER_PROF): the same work is stopped
    # at the same point however busy the machine is. The grader keeps a wall-clock limit
    # too, for cells that wait rather than compute.
    signal.signal(signal.SIGPROF, _on_alarm)
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def capture_output() -> dict:
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


def enter_folder(cwd: str, previous: str | None = None) -> None:
    os.chdir(cwd)
    if previous and previous in sys.path:
        sys.path.remove(previous)
    if cwd not in sys.path:
        sys.path.insert(0, cwd)


def run_here(cells: list[tuple[int, str]], channel: Channel, timeout: float, max_lines: int,
              captures: dict) -> str:
    """Run `cells` in this process's shell, reporting each; return ok, timeout or exit."""
    global _recorder
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    _recorder = _Recorder(max_lines)
    for index, source in cells:
        channel.send({"event": protocol.START, "index": index})
        timed_out = False
        count = shell.execution_count
        began = time.perf_counter()
        signal.setitimer(signal.ITIMER_PROF, timeout)
        try:
            result = shell.run_cell(source, store_history=True)
            signal.setitimer(signal.ITIMER_PROF, 0)
            count = result.execution_count or count
            if isinstance(result.error_in_exec, CellTimeout):
                timed_out = True
        except CellTimeout:  # raised outside the cell's code (in a hook, for example)
            timed_out = True
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
        seconds = time.perf_counter() - began
        for name, capture in captures.items():
            handle, seen = capture
            size = os.fstat(handle.fileno()).st_size
            if size > seen:
                handle.seek(seen)
                data = handle.read(min(size - seen, protocol.MAX_STREAM_BYTES))
                capture[1] = size
                _recorder.stream(name, data.decode("utf-8", "replace"))
        outputs = _recorder.take()
        for output in outputs:
            if output["output_type"] == "execute_result":
                output["execution_count"] = count
        if timed_out:  # the grader adds its own note of the time limit
            outputs = [o for o in outputs
                       if not (o["output_type"] == "error" and o["ename"] == "CellTimeout")]
        channel.send({"event": protocol.DONE, "index": index, "outputs": outputs,
                      "execution_count": count, "timed_out": timed_out, "seconds": seconds})
        if timed_out:
            return "timeout"
        if getattr(shell, "exit_now", False):
            channel.send({"event": protocol.EXIT, "index": index})
            return "exit"
    return "ok"


