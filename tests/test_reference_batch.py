"""A classmate cannot change another student's reference outcomes.

`References.ensure` (autograder/trusted/executor.py) computes a student's expected outcomes in
a run of their own, or earlier, in a classmate's batch: one process of the reference solution
that runs every classmate's scenarios, in sorted order, before (or after) this student's. Which
classmates there are, and their submissions (whose digests draw their seeds), must not change
what the reference reports for this student: a reference that kept state between scenario runs
(a hook left registered, the global generator drawn from, a cache) would let one submission
change another's verdict. For every lesson, each scenario's outcome on one seed is the same
computed alone as between two other seeds' runs in the same process (one drawn before it in
the sorted batch order, one after). The reference's outcomes decide scores; the mistakes'
(named-mistake evidence, run in the same process) are left out here for the suite's time.

Each order runs in a process of its own (the reference's namespace, fresh), as the grader's
reference runs do.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autograder.release import lessons

import scenario_support as support

_RUN = r'''
import json, sys
sys.path.insert(0, "tests")
import scenario_support as S
from coursekit.scenarios import collect
from autograder.sandbox.observe import run_scenarios
lesson, batch = sys.argv[1], sys.argv[2] == "batch"
module = S.scenario_module(lesson)
scenarios, _ = collect(module)
target = [(s.name, 0 if s.visible else 777) for s in scenarios]
runs = sorted(set(target + [(s.name, seed) for s in scenarios if not s.visible
                            for seed in (3, 1234)])) if batch else target
out = run_scenarios(module, S.reference_namespace(lesson), runs, mistakes=False)
wanted = {f"{n}/{s}" for n, s in target}
print(json.dumps({k: v for k, v in out.items() if "/".join(k.split("/")[:2]) in wanted},
                 sort_keys=True))
'''


def _outcomes(lesson: str, order: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _RUN, lesson, order], cwd=support.ROOT,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("lesson", lessons())
def test_a_students_reference_is_the_same_alone_and_in_a_classmates_batch(lesson):
    alone, batched = _outcomes(lesson, "alone"), _outcomes(lesson, "batch")
    assert alone, f"{lesson}: no outcome computed"
    differ = sorted(k for k in alone.keys() | batched.keys() if alone.get(k) != batched.get(k))
    assert not differ, f"{lesson}: the reference reports other outcomes in a batch: {differ}"
