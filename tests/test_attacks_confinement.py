"""Attacks on the sandbox's system calls, keyrings and limits.

One class of the fixture course's lesson A is graded twice through `python -m autograder
grade`: as root (a cgroup per notebook) and as an unprivileged account made with `useradd`
(no cgroup: the runner host measures each notebook's processes from /proc). Both runs happen
in a session keyring that holds a key of the grader's. Every attack student answers both
exercises correctly and adds its attack to the first answer, so an attack that is not stopped
scores full marks; the honest students must keep them.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import pwd
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from attack_support import (A, REPO, _SHIM, feedback_text, fixture_course, honest,
                            namespace_prefix, outputs_text, read_rows, write)

pytestmark = pytest.mark.slow

TIMEOUT = 3  # seconds of CPU time per cell
MEMORY_LIMIT = "2G"
USER = "agconfine"
CUBE = "def cube_grad(x):\n    return 3 * x.detach() ** 2\n"
INTERMEDIATE = "def intermediate_grad(x):\n    return 2 * x.detach(), None"
GRADER_KEY = "autograder-grader-key"
LEFT_KEY = "autograder-left-key"
_NUMBERS = {"x86_64": {"add_key": 248, "keyctl": 250},
            "aarch64": {"add_key": 217, "keyctl": 219}}
KEYCTL_JOIN, KEYCTL_SEARCH, KEYCTL_READ, KEYCTL_INVALIDATE = 1, 10, 11, 21
SESSION = -3  # KEY_SPEC_SESSION_KEYRING

# Reads and rewrites the grader's key, leaves one of its own, and reads one left before it.
KEYRING = r'''
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
ADD_KEY, KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
def search(name):
    return libc.syscall(ctypes.c_long(KEYCTL), ctypes.c_long(10), ctypes.c_long(-3), b"user",
                        name.encode(), ctypes.c_long(0))
def read(key):
    buf = ctypes.create_string_buffer(256)
    size = libc.syscall(ctypes.c_long(KEYCTL), ctypes.c_long(11), ctypes.c_long(key), buf,
                        ctypes.c_long(256))
    return buf.raw[:size].decode() if size >= 0 else None
key = search(GRADER_KEY)
if key >= 0:
    print("KEY-" + "READ", read(key))
    rewritten = libc.syscall(ctypes.c_long(KEYCTL), ctypes.c_long(2), ctypes.c_long(key),
                             b"rewritten", ctypes.c_long(9))
    print("KEY-" + "REWRITTEN" if rewritten == 0 else "rewrite refused")
else:
    print("denied:search", os.strerror(ctypes.get_errno()))
left = libc.syscall(ctypes.c_long(ADD_KEY), b"user", LEFT_KEY.encode(), b"left by a notebook",
                    ctypes.c_long(18), ctypes.c_long(-3))
print("KEY-" + "LEFT" if left >= 0 else "denied:add_key " + os.strerror(ctypes.get_errno()))
found = search(LEFT_KEY)
print("KEY-" + "FOUND " + str(read(found)) if found >= 0 else "no key left by another")
try:
    print("proc keys:", repr(open("/proc/keys").read()[:2000]))
except OSError as err:
    print("proc keys:", err.strerror)
'''

# Each call a notebook never needs: "ESCAPED:<name>" when it works, "denied:<name>" if not.
SYSCALLS = r'''
import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
X86 = platform.machine() == "x86_64"
NR = dict(zip(["io_uring_setup", "userfaultfd", "bpf", "perf_event_open", "clone",
               "process_vm_readv"],
              [425, 323, 321, 298, 56, 310] if X86 else [425, 282, 280, 241, 220, 270]))
def syscall(name, *args):
    return libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) if isinstance(a, int)
                                                   else a for a in args])
def report(name, ok):
    print(("ESCAPED:" + name) if ok else ("denied:" + name + " " + os.strerror(ctypes.get_errno())))
def in_child(name, body):
    """body() in a forked child (one thread: unshare needs it); its verdict comes back."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            ok, err = body(), ctypes.get_errno()
        except BaseException:
            ok, err = False, 0
        os.write(w, b"%d %d" % (bool(ok), err))
        os._exit(0)
    os.close(w)
    ok, err = map(int, os.read(r, 64).split())
    os.waitpid(pid, 0)
    ctypes.set_errno(err)
    report(name, ok)
in_child("unshare-mount", lambda: libc.unshare(0x10000000 | 0x00020000) == 0
         and libc.mount(b"none", b"/tmp", b"tmpfs", ctypes.c_ulong(0), None) == 0)
