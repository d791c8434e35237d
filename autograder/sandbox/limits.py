"""The limits of one notebook's process tree: a cgroup where the machine allows one, or
its processes measured from /proc where it does not. Only the standard library."""

from __future__ import annotations

import os
import signal
import socket

from autograder.sandbox.policy import SandboxPolicy
from autograder.sandbox.sockets import queued_bytes, receive_diag_socket
from autograder.sandbox.syscalls import write
from autograder.units import format_memory


# --------------------------------------------------------------------------------------------
# Cgroups: one per notebook, for the memory and the number of processes of its whole tree

class Cgroup:
    """A cgroup for one notebook's process tree: v1 (memory and pids controllers, as root) or
    v2 (a delegated subtree with the memory and pids controllers enabled)."""

    def __init__(self, paths: dict[str, str], version: int) -> None:
        self.paths, self.version = paths, version

    @staticmethod
    def base() -> tuple[int, dict[str, str]] | None:
        """Where this process may create child cgroups: (version, {controller: folder})."""
        try:
            lines = open("/proc/self/cgroup").read().splitlines()
        except OSError:
            return None
        v1 = {}
        for line in lines:
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(","):
                if name in ("memory", "pids", "cpuacct"):  # cpuacct: optional (CPU time)
                    folder = f"/sys/fs/cgroup/{name}{path}"
                    if os.path.isdir(folder) and os.access(folder, os.W_OK):
                        v1[name] = folder
        if {"memory", "pids"} <= set(v1):
            return 1, v1
        for line in lines:
            if line.startswith("0::"):
                for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                    own = root + line[3:].rstrip("/")
                    # Its own folder, or the delegated one its leaf is in (cgroup v2 lets
                    # only a folder without processes give its children controllers).
                    for folder in (own, os.path.dirname(own)):
                        try:
                            enabled = open(f"{folder}/cgroup.subtree_control").read().split()
                        except OSError:
                            continue
                        if {"memory", "pids"} <= set(enabled) and os.access(folder, os.W_OK):
                            return 2, {"unified": folder}
        return None

    @classmethod
    def create(cls, name: str, memory: int, pids: int) -> "Cgroup | None":
        found = cls.base()
        if found is None:
            return None
        version, bases = found
        paths = {}
        try:
            for key, folder in bases.items():
                path = os.path.join(folder, name)
                try:
                    if os.path.realpath(path) not in map(os.path.realpath, paths.values()):
                        os.mkdir(path)  # never one that exists: it would be another notebook's
                except OSError:
                    if key == "cpuacct":
                        continue  # the CPU time is then kept on the wall clock only
                    raise
                paths[key] = path
            group = cls(paths, version)
            if version == 1:
                if memory > 0:
                    write(f"{paths['memory']}/memory.limit_in_bytes", str(memory))
                    if os.path.exists(f"{paths['memory']}/memory.memsw.limit_in_bytes"):
                        write(f"{paths['memory']}/memory.memsw.limit_in_bytes", str(memory))
                write(f"{paths['pids']}/pids.max", str(pids))
            else:
                if memory > 0:
                    write(f"{paths['unified']}/memory.max", str(memory))
                    if os.path.exists(f"{paths['unified']}/memory.swap.max"):
                        write(f"{paths['unified']}/memory.swap.max", "0")
                write(f"{paths['unified']}/pids.max", str(pids))
            return group
        except OSError:
            for path in paths.values():
                try:
                    os.rmdir(path)
                except OSError:
                    pass
            return None

    def cpu_file(self) -> str | None:
        """The file that holds the CPU time used by the group's processes, if there is one."""
        if self.version == 1:
            path = self.paths.get("cpuacct")
            return f"{path}/cpuacct.usage" if path else None
        path = f"{self.paths['unified']}/cpu.stat"
        return path if os.path.exists(path) else None

    def add(self, pid: int = 0) -> None:
        for path in self.paths.values():
            write(f"{path}/cgroup.procs", str(pid or os.getpid()))

    def out_of_memory(self) -> bool:
        """Whether the kernel killed a process of the group for memory."""
        try:
            if self.version == 1:
                text = open(f"{self.paths['memory']}/memory.oom_control").read()
            else:
                text = open(f"{self.paths['unified']}/memory.events").read()
        except OSError:
            return False
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                return True
        return False

    def hit_limit(self) -> bool:
        """Whether the group's memory reached its limit (the kernel then reclaimed or killed):
        a notebook that stalls or dies after that ran out of memory."""
        try:
            if self.version == 1:
                folder = self.paths["memory"]
                # failcnt stays 0 on some kernels whose group did reach its limit: the peak says
                peak = int(open(f"{folder}/memory.max_usage_in_bytes").read())
                limit = int(open(f"{folder}/memory.limit_in_bytes").read())
                return int(open(f"{folder}/memory.failcnt").read()) > 0 or peak >= limit
            for line in open(f"{self.paths['unified']}/memory.events").read().splitlines():
                key, _, value = line.partition(" ")
                if key in ("max", "oom") and value.strip().isdigit() and int(value) > 0:
                    return True
        except (OSError, ValueError):
            pass
        return False

    def pids(self) -> list[int]:
        found = set()
        for path in self.paths.values():
            try:
                found |= {int(p) for p in open(f"{path}/cgroup.procs").read().split()}
            except OSError:
                pass
        return sorted(found)

    def kill(self) -> None:
        """Kill every process of the group (those it starts meanwhile included)."""
        for _ in range(50):
            left = self.pids()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            import time
            time.sleep(0.01)

    def remove(self) -> None:
        """Kill whatever is left in the group and remove it."""
        self.kill()
        for path in self.paths.values():
            try:
                os.rmdir(path)
            except OSError:
                pass


