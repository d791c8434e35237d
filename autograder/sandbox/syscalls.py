"""The C library calls the sandbox makes (mount, unshare, prctl, raw system calls), with the
flags they take, and the error each raises. Only the standard library."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

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

SYSCALLS = {"x86_64": {"pivot_root": 155, "capset": 126, "keyctl": 250},
            "aarch64": {"pivot_root": 41, "capset": 91, "keyctl": 219}}

libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


class SandboxError(RuntimeError):
    """The sandbox could not be set up."""


def check(result: int, what: str) -> int:
    if result != 0 and result == -1:
        err = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(err)} (errno {err})")
    return result


def syscall(name: str, *args) -> int:
    number = SYSCALLS.get(platform.machine(), {}).get(name)
    if number is None:
        raise SandboxError(f"no syscall number for {name} on {platform.machine()}")
    return libc.syscall(ctypes.c_long(number), *args)


def mount(source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags),
                     enc(data)), f"mount {target}")


def write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)