in_child("ptrace", lambda: libc.ptrace(ctypes.c_long(0), ctypes.c_long(0), None, None) == 0)
params = ctypes.create_string_buffer(120)
report("io_uring_setup", syscall("io_uring_setup", 4, params) >= 0)
report("userfaultfd", syscall("userfaultfd", 1 | os.O_CLOEXEC) >= 0)  # user-mode only
attr = ctypes.create_string_buffer(72)  # an array map of one 4-byte value
ctypes.memmove(attr, (ctypes.c_uint32 * 4)(2, 4, 4, 1), 16)
report("bpf", syscall("bpf", 0, attr, 72) >= 0)
event = ctypes.create_string_buffer(64)  # the task clock of this process, user space only
ctypes.memmove(event, (ctypes.c_uint32 * 2)(1, 64), 8)
ctypes.memmove(ctypes.byref(event, 8), (ctypes.c_uint64 * 1)(1), 8)
ctypes.memmove(ctypes.byref(event, 40), (ctypes.c_uint64 * 1)(1 | 1 << 5 | 1 << 6), 8)
report("perf_event_open", syscall("perf_event_open", event, 0, -1, -1, 0) >= 0)
source = ctypes.create_string_buffer(b"readable", 8)
target = ctypes.create_string_buffer(8)
local = (ctypes.c_void_p * 2)(ctypes.addressof(target), 8)
remote = (ctypes.c_void_p * 2)(ctypes.addressof(source), 8)
report("process_vm_readv", syscall("process_vm_readv", os.getpid(), local, 1, remote, 1, 0) == 8)
child = syscall("clone", 0x10000000 | 17, 0, 0, 0, 0)  # CLONE_NEWUSER, then as fork()
if child == 0:
    os._exit(0)
if child > 0:
    os.waitpid(child, 0)
report("clone-newuser", child > 0)
'''

SYSCALL_NAMES = ("unshare-mount", "ptrace", "io_uring_setup", "userfaultfd", "bpf",
                 "perf_event_open", "process_vm_readv", "clone-newuser")

# Children that together hold more than the limit, each under it.
MEMORY = r'''
import os, select, signal, time, torch
ready_r, ready_w = os.pipe()
children = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        held = []
        try:
            for _ in range(7):
                held.append(torch.ones(25 << 20))  # 100 MiB, touched
        except BaseException:
            pass
        os.write(ready_w, b"%d\n" % (len(held) * 100))
        time.sleep(8)
        os._exit(0)
    children.append(pid)
os.close(ready_w)
held = 0
for _ in children:
    held += int(os.read(ready_r, 16).split()[0] or 0)
print("children hold MiB:", held)
for pid in children:
    os.waitpid(pid, 0)
'''

# A child computes for three cells' time while the notebook's own process only waits.
CPU_CHILD = r'''
import os, time
pid = os.fork()
if pid == 0:
    while time.process_time() < 3 * TIMEOUT:
        pass
    os._exit(0)
os.waitpid(pid, 0)
print("the child computed for", 3 * TIMEOUT, "s")
'''

# Short children reaped by the kernel (SIGCHLD ignored), so that no parent counts their time.
CPU_UNSEEN = r'''
import os, signal, time
try:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    print("SIGCHLD ignored")
except OSError as err:
    print("denied:sigchld", err.strerror)
began = time.monotonic()
for _ in range(int(3 * TIMEOUT / 0.2)):
    if os.fork() == 0:
        start = time.process_time()
        while time.process_time() - start < 0.2:
            pass
        os._exit(0)
    time.sleep(0.21)
time.sleep(0.5)
print("children computed for", 3 * TIMEOUT, "s in", round(time.monotonic() - began), "s")
'''

HONEST_THREADS = r'''
import subprocess, threading
import matplotlib.pyplot as plt
results = []
worker = threading.Thread(target=lambda: results.append(sum(range(1000))))
worker.start()
worker.join()
plt.plot([1, 2, 3])
plt.show()
print("thread", results, subprocess.run(["/bin/echo", "child"], capture_output=True,
                                        text=True).stdout.strip())
