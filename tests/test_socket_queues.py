"""Without a cgroup, what a notebook's sockets hold in the kernel's queues counts toward its
memory limit (red team, round 5: 3 GiB held in Unix socket buffers under a 1 GiB limit, graded
7/7, counted nowhere). The runner host reads them with sock_diag, through a netlink socket the
sandbox makes inside its network namespace before any of the notebook's code runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# A notebook without a cgroup that holds about 200 MiB in Unix sockets' queues, and the runner
# host's measure of its process tree while it does.
_PROBE = r'''
import json, os, socket, sys, time
from autograder.sandbox.confine import confine
from autograder.sandbox.limits import ProcessTree
from autograder.sandbox.policy import SandboxPolicy
from autograder.units import MiB
to_host, to_sandbox = socket.socketpair()
ready_r, ready_w = os.pipe()
pid = os.fork()
if pid == 0:
    to_host.close()
    os.close(ready_r)
    confine(SandboxPolicy(memory_limit=0), sys.argv[1], None,
            diag_channel=to_sandbox.detach())
    sockets = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            sockets.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own descriptor, closed by now
            pass
    held, pairs = 0, []
    while held < 200 * MiB:
        a, b = socket.socketpair()
        a.setblocking(False)
        try:
            while True:
                held += a.send(b"x" * 65536)
        except BlockingIOError:
            pass
        a.close()  # what it sent stays in b's queue: one descriptor per pair
        pairs.append(b)
    os.write(ready_w, json.dumps({"fds": sockets, "held": held}).encode() + b"\n")
    time.sleep(60)
    os._exit(0)
to_sandbox.close()
os.close(ready_w)
seen = json.loads(os.fdopen(ready_r).readline())
tree = ProcessTree(pid, os.path.join(sys.argv[1] + "-cpu"), diag_channel=to_host)
try:
    _, memory = tree.measure()
finally:
    tree.kill()
    tree.remove()
    os.waitpid(pid, 0)
print(json.dumps({"memory": memory, **seen}))
'''


@pytest.mark.parametrize("account", ["root", "nobody"])
def test_without_a_cgroup_socket_queues_count_toward_the_memory(account):
    """As root, and as an ordinary account (the usual case without a cgroup: the sandbox's
    namespaces are then nested in one of that account's)."""
    if os.geteuid() != 0 or (account == "nobody" and not shutil.which("setpriv")):
        pytest.skip("enters the sandbox as root, or as nobody through setpriv")
    root = Path(tempfile.mkdtemp(prefix="autograder-sockets-probe-"))
    os.chmod(root, 0o777)
    as_account = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] \
        if account == "nobody" else []
    # The sandbox's modules, copied where the account can read them: the checkout may be in a
    # folder closed to other accounts (a private temporary folder), as the venv is not.
    package = root / "lib" / "autograder"
    shutil.copytree(REPO / "autograder" / "sandbox", package / "sandbox",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "autograder" / "__init__.py", package)
    for path in [root / "lib", *(root / "lib").rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    env = dict(os.environ, PYTHONPATH=str(root / "lib"), PYTHONDONTWRITEBYTECODE="1")
    try:
        done = subprocess.run([*as_account, sys.executable, "-c", _PROBE, str(root)], cwd=root,
                              env=env, capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        Path(f"{root}-cpu").unlink(missing_ok=True)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["held"] >= 200 << 20
    assert seen["memory"] >= seen["held"], seen["memory"] >> 20
    # The notebook holds no descriptor of the host's: its standard streams and its pipe only.
    assert not any(fd.startswith("socket:") for fd in seen["fds"]), seen["fds"]
