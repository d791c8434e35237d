"""The stored outputs do not depend on the CPU: floating-point sums change their last digits
with torch's thread count as they do with the CPU, so the suite's nbval run of solutions/
starts each notebook's kernel with another thread count than the default (tests/conftest.py:
one thread, or two on a one-core machine), and a lesson that prints digits only one machine
agrees on fails there. This checks that a notebook's kernel started as nbval starts it, under
that set-up, really runs its cells with that thread count (and that nothing else sees it)."""

from __future__ import annotations

import os
from types import SimpleNamespace

from nbval.kernel import CURRENT_ENV_KERNEL_NAME, start_new_kernel

from conftest import COURSE_ROOT, _SolutionKernelsThreads, other_thread_count, solution_path


def _threads_in_a_new_kernel() -> str:
    manager, client = start_new_kernel(kernel_name=CURRENT_ENV_KERNEL_NAME)
    printed = []
    try:
        client.execute_interactive(
            "import torch; print(torch.get_num_threads())", timeout=120,
            output_hook=lambda msg: printed.append(msg["content"].get("text", "")))
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return "".join(printed).strip()


def test_a_solution_notebook_s_kernel_runs_on_the_other_thread_count():
    plugin = _SolutionKernelsThreads()
    before = os.environ.get("IPYTHONDIR")
    first_cell = SimpleNamespace(path=solution_path("01_leaf_and_intermediate"))
    setup = plugin.pytest_runtest_setup(first_cell)
    try:
        next(setup)  # nbval's set-up of the notebook, which starts its kernel, runs here
        assert _threads_in_a_new_kernel() == str(other_thread_count())
    finally:
        setup.close()
        plugin.pytest_unconfigure()
    assert os.environ.get("IPYTHONDIR") == before


def test_a_test_file_s_kernels_keep_the_default():
    plugin = _SolutionKernelsThreads()
    setup = plugin.pytest_runtest_setup(SimpleNamespace(path=COURSE_ROOT / "tests" / "x.py"))
    before = os.environ.get("IPYTHONDIR")
    try:
        next(setup)
        assert os.environ.get("IPYTHONDIR") == before
    finally:
        setup.close()