'''


def _source(template: str, **values) -> str:
    return "\n".join([f"{name} = {value!r}" for name, value in values.items()]
                     + [template.strip()])


def _keyctl(*args) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    number = _NUMBERS[platform.machine()]["keyctl"]
    return libc.syscall(ctypes.c_long(number), *[ctypes.c_long(a) if isinstance(a, int) else a
                                                 for a in args])


def _read_key(name: str) -> str | None:
    key = _keyctl(KEYCTL_SEARCH, SESSION, b"user", name.encode(), 0)
    if key < 0:
        return None
    buf = ctypes.create_string_buffer(256)
    size = _keyctl(KEYCTL_READ, key, buf, 256)
    return buf.raw[:max(size, 0)].decode()


@pytest.fixture(scope="module")
def session_key():
    """This test process joins a session keyring of its own holding a key of the grader's;
    the grading commands it starts inherit it."""
    if platform.machine() not in _NUMBERS:
        pytest.skip("keyring numbers known for x86_64 and aarch64 only")
    if _keyctl(KEYCTL_JOIN, f"autograder-test-{uuid.uuid4().hex}".encode()) < 0:
        pytest.skip(f"no session keyring here: {os.strerror(ctypes.get_errno())}")
    token = f"grader-secret-{uuid.uuid4().hex}"
    libc = ctypes.CDLL(None, use_errno=True)
    key = libc.syscall(ctypes.c_long(_NUMBERS[platform.machine()]["add_key"]), b"user",
                       GRADER_KEY.encode(), token.encode(), ctypes.c_long(len(token)),
                       ctypes.c_long(SESSION))
    assert key >= 0, os.strerror(ctypes.get_errno())
    assert _read_key(GRADER_KEY) == token
    return token


@pytest.fixture(scope="module")
def klass(tmp_path_factory):
    """The fixture course and its class, in folders an unprivileged account can reach."""
    from autograder.demo import Lessons

    base = Path(tempfile.mkdtemp(prefix="autograder-confine-"))
    os.chmod(base, 0o755)
    course = Lessons(fixture_course.build_course(base / "course"), [A])
    students = {"aa-honest": honest(course, CUBE, INTERMEDIATE),
                "aa-honest-threads": honest(course, CUBE + HONEST_THREADS, INTERMEDIATE)}
    attacks = {"keyring-1": _source(KEYRING, GRADER_KEY=GRADER_KEY, LEFT_KEY=LEFT_KEY),
               "keyring-2": _source(KEYRING, GRADER_KEY=GRADER_KEY, LEFT_KEY=LEFT_KEY),
               "syscalls": SYSCALLS, "memory": MEMORY,
               "cpu-child": _source(CPU_CHILD, TIMEOUT=TIMEOUT),
               "cpu-unseen": _source(CPU_UNSEEN, TIMEOUT=TIMEOUT)}
    for name, source in attacks.items():
        students[name] = honest(course, CUBE + source, INTERMEDIATE)
    for name, nb in students.items():
        write(nb, base / "class" / name / f"{A}.ipynb")
    yield {"base": base, "course": course}
    shutil.rmtree(base, ignore_errors=True)


def _run(klass, label: str, user: pwd.struct_passwd | None) -> dict:
    """Grade the class (a copy of the course each time) in a throwaway PID namespace."""
    base = klass["base"]
    root, out, home = base / f"course-{label}", base / f"out-{label}", base / f"home-{label}"
    shutil.copytree(base / "course", root)
    home.mkdir()
    (base / f"keep-{label}").mkdir()
    command = [sys.executable, "-m", "autograder", "grade", str(base / "class"), "--out",
               str(out), "--course-root", str(root), "--jobs", "1", "--timeout", str(TIMEOUT),
               "--memory-limit", MEMORY_LIMIT]
    env = dict(os.environ, CI="true", HOME=str(home))
    if user is not None:
        for path in (root, home, *root.rglob("*")):
            os.chown(path, user.pw_uid, user.pw_gid)
        out.mkdir()
        os.chown(out, user.pw_uid, user.pw_gid)
        reachable = [sys.base_prefix, str(REPO)]
        command = [sys.executable, "-c", _AS_USER, str(user.pw_uid), str(user.pw_gid),
                   str(base / f"keep-{label}"), str(len(reachable)), *reachable, *command]
    report = base / f"{label}.json"
    subprocess.run(namespace_prefix() + [sys.executable, "-c", _SHIM, str(report), "10",
                                         *command],
                   cwd=REPO, env=env, timeout=900, stdin=subprocess.DEVNULL)
    result = json.loads(report.read_text())
    result["stdout"] = Path(f"{report}.out").read_text(errors="replace")
    result["stderr"] = Path(f"{report}.err").read_text(errors="replace")
    result.update(root=root, out=out, rows=read_rows(out))
    try:
        result["log"] = (out / "grading.log").read_text()
    except OSError:
        result["log"] = ""
    return result


# Run as root in the grading command's PID and mount namespace: where this Python or the
# course's clone (with its venv) lies in a folder the account cannot enter (a pyenv under
# /root, a clone in a private temporary folder), that folder is covered with an empty one
# through which only those paths are reachable (in this namespace only); then the command runs
# as the account.
_AS_USER = r'''
import os, subprocess, sys
uid, gid, keep, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
paths, command = sys.argv[5:5 + count], sys.argv[5 + count:]
needed = {}  # a folder the account cannot enter -> its entries the paths go through
for path in paths:
    parts = os.path.realpath(path).strip("/").split("/")
    for depth in range(1, len(parts)):
        folder = "/" + "/".join(parts[:depth])
        if not os.stat(folder).st_mode & 0o001:
            needed.setdefault(folder, set()).add(parts[depth])
            break
