"""Confine the process that runs a submission: namespaces, a private filesystem, limits.

`confine(policy)` is called in a freshly forked, single-threaded child (it keeps the warm
state of the process it was forked from: torch and the course's modules are already
imported). It returns in a new process, the only child of PID 1 of its own PID namespace (an
init of the sandbox's own that runs none of the notebook's code), that

- has its own user namespace, as an unprivileged uid (1000) mapped to `nobody` when the grader
  runs as root, or to the grader's own uid otherwise; no capabilities, no new privileges;
- has its own network namespace (no interface but a loopback that is down), IPC and UTS
  namespaces;
- sees a filesystem made for it: an empty root (tmpfs, read-only) holding read-only bind
  mounts of the Python environment and the system libraries, a fresh /proc of its own PID
  namespace, a minimal /dev, and writable tmpfs folders for /tmp and its working folder
  (capped in size, gone when it ends). Nothing of the course root but the folders named in the
  policy (the virtual environment, the course's shared package);
- has limits: its whole process tree in a memory and pids cgroup where the machine allows one
  (cgroup v1 as root, or a delegated cgroup v2), and per process RLIMIT_AS, RLIMIT_NPROC
  (counted per user namespace), RLIMIT_FSIZE, RLIMIT_CORE.

The forked child itself (C1) stays outside the new PID namespace and waits for the namespace's
init (C2), which forks the confined process (C3) and waits for it. Each leaves with the status
of the one it waits for. When C2 ends (C3 ended, or C1 was killed: C2 has a parent-death
signal that C3 cannot clear), the kernel kills every process left in the namespace, so nothing
a notebook starts outlives it, with or without a cgroup. This module uses only the standard
library, so it can be tested on its own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import platform
import resource
import select
import shutil
import signal
import stat
import sys
from dataclasses import dataclass, field

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP = 1, 4, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4

_SYSCALLS = {"x86_64": {"pivot_root": 155, "capset": 126, "keyctl": 250},
             "aarch64": {"pivot_root": 41, "capset": 91, "keyctl": 219}}

INSIDE_UID = 1000
CAP_SYS_ADMIN = 21
PROBE_ENV = "AUTOGRADER_SANDBOX_PROBE"  # "fail": check_available() fails (tests)
NOBODY = 65534
GiB = 1 << 30
MiB = 1 << 20

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


class SandboxError(RuntimeError):
    """The sandbox could not be set up."""


def _check(result: int, what: str) -> int:
    if result != 0 and result == -1:
        err = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(err)} (errno {err})")
    return result


def _syscall(name: str, *args) -> int:
    number = _SYSCALLS.get(platform.machine(), {}).get(name)
    if number is None:
        raise SandboxError(f"no syscall number for {name} on {platform.machine()}")
    return _libc.syscall(ctypes.c_long(number), *args)


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags),
                       enc(data)), f"mount {target}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


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
                    folder = root + line[3:].rstrip("/")
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
                    _write(f"{paths['memory']}/memory.limit_in_bytes", str(memory))
                    if os.path.exists(f"{paths['memory']}/memory.memsw.limit_in_bytes"):
                        _write(f"{paths['memory']}/memory.memsw.limit_in_bytes", str(memory))
                _write(f"{paths['pids']}/pids.max", str(pids))
            else:
                if memory > 0:
                    _write(f"{paths['unified']}/memory.max", str(memory))
                    if os.path.exists(f"{paths['unified']}/memory.swap.max"):
                        _write(f"{paths['unified']}/memory.swap.max", "0")
                _write(f"{paths['unified']}/pids.max", str(pids))
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
            _write(f"{path}/cgroup.procs", str(pid or os.getpid()))

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

    def __init__(self, pid: int, cpu_file: str) -> None:
        self.pid, self.cpu_file = pid, cpu_file
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
        return cpu, memory

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
    limit = f"{memory_limit / GiB:g} GiB" if memory_limit > 0 else "no limit"
    return ("WARNING: limits are weaker than asked. This account cannot create cgroups, so "
            "no kernel limit holds each notebook's processes together. Instead the grader reads "
            "the memory and CPU time of every process of a notebook from /proc every "
            f"{TREE_POLL_SECONDS} s and stops it past the memory limit ({limit}) or its cells' "
            "time: a peak shorter than that can pass (each process is still held to the limit "
            "in address space), files it writes into its tmpfs folders (up to 768 MiB) are not "
            "counted, and its processes are counted by their user namespace (RLIMIT_NPROC). "
            "For full limits, grade as root on a machine with cgroup v1's memory and pids "
            "controllers, or from a process whose own cgroup v2 folder this account may write "
            "and whose cgroup.subtree_control enables memory and pids (see docs/GRADING.md, "
            "The sandbox).")


TREE_POLL_SECONDS = 0.1


# --------------------------------------------------------------------------------------------
# The policy and the confinement

@dataclass
class Policy:
    """What a confined notebook may see and use."""

    readonly: list[str] = field(default_factory=list)  # host folders bound read-only
    workdir: str = "/home/student/work"  # its working folder (tmpfs), the cwd
    home: str = "/home/student"
    files_from: str | None = None  # a host folder whose files are copied into workdir
    tmp_bytes: int = 256 * MiB  # size of the writable tmpfs folders, each
    memory_limit: int = 4 * GiB  # address space per process (RLIMIT_AS); 0: none
    max_processes: int = 64  # processes and threads of the notebook's uid in its namespace
    max_file_bytes: int = 256 * MiB
    root_dir: str = ""  # an empty host folder to build the new root on (made if missing)
    hostname: str = "sandbox"


def python_paths() -> list[str]:
    """The folders this Python needs: its prefixes, and the folders on sys.path that are part
    of the installation (inside a prefix, or a site-packages folder). Not the rest of sys.path:
    `python -m` puts the folder it was started from first, and PYTHONPATH may name any folder
    of the grader's (a class's submissions, a home folder); a notebook needs none of them."""
    import site

    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                               sys.base_exec_prefix)} - {"/"}
    sites = set()
    try:
        sites |= {os.path.realpath(p) for p in site.getsitepackages()}
        sites.add(os.path.realpath(site.getusersitepackages()))
    except AttributeError:  # pragma: no cover (a virtualenv's old site.py)
        pass

    def installed(path: str) -> bool:
        real = os.path.realpath(path)
        return real in sites or any(real == p or real.startswith(p + os.sep) for p in prefixes)

    paths = set(prefixes)
    paths |= {p for p in sys.path if p and os.path.isdir(p) and installed(p)}
    return sorted(paths)


_SYSTEM = ["/usr", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
           "/etc/fonts", "/etc/localtime", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
           "/etc/mime.types", "/etc/ssl/certs", "/etc/alternatives"]
_DEVICES = ["null", "zero", "full", "random", "urandom"]


def check_available() -> str | None:
    """None when this machine can confine notebooks; otherwise what is missing and what to do."""
    if not sys.platform.startswith("linux"):
        return "The sandbox needs Linux (user, PID, mount and network namespaces)."
    if platform.machine() not in _SYSCALLS:
        return f"The sandbox does not know this processor ({platform.machine()})."
    import tempfile
    # For tests of the set-up note: the probe then fails as if the kernel refused.
    simulated = os.environ.get(PROBE_ENV, "").strip().lower() == "fail"
    root = tempfile.mkdtemp(prefix="autograder-probe-")
    os.chmod(root, 0o755)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (measured by the exit status)
        code = 1
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            if simulated:
                os._exit(1)
            confine(Policy(root_dir=root, memory_limit=0))
            code = 0 if os.getuid() == INSIDE_UID and os.path.isdir("/proc/self") else 1
        except BaseException:  # noqa: BLE001
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    try:
        os.rmdir(root)
    except OSError:
        pass
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return None
    hints = []
    try:
        if int(open("/proc/sys/user/max_user_namespaces").read()) == 0:
            hints.append("user namespaces are disabled: "
                         "`sudo sysctl -w user.max_user_namespaces=15000`")
    except (OSError, ValueError):
        pass
    try:
        if open("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").read().strip() == "1":
            hints.append("AppArmor restricts unprivileged user namespaces (as Ubuntu 24.04 "
                         "does): `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`"
                         ", or give this Python an AppArmor profile that allows `userns,`")
    except OSError:
        pass
    try:
        if open("/proc/sys/kernel/unprivileged_userns_clone").read().strip() == "0":
            hints.append("`sudo sysctl -w kernel.unprivileged_userns_clone=1`")
    except OSError:
        pass
    if os.geteuid() == 0 and not _has_capability(CAP_SYS_ADMIN):
        hints.append("the grader runs as root without CAP_SYS_ADMIN (a container's default): "
                     "run it as an ordinary user, which needs only user namespaces, or give "
                     "the container CAP_SYS_ADMIN (Docker: `--cap-add SYS_ADMIN`)")
    hint = "; ".join(hints) or ("allow user namespaces for this user (in a container, run it "
                                "with user namespaces allowed, e.g. Docker's "
                                "`--security-opt seccomp=unconfined`)")
    return ("This machine does not let the grader create the namespaces its sandbox needs "
            f"(user, mount, PID, network): {hint}. Or grade with --no-sandbox, which is as "
            "unsafe as plain nbgrader."
            + (f" (Simulated: {PROBE_ENV}=fail is set.)" if simulated else ""))


def _has_capability(number: int) -> bool:
    try:
        for line in open("/proc/self/status"):
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> number & 1)
    except (OSError, ValueError, IndexError):
        pass
    return True


def setup_note() -> str | None:
    """What `make setup` tells an instructor when this machine cannot confine notebooks
    (None when it can). Never an error: students set up the same way and need no sandbox."""
    try:
        problem = check_available()
    except Exception as err:  # noqa: BLE001 (a note, whatever happens)
        problem = f"The sandbox's probe failed: {err}."
    if problem is None:
        return None
    return ("Note for instructors (students can ignore it: `make lab` does not need it): "
            "`make grade` runs each notebook in a sandbox, and it cannot run on this machine, "
            "so grading would stop before it starts. " + problem + " README.md (For "
            "instructors) says what the sandbox needs.")


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """This process gets `sig` when the one that forked it ends."""
    _libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)


def confine(policy: Policy, cgroup: Cgroup | None = None) -> None:
    """Confine this freshly forked, single-threaded process (see the module's doc). Returns
    in the confined process (the child of PID 1 of its namespace); the calling process never
    returns: it waits and exits with the confined process's status.

    As root, the filesystem view is built first, in a mount namespace of the machine's own user
    namespace (so root can reach every folder it binds); then the process becomes `nobody` and
    enters a new user namespace, which copies those mounts in locked: read-only there cannot be
    undone. As an ordinary user, a first user namespace (mapping the user to 0) builds the view
    and a second, nested one confines; its mounts are locked the same way."""
    os.setsid()
    if cgroup is not None:
        cgroup.add()
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        _check(_libc.unshare(CLONE_NEWNS), "unshare the mount namespace")
        owner = NOBODY
    else:
        _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare a user namespace")
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"0 {uid} 1")
        _write("/proc/self/gid_map", f"0 {gid} 1")
        owner = 0
    _build_root(policy, owner)
    if uid == 0:  # never run a notebook as root, in any namespace: become nobody first
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # so that it may write its own maps
    outer_uid, outer_gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET
                         | CLONE_NEWIPC | CLONE_NEWUTS), "unshare the namespaces")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{INSIDE_UID} {outer_uid} 1")
    _write("/proc/self/gid_map", f"{INSIDE_UID} {outer_gid} 1")
    alive_r, alive_w = os.pipe()  # C1 holds the write end while it lives
    child = os.fork()
    if child:  # C1: wait for the namespace's init, then leave with its status
        os.close(alive_r)
        die_with_parent()
        _exit_with(_wait_for(child))
    # C2: PID 1 of the new namespace. It runs no student code: it forks the notebook's process
    # (C3) and reaps. (A PID 1 ignores the signals its own namespace sends it; a notebook must
    # not.) It dies with C1 (parent-death signal) and, being the namespace's init, takes every
    # process of the namespace with it. The notebook can clear its own parent-death signal or
    # leave the process group the grader kills, but not C2's: from inside the namespace, init
    # gets no signal it has no handler for, and C2 is not dumpable (no ptrace, no
    # /proc/1/mem, no pidfd_getfd).
    os.close(alive_w)
    die_with_parent()
    if select.select([alive_r], [], [], 0)[0]:  # C1 is already gone
        os._exit(70)
    try:
        _enter_root(policy)
    except BaseException as err:  # noqa: BLE001
        os.write(2, f"sandbox: {err}\n".encode())
        os._exit(71)
    notebook = os.fork()
    if notebook:
        os.close(alive_r)
        _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        for number in range(1, signal.NSIG):  # no handler: nothing reaches init from inside
            try:
                signal.signal(number, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
        try:
            _drop_privileges()
        except SandboxError:
            pass
        _exit_with(_wait_for(notebook, reap=True))
    os.close(alive_r)
    die_with_parent()
    try:
        _limit(policy)
        _drop_privileges()
        new_session_keyring()
        install_seccomp(keep_sigchld=cgroup is None)
    except BaseException as err:  # noqa: BLE001
        os.write(2, f"sandbox: {err}\n".encode())
        os._exit(71)


def _wait_for(pid: int, reap: bool = False) -> int:
    """Wait for `pid` and return its wait status; with `reap`, also reap every other child
    that ends meanwhile (as a namespace's init must: orphans become its children)."""
    while True:
        try:
            done, status = os.waitpid(-1 if reap else pid, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            return 0
        if done == pid:
            return status


def _exit_with(status: int) -> None:
    """Leave with the exit status `status` describes (128 + signal for a killed process)."""
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status))


def _bind(source: str, target: str, readonly: bool = True) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "w").close()
    _mount(source, target, None, MS_BIND | MS_REC)
    if readonly:
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
        info = os.statvfs(source)
        if info.f_flag & os.ST_NODEV:
            flags |= MS_NODEV
        if info.f_flag & os.ST_NOEXEC:
            flags |= MS_NOEXEC
        _mount(None, target, None, flags)


