"""The runner host: a warm process that forks one confined process per notebook.

A grading worker starts this program (`python -s -B -m autograder.runner.host FD CONFIG`) as
a new program, so the host's memory holds nothing of the grader's: no hidden scenarios, no
course secret, no gradebook, no other student's notebook. It imports torch and what the
lessons import once, then serves requests that come on the socket FD, one at a time:

    {"prologue_cells": [[index, source], ...] or [], "timeout": s, "max_lines": n,
     "files_from": folder or null}

each with three descriptors: the write end of the notebook's own events pipe, the write end
of a control pipe, and the read end of its payload pipe. Only the notebook's own process reads
the payload: first its cells, then, once it has reported its last cell's end, the scenarios
to observe (`{"cells": ...}`, then `{"observe": ...}`), and, when that says there are more,
once it has reported the first runs' outcomes ("observed"), the later runs (`{"runs": ...}`:
the hidden scenarios, whose seeds are in no object of the process before then). For each
request it forks a process (`autograder.sandbox.notebook`) that confines itself, runs the
cells, then the requested scenarios, reporting each on the events pipe;
on the control pipe the host says which process it forked ("forked") and how it ended
("exited", with "oom" when its cgroup ran out of memory).

With "prologue_cells" the first cells are the lesson's own worked examples, unchanged (the
grader sends N > 0 only then): they run once, in a zygote process forked from the host, and
each such notebook's process is forked from the zygote and runs only the rest. A zygote runs
only the course's own code; the notebooks forked from it confine themselves before running
any of theirs.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections import OrderedDict

from autograder import protocol
from autograder.sandbox import shell
from autograder.sandbox.confine import die_with_parent
from autograder.sandbox.limits import TREE_POLL_SECONDS, Cgroup, ProcessTree
from autograder.sandbox.notebook import notebook_main
from autograder.sandbox.policy import SandboxPolicy

MAX_ZYGOTES = 2
OOM_POLL_SECONDS = 0.05
ZYGOTE_START_SECONDS_PER_CELL = 5.0


class Host:
    def __init__(self, config: dict) -> None:
        self.config = config
        self.policy = SandboxPolicy.from_dict(config["policy"])
        self.sandbox = self.policy.confined
        self.memory_limit = self.policy.memory_limit
        # Where a cgroup measures the notebook's memory (resident, its children's included),
        # that is the limit; the address-space limit is then only a loose backstop, so that it
        # never decides first (torch reserves far more address space than it uses). Without
        # a cgroup the address space is the limit.
        self.cgroups = self.sandbox and Cgroup.base() is not None
        self.address_space = self.policy.address_space(self.cgroups)
        self.threads = self.policy.threads
        self.scratch = tempfile.mkdtemp(prefix="autograder-host-")
        os.chmod(self.scratch, 0o755)
        self.zygotes: OrderedDict[str, Zygote] = OrderedDict()
        self.count = 0

    def root(self) -> str:
        """The empty folder each sandbox builds its root on."""
        root = os.path.join(self.scratch, "root")
        os.makedirs(root, exist_ok=True)
        return root

    def serve(self, sock: socket.socket) -> None:
        for request, events, control, payload in _requests(sock):
            try:
                self.handle(request, events, control, payload)
            except Exception:  # noqa: BLE001 (report and serve the next one)
                _send(control, {"event": protocol.FAILED, "detail": traceback.format_exc()})
            finally:
                os.close(events)
                os.close(control)
                os.close(payload)

    def handle(self, request: dict, events: int, control: int, payload: int) -> None:
        """`request` is a header: limits, and the lesson's own worked examples when they are
        shared. The notebook's cells and scenarios never pass through the host: its process
        reads them from `payload`, a pipe only it holds, so no notebook forked later can find
        them in memory inherited from the host or a zygote."""
        prologue = [tuple(c) for c in request.get("prologue_cells") or []]
        if prologue:
            zygote = self.zygote(prologue, request)
            if zygote is not None and zygote.ok:
                # The zygote may have run the same cells at other positions (the solution
                # notebook's, for a reference run): its outputs go to this notebook's cells.
                executed = [dict(done, index=cell[0])
                            for done, cell in zip(zygote.executed, prologue)]
                _send(control, {"event": protocol.PROLOGUE, "executed": executed})
                if zygote.run(dict(request, skip=len(prologue)), events, control, payload):
                    return
                self.zygotes.pop(zygote.key, None)
                zygote.close()
                _send(control, {"event": protocol.PROLOGUE_LOST})
        spawn(self, dict(request, skip=0), events, control, payload)

    def zygote(self, prologue: list, request: dict) -> "Zygote | None":
        # By the cells' sources, not their positions: a released notebook and the solution
        # notebook (a reference run) share the lesson's zygote.
        key = hashlib.sha256(json.dumps([[source for _, source in prologue],
                                         request.get("timeout"),
                                         request.get("max_lines")]).encode()).hexdigest()
        zygote = self.zygotes.get(key)
        if zygote is None:
            while len(self.zygotes) >= MAX_ZYGOTES:
                self.zygotes.popitem(last=False)[1].close()
            zygote = Zygote(self, key, prologue, request)
            if not zygote.ok:
                return None
            self.zygotes[key] = zygote
        self.zygotes.move_to_end(key)
        return zygote


def _requests(sock: socket.socket):
    """Each request on `sock` until it closes: (a JSON line, and the three descriptors sent
    with it: the notebook's events pipe, the control pipe, the payload pipe)."""
    buffer, fds = b"", []
    while True:
        data, received, _, _ = socket.recv_fds(sock, 1 << 22, 8)
        fds += received
        if not data:
            return
        buffer += data
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield json.loads(line), fds.pop(0), fds.pop(0), fds.pop(0)


def _send(fd: int, message: dict) -> None:
    data = (json.dumps(message) + "\n").encode()
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        pass


def spawn(host: Host, request: dict, events: int, control: int, payload: int,
          forked_from_zygote: bool = False) -> None:
    """Fork the notebook's process (confined), report it, wait for it, report its end."""
    host.count += 1
    cgroup = None
    if host.sandbox:
        # A name of its own: two grading runs in two PID namespaces (containers, or the
        # tests' throwaway ones) can have hosts of the same pid, and a shared group would mix
        # their notebooks' time and memory, and end one with the other.
        cgroup = Cgroup.create(f"autograder-{os.getpid()}-{host.count}-{os.urandom(6).hex()}",
                               host.memory_limit, host.policy.max_processes)
    # Without a cgroup, the host measures the notebook's process tree itself, from /proc, and
    # its sockets' queues through a socket the sandbox sends from its network namespace.
    diag = socket.socketpair() if host.sandbox and cgroup is None else None
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the notebook's process, measured through the tests)
        notebook_main(host, request, events, payload, cgroup, forked_from_zygote,
                       diag[1].detach() if diag else None)
    if diag:
        diag[1].close()
    tree = ProcessTree(pid, os.path.join(host.scratch, f"autograder-cpu-{os.getpid()}-"
                                         f"{host.count}"), diag[0]) if diag else None
    cpu_file = cgroup.cpu_file() if cgroup is not None else tree.cpu_file if tree else None
    _send(control, {"event": protocol.FORKED, "pid": pid, "cpu_file": cpu_file})
    # While it runs: when its processes reach the memory limit (the kernel then starts
    # reclaiming, or kills one of them), the whole notebook is stopped and that is reported at
    # once. The same notebook always stops the same way, however busy the machine is (near its
    # limit a group can spend minutes reclaiming before the kernel kills anything), and the
    # grader names the cell that was running, even when the notebook would have carried on.
    reported = over = False
    watched = cgroup is not None or tree is not None
    ended = _pidfd(pid) if watched else None  # readable once it has ended
    poll = OOM_POLL_SECONDS if cgroup is not None else TREE_POLL_SECONDS
    try:
        while True:
            try:
                done, status = os.waitpid(pid, 0 if not watched or reported else os.WNOHANG)
            except InterruptedError:
                continue
            if done:
                break
            if tree is not None:
                seconds, memory = tree.measure()
                tree.write_cpu(seconds)
                over = 0 < host.memory_limit <= memory
            if over or (cgroup is not None and (cgroup.out_of_memory() or cgroup.hit_limit())):
                reported = True
                _send(control, {"event": protocol.OOM})
                (cgroup or tree).kill()
            elif ended is not None:
                select.select([ended], [], [], poll)
            else:
                time.sleep(poll)
        oom = bool(cgroup and cgroup.out_of_memory()) or over
        limit = bool(cgroup and cgroup.hit_limit()) or over
        # Reported as soon as its process has ended: the grader goes on with its feedback
        # while this process removes the group (what is left in it is killed first). The
        # next notebook is forked only after that: this process serves one at a time.
        _send(control, {"event": protocol.EXITED, "pid": pid, "status": status, "oom": oom,
                        "memory_limit_hit": limit})
    finally:  # also when the host is told to stop meanwhile: no group is left behind
        if ended is not None:
            os.close(ended)
        if cgroup is not None:
            cgroup.remove()
        if tree is not None:
            tree.remove()


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # Linux before 5.3
        return None


class Zygote:
    """A process forked from the host that has run a lesson's worked examples (the course's own
    code) and forks each notebook that shares them."""

    def __init__(self, host: Host, key: str, prologue: list, request: dict) -> None:
        self.host, self.key, self.ok, self.executed = host, key, False, []
        self.scratch = tempfile.mkdtemp(prefix="autograder-prologue-", dir=host.scratch)
        ours, theirs = socket.socketpair()
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (measured through the tests)
            ours.close()
            os.close(read_fd)
            _zygote_main(host, prologue, request, self.scratch, theirs, write_fd)
        theirs.close()
        os.close(write_fd)
        self.pid, self.sock = pid, ours
        limit = time.monotonic() + len(prologue) * ZYGOTE_START_SECONDS_PER_CELL + \
            float(request["timeout"])
        report = _read_until(read_fd, protocol.PROLOGUE, limit)
        os.close(read_fd)
        if report is None or report.get("outcome") != "ok" or not report.get("clean"):
            self.close()
            return
        self.executed = report.get("executed", [])
        self.ok = True

    def run(self, request: dict, events: int, control: int, payload: int) -> bool:
        """Have the zygote fork the notebook's process; False if the zygote has gone."""
        try:
            socket.send_fds(self.sock, [(json.dumps(request) + "\n").encode()],
                            [events, control, payload])
            ready = self.sock.recv(1)  # one byte when the notebook's process has ended
        except OSError:
            return False
        return ready == b"."

    def close(self) -> None:
        self.ok = False
        try:
            self.sock.close()
        except OSError:
            pass
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (OSError, ChildProcessError):
            pass


def _read_until(fd: int, event: str, deadline: float) -> dict | None:
    import select
    buffer = b""
    while True:
        wait = deadline - time.monotonic()
        if wait <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            return None
        chunk = os.read(fd, protocol.READ_BYTES)
        if not chunk:
            return None
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            message = json.loads(line)
            if message.get("event") == event:
                return message


def _zygote_main(host: Host, prologue: list, request: dict, scratch: str,
                 sock: socket.socket, report_fd: int) -> None:
    code = 0
    try:
        shell.close_inherited((sock.fileno(), report_fd))
        os.setsid()
        die_with_parent()  # a zygote never outlives its runner host
        import resource
        if host.address_space > 0:
            resource.setrlimit(resource.RLIMIT_AS, (host.address_space, host.address_space))
        # One thread: torch's OpenMP pool does not survive fork(), and a notebook forked from
        # a zygote whose pool had started hangs at its first parallel operation. Each notebook
        # takes its share of the cores after the fork (sandbox/notebook.py).
        shell.enter_process(1)
        captures = shell.capture_output()
        shell.enter_folder(scratch)
        before = sorted(os.listdir(scratch))
        collected = _Collect()
        outcome = shell.run_here(prologue, collected, float(request["timeout"]),
                                 int(request["max_lines"]), captures)
        clean = sorted(os.listdir(scratch)) == before
        shell.Channel(report_fd).send({"event": protocol.PROLOGUE, "outcome": outcome,
                                       "clean": clean, "executed": collected.done})
        os.close(report_fd)
        if outcome != "ok" or not clean:
            return
        # Fresh capture files for each notebook: nothing of the prologue's is re-read.
        for request, events, control, payload in _requests(sock):
            spawn(host, request, events, control, payload, forked_from_zygote=True)
            os.close(events)
            os.close(control)
            os.close(payload)
            sock.sendall(b".")
    except BaseException:  # noqa: BLE001
        code = 70
    finally:
        os._exit(code)


class _Collect:
    """A channel that keeps the prologue's "done" messages (the outputs of its cells)."""

    def __init__(self) -> None:
        self.done: list[dict] = []

    def send(self, message: dict) -> None:
        if message.get("event") == protocol.DONE:
            self.done.append(message)


def _leave_with_worker(sock: socket.socket) -> None:
    """The host ends when the worker that started it ends (it runs in a session of its own,
    so nothing else would stop it): killed, or done while the host still imports torch. Until
    the host has something to clean up, SIGTERM's default action ends it silently; after
    that, `_stop` turns it into a normal exit."""
    import struct

    die_with_parent(signal.SIGTERM)
    # The worker made the socket pair: its pid is the peer's. If the host's parent is no
    # longer that process, the worker ended before the signal was set.
    try:
        worker = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                     struct.calcsize("3i")))[0]
    except OSError:
        worker = 0
    if worker and os.getppid() != worker:
        os._exit(0)
    # Processes forked from the host (zygotes, notebooks) keep SIGTERM's default action.
    os.register_at_fork(after_in_child=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))


def _stop(signum, frame) -> None:
    raise SystemExit(0)


def main(argv: list[str]) -> int:
    fd, config = int(argv[0]), json.loads(argv[1])
    sock = socket.socket(fileno=fd)
    _leave_with_worker(sock)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    shell.prepare(config.get("preload", []))
    host = Host(config)
    signal.signal(signal.SIGTERM, _stop)
    try:
        sock.sendall(b"ready\n")
        host.serve(sock)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the worker has gone: nothing to report, only to clean up
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the clean-up is not interrupted
        for zygote in list(host.zygotes.values()):
            zygote.close()
        import shutil
        shutil.rmtree(host.scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    _code = main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(_code)  # what it started is stopped and its folder gone: no slow teardown
