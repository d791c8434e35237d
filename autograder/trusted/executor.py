"""The grader's side of running a notebook: the runner host, and nbgrader's Execute replaced.

Student code never runs in this process. A grading worker starts a runner host
(`autograder.runner.host`, a new program that holds nothing of the grader's) and hands it, for
each notebook, the cells to run and the scenarios to observe (`autograder.protocol`). The host
forks a confined process for the notebook (`autograder.sandbox.confine`); what comes back on
the notebook's pipe is untrusted, read by `autograder.trusted.messages`.

Scores never come from the student's process. After the cells, the notebook's process runs the
lesson's scenarios (`scenarios/<lesson>.py`) against the student's answers, on inputs drawn for
this student from the course secret, and reports observations. A reference run (the solution
notebook's own cells, in the same kind of process, forked from the same warm state) reports the
expected observations and those of each typical mistake; `autograder.trusted.verdicts` compares
them here, and each test cell's outputs are replaced by the verdict, which is what nbgrader
scores.

`ForkedExecute` is the nbgrader preprocessor that replaces nbgrader's `Execute` in
`Autograde.autograde_preprocessors`; everything else in autograding stays nbgrader's. It runs in
the worker's `GradingSession` (`autograder.trusted.session`: the runner host, the lessons, their
reference outcomes), and what it established (status, reason, timings, checks) goes to the
`RunOutcome` it was given.
"""

from __future__ import annotations

from autograder.nbgrader_glue import patches  # noqa: F401 (first: a quicker jsonschema import)

import json
import os
import socket
import subprocess
import sys
from typing import Any

from nbformat import NotebookNode, from_dict
from traitlets import Bool, Integer

from nbgrader.preprocessors import NbGraderPreprocessor

from coursekit.notebook import exercise_of

from autograder.grader_notes import (CHECKS_STOPPED, DEAD_ENAME, TIMEOUT_ENAME,
                                     checks_stopped_output, not_graded_output)
from autograder.nbgrader_glue import cells as cells_
from autograder.records import CheckRow
from autograder.sandbox.policy import SandboxPolicy
from autograder.text import one_line
from autograder.trusted.domains import add_domain_line, declared
from autograder.trusted.messages import collect
from autograder.trusted.notes import (checks_stopped, died_detail, died_output, not_run_output,
                                      oom_output, timeout_output, verdict_outputs)
from autograder.trusted.outputs import MAX_KEPT_OUTPUT_BYTES, within
from autograder.trusted.payload import Payload
from autograder.trusted.run import Run
from autograder.trusted.seeds import course_secret, scenario_seed
from autograder.trusted.sources import Lesson, lesson_files, prologue_end, strip_hidden
from autograder.trusted.status import RunOutcome, Stop, run_status
from autograder.trusted.outcomes import (Outcome, ReportError, ScenarioBroken, ScenarioRun,
                                         read_outcome)
from autograder.trusted.verdicts import judge_exercise

HOST_START_SECONDS = 180.0
# The grader's notes kept in front of a test cell's verdict when the run stopped there.
_STOP_ENAMES = {"timeout": (TIMEOUT_ENAME,), "oom": ("MemoryError",), "died": (DEAD_ENAME,)}


# --------------------------------------------------------------------------------------------
# The runner host, seen from the worker


class HostError(RuntimeError):
    """The runner host could not be started or stopped answering."""


