"""What a notebook's sockets hold in the kernel's queues, for the limit without a cgroup.

Data queued in a socket (written and not yet read, or sent with a descriptor in flight) is
memory no process maps: without a cgroup, nothing else counts it. Every socket of the
notebook's processes lives in its network namespace, so the runner host asks the kernel
(sock_diag, over netlink) for the memory of every Unix, TCP and UDP socket of that namespace.
The netlink socket is made inside the namespace by the sandbox's first process, before any of
the notebook's code runs, and handed to the host (`send_diag_socket`); the notebook never holds
it. Only the standard library.
"""

from __future__ import annotations

import os
import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
UDIAG_SHOW_RQLEN, UDIAG_SHOW_MEMINFO = 0x10, 0x20
UNIX_DIAG_RQLEN = 4  # the attribute's type in a reply (enum unix_diag_attr)
UNIX_DIAG_MEMINFO = 5  # the attribute's type in a reply (enum unix_diag_attr)
INET_DIAG_SKMEMINFO = 7
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port
_ATTR = struct.Struct("=HH")  # rtattr: length, type
_UNIX_REPLY = 16  # unix_diag_msg
_INET_REPLY = 72  # inet_diag_msg
ALL_STATES = 0xFFFFFFFF


def _requests() -> list[tuple[bytes, int, bool]]:
    """(the request's body, the size of a reply's fixed part, whether it is of Unix sockets)
    for each kind of socket."""
    unix = struct.pack("=BBHIIIII", socket.AF_UNIX, 0, 0, ALL_STATES, 0,
                       UDIAG_SHOW_MEMINFO | UDIAG_SHOW_RQLEN, 0, 0)
    found = [(unix, _UNIX_REPLY, True)]
    for family in (socket.AF_INET, socket.AF_INET6):
        for protocol in (socket.IPPROTO_TCP, socket.IPPROTO_UDP):
            body = struct.pack("=BBBBI", family, protocol, 1 << (INET_DIAG_SKMEMINFO - 1), 0,
                               ALL_STATES) + bytes(48)
            found.append((body, _INET_REPLY, False))
    return found


def queued_bytes(diag: socket.socket) -> int:
    """Bytes held by the queues of every Unix, TCP and UDP socket in `diag`'s namespace. A Unix
    socket: the bytes waiting in its receive queue and the memory its sent data holds (data
    both sent by a live socket and waiting in its peer counts twice: never less than held); an
    Internet one: its receive memory and the larger of its send memory and send queue."""
    total = 0
    for sequence, (body, fixed, unix) in enumerate(_requests(), start=1):
        message = _HEADER.pack(_HEADER.size + len(body), SOCK_DIAG_BY_FAMILY,
                               NLM_F_REQUEST | NLM_F_DUMP, sequence, 0) + body
        diag.send(message)
        total += _replies(diag, sequence, fixed, unix)
    return total


def _replies(diag: socket.socket, sequence: int, fixed: int, unix: bool) -> int:
    total = 0
    while True:
        data = diag.recv(1 << 16)
        if not data:
            return total
        at = 0
        while at + _HEADER.size <= len(data):
            length, kind, _, seq, _ = _HEADER.unpack_from(data, at)
            if length < _HEADER.size:
                return total
            if seq == sequence:
                if kind in (NLMSG_DONE, NLMSG_ERROR):
                    return total
                found = _attributes(data[at + _HEADER.size + fixed:at + length])
                rmem, _, wmem, _, _, queued = struct.unpack_from(
                    "=6I", found.get(UNIX_DIAG_MEMINFO if unix else INET_DIAG_SKMEMINFO,
                                     bytes(24)).ljust(24, b"\0"))
                if unix:
                    waiting = struct.unpack_from("=I", found.get(UNIX_DIAG_RQLEN, bytes(4))
                                                 .ljust(4, b"\0"))[0]
                    total += waiting + wmem
                else:
                    total += rmem + max(wmem, queued)
            at += (length + 3) & ~3


def _attributes(data: bytes) -> dict[int, bytes]:
    """A reply's netlink attributes: type -> payload."""
    found, at = {}, 0
    while at + _ATTR.size <= len(data):
        length, kind = _ATTR.unpack_from(data, at)
        if length < _ATTR.size:
            break
        found[kind] = data[at + _ATTR.size:at + length]
        at += (length + 3) & ~3
    return found


def diag_socket() -> socket.socket:
    return socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC,
                         NETLINK_SOCK_DIAG)


def send_diag_socket(channel: int) -> None:
    """In the sandbox's first process, just inside its network namespace: hand a sock_diag
    socket of that namespace to the host over `channel`, then close both (before anything of
    the notebook's is forked)."""
    try:
        with socket.socket(fileno=channel) as to_host, diag_socket() as diag:
            socket.send_fds(to_host, [b"d"], [diag.fileno()])
    except OSError:
        pass  # the host then counts no queue: it says so in its warning
    finally:
        try:
            os.close(channel)
        except OSError:
            pass


def receive_diag_socket(channel: socket.socket) -> socket.socket | None:
    """The sock_diag socket the sandbox sent on `channel`, once it has come (never waits)."""
    try:
        _, fds, _, _ = socket.recv_fds(channel, 1, 1, socket.MSG_DONTWAIT)
    except (BlockingIOError, OSError):
        return None
    if not fds:
        return None
    return socket.socket(fileno=fds[0])