for number, folder in enumerate(sorted(needed, key=len)):
    entries = sorted(needed[folder])
    kept = [os.path.join(keep, f"{number}-{index}") for index in range(len(entries))]
    for entry, place in zip(entries, kept):
        os.makedirs(place)
        subprocess.run(["mount", "--bind", os.path.join(folder, entry), place], check=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "none", folder], check=True)
    for entry, place in zip(entries, kept):
        os.makedirs(os.path.join(folder, entry))
        subprocess.run(["mount", "--bind", place, os.path.join(folder, entry)], check=True)
os.execvp("setpriv", ["setpriv", "--reuid=" + uid, "--regid=" + gid, "--clear-groups", "--",
                      *command])
'''


def _texts(run: dict, student: str) -> str:
    return outputs_text(run["root"], student) + feedback_text(run["out"], student)


@pytest.fixture(scope="module")
def as_root(klass, session_key):
    if os.geteuid() != 0:
        pytest.skip("grades as root")
    run = _run(klass, "root", None)
    run["left_key"] = _read_key(LEFT_KEY)
    run["grader_key"] = _read_key(GRADER_KEY)
    return run


@pytest.fixture(scope="module")
def as_user(klass, session_key):
    if os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("setpriv") is None:
        pytest.skip("needs root, useradd and setpriv (as in CI)")
    try:
        pwd.getpwnam(USER)
        created = False
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
                       check=True)
        created = True
    try:
        run = _run(klass, "user", pwd.getpwnam(USER))
    finally:
        if created:
            subprocess.run(["userdel", USER], check=False)
    run["left_key"] = _read_key(LEFT_KEY)
    run["grader_key"] = _read_key(GRADER_KEY)
    return run


@pytest.fixture(params=["as_root", "as_user"])
def graded(request):
    return request.getfixturevalue(request.param)


def _row(run: dict, student: str) -> dict:
    row = run["rows"].get((student, A))
    assert row is not None, (student, run["rc"], run["stderr"][-3000:])
    return row


def test_the_run_completes_and_leaves_nothing(graded):
    assert graded["rc"] == 0, graded["stderr"][-3000:]
    assert graded["left"] == [], graded["left"]


def test_honest_students_keep_full_marks(graded):
    for student in ("aa-honest", "aa-honest-threads"):
        row = _row(graded, student)
        assert (row["status"], row["score"]) == ("graded", "3"), row
    assert "thread [499500] child" in _texts(graded, "aa-honest-threads")


def test_the_graders_keyring_is_out_of_reach(graded, session_key):
    for student in ("keyring-1", "keyring-2"):
        text = _texts(graded, student)
        assert session_key not in text and "KEY-READ" not in text, text[-2000:]
        assert "KEY-REWRITTEN" not in text and "KEY-LEFT" not in text
        assert "KEY-FOUND" not in text
        assert "denied:search Operation not permitted" in text, text[-2000:]
        assert "denied:add_key Operation not permitted" in text
        assert "proc keys: ''" in text  # the kernel's list of keys shows none of them
    assert graded["grader_key"] == session_key
    assert graded["left_key"] is None


@pytest.mark.parametrize("name", SYSCALL_NAMES)
def test_calls_a_notebook_never_needs_are_denied(graded, name):
    text = _texts(graded, "syscalls")
    assert f"ESCAPED:{name}" not in text, text[-3000:]
    assert f"denied:{name} Operation not permitted" in text, text[-3000:]


def test_children_past_the_memory_limit_stop_the_notebook(graded):
    row = _row(graded, "memory")
    assert row["status"] == "error" and row["score"] == "0", row
    assert "ran out of memory" in row["reason"] and "01-ex1-answer" in row["reason"], row


@pytest.mark.parametrize("student", ["cpu-child", "cpu-unseen"])
def test_a_child_computing_past_the_cell_limit_is_stopped(graded, student):
    row = _row(graded, student)
    assert row["status"] == "timeout" and row["score"] == "0", row
    assert "01-ex1-answer" in row["reason"], row


def test_weaker_limits_are_said_loudly(as_root, as_user):
    warning = "WARNING: limits are weaker than asked"
    assert warning in as_user["stdout"] and warning in as_user["log"], as_user["stdout"][-3000:]
    assert "grade as root" in as_user["stdout"]
    assert as_user["stdout"].count(warning) == 1, "said once, at the start"
    assert warning not in as_root["stdout"] + as_root["log"]