class Host:
    """A runner host process and the socket to it."""

    def __init__(self, config: dict) -> None:
        self.config = config
        self.process: subprocess.Popen | None = None
        self.sock: socket.socket | None = None

    def start(self) -> None:
        ours, theirs = socket.socketpair()
        env = {key: value for key, value in os.environ.items()
               if key in ("PATH", "LANG", "LC_ALL", "HOME", "OMP_NUM_THREADS", "PYTHONPATH",
                          "NBFORMAT_VALIDATOR", "MPLBACKEND", "PYDEVD_DISABLE_FILE_VALIDATION")}
        self.process = subprocess.Popen(
            [sys.executable, "-s", "-B", "-m", "autograder.runner.host", str(theirs.fileno()),
             json.dumps(self.config)],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            env=env, start_new_session=True, cwd="/")
        theirs.close()
        self.sock = ours
        ours.settimeout(HOST_START_SECONDS)
        try:
            line = ours.recv(64)
        except OSError:
            line = b""
        ours.settimeout(None)
        if line != b"ready\n":
            self.stop()
            raise HostError("the runner host did not start")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.process is not None:
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def run(self, request: dict, *, timeout: float, budget: float) -> "Run":
        """Run one notebook: the host gets only a header; the cells, then (once the notebook
        has reported its last cell's end) the scenarios with their first runs, then (once it
        has reported those runs' outcomes) the later runs, go on a payload pipe that only the
        notebook's own process reads. Collect what it reports until the host says that its
        process has ended."""
        if not self.alive():
            self.stop()
            self.start()
        prologue = int(request.get("prologue") or 0)
        header = {"prologue_cells": request["cells"][:prologue], "timeout": request["timeout"],
                  "max_lines": request["max_lines"], "files_from": request.get("files_from")}
        events_r, events_w = os.pipe()
        control_r, control_w = os.pipe()
        payload_r, payload_w = os.pipe()
        try:
            socket.send_fds(self.sock, [(json.dumps(header) + "\n").encode()],
                            [events_w, control_w, payload_r])
        except OSError as err:
            for fd in (events_r, events_w, control_r, control_w, payload_r, payload_w):
                os.close(fd)
            self.stop()
            raise HostError(f"the runner host stopped answering ({err})") from None
        os.close(events_w)
        os.close(control_w)
        os.close(payload_r)
        writer = Payload(payload_w, request)
        try:
            return collect(events_r, control_r, request, timeout, budget, writer)
        finally:
            writer.close()
            os.close(events_r)
            os.close(control_r)


class References:
    """Reference outcomes (the solution's and each mistake's), per lesson and seed, computed
    in runs of the solution notebook's own cells and kept for the worker's lifetime."""

    def __init__(self) -> None:
        self.outcomes: dict[tuple[str, str], Any] = {}
        self.unbatched: set[str] = set()  # lessons whose classmates' batch did not finish

    def ensure(self, host: Host, lesson: Lesson, runs: list[list[tuple[str, int]]], *,
               timeout: float, budget: float, max_lines: int) -> None:
        """Compute the reference outcomes not known yet of `runs`: the runs of one notebook
        per student, the student being graded first, then classmates. All the scenarios of
        a reference run share one cell's time limit: the runs of one notebook fit it (the
        reference's own tests show it), a batch of classmates may not. So the student's
        own runs go first in a run of their own, and only a failure there raises (the
        reference fails its own scenarios); the classmates' runs follow in one run, as a
        prefetch: if it does not finish, nothing is lost but its time, each classmate's
        runs are computed when they are graded, and this lesson is not batched again. How
        many classmates a notebook is graded with never decides its status."""
        own, *others = runs or [[]]
        self._observe(host, lesson, own, timeout=timeout, budget=budget, max_lines=max_lines,
                      must=True)
        if others and lesson.name not in self.unbatched:
            done = self._observe(host, lesson, [r for rs in others for r in rs],
                                 timeout=timeout, budget=budget, max_lines=max_lines,
                                 must=False)
            if not done:
                self.unbatched.add(lesson.name)

    def _observe(self, host: Host, lesson: Lesson, runs: list[tuple[str, int]], *,
                 timeout: float, budget: float, max_lines: int, must: bool) -> bool:
        missing = sorted({(n, s) for n, s in runs
                          if (lesson.name, f"{n}/{s}") not in self.outcomes})
        if not missing:
            return True
        request = {"cells": lesson.reference_cells,
                   "prologue": len(lesson.prologue), "timeout": timeout,
                   "max_lines": max_lines, "files_from": None,
                   "observe": {"source": lesson.source, "filename": lesson.filename,
                               "runs": missing, "mistakes": True}}
        run = host.run(request, timeout=timeout, budget=budget)
        if run.outcomes is None:
            if must:
                raise ScenarioBroken(f"the reference run of {lesson.name} did not finish "
                                     f"({run.outcome}: {one_line(run.detail, 300)})")
            return False
        for key, value in run.outcomes.items():
            self.outcomes[(lesson.name, key)] = value
        return True

    def get(self, lesson: str, key: str) -> Any:
        return self.outcomes.get((lesson, key))


# --------------------------------------------------------------------------------------------
# nbgrader's Execute, replaced