def _copy_tree(source: str, target: str) -> None:
    for name in sorted(os.listdir(source)):
        path = os.path.join(source, name)
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            shutil.copyfile(path, os.path.join(target, name), follow_symlinks=False)
        elif stat.S_ISDIR(st.st_mode):
            os.makedirs(os.path.join(target, name), exist_ok=True)
            _copy_tree(path, os.path.join(target, name))


def _build_root(policy: Policy, owner: int) -> None:
    """The new root's tree at policy.root_dir, in this process's (new) mount namespace."""
    root = policy.root_dir or "/tmp"
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    _mount("sandbox-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755")
    size = f"size={max(policy.tmp_bytes, 1 << 20)},mode=1777"
    for folder in ("/tmp", policy.home):
        os.makedirs(root + folder, exist_ok=True)
        _mount("tmpfs", root + folder, "tmpfs", MS_NOSUID | MS_NODEV, size)
    for path in _SYSTEM + sorted(set(policy.readonly)):
        if not os.path.exists(path):
            continue
        real = os.path.realpath(path)
        _bind(real, root + path)
        if real != path and os.path.isdir(real):
            _bind(real, root + real)
    for link in ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(link):
            os.symlink(os.readlink(link), root + link)
        elif os.path.isdir(link):
            _bind(link, root + link)
    os.makedirs(root + "/dev", exist_ok=True)
    for name in _DEVICES:
        _bind(f"/dev/{name}", f"{root}/dev/{name}", readonly=False)
    os.makedirs(root + "/dev/shm", exist_ok=True)
    _mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, size)
    os.symlink("/proc/self/fd", root + "/dev/fd")
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{number}", f"{root}/dev/{name}")
    os.makedirs(root + policy.workdir, exist_ok=True)
    if policy.files_from and os.path.isdir(policy.files_from):
        _copy_tree(policy.files_from, root + policy.workdir)
    for dirpath, _, filenames in os.walk(root + policy.home):
        os.chown(dirpath, owner, owner)
        for name in filenames:
            os.chown(os.path.join(dirpath, name), owner, owner)
    os.makedirs(root + "/proc", exist_ok=True)
    os.makedirs(root + "/.old-root", exist_ok=True)


