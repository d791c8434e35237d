"""Helpers for the attack suites (tests/test_attacks_sandbox.py, tests/test_attacks_verdicts.py).

Each suite builds a class of the fixture course (tests/fixtures/grading) in which every attack
is one student, grades it through `python -m autograder grade`, and reads what came out.

The grading command runs inside a throwaway PID namespace (`unshare --pid --fork --mount-proc`)
whose first process is `_SHIM`: it runs the command, waits for the namespace to empty (a few
seconds at most), lists every process still alive in it (the processes of this run and nothing else: a leftover daemon of a
notebook is there, a process of another test run is not), writes the list, then exits, which
makes the kernel kill whatever is left. So an attack that escapes the sandbox (on code before
the sandbox, or after a regression) reaches only the processes of its own test run: a
`kill -9 -1` or a write into `/proc/<pid>/fd/...` cannot hurt the machine running the tests.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "fixtures" / "grading"))
import fixture_course  # noqa: E402

A = fixture_course.LESSON_A

# Runs as PID 1 of the grading command's namespace: runs it, lingers, lists the survivors.
_SHIM = r'''
import json, os, subprocess, sys, time
report, linger, command = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
with open(report + ".out", "w") as out, open(report + ".err", "w") as err:
    rc = subprocess.run(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL).returncode
def survivors():
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            status = open(f"/proc/{name}/status").read()
            cmdline = open(f"/proc/{name}/cmdline", "rb").read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        found.append({"pid": int(name), "name": fields.get("Name", "").strip(),
                      "state": fields.get("State", "").strip(),
                      "uid": fields.get("Uid", "").split()[:1],
                      "cmdline": cmdline.replace(b"\0", b" ").decode("utf-8", "replace")[:300]})
    return found
# The grader's own processes (workers, runner hosts) may take a moment to go: wait for the
# namespace to empty, at most `linger` seconds, reaping (as its init) what ends meanwhile.
end = time.monotonic() + linger
while True:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
    left = survivors()
    if not left or time.monotonic() > end:
        break
    time.sleep(0.1)
with open(report, "w") as handle:
    json.dump({"rc": rc, "left": left}, handle)
'''


def namespace_prefix() -> list[str]:
    """The command prefix that runs a command in a PID namespace of its own (root only)."""
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("the attack suites run the grader in a throwaway PID namespace, which "
                    "needs root and util-linux's unshare (as in CI)")
    prefix = [unshare, "--pid", "--fork", "--mount-proc"]
    probe = subprocess.run(prefix + ["true"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare --pid does not work here: {probe.stderr.strip()}")
    return prefix


def grade(submissions: Path, out: Path, root: Path, report: Path, *extra: str,
          timeout: int, memory_limit: str = "2G", linger: float = 10.0) -> dict:
    """`python -m autograder grade` in its own PID namespace; returns {"rc", "stdout",
    "stderr", "left"} where "left" lists the processes still alive in that namespace once it
    has emptied or `linger` seconds after the command ended."""
    command = [sys.executable, "-m", "autograder", "grade", str(submissions), "--out", str(out),
               "--course-root", str(root), "--jobs", "2", "--timeout", str(timeout),
               "--memory-limit", memory_limit, *extra]
    env = dict(os.environ, CI="true")
    subprocess.run(namespace_prefix() + [sys.executable, "-c", _SHIM, str(report), str(linger),
                                         *command],
                   cwd=REPO, env=env, timeout=900, stdin=subprocess.DEVNULL)
    result = {"rc": None, "left": None}
    try:
        result.update(json.loads(report.read_text()))
    except (OSError, ValueError):
        pass
    for key, suffix in (("stdout", ".out"), ("stderr", ".err")):
        try:
            result[key] = Path(str(report) + suffix).read_text(errors="replace")
        except OSError:
            result[key] = ""
    return result


def read_rows(out: Path) -> dict[tuple[str, str], dict]:
    try:
        with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except (OSError, csv.Error, UnicodeDecodeError):
        return {}
    return {(row["student_id"], row["lesson"]): row for row in rows
            if "student_id" in row and "lesson" in row}  # not a file something else wrote


def tree_digest(folder: Path) -> dict[str, str]:
    """Path -> sha256 of every file under `folder` (symlinks by their target)."""
    digest = {}
    for path in sorted(Path(folder).rglob("*")):
        key = str(path.relative_to(folder))
        if path.is_symlink():
            digest[key] = "link:" + os.readlink(path)
        elif path.is_file():
            digest[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def answer_cells(nb) -> list:
    return [cell for cell in nb.cells if cell.cell_type == "code"
            and cell.get("metadata", {}).get("nbgrader", {}).get("solution")
            and not cell.metadata["nbgrader"].get("grade")]


def honest(course, cube_grad: str, intermediate_grad: str):
    """The student notebook with both answers written (not copied from the solution)."""
    nb = course.blank(A)
    first, second = answer_cells(nb)
    first.source, second.source = cube_grad, intermediate_grad
    return nb


def attack(course, source: str):
    """The student notebook with its first answer cell replaced by `source`; the second answer
    stays blank, so the notebook earns nothing unless the attack does."""
    nb = course.blank(A)
    answer_cells(nb)[0].source = source
    return nb


def write(nb, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def outputs_text(root: Path, student: str, lesson: str = A) -> str:
    """Every output of the student's autograded notebook, as text (what the instructor sees)."""
    path = root / "autograded" / student / lesson / f"{lesson}.ipynb"
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    parts = []
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            for key in ("text", "traceback", "evalue"):
                value = output.get(key)
                parts.append("".join(value) if isinstance(value, list) else str(value or ""))
            for value in (output.get("data") or {}).values():
                parts.append("".join(value) if isinstance(value, list) else str(value))
    return "\n".join(parts)


def feedback_text(out: Path, student: str, lesson: str = A) -> str:
    path = out / "feedback" / student / f"{lesson}.html"
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


_PROBE = r'''
import json, os, resource, sys
from autograder.sandbox.confine import confine
from autograder.sandbox.policy import SandboxPolicy
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(read)
    confine(%s, sys.argv[1])
    seen = {}
%s
    os.write(write, json.dumps(seen).encode())
    os._exit(0)
os.close(write)
with os.fdopen(read) as report:
    print(report.read())
os.waitpid(pid, 0)
'''


def confined_probe(policy: str, findings: str, prefix: str) -> dict:
    """What a child confined by `policy` (a SandboxPolicy expression) finds: `findings`, code
    run in it (indented by four spaces) that fills the dict `seen`. Run as this (root) user on
    an empty folder; `seen`, parsed."""
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("enters the sandbox as root")
    root = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(root, 0o755)
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE % (policy, findings), str(root)],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)
