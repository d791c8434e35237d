"""The reference outcomes a notebook is judged against (autograder.trusted.executor.References):
all the scenarios of one reference run share one cell's time limit, so a notebook's status must
never depend on how many classmates' references its worker computes alongside it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from autograder.trusted.executor import References
from autograder.trusted.outcomes import ScenarioBroken
from autograder.trusted.run import Run

pytestmark = pytest.mark.fast

LIMIT = {"timeout": 60, "budget": 600, "max_lines": 100}


class Host:
    """A runner host whose reference runs finish when they observe at most `fits` runs (the
    CPU time of all of a run's scenarios is one cell's limit); it records what it was asked."""

    def __init__(self, fits: int) -> None:
        self.fits = fits
        self.asked: list[list[tuple[str, int]]] = []

    def run(self, request: dict, *, timeout: float, budget: float) -> Run:
        runs = [tuple(r) for r in request["observe"]["runs"]]
        self.asked.append(runs)
        if len(runs) > self.fits:
            return Run(outcome="timeout", detail="the scenarios' CPU time ran out")
        return Run(outcomes={f"{name}/{seed}": {"value": seed} for name, seed in runs})


def lesson(name: str = "08_hooks_in_a_training_stack") -> SimpleNamespace:
    return SimpleNamespace(name=name, reference_cells=[(0, "pass")], prologue=[],
                           source="", filename="<scenarios>")


def runs_of(student: int) -> list[tuple[str, int]]:
    """A notebook's runs: the visible one (seed 0, shared by all) and two hidden ones."""
    return [("visible", 0), ("hidden-a", 100 + student), ("hidden-b", 200 + student)]


def test_a_class_too_large_for_one_reference_run_still_grades_each_notebook():
    host, references = Host(fits=3), References()
    class_runs = [runs_of(student) for student in range(16)]
    references.ensure(host, lesson(), class_runs, **LIMIT)  # the old batched run raised here
    assert all(references.get(lesson().name, f"{n}/{s}") is not None for n, s in runs_of(0))
    # the classmates' batch did not finish: nothing of theirs is kept, and the lesson is no
    # longer batched; each classmate's own runs are computed when it is graded
    assert references.get(lesson().name, "hidden-a/105") is None
    asked = len(host.asked)
    references.ensure(host, lesson(), [runs_of(5)] + class_runs, **LIMIT)
    assert host.asked[asked:] == [[("hidden-a", 105), ("hidden-b", 205)]]
    assert references.get(lesson().name, "hidden-b/205") == {"value": 205}


def test_classmates_that_fit_are_computed_in_one_run_and_not_again():
    host, references = Host(fits=100), References()
    references.ensure(host, lesson(), [runs_of(s) for s in range(4)], **LIMIT)
    assert host.asked[0] == sorted(runs_of(0))  # the notebook's own runs, first and alone
    assert len(host.asked) == 2 and len(host.asked[1]) == 6  # the classmates' hidden runs
    references.ensure(host, lesson(), [runs_of(3)], **LIMIT)
    assert len(host.asked) == 2


def test_a_reference_that_fails_the_notebooks_own_runs_is_the_courses_fault():
    host, references = Host(fits=2), References()
    with pytest.raises(ScenarioBroken, match="reference run of 08_hooks_in_a_training_stack "
                                             "did not finish"):
        references.ensure(host, lesson(), [runs_of(0)], **LIMIT)


def test_the_graders_own_fault_is_said_as_such(tmp_path):
    """When the reference run fails (ForkedExecute records why, then nbgrader wraps the error in
    "Please see the above traceback"), the row and the notice say what failed and whose fault
    it is, not nbgrader's wrapper."""
    from traitlets.config import Config

    from autograder.tasks import GradingOptions
    from autograder.trusted.autograde import grade_submission

    class Engine:
        def run(self, config, student, lesson, outcome):
            outcome.grader_fault = ("the reference run of 02_retain_grad did not finish "
                                    "(timeout: the scenarios' CPU time ran out)")
            raise RuntimeError("Please see the the above traceback for details")

        def decided(self, outcome):
            return outcome.decided

    config = Config()
    config.CourseDirectory.root = str(tmp_path)
    result = grade_submission(GradingOptions(course_root=str(tmp_path), out=str(tmp_path / "out")),
                              config, "ada", "02_retain_grad", [], Engine())
    assert result.status == "error"
    assert "reference run of 02_retain_grad did not finish" in result.reason
    assert "not of the notebook" in result.reason and "traceback" not in result.reason
