"""The life of a notebook's process, beside student code: forked by the runner host
(`autograder.runner.host`), it confines itself (`confine.py`), runs the notebook's cells in its
shell (`shell.py`) and then the scenarios on the answers (`observe.py`), and reports each event
on its pipe in the wire format (`autograder.protocol`). Nothing here decides a score."""

from __future__ import annotations

import json
import os
import signal
import tempfile
import traceback
from typing import Protocol

from autograder import protocol
from autograder.sandbox import shell
from autograder.sandbox.confine import confine, die_with_parent
from autograder.sandbox.observe import fresh_within_time, load_module, run_scenarios
from autograder.sandbox.policy import SandboxPolicy


class NotebookHost(Protocol):
    """What a notebook's process reads of the runner host that forked it."""

    sandbox: bool
    policy: SandboxPolicy
    address_space: int
    threads: int

    def root(self) -> str: ...


def read_line(fd: int) -> dict:
    """One JSON line from the payload pipe (the grader writes it when it is time)."""
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = os.read(fd, protocol.READ_BYTES)
        if not chunk:
            break
        data += chunk
    return json.loads(bytes(data)) if data.strip() else {}


def notebook_main(host: NotebookHost, request: dict, events: int, payload: int, cgroup,
                  forked_from_zygote: bool, diag: int | None = None) -> None:
    """The forked child's life, never returning: confine itself (or, unconfined, a working folder
    and the address-space limit), run the cells the payload pipe sends, then the scenarios on
    the answers, reporting each event on `events`; anything that goes wrong is reported as a
    crash, and the process exits."""
    code = 0
    try:
        die_with_parent()  # nor a notebook its host or zygote
        shell.close_inherited((events, payload) + ((diag,) if diag is not None else ()))
        channel = shell.Channel(events)
        if host.sandbox:
            confine(host.policy, host.root(), request.get("files_from"), cgroup, diag)
        else:
            os.setsid()
            workdir = tempfile.mkdtemp(prefix="autograder-nosandbox-")
            if request.get("files_from"):
                import shutil
                shutil.copytree(request["files_from"], workdir, dirs_exist_ok=True)
            os.chdir(workdir)
            import resource
            if host.address_space > 0:
                resource.setrlimit(resource.RLIMIT_AS, (host.address_space, host.address_space))
        os.environ.clear()
        os.environ.update(host.policy.env())
        tempfile.tempdir = None  # found again, from TMPDIR
        shell.enter_process(host.threads)
        captures = shell.capture_output()
        shell.enter_folder(os.getcwd())
        timeout = float(request["timeout"])
        cells = [tuple(c) for c in read_line(payload).get(protocol.PAYLOAD_CELLS, [])]
        cells = cells[int(request["skip"]):]
        outcome = shell.run_here(cells, channel, timeout, int(request["max_lines"]), captures)
        observe = None
        if outcome == "ok":
            channel.send({"event": protocol.CELLS_DONE})
            # Sent only now, by the grader.
            observe = read_line(payload).get(protocol.PAYLOAD_OBSERVE)
        if outcome == "ok" and observe:
            shell._recorder = None  # nothing printed from here on is reported
            channel.send({"event": protocol.OBSERVING})
            module = load_module(observe["source"], observe.get("filename", "<scenarios>"))
            from IPython.core.interactiveshell import InteractiveShell
            namespace = InteractiveShell.instance().user_ns
            mistakes = bool(observe.get("mistakes"))
            signal.setitimer(signal.ITIMER_PROF, timeout)  # one limit for both phases
            try:
                outcomes = run_scenarios(module, namespace, [tuple(r) for r in observe["runs"]],
                                         mistakes=mistakes)
                if observe.get("more"):
                    # The later runs (the hidden scenarios) and their seeds come only once the
                    # first runs' outcomes are reported: no answer called before could find them.
                    channel.send({"event": protocol.OBSERVED, "outcomes": outcomes})
                    later = read_line(payload).get(protocol.PAYLOAD_RUNS) or []
                    outcomes = run_scenarios(module, namespace, [tuple(r) for r in later],
                                             mistakes=mistakes)
                # The fresh starts last: the answer cell run again may change what the scored
                # runs share (a registration at module level adds its hook a second time), so
                # no scored run comes after it.
                outcomes.update(fresh_within_time(module, namespace, observe.get("fresh"),
                                                   dict(cells)))
            except shell.CellTimeout:  # the answers' CPU time ran out (one cell's limit)
                outcomes = None
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
            channel.send({"event": protocol.OBSERVATIONS, "outcomes": outcomes}
                         if outcomes is not None else {"event": protocol.OBSERVING_TIMED_OUT})
        channel.send({"event": protocol.END})
    except BaseException:  # noqa: BLE001 (report anything, then leave)
        code = 70
        try:
            os.write(events, (json.dumps({"event": protocol.CRASH,
                                          "detail": traceback.format_exc()
                                          [-protocol.MAX_CRASH_CHARS:]})
                              + "\n").encode())
        except OSError:
            pass
    finally:
        os._exit(code)
