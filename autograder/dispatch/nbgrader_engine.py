"""Engine "nbgrader" (`grade --engine nbgrader`): nbgrader's own `nbgrader autograde` command for
each notebook, one fresh Jupyter kernel each, one at a time.

It runs student code unconfined, as plain nbgrader does (only its address space is limited), and
keeps no record of the run but the autograded notebook, so its verdict is read from that
notebook's text. It is the reference the fork engine is tested against
(tests/test_grading_equivalence.py), and it lives here, beside the dispatch of grading, never
in `trusted/`: nothing in `trusted/` runs student code or reads a verdict from its text.
"""

from __future__ import annotations

import resource
import subprocess

from traitlets.config import Config

from autograder.release import nbgrader_command, nbgrader_env
from autograder.records import Status
from autograder.tasks import GradingOptions
from autograder.trusted import status
from autograder.grader_notes import (CHECKS_STOPPED, CHECKS_STOPPED_ENAME, DEAD_ENAME,
                                     NOT_RUN_ENAME, TIMEOUT_ENAME)
from autograder.trusted.status import RunOutcome

_MEMORY_WORDS = ("can't allocate memory", "not enough memory", "DefaultCPUAllocator",
                 "Cannot allocate memory", "out of memory")


class NbgraderCommand:
    """The engine `autograder.trusted.autograde.grade_submission` runs a notebook with."""

    name = "nbgrader"

    def __init__(self, settings: GradingOptions) -> None:
        self.settings = settings

    def run(self, config: Config, student: str, lesson: str, outcome: RunOutcome) -> str | None:
        return nbgrader_autograde(self.settings, student, lesson)

    def decided(self, outcome: RunOutcome) -> bool:
        return True  # the autograded notebook is all this engine leaves

    def verdict(self, nb, outcome: RunOutcome) -> tuple[Status, str] | None:
        return verdict(nb, self.settings)


def _is_memory_error(output) -> bool:
    ename, evalue = output.get("ename", ""), output.get("evalue", "")
    return ename in ("MemoryError", "OutOfMemoryError") or (
        ename == "RuntimeError" and any(word in evalue for word in _MEMORY_WORDS))


def verdict(nb, settings: GradingOptions) -> tuple[Status, str] | None:
    """(status, reason) when a cell of the notebook autograded by `--engine nbgrader` shows
    that the run went wrong (that engine keeps no record of the run but the notebook)."""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") != "error":
                continue
            ename = output.get("ename")
            if ename == CHECKS_STOPPED_ENAME and output.get("evalue") in CHECKS_STOPPED:
                return status.checks_stopped(output.get("evalue"))
            if ename == TIMEOUT_ENAME:
                return status.timed_out(nb, index, settings.timeout)
            if ename == DEAD_ENAME:
                detail = output.get("traceback", [""])[-1].split("while this cell ran: ")[-1]
                return status.died(nb, index, detail)
            if _is_memory_error(output):
                return status.out_of_memory(nb, index, settings.memory_limit)
            if ename == NOT_RUN_ENAME and "exit()" in output.get("evalue", ""):
                return status.exited(nb, index)
    return None


def _limit_memory(limit: int):
    def apply() -> None:
        if limit > 0:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def nbgrader_autograde(settings: GradingOptions, student: str, lesson: str) -> str | None:
    """`nbgrader autograde` for one submission; None, or what went wrong."""
    root = settings.course_root
    command = nbgrader_command("autograde", lesson, "--student", student, "--force",
                               f"--CourseDirectory.root={root}",
                               f"--Execute.timeout={settings.timeout}")
    try:
        done = subprocess.run(command, cwd=root, env=nbgrader_env(), capture_output=True,
                              text=True, preexec_fn=_limit_memory(settings.memory_limit),
                              timeout=60 * settings.timeout + 300)
    except subprocess.TimeoutExpired:
        return "nbgrader autograde did not finish"
    from autograder.nbgrader_glue.inproc import LOG
    for line in done.stderr.splitlines():
        LOG.info("nbgrader: %s", line)
    if done.returncode == 0:
        return None
    text = done.stderr
    if "DeadKernelError" in text or "Kernel died" in text or "kernel died" in text:
        return "dead kernel"
    return f"nbgrader autograde failed (exit code {done.returncode})"
