"""The sandbox's seccomp filter on sockets and on memory no process maps (a hostile
classmate's ways out), and what it shows of the machine's accounts (its own, never the
machine's), each checked in a real process that installs the filter or enters the sandbox.

- socket() and socketpair() take only AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK: AF_VSOCK
  (not per network namespace: on a VM it reaches the hypervisor) and the rest are refused;
- without a cgroup, memfd_create, shmget and msgget are refused (that memory would be counted
  nowhere); with one they work, as the cgroup counts them;
- torch.distributed over gloo, two processes on the loopback, still works under the filter;
- the sandbox's /etc/passwd and /etc/group are its own, and its descriptors are capped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

_FILTERED = r'''
import ctypes, json, os, platform, socket, sys
from autograder.sandbox.seccomp import install_seccomp
libc = ctypes.CDLL(None, use_errno=True)
NR = {"x86_64": {"memfd_create": 319, "shmget": 29, "msgget": 68},
      "aarch64": {"memfd_create": 279, "shmget": 194, "msgget": 186}}[platform.machine()]
assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
install_seccomp(keep_sigchld=sys.argv[1] == "no-cgroup")
found = {}
for name, family in (("vsock", 40), ("packet", 17), ("bluetooth", 31), ("rds", 21),
                     ("unix", 1), ("inet", 2), ("inet6", 10), ("netlink", 16)):
    try:
        socket.socket(family, socket.SOCK_DGRAM if family != 17 else socket.SOCK_RAW).close()
        found[name] = "created"
    except OSError as err:
        found[name] = err.strerror
try:
    socket.socketpair(40, socket.SOCK_STREAM)
    found["socketpair-vsock"] = "created"
except OSError as err:
    found["socketpair-vsock"] = err.strerror
for name in NR:
    args = {"memfd_create": (b"x", 0), "shmget": (0, 1 << 20, 0o1600),
            "msgget": (0, 0o1600)}[name]
    result = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) if isinstance(a, int)
                                                      else a for a in args])
    found[name] = "made" if result >= 0 else os.strerror(ctypes.get_errno())
print(json.dumps(found))
'''


def _filtered(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _FILTERED, mode], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["no-cgroup", "cgroup"])
def test_only_the_four_families_of_the_network_namespace_are_created(mode):
    found = _filtered(mode)
    refused = "Address family not supported by protocol"
    for name in ("vsock", "packet", "bluetooth", "rds", "socketpair-vsock"):
        assert found[name] == refused, found
    for name in ("unix", "inet", "inet6", "netlink"):
        assert found[name] == "created", found


def test_memory_no_process_maps_is_refused_only_without_a_cgroup():
    without, within = _filtered("no-cgroup"), _filtered("cgroup")
    for name in ("memfd_create", "shmget", "msgget"):
        assert without[name] == "Operation not permitted", without
        assert within[name] == "made", within


_GLOO = r'''
import ctypes, os, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp
from autograder.sandbox.seccomp import install_seccomp

def run(rank, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    total = torch.tensor([rank + 1.0])
    dist.all_reduce(total)
    os.write(1, f"rank {rank} sum {total.item()}\n".encode())  # one write: lines never interleave
    dist.destroy_process_group()

if __name__ == "__main__":
    assert ctypes.CDLL(None).prctl(38, 1, 0, 0, 0) == 0
    install_seccomp(keep_sigchld=True)
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mp.spawn(run, args=(port,), nprocs=2)
'''


def test_torch_distributed_over_gloo_runs_under_the_filter(tmp_path):
    script = tmp_path / "gloo_probe.py"
    script.write_text(_GLOO)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rank 0 sum 3.0" in done.stdout and "rank 1 sum 3.0" in done.stdout


_ACCOUNTS = """
    seen["files"] = resource.getrlimit(resource.RLIMIT_NOFILE)
    for name in ("passwd", "group"):
        seen[name] = open(f"/etc/{name}").read()
    import pwd
    seen["me"] = pwd.getpwuid(os.getuid()).pw_name"""


def test_the_sandbox_has_its_own_accounts_and_few_descriptors():
    from attack_support import confined_probe

    seen = confined_probe("SandboxPolicy(memory_limit=0)", _ACCOUNTS,
                          "autograder-accounts-probe-")
    names = {line.split(":")[0] for line in seen["passwd"].splitlines()}
    assert names == {"root", "student", "nobody"}, seen["passwd"]
    assert {line.split(":")[0] for line in seen["group"].splitlines()} == {
        "root", "student", "nogroup"}
    assert seen["me"] == "student"
    assert seen["files"] == [1024, 1024]
