"""The stored outputs do not depend on the CPU: each solution notebook, run
again by nbval with another number of torch threads than the default, gives the stored text.
Floating-point sums change their last digits with the thread count as they do with the CPU, so
a lesson that prints digits only one machine agrees on fails here."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from conftest import COURSE_ROOT, solution_path

# The default is one thread a core; compare with one thread (with two on a one-core machine).
THREADS = 1 if torch.get_num_threads() > 1 else 2


def _sets_its_own_thread_count(lesson: str) -> bool:
    """Whether the lesson's set-up cell pins torch's thread count itself (lesson 07 does, so
    that its training runs repeat): run again with one thread, it would compare one with one
    at the cost of a second full run of its training loops."""
    import json

    cells = json.loads(solution_path(lesson).read_text())["cells"]
    return any("torch.set_num_threads(" in "".join(cell["source"])
               for cell in cells if cell["cell_type"] == "code")


def test_stored_outputs_hold_with_another_thread_count(lesson, tmp_path):
    if _sets_its_own_thread_count(lesson):
        pytest.skip(f"{lesson} sets torch's thread count itself: its outputs do not depend on it")
    ipython_dir = tmp_path / "ipython"
    startup = ipython_dir / "profile_default" / "startup"
    startup.mkdir(parents=True)
    marker = tmp_path / "threads"
    # Runs in the kernel before the notebook's first cell; the marker shows that it did.
    (startup / "00-threads.py").write_text(
        f"import torch\ntorch.set_num_threads({THREADS})\n"
        f"open({str(marker)!r}, 'w').write(str(torch.get_num_threads()))\n")
    env = {**os.environ, "IPYTHONDIR": str(ipython_dir)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(solution_path(lesson)), "-n", "0", "-q"],
        cwd=COURSE_ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert marker.exists() and marker.read_text() == str(THREADS), \
        "the kernel did not run the start-up file that sets the thread count"
    assert run.returncode == 0, (
        f"{lesson} with {THREADS} torch thread(s) differs from its stored outputs: print those "
        f"values rounded to what every CPU agrees on\n{run.stdout[-6000:]}")