def _enter_root(policy: Policy) -> None:
    """In the confined process: its own /proc, then the new root; the old one detached."""
    root = policy.root_dir or "/tmp"
    # A mount made in a more privileged namespace is locked here, and pivot_root refuses a
    # locked new root: bind the tree onto itself (its mounts inside stay locked).
    _mount(root, root, None, MS_BIND | MS_REC)
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    # The kernel's list of keys is not per namespace: it would name the grader's keys.
    _mount(root + "/dev/null", root + "/proc/keys", None, MS_BIND)
    _check(_syscall("pivot_root", root.encode(), (root + "/.old-root").encode()), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.old-root", MNT_DETACH), "umount the old root")
    try:
        os.rmdir("/.old-root")  # empty now; a root owned outside the namespace keeps it
    except OSError:
        pass
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    name = policy.hostname.encode()
    _libc.sethostname(name, len(name))
    os.chdir(policy.workdir)


def _limit(policy: Policy) -> None:
    if policy.memory_limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (policy.memory_limit, policy.memory_limit))
    resource.setrlimit(resource.RLIMIT_NPROC, (policy.max_processes, policy.max_processes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (policy.max_file_bytes, policy.max_file_bytes))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _drop_privileges() -> None:
    """No capabilities (effective, permitted, inheritable, ambient, bounding), no new
    privileges from set-uid programs."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:
                break
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    _check(_syscall("capset", ctypes.byref(header), ctypes.byref(data)), "capset")


# --------------------------------------------------------------------------------------------
# The seccomp filter: system calls a notebook never needs

# Denied with EPERM: key management, io_uring, userfaultfd, bpf, perf events, tracing and
# reading other processes' memory, mounting, kexec, kernel modules, entering or making
# namespaces. Numbers by architecture (the calls added since Linux 5.0 share theirs).
_SHARED_DENIED = {"open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
                  "fsmount": 432, "fspick": 433, "mount_setattr": 442, "open_tree_attr": 467,
                  "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
_DENIED = {
    "x86_64": {"keyctl": 250, "add_key": 248, "request_key": 249, "userfaultfd": 323,
               "bpf": 321, "perf_event_open": 298, "ptrace": 101, "process_vm_readv": 310,
               "process_vm_writev": 311, "mount": 165, "umount2": 166, "pivot_root": 155,
               "kexec_load": 246, "kexec_file_load": 320, "init_module": 175,
               "finit_module": 313, "delete_module": 176, "unshare": 272, "setns": 308,
               **_SHARED_DENIED},
    "aarch64": {"keyctl": 219, "add_key": 217, "request_key": 218, "userfaultfd": 282,
                "bpf": 280, "perf_event_open": 241, "ptrace": 117, "process_vm_readv": 270,
                "process_vm_writev": 271, "mount": 40, "umount2": 39, "pivot_root": 41,
                "kexec_load": 104, "kexec_file_load": 294, "init_module": 105,
                "finit_module": 273, "delete_module": 106, "unshare": 97, "setns": 268,
                **_SHARED_DENIED},
}
_CLONE = {"x86_64": 56, "aarch64": 220}
_CLONE3 = 435
_RT_SIGACTION = {"x86_64": 13, "aarch64": 134}
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_BIT = 0x40000000
# Every CLONE_NEW* flag that clone() takes (CLONE_NEWTIME shares its bit with the exit signal
# there, and is taken by clone3 and unshare only, both denied).
CLONE_NEW_FLAGS = 0x02000000 | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER \
    | CLONE_NEWPID | CLONE_NEWNET
SIGCHLD = 17  # the same number on x86_64 and aarch64
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
_RET_ALLOW, _RET_ERRNO, _RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def seccomp_program(machine: str, keep_sigchld: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter's BPF instructions (code, jt, jf, k) for `machine`. With `keep_sigchld`, a
    notebook may not change SIGCHLD's action either (ignored, its children would be reaped
    unseen, and their CPU time with them: only counted that way without a cgroup)."""
    low = 0 if sys.byteorder == "little" else 4  # the low half of a 64-bit argument

    def arg(n: int, high: bool = False) -> int:
        return 16 + 8 * n + (4 - low if high else low)

    eperm, enosys = _RET_ERRNO | errno.EPERM, _RET_ERRNO | errno.ENOSYS
    prog = [(_LD_ABS, 0, 0, 4), (_JEQ, 1, 0, _AUDIT_ARCH[machine]),  # another ABI: killed
            (_RET, 0, 0, _RET_KILL_PROCESS), (_LD_ABS, 0, 0, 0)]
    if machine == "x86_64":  # the x32 ABI's numbers
        prog += [(_JGE, 0, 1, _X32_BIT), (_RET, 0, 0, eperm)]
    for number in sorted(set(_DENIED[machine].values())):
        prog += [(_JEQ, 0, 1, number), (_RET, 0, 0, eperm)]
    # clone3 passes its flags in memory, out of the filter's sight: ENOSYS makes the C library
    # fall back to clone, whose flags it sees.
    prog += [(_JEQ, 0, 1, _CLONE3), (_RET, 0, 0, enosys)]
    if keep_sigchld:  # rt_sigaction(SIGCHLD, act != NULL, ...)
        prog += [(_JEQ, 0, 7, _RT_SIGACTION[machine]), (_LD_ABS, 0, 0, arg(0)),
                 (_JEQ, 0, 5, SIGCHLD), (_LD_ABS, 0, 0, arg(1)), (_JEQ, 0, 2, 0),
                 (_LD_ABS, 0, 0, arg(1, high=True)), (_JEQ, 1, 0, 0), (_RET, 0, 0, eperm),
                 (_LD_ABS, 0, 0, 0)]
    prog += [(_JEQ, 0, 3, _CLONE[machine]), (_LD_ABS, 0, 0, arg(0)),
             (_JSET, 0, 1, CLONE_NEW_FLAGS), (_RET, 0, 0, eperm), (_RET, 0, 0, _RET_ALLOW)]
    return prog


def install_seccomp(keep_sigchld: bool = False) -> None:
    """Load the filter into this process (needs no_new_privs); inherited by every thread and
    child it makes, and never lifted."""
    machine = platform.machine()
    if machine not in _DENIED:
        raise SandboxError(f"no seccomp filter for {machine}")
    prog = seccomp_program(machine, keep_sigchld)
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0),
           "seccomp filter")


def new_session_keyring() -> None:
    """Join a new, empty, anonymous session keyring (none of the grader's keys in reach)."""
    KEYCTL_JOIN_SESSION_KEYRING = 1
    if _syscall("keyctl", KEYCTL_JOIN_SESSION_KEYRING, None) == -1:
        err = ctypes.get_errno()
        if err != errno.ENOSYS:  # a kernel without keys: nothing to keep out of reach
            raise SandboxError(f"a new session keyring: {os.strerror(err)}")


if __name__ == "__main__":  # `make setup`: one line that all is ready, or a note
    if sys.argv[1:] == ["--setup-note"]:
        print(setup_note() or "Ready: the course's environment (.venv) is set up, and the "
              "grader's sandbox runs on this machine.")
