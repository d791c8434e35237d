"""The sandbox's network: each notebook gets a network namespace of its own whose loopback is
up (lesson 08's DDP exercise runs two processes that talk over 127.0.0.1), and nothing else.

Two notebooks are confined side by side, as two students' notebooks are graded: the first
listens on its own 127.0.0.1 and connects to itself; the second tries that port, a port the
grader listens on, and an address outside. Before `loopback_up` the first could not reach its
own port either (network unreachable).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from autograder.sandbox.probe import check_available  # noqa: E402

PROBE = r'''
import json, os, socket, sys, tempfile
sys.path.insert(0, sys.argv[1])
from autograder.sandbox import confine as sandbox

grader = socket.socket()
grader.bind(("127.0.0.1", 0))
grader.listen(4)
grader.setblocking(False)


def attempt(address):
    try:
        with socket.socket() as sock:
            sock.settimeout(2)
            sock.connect(address)
            sock.sendall(b"attack")
        return "connected"
    except OSError as err:
        return err.strerror or type(err).__name__


def confined(body):
    """Fork a notebook in a sandbox of its own running body(report_fd, go_fd)."""
    read, write = os.pipe()
    go_read, go_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.close(go_write)
        root = tempfile.mkdtemp(prefix="autograder-loopback-", dir=sys.argv[2])
        os.chmod(root, 0o755)
        sandbox.confine(sandbox.SandboxPolicy(memory_limit=0), root)
        body(write, go_read)
        os._exit(0)
    os.close(write)
    os.close(go_read)
    return pid, read, go_write


def listener(report, go):
    seen = {}
    try:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        seen["port"] = server.getsockname()[1]
        seen["its own port"] = attempt(("127.0.0.1", seen["port"]))
    except OSError as err:
        seen["its own port"] = err.strerror
    os.write(report, (json.dumps(seen) + "\n").encode())
    os.read(go, 1)  # keep listening until the other notebook has tried


def intruder(port):
    def body(report, go):
        seen = {"the other notebook's port": attempt(("127.0.0.1", port)),
                "the grader's port": attempt(("127.0.0.1", grader.getsockname()[1])),
                "outside": attempt(("1.1.1.1", 53))}
        os.write(report, (json.dumps(seen) + "\n").encode())
    return body


first, first_report, first_go = confined(listener)
seen_first = json.loads(os.read(first_report, 4096) or b"{}")
second, second_report, _ = confined(intruder(seen_first.get("port", 9)))
seen_second = json.loads(os.read(second_report, 4096) or b"{}")
os.write(first_go, b"x")
os.waitpid(first, 0)
os.waitpid(second, 0)
try:
    grader.accept()
    accepted = True
except BlockingIOError:
    accepted = False
print(json.dumps({"first": seen_first, "second": seen_second, "grader accepted": accepted}))
'''


@pytest.fixture(scope="module")
def probed():
    if check_available() is not None:
        pytest.skip(check_available())
    with tempfile.TemporaryDirectory() as folder:
        os.chmod(folder, 0o755)  # the sandbox's roots are made in it, reached as `nobody`
        probe = Path(folder) / "probe.py"
        probe.write_text(PROBE)
        done = subprocess.run([sys.executable, str(probe), str(REPO), folder],
                              capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_notebook_reaches_its_own_loopback(probed):
    assert probed["first"]["its own port"] == "connected", probed


def test_a_notebook_cannot_reach_another_notebooks_loopback(probed):
    assert probed["second"]["the other notebook's port"] == "Connection refused", probed


def test_a_notebook_reaches_neither_the_grader_nor_outside(probed):
    assert probed["second"]["the grader's port"] == "Connection refused", probed
    assert probed["second"]["outside"] == "Network is unreachable", probed
    assert probed["grader accepted"] is False, probed
