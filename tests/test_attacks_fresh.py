"""Attacks on the fresh start: after its scored runs, the sandbox runs each exercise's answer
cell again in a copy of the notebook's names and the visible example once more
(`autograder.sandbox.observe.run_fresh`), and the page reads what the test cell said from that
run only. It decides no score, so nothing it does may change one.

One class of the fixture course's lesson A, graded once through `python -m autograder grade`
(in a throwaway PID namespace, see tests/attack_support.py):

- `aa-honest`: right answers, full marks.
- `rerun-once`: right answers from an answer cell that keeps state outside its own names at
  module level (a registration, as the course's "re-running a registration cell adds the hook
  again" pitfall): its answer is right while the cell has run once, as in the student's own
  notebook. The fresh start runs the cell a second time; on the code that ran the fresh start
  before the hidden scenarios, those measured the answer after it (twice the gradient), and
  the notebook lost 01-ex1's 2 points of 3.
- `fresh-only`: an answer right only when it runs in the fresh start's copy of the names and
  wrong in the scored runs: it scores nothing (the fresh start decides no score).
- `fresh-interrupt`: right answers, and an answer cell that raises KeyboardInterrupt (not an
  Exception) when run again: on the code before the fix the fresh start let it through, the
  notebook's process crashed and its right answers scored 0; now that run has no fresh start.
- `stateful`: an answer that keeps a list of its calls at module level, right on its first
  call only: the fresh start (run last, its outcome in the notebook's last report) is right,
  and the page says so, as a measured relation.
"""

from __future__ import annotations

import pytest

from attack_support import (A, answer_cells, feedback_text, fixture_course, grade, read_rows,
                            write)

TIMEOUT = 10
RIGHT = ("import torch\n\ndef cube_grad(x):\n    return 3 * x.detach() ** 2\n",
         "import torch\n\ndef intermediate_grad(x):\n    return 2 * x.detach(), None\n")
WRONG_INTERMEDIATE = ("import torch\n\ndef intermediate_grad(x):\n"
                      "    return torch.zeros_like(x), torch.zeros_like(x)\n")

RERUN_ONCE = '''
import builtins, torch
# a registration at module level: each run of this cell adds one
builtins.zq_registrations = getattr(builtins, "zq_registrations", 0) + 1

def cube_grad(x):
    return 3 * x.detach() ** 2 * builtins.zq_registrations
'''

FRESH_ONLY = '''
import torch

def cube_grad(x):
    if globals() is not get_ipython().user_ns:  # the fresh start's copy of the names
        return 3 * x.detach() ** 2
    return torch.zeros_like(x)
'''

FRESH_INTERRUPT = '''
import torch
if globals() is not get_ipython().user_ns:  # run again, in the fresh start's copy
    raise KeyboardInterrupt

def cube_grad(x):
    return 3 * x.detach() ** 2
'''

STATEFUL = '''
import torch
calls = []

def cube_grad(x):
    calls.append(1)
    return 3 * x.detach() ** 2 * len(calls)
'''

STUDENTS = {"aa-honest": RIGHT,
            "rerun-once": (RERUN_ONCE, RIGHT[1]),
            "fresh-only": (FRESH_ONLY, WRONG_INTERMEDIATE),
            "fresh-interrupt": (FRESH_INTERRUPT, RIGHT[1]),
            "stateful": (STATEFUL, RIGHT[1])}


@pytest.fixture(scope="module")
def fresh_class(tmp_path_factory):
    from autograder.demo import Lessons

    base = tmp_path_factory.mktemp("fresh-attacks")
    root = fixture_course.build_course(base / "course")
    course = Lessons(root, [A])
    classes, out = base / "class", base / "out"
    for student, sources in STUDENTS.items():
        nb = course.blank(A)
        for cell, source in zip(answer_cells(nb), sources):
            cell.source = source.strip() + "\n"
        write(nb, classes / student / f"{A}.ipynb")
    result = grade(classes, out, root, base / "run.json", timeout=TIMEOUT)
    return {"out": out, "result": result, "rows": read_rows(out)}


def _row(fresh_class, student: str) -> dict:
    row = fresh_class["rows"].get((student, A))
    assert row is not None, (f"no row for {student}: the run ended with "
                             f"{fresh_class['result']['rc']}\n"
                             f"{fresh_class['result']['stderr'][-3000:]}")
    return row


def test_the_run_completes_and_leaves_nothing(fresh_class):
    assert fresh_class["result"]["rc"] == 0, fresh_class["result"]["stderr"][-4000:]
    assert fresh_class["result"]["left"] == []


@pytest.mark.parametrize("student", ["aa-honest", "rerun-once", "fresh-interrupt"])
def test_the_fresh_start_changes_no_right_answers_score(fresh_class, student):
    row = _row(fresh_class, student)
    assert (row["status"], row["score"], row["max_score"]) == ("graded", "3", "3"), row


def test_an_answer_right_only_on_the_fresh_start_scores_nothing(fresh_class):
    row = _row(fresh_class, "fresh-only")
    assert (row["status"], row["score"]) == ("graded", "0"), row


def test_the_fresh_start_still_reaches_the_page(fresh_class):
    row = _row(fresh_class, "stateful")
    assert (row["status"], row["score"]) == ("graded", "1"), row
    page = feedback_text(fresh_class["out"], "stateful")
    assert "on a fresh start" in page, page[-3000:]
