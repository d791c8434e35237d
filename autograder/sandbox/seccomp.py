"""The seccomp filter (system calls a notebook never needs) and a new, empty session keyring.
Only the standard library."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import sys

from autograder.sandbox.syscalls import (CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID,
                                         CLONE_NEWUSER, CLONE_NEWUTS, SandboxError, check, libc,
                                         syscall)

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
# Without a cgroup, memory that no process maps is counted nowhere: memfds and System V shared
# memory and message queues are denied there (torch, its distributed package over gloo and the
# course's notebooks use none of them; /dev/shm is a capped tmpfs).
_UNCOUNTED = {"x86_64": {"memfd_create": 319, "shmget": 29, "msgget": 68},
              "aarch64": {"memfd_create": 279, "shmget": 194, "msgget": 186}}
# socket() and socketpair() take only the address families that are per network namespace and
# that a notebook may need (torch.distributed over the sandbox's loopback uses AF_INET, AF_INET6,
# AF_UNIX and AF_NETLINK); any other (AF_VSOCK reaches the hypervisor, AF_PACKET, AF_BLUETOOTH,
# ...) fails with EAFNOSUPPORT.
_SOCKET_CALLS = {"x86_64": (41, 53), "aarch64": (198, 199)}
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
# The same by name, for the sandbox's policy (`autograder.sandbox.policy`), which prints them.
DENIED_CALLS = tuple(sorted(_DENIED["x86_64"]))
UNCOUNTED_CALLS = tuple(sorted(_UNCOUNTED["x86_64"]))
SOCKET_FAMILIES = ("AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK")
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
    """The filter's BPF instructions (code, jt, jf, k) for `machine`. With `keep_sigchld` (no
    cgroup holds the notebook), a notebook may not change SIGCHLD's action either (ignored, its
    children would be reaped unseen, and their CPU time with them: only counted that way without
    a cgroup), nor make memory that no process maps (`_UNCOUNTED`)."""
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
    if keep_sigchld:
        for number in sorted(_UNCOUNTED[machine].values()):
            prog += [(_JEQ, 0, 1, number), (_RET, 0, 0, eperm)]
    for number in _SOCKET_CALLS[machine]:  # its family (the first argument): one of four
        prog += [(_JEQ, 0, 7, number), (_LD_ABS, 0, 0, arg(0)), (_JEQ, 4, 0, AF_UNIX),
                 (_JEQ, 3, 0, AF_INET), (_JEQ, 2, 0, AF_INET6), (_JEQ, 1, 0, AF_NETLINK),
                 (_RET, 0, 0, _RET_ERRNO | errno.EAFNOSUPPORT), (_LD_ABS, 0, 0, 0)]
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
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0),
          "seccomp filter")


def new_session_keyring() -> None:
    """Join a new, empty, anonymous session keyring (none of the grader's keys in reach)."""
    KEYCTL_JOIN_SESSION_KEYRING = 1
    if syscall("keyctl", KEYCTL_JOIN_SESSION_KEYRING, None) == -1:
        err = ctypes.get_errno()
        if err != errno.ENOSYS:  # a kernel without keys: nothing to keep out of reach
            raise SandboxError(f"a new session keyring: {os.strerror(err)}")