class ProcessTree:
    """Without a cgroup: the CPU time and memory of every process of one notebook, read from
    /proc. Every process of its PID namespace descends from the process the host forked (an
    orphan goes to the namespace's init, or to a subreaper inside it), so the tree is all of
    them. Parents are read before their children: a child reaped meanwhile has its time in
    its parent's (already read) or in none, never in both."""

    PAGE = os.sysconf("SC_PAGE_SIZE")
    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, pid: int, cpu_file: str,
                 diag_channel: socket.socket | None = None) -> None:
        self.pid, self.cpu_file = pid, cpu_file
        # Where the sandbox sends a sock_diag socket of its network namespace (`sockets`).
        self.diag_channel, self.diag = diag_channel, None
        self.write_cpu(0.0)

    @staticmethod
    def _stat(pid: int) -> list[str] | None:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                text = handle.read().decode("ascii", "replace")
        except OSError:
            return None
        return text.rpartition(")")[2].split()  # the name may hold spaces and parentheses

    def members(self) -> list[int]:
        """The tree's processes, each after its parent."""
        children: dict[int, list[int]] = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                fields = self._stat(int(name))
                if fields and len(fields) > 1 and fields[1].isdigit():
                    children.setdefault(int(fields[1]), []).append(int(name))
        order, at = [self.pid], 0
        while at < len(order):
            order += children.get(order[at], [])
            at += 1
        return order

    def measure(self) -> tuple[float, int]:
        """(CPU seconds of the tree, its reaped children's included; its memory in bytes:
        each process's proportional share where it can be read, else its resident size)."""
        cpu, memory = 0.0, 0
        for pid in self.members():
            fields = self._stat(pid)
            if not fields or len(fields) < 22:
                continue
            cpu += sum(int(value) for value in fields[11:15]) / self.TICK
            memory += self._pss(pid, int(fields[21]) * self.PAGE)
        return cpu, memory + self._queued()

    def _queued(self) -> int:
        """Bytes in the queues of the sockets of the notebook's network namespace (memory no
        process maps); 0 until the sandbox has sent its sock_diag socket."""
        if self.diag is None and self.diag_channel is not None:
            self.diag = receive_diag_socket(self.diag_channel)
        if self.diag is None:
            return 0
        try:
            return queued_bytes(self.diag)
        except OSError:
            return 0

    @staticmethod
    def _pss(pid: int, rss: int) -> int:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as handle:
                for line in handle:
                    if line.startswith("Pss:"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError):
            pass
        return rss  # a process that made itself unreadable counts all it holds

    def write_cpu(self, seconds: float) -> None:
        """Where the grader reads the CPU time (as cgroup v2's cpu.stat says it)."""
        part = self.cpu_file + ".new"
        with open(part, "w") as handle:
            handle.write(f"usage_usec {int(seconds * 1e6)}\n")
        os.replace(part, self.cpu_file)

    def kill(self) -> None:
        """End the notebook: its first process (the namespace's init dies with it, and every
        process of the namespace with that)."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def remove(self) -> None:
        for held in (self.diag, self.diag_channel):
            if held is not None:
                held.close()
        for path in (self.cpu_file, self.cpu_file + ".new"):
            try:
                os.remove(path)
            except OSError:
                pass


def weaker_limits(memory_limit: int) -> str | None:
    """None where every notebook gets a cgroup; otherwise a warning: which limits are weaker
    than asked, and how to get full ones."""
    if Cgroup.base() is not None:
        return None
    policy = SandboxPolicy(memory_limit=memory_limit)
    limit = format_memory(memory_limit)
    files = format_memory(policy.tmp_bytes * len(policy.tmpfs))
    return ("WARNING: limits are weaker than asked. This account cannot create cgroups, so "
            "no kernel limit holds each notebook's processes together. Instead the grader reads "
            "the memory and CPU time of every process of a notebook from /proc every "
            f"{TREE_POLL_SECONDS} s and stops it past the memory limit ({limit}) or its cells' "
            "time: a peak shorter than that can pass (each process is still held to the limit "
            f"in address space), files it writes into its tmpfs folders (up to {files}) and the "
            f"kernel's buffers of its pipes (at most {policy.max_open_files} descriptors per "
            "process) are not "
            "counted (its sockets' queues are), memfds and System V shared memory and message queues are refused "
            "(nothing would count them), and its processes are counted by their user namespace "
            "(RLIMIT_NPROC). "
            "For full limits, grade as root on a machine with cgroup v1's memory and pids "
            "controllers, or from a process whose own cgroup v2 folder this account may write "
            "and whose cgroup.subtree_control enables memory and pids (see docs/GRADING.md, "
            "The sandbox).")


TREE_POLL_SECONDS = 0.1
