"""Confine the process that runs a submission: namespaces, a private filesystem, limits.

`confine(policy)` is called in a freshly forked, single-threaded child (it keeps the warm
state of the process it was forked from: torch and the course's modules are already
imported). It returns in a new process, the only child of PID 1 of its own PID namespace (an
init of the sandbox's own that runs none of the notebook's code), that

- has its own user namespace, as an unprivileged uid (1000) mapped to `nobody` when the grader
  runs as root, or to the grader's own uid otherwise; no capabilities, no new privileges;
- has its own network namespace, made for it alone, whose only interface is its own loopback,
  brought up so that its processes can talk to each other (torch.distributed's gloo over
  127.0.0.1); nothing outside the namespace, another notebook's included, is reachable; IPC
  and UTS namespaces of its own;
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
a notebook starts outlives it, with or without a cgroup. This module, like the ones it uses
(`limits`, `seccomp`, `syscalls`), uses only the standard library, so it can be tested on its own.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import resource
import select
import shutil
import signal
import socket
import stat
import struct

from autograder.sandbox.limits import Cgroup
from autograder.sandbox.policy import HOME, INSIDE_UID, NOBODY, USER, SandboxPolicy
from autograder.sandbox.seccomp import install_seccomp, new_session_keyring
from autograder.sandbox.sockets import send_diag_socket
from autograder.sandbox.syscalls import (CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID,
                                         CLONE_NEWUSER, CLONE_NEWUTS, MNT_DETACH, MS_BIND,
                                         MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_PRIVATE, MS_RDONLY,
                                         MS_REC, MS_REMOUNT, PR_CAP_AMBIENT,
                                         PR_CAP_AMBIENT_CLEAR_ALL, PR_CAPBSET_DROP,
                                         PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG,
                                         SandboxError, check, libc, mount, syscall,
                                         write)

# The sandbox's own accounts, never the machine's (on the class hub, its students' names).
_ACCOUNTS = {"passwd": "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                       f"{USER}:x:{INSIDE_UID}:{INSIDE_UID}:{USER}:{HOME}:/bin/sh\n"
                       f"nobody:x:{NOBODY}:{NOBODY}:nobody:/nonexistent:/usr/sbin/nologin\n",
             "group": f"root:x:0:\n{USER}:x:{INSIDE_UID}:\nnogroup:x:{NOBODY}:\n"}


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """This process gets `sig` when the one that forked it ends."""
    libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)


def confine(policy: SandboxPolicy, root_dir: str, files_from: str | None = None,
            cgroup: Cgroup | None = None, diag_channel: int | None = None) -> None:
    """Confine this freshly forked, single-threaded process (see the module's doc) by
    `policy`, its new root built in the empty host folder `root_dir` (made if missing), its
    working folder a copy of the files of `files_from` (a host folder) if given. Returns
    in the confined process (the child of PID 1 of its namespace); the calling process never
    returns: it waits and exits with the confined process's status.

    As root, the filesystem view is built first, in a mount namespace of the machine's own user
    namespace (so root can reach every folder it binds); then the process becomes `nobody` and
    enters a new user namespace, which copies those mounts in locked: read-only there cannot be
    undone. As an ordinary user, a first user namespace (mapping the user to 0) builds the view
    and a second, nested one confines; its mounts are locked the same way. Without a cgroup,
    `diag_channel` (a Unix socket to the host) gets a sock_diag socket of the new network
    namespace, to count its sockets' queues (`autograder.sandbox.sockets`)."""
    os.setsid()
    if cgroup is not None:
        cgroup.add()
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        check(libc.unshare(CLONE_NEWNS), "unshare the mount namespace")
        owner = NOBODY
    else:
        check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare a user namespace")
        write("/proc/self/setgroups", "deny")
        write("/proc/self/uid_map", f"0 {uid} 1")
        write("/proc/self/gid_map", f"0 {gid} 1")
        owner = 0
    _build_root(policy, root_dir, files_from, owner)
    if uid == 0:  # never run a notebook as root, in any namespace: become nobody first
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # so that it may write its own maps
    outer_uid, outer_gid = os.geteuid(), os.getegid()
    check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET
                        | CLONE_NEWIPC | CLONE_NEWUTS), "unshare the namespaces")
    write("/proc/self/setgroups", "deny")
    write("/proc/self/uid_map", f"{INSIDE_UID} {outer_uid} 1")
    write("/proc/self/gid_map", f"{INSIDE_UID} {outer_gid} 1")
    loopback_up()
    if diag_channel is not None:  # sent and closed before anything is forked
        send_diag_socket(diag_channel)
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
        _enter_root(policy, root_dir)
    except BaseException as err:  # noqa: BLE001
        os.write(2, f"sandbox: {err}\n".encode())
        os._exit(71)
    notebook = os.fork()
    if notebook:
        os.close(alive_r)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
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
        _limit(policy, cgroup is not None)
        _drop_privileges()
        new_session_keyring()
        install_seccomp(keep_sigchld=cgroup is None)
    except BaseException as err:  # noqa: BLE001
        os.write(2, f"sandbox: {err}\n".encode())
        os._exit(71)


SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1


def loopback_up() -> None:
    """Bring up `lo` in this process's network namespace: the fresh one `confine` has just
    made for this notebook alone (the new user namespace owns it, so this needs no privilege
    on the machine). Its only address is 127.0.0.1 (and ::1), reachable only from inside."""
    request = struct.pack("16sH22x", b"lo", 0)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            flags = struct.unpack("16sH22x", fcntl.ioctl(sock, SIOCGIFFLAGS, request))[1]
            fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))
        except OSError as err:
            raise SandboxError(f"bring up the sandbox's loopback: {err.strerror}") from err


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
    mount(source, target, None, MS_BIND | MS_REC)
    if readonly:
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID
        info = os.statvfs(source)
        if info.f_flag & os.ST_NODEV:
            flags |= MS_NODEV
        if info.f_flag & os.ST_NOEXEC:
            flags |= MS_NOEXEC
        mount(None, target, None, flags)


def _copy_tree(source: str, target: str) -> None:
    for name in sorted(os.listdir(source)):
        path = os.path.join(source, name)
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            shutil.copyfile(path, os.path.join(target, name), follow_symlinks=False)
        elif stat.S_ISDIR(st.st_mode):
            os.makedirs(os.path.join(target, name), exist_ok=True)
            _copy_tree(path, os.path.join(target, name))


def _build_root(policy: SandboxPolicy, root: str, files_from: str | None, owner: int) -> None:
    """The new root's tree at `root`, in this process's (new) mount namespace."""
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    mount("sandbox-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755")
    size = f"size={max(policy.tmp_bytes, 1 << 20)},mode=1777"
    for folder in policy.tmpfs:
        if folder.startswith("/dev/"):
            continue  # made once /dev is
        os.makedirs(root + folder, exist_ok=True)
        mount("tmpfs", root + folder, "tmpfs", MS_NOSUID | MS_NODEV, size)
    for path in list(policy.system) + sorted(set(policy.readonly)):
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
    os.makedirs(root + "/etc", exist_ok=True)
    for name, text in _ACCOUNTS.items():
        with open(f"{root}/etc/{name}", "w") as handle:
            handle.write(text)
    os.makedirs(root + "/dev", exist_ok=True)
    for name in policy.devices:
        _bind(f"/dev/{name}", f"{root}/dev/{name}", readonly=False)
    for folder in policy.tmpfs:
        if folder.startswith("/dev/"):
            os.makedirs(root + folder, exist_ok=True)
            mount("tmpfs", root + folder, "tmpfs", MS_NOSUID | MS_NODEV, size)
    os.symlink("/proc/self/fd", root + "/dev/fd")
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{number}", f"{root}/dev/{name}")
    os.makedirs(root + policy.workdir, exist_ok=True)
    if files_from and os.path.isdir(files_from):
        _copy_tree(files_from, root + policy.workdir)
    for dirpath, _, filenames in os.walk(root + policy.home):
        os.chown(dirpath, owner, owner)
        for name in filenames:
            os.chown(os.path.join(dirpath, name), owner, owner)
    os.makedirs(root + "/proc", exist_ok=True)
    os.makedirs(root + "/.old-root", exist_ok=True)


def _enter_root(policy: SandboxPolicy, root: str) -> None:
    """In the confined process: its own /proc, then the new root; the old one detached."""
    # A mount made in a more privileged namespace is locked here, and pivot_root refuses a
    # locked new root: bind the tree onto itself (its mounts inside stay locked).
    mount(root, root, None, MS_BIND | MS_REC)
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    # The kernel's list of keys is not per namespace: it would name the grader's keys.
    mount(root + "/dev/null", root + "/proc/keys", None, MS_BIND)
    check(syscall("pivot_root", root.encode(), (root + "/.old-root").encode()), "pivot_root")
    os.chdir("/")
    check(libc.umount2(b"/.old-root", MNT_DETACH), "umount the old root")
    try:
        os.rmdir("/.old-root")  # empty now; a root owned outside the namespace keeps it
    except OSError:
        pass
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    name = policy.hostname.encode()
    libc.sethostname(name, len(name))
    os.chdir(policy.workdir)


def _limit(policy: SandboxPolicy, cgroup: bool) -> None:
    address_space = policy.address_space(cgroup)
    if address_space > 0:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    resource.setrlimit(resource.RLIMIT_NPROC, (policy.max_processes, policy.max_processes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (policy.max_file_bytes, policy.max_file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (policy.max_open_files, policy.max_open_files))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _drop_privileges() -> None:
    """No capabilities (effective, permitted, inheritable, ambient, bounding), no new
    privileges from set-uid programs."""
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:
                break
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    check(syscall("capset", ctypes.byref(header), ctypes.byref(data)), "capset")
