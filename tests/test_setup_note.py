"""`make setup` says in one line that the course and the grader's sandbox are ready, or tells
an instructor when the sandbox cannot run on this machine.

The probe (`autograder.sandbox.probe.check_available`) really forks and confines a process;
AUTOGRADER_SANDBOX_PROBE=fail makes that process fail as if the kernel had refused, so the
note can be seen on a machine where the sandbox works. The note never fails the set-up, and
`make lab` (what students run) does not probe at all.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from autograder.sandbox.probe import PROBE_ENV, check_available

REPO = Path(__file__).resolve().parent.parent


def make(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != PROBE_ENV}
    environment.update(env)
    return subprocess.run(["make", "--no-print-directory", "-C", str(REPO), *args],
                          capture_output=True, text=True, env=environment, timeout=300)


def test_setup_notes_a_sandbox_that_cannot_run():
    done = make("setup", **{PROBE_ENV: "fail"})
    assert done.returncode == 0, done.stdout + done.stderr
    note = done.stdout
    assert "Note for instructors" in note
    assert "cannot run on this machine" in note and "user, mount, PID, network" in note
    assert "--no-sandbox" in note and "README.md" in note
    assert "make lab` does not need it" in note


def test_setup_says_in_one_line_that_all_is_ready():
    if check_available() is not None:
        pytest.skip("the sandbox cannot run on this machine")
    done = make("setup")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines() == ["Ready: the course's environment (.venv) is set up, and "
                                        "the grader's sandbox runs on this machine."]


def test_lab_does_not_probe_the_sandbox():
    planned = make("-n", "lab").stdout
    assert "autograder.sandbox.probe" not in planned
    assert "autograder.sandbox.probe --setup-note" in make("-n", "setup").stdout