class ForkedExecute(NbGraderPreprocessor):
    """nbgrader's Execute step: the notebook runs confined, forked from the runner host, and
    each test cell's outputs become the trusted verdict on its exercise."""

    max_lines = Integer(1000, help="Lines of a cell's stream output kept.").tag(config=True)
    share_prologue = Bool(True, help="Run the lesson's unchanged worked examples once for all "
                                     "notebooks that have them.").tag(config=True)

    def __init__(self, session=None, outcome: RunOutcome | None = None, **kwargs: Any) -> None:
        """`session`: the worker's `autograder.trusted.session.GradingSession` (required)."""
        super().__init__(**kwargs)
        if session is None:
            raise TypeError("ForkedExecute runs a notebook in a grading worker's session: "
                            "pass session=GradingSession(...) (autograder.trusted.session)")
        self.session = session
        self.outcome = outcome if outcome is not None else RunOutcome()

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        info = resources.get("nbgrader", {})
        name, student = info.get("assignment", ""), info.get("student", "")
        session, policy = self.session, self.session.policy
        root = session.course_root
        lesson = session.lesson(name)
        secret = course_secret(root)
        cells = []
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            source = strip_hidden(cell.source) if cells_.is_graded(cell) else cell.source
            if source.strip():
                cells.append((index, source))
        cells, skipped = lesson.graded_cells(nb, cells)
        for cell in nb.cells:  # what nbclient does before running a cell
            if cell.cell_type == "code":
                cell.outputs = []
                cell.execution_count = None
        end = prologue_end(nb)
        prologue = [source for index, source in cells if index < end]
        shared = self.share_prologue and prologue and prologue == lesson.prologue
        digest = session.submission(name, student, cells)
        runs = lesson.runs(secret, student, digest)
        visible = {s.name for s in lesson.scenarios if s.visible}
        # Each visible scenario is also run on a fresh start (its exercise's answer cell run
        # again in a copy of the notebook's names), as the test cell's own call met the answer.
        answers = {exercise_of(cells_.labels(nb.cells[i]).get("grade_id", "")): i
                   for i, _ in cells if cells_.labels(nb.cells[i]).get("solution")}
        fresh = [[name, seed, answers[s.exercise]] for s in lesson.scenarios if s.visible
                 and s.exercise in answers for name, seed in runs if name == s.name]
        # The hidden runs' seeds reach the notebook only after it has reported the visible
        # runs' outcomes (whose found values its feedback quotes).
        request = {"cells": cells, "prologue": len(prologue) if shared else 0,
                   "timeout": policy.cell_seconds, "max_lines": self.max_lines,
                   "files_from": lesson_files(root, name),
                   "observe": {"source": lesson.student_source, "filename": "<scenarios>",
                               "runs": [r for r in runs if r[0] in visible],
                               "later": [r for r in runs if r[0] not in visible],
                               "fresh": fresh,
                               "mistakes": False} if lesson.scenarios else None}
        run = session.host().run(request, timeout=policy.cell_seconds,
                                 budget=policy.notebook_seconds)
        stops = self._apply(nb, cells, run)
        for index in skipped:
            nb.cells[index].outputs = [from_dict(not_graded_output())]
        try:
            checks = self._verdicts(nb, lesson, student, digest, secret, run, stops)
        except ScenarioBroken as err:  # the course's reference, not this notebook
            self.outcome.grader_fault = one_line(err, 400)
            raise
        found = run_status(nb, stops, died_detail(run), policy.cell_seconds,
                           policy.memory_limit)
        outcome = self.outcome
        outcome.status, outcome.reason = found or ("graded", "")
        outcome.cell_seconds, outcome.shared_seconds = run.cell_seconds, run.shared_seconds
        outcome.observe_seconds, outcome.checks = run.observe_seconds, checks
        outcome.decided = True
        return nb, resources

    def _apply(self, nb: NotebookNode, cells: list[tuple[int, str]], run: Run) -> list[Stop]:
        """Each run cell's outputs as the grader keeps them, and the grader's notes where the
        run stopped; returns the notes that decide the notebook's status."""
        stops: list[Stop] = []
        stopped = False
        left = MAX_KEPT_OUTPUT_BYTES  # of the outputs kept, in bytes
        for index, _ in cells:
            cell = nb.cells[index]
            done = run.executed.get(index)
            if done is not None and not (run.cell == index and run.outcome == "oom"):
                kept, left = within(done["outputs"], left)
                cell.outputs = [from_dict(o) for o in kept]
                cell.execution_count = done["execution_count"]
                if run.cell == index and run.outcome == "timeout":
                    cell.outputs.append(from_dict(timeout_output(self.session.policy.cell_seconds)))
                    stops.append(Stop(index, kind="timeout"))
                continue
            if not stopped and run.cell == index and run.outcome in ("timeout", "oom", "died"):
                notes = {"timeout": timeout_output(self.session.policy.cell_seconds), "oom": oom_output(),
                         "died": died_output(run)}
                cell.outputs = [from_dict(notes[run.outcome])]
                stops.append(Stop(index, kind=run.outcome))
            else:
                cell.outputs = [from_dict(not_run_output(run))]
                if run.outcome == "exit" and not run.budget_spent:
                    stops.append(Stop(index, kind="exit"))
            stopped = True
        return stops

    def _verdicts(self, nb: NotebookNode, lesson: Lesson, student: str, digest: str,
                  secret: bytes, run: Run, stops: list[Stop]) -> list[dict]:
        """Each test cell's outputs replaced by the verdict on its exercise (the grader's note
        of a stop there kept in front); `stops` loses the notes replaced, and gains the note of
        checking stopped. Returns the checks' rows."""
        rows: list[CheckRow] = []
        session = self.session
        tests = [(i, c) for i, c in enumerate(nb.cells)
                 if c.cell_type == "code" and cells_.is_test(c)]
        if not tests:
            return rows
        outcomes = run.outcomes if isinstance(run.outcomes, dict) else {}
        stopped = checks_stopped(run)
        if lesson.scenarios:
            everyone = dict(session.classmates.get(lesson.name, {}), **{student: digest})
            # The student's own runs first: their grading needs nothing else.
            order = [student] + sorted(set(everyone) - {student})
            runs = [lesson.runs(secret, who, everyone[who]) for who in order]
            session.references.ensure(session.host(), lesson, runs,
                                      timeout=session.policy.cell_seconds,
                                      budget=session.policy.notebook_seconds,
                                      max_lines=self.max_lines)
        mistakes = list(enumerate(lesson.mistakes))
        for index, cell in tests:
            grade_id = cells_.labels(cell).get("grade_id", "")
            exercise = exercise_of(grade_id) or grade_id
            scenarios = lesson.for_exercise(exercise)
            judged: list[ScenarioRun] = []
            for scenario in scenarios:
                seed = 0 if scenario.visible else scenario_seed(secret, student, exercise,
                                                                scenario.name, digest)
                key = f"{scenario.name}/{seed}"
                reference = read_outcome(session.references.get(lesson.name, key))
                wrong = []
                for i, known in mistakes:
                    if known.exercise == exercise:
                        raw = session.references.get(lesson.name, f"{key}/mistake/{i}")
                        wrong.append((known, None if raw is None else read_outcome(raw)))
                if run.outcomes is None:
                    student_outcome = Outcome(stopped=CHECKS_STOPPED[stopped] if stopped else (
                        "not checked: the notebook stopped before its answers could be "
                        "checked (see the first cell that did not finish)"))
                else:
                    try:
                        student_outcome = read_outcome(outcomes.get(key))
                    except ReportError:
                        student_outcome = read_outcome({"unreportable": "its report was malformed"})
                judged.append(ScenarioRun(scenario, reference, student_outcome, wrong,
                                          _fresh_outcome(outcomes, key, scenario.visible)))
            checks = judge_exercise(judged)
            rows += [c.row(grade_id) for c in checks]
            # Where the run stopped at this cell (time, memory, a death), the grader's own
            # note of it stays in front of the verdict: the notebook's status comes from it.
            stop = [o for o in cell.outputs if run.cell == index and o.get("ename") in
                    _STOP_ENAMES.get(run.outcome, ())]
            verdict_outputs(cell, exercise, checks, run)
            add_domain_line(cell, declared(lesson.source).get(exercise))
            cell.outputs = stop + list(cell.outputs)
            stops[:] = [s for s in stops if s.index != index or stop]
        if stopped:  # the first test cell says that checking the answers stopped, and why
            index, cell = tests[0]
            cell.outputs = [from_dict(checks_stopped_output(stopped))] + list(cell.outputs)
            stops.append(Stop(index, first_in_cell=True, kind="checks", why=stopped))
        return rows


def host_config(policy: SandboxPolicy, preload: list[str] = ()) -> dict:
    """What the runner host needs: the sandbox's policy (limits, the folders its notebooks may
    read: this Python's environment and the course's shared package), the modules to import
    once."""
    return {"policy": policy.to_dict(),
            "preload": list(dict.fromkeys(["torch", "numpy", "matplotlib.pyplot", "coursekit",
                                           "coursekit.checks", "coursekit.scenarios",
                                           "coursekit.drawing", "hypothesis",
                                           "hypothesis.strategies",
                                           *preload]))}


def _fresh_outcome(outcomes: dict, key: str, visible: bool) -> Outcome | None:
    """A visible scenario's outcome on a fresh start (None where there is none, or it is
    malformed: the page then reads the later call)."""
    raw = outcomes.get(f"{key}/fresh") if visible else None
    if raw is None:
        return None
    try:
        return read_outcome(raw)
    except ReportError:
        return None
