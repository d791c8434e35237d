"""One `GradingSession` per grading worker (autograder.trusted.session): the worker's state (its
runner host, lessons, reference outcomes, classmates) lives in the session it makes once and
hands to each notebook's ForkedExecute, never in class attributes that any code may write; the
sandbox's policy of the session is built from the run's options."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from autograder.release import lessons
from autograder.tasks import GradingOptions
from autograder.trusted.executor import ForkedExecute
from autograder.trusted.session import GradingSession
from autograder.units import GiB

REPO = Path(__file__).resolve().parent.parent


def test_a_session_is_built_from_the_runs_options():
    options = GradingOptions(course_root=str(REPO), memory_limit=2 * GiB, timeout=7,
                             notebook_timeout=90, threads=3, sandbox=False)
    session = GradingSession.for_options(options, ["numpy"])
    policy = session.policy
    assert (policy.memory_limit, policy.cell_seconds, policy.notebook_seconds) == (2 * GiB, 7, 90)
    assert policy.threads == 3 and not policy.confined
    assert session.preload == ["numpy"] and session.course_root == REPO.resolve()


def test_two_sessions_share_nothing():
    first = GradingSession.for_options(GradingOptions(course_root=str(REPO)))
    second = GradingSession.for_options(GradingOptions(course_root=str(REPO)))
    lesson = lessons(REPO)[0]
    assert first.lesson(lesson) is first.lesson(lesson)  # loaded once per session
    assert lesson not in second.lessons
    first.set_class({lesson: {"ann": "d1"}})
    assert second.classmates == {}
    assert first.submission(lesson, "ann", []) == "d1"
    assert second.submission(lesson, "ann", [(0, "x = 1")]) != "d1"  # the cells' digest
    first.references.outcomes[(lesson, "k/0")] = {"v": 1}
    assert second.references.get(lesson, "k/0") is None


def test_forked_execute_keeps_no_worker_state_in_its_class():
    # (traitlets keeps its own tables in private class attributes: only the public ones, and
    # the names the worker's state had, are looked at)
    state = {name for name, value in vars(ForkedExecute).items()
             if not name.startswith("_") and isinstance(value, (dict, list, set))
             or name in ("_host", "_lessons", "_references", "_students", "preload")}
    assert not state, f"worker state in ForkedExecute's class: {sorted(state)}"
    with pytest.raises(TypeError, match="session"):
        ForkedExecute()


def test_the_worker_state_is_written_nowhere_but_the_session():
    """No module assigns to an attribute of ForkedExecute (its class is no worker's store)."""
    found = []
    for path in sorted((REPO / "autograder").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                owner = ast.unparse(target.value) if isinstance(target, ast.Attribute) else ""
                # nbgrader's configuration of the step (extra.ForkedExecute.x = ...) is no state
                if owner.endswith("ForkedExecute") and owner.split(".")[0] not in (
                        "extra", "config", "c"):
                    found.append(f"{path.relative_to(REPO)}: {ast.unparse(target)}")
    assert not found, found


def test_trusted_never_runs_the_nbgrader_command():
    """`--engine nbgrader` runs student code unconfined: it lives in dispatch/, and nothing in
    trusted/ starts `nbgrader autograde`."""
    found = []
    for path in sorted((REPO / "autograder" / "trusted").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and any(
                    alias.name in ("nbgrader_command", "nbgrader_env") for alias in node.names):
                found.append(str(path.relative_to(REPO)))
    assert not found, found
