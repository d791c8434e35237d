"""The class hub's cgroups (hub/lib/coursehub/cgroups.py, issues 31 item 4 and 30 item 9): the
hub prepares a delegated subtree as root at its start; feedback on submit joins it and its
grading, as nobody, gets the sandbox's per-notebook cgroups, whose memory limit holds for memory
nothing else counts (a memfd); an instructor's server runs in their own; without one, the
service refuses to start and says what to do. Run for real, as root, in this machine's cgroups:
a test that needs a cgroup skips, saying which, only where the kernel offers none to root."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import COURSE_ROOT

sys.path.insert(0, str(COURSE_ROOT / "hub" / "lib"))
from coursehub import cgroups
from test_onsubmit import hub_course, nobodys_python  # noqa: F401 (fixtures)

HUB_LIB = str(COURSE_ROOT / "hub" / "lib")
LIMIT = 64 << 20
# As nobody, in the cgroup it was started in: the sandbox's cgroup for a notebook, and a
# process in it that fills a memfd four times the limit (memory counted nowhere without one).
HOG = f"""
import json, mmap, os
from autograder.sandbox.limits import Cgroup, weaker_limits
group = Cgroup.create(f"hog-{{os.getpid()}}", {LIMIT}, 16)
said = {{"warning": weaker_limits({LIMIT}), "cgroup": group is not None, "killed": False}}
if group is not None:
    pid = os.fork()
    if pid == 0:
        group.add()
        fd = os.memfd_create("hog")
        os.ftruncate(fd, {4 * LIMIT})
        area = mmap.mmap(fd, {4 * LIMIT})
        for at in range(0, {4 * LIMIT}, 4096):
            area[at] = 1
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    said["killed"] = os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9
    said["oom"] = group.out_of_memory()
    group.remove()
print(json.dumps(said))
"""


def _root_has_cgroups() -> str:
    """Why root gets no cgroup with memory and pids here ("" where it does)."""
    if os.geteuid() != 0:
        return "the hub's cgroups are set up by root: run as root"
    if cgroups._v1_bases():
        return ""
    base = cgroups._v2_base()
    if base is None:
        return ("this kernel offers root no cgroup with the memory and pids controllers "
                "(neither cgroup v1's mounted nor cgroup v2's available in its own cgroup)")
    if not os.access(f"{base}/cgroup.subtree_control", os.W_OK):
        return f"the cgroup v2 folder {base} is read-only here (a container without delegation)"
    return ""


@pytest.fixture
def class_state(hub_course):
    """A class's state and course folders (test_onsubmit's), and the hub's cgroups removed
    afterwards as `make hub-stop` removes them."""
    settings, python = hub_course
    yield settings, python
    cgroups.remove(settings)
    assert cgroups.load(settings) is None
    bases = list(cgroups._v1_bases().values()) or [cgroups._v2_base() or "/nonexistent"]
    assert not [base for base in bases
                if os.path.exists(f"{base}/{cgroups.subtree_name(settings)}")]


def _serve(settings, python, timeout=120) -> subprocess.CompletedProcess:
    """`python -m coursehub.onsubmit serve`, as JupyterHub starts it, stopped after its start
    (or after `timeout` seconds if it did not end by itself)."""
    return subprocess.run(
        [sys.executable, "-c",
         "import sys; from coursehub import onsubmit, settings as s, cgroups\n"
         "from pathlib import Path\n"
         f"config = s.load(Path({str(settings.config_file)!r}))\n"
         "where = cgroups.require_for_grading(config, Path(sys.argv[1]))\n"
         "import subprocess\n"
         "from coursehub.state import as_nobody\n"
         f"done = subprocess.run([sys.argv[1], '-c', {HOG!r}], preexec_fn=as_nobody(config), "
         "cwd=config.course_dir, capture_output=True, text=True, env={'PATH': '/usr/bin:/bin'})\n"
         "print(done.stdout + done.stderr)\n", str(python)],
        env={**os.environ, "PYTHONPATH": HUB_LIB}, capture_output=True, text=True,
        timeout=timeout)


def test_feedback_on_submit_refuses_to_start_without_a_cgroup(class_state):
    settings, python = class_state
    # No cgroup set up at the hub's start (none offered, or none asked for): `serve` ends at
    # once, saying why and what to do, before it watches anything.
    done = subprocess.run([sys.executable, "-m", "coursehub.onsubmit", "serve", "--config",
                           str(settings.config_file), "--python", str(python)],
                          env={**os.environ, "PYTHONPATH": HUB_LIB}, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "feedback on submit needs a cgroup for grading" in done.stderr
    assert "Delegate=yes" in done.stderr and "feedback_on_submit = false" in done.stderr
    assert "watching" not in done.stdout
    assert not settings.queue_dir.exists()


def test_the_services_grading_gets_cgroups_whose_memory_limit_holds(class_state):
    why = _root_has_cgroups()
    if why:
        pytest.skip(why)
    settings, python = class_state
    layout, why = cgroups.prepare(settings)  # as `make hub` does at its start
    assert layout is not None, why
    done = _serve(settings, python)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"(cgroup v{layout['version']})" in done.stdout
    said = json.loads(done.stdout.strip().splitlines()[-1])
    # As nobody: no warning, a cgroup per notebook, and a memfd four times the limit is
    # stopped by the kernel.
    assert said["warning"] is None and said["cgroup"], said
    assert said["killed"] and said["oom"], said


def test_an_instructors_server_runs_in_a_cgroup_of_their_own(class_state):
    why = _root_has_cgroups()
    if why:
        pytest.skip(why)
    settings, python = class_state
    layout, why = cgroups.prepare(settings)
    assert layout is not None, why
    nobody = 65534  # as an instructor's account: their server's preexec_fn, then their grading
    places = cgroups.account_place(layout, "teacher", nobody, nobody)
    code = (f"import os, sys; sys.path.insert(0, {HUB_LIB!r})\n"
            "from coursehub import cgroups\n"
            f"cgroups.enter({places!r})\n"
            f"os.setgroups([]); os.setgid({nobody}); os.setuid({nobody})\n"
            f"os.execv({str(python)!r}, [{str(python)!r}, '-c', {HOG!r}])\n")
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                          cwd="/", timeout=120)
    said = json.loads(done.stdout.strip().splitlines()[-1])
    assert said["warning"] is None and said["killed"] and said["oom"], said
    owner = os.stat(places[0]).st_uid
    assert owner == nobody
