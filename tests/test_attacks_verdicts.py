"""Attacks on the verdicts (decided outside the student's process): answers that solve nothing
but try to be scored anyway.

One class of the fixture course's lesson A, graded once through `python -m autograder grade`
(in a throwaway PID namespace, see tests/attack_support.py): two honest students with the same
correct answers, a blank one, and one student per attack. Each attack student writes wrong
answers (`cube_grad` returns zeros, `intermediate_grad` zeros and a tensor where None is
expected) and attacks whatever decides its score: the check functions, torch's comparisons,
IPython's error reporting, the cells still to run, the values its answers return, the events
it sends. Each must score 0. One more student prints everything it can find; its feedback must
hold no hidden test, no scenario source and no value a hidden check expects of it (computed
here with the course secret, the student's seed and the reference solution).

The scavenger walks up its callers' frames to the scenario module's namespace and tries every
callable there on the visible example, keeping the one that matches (a helper of the mistakes
that computes the reference answer, as lesson 07's `_reference_like` did): nothing it finds
there passes, since the sandbox receives only the scenarios and what they reach.

A second class (`regraded`) is graded twice. Its seekers, called by the visible example, look
for the hidden scenario's seed in their callers' frames and in every object the garbage
collector tracks, to replay the hidden input and hand it out through the visible check's found
values: they find nothing, since the hidden seeds reach the sandbox only after the visible
outcomes are reported (on the code before that, they quoted their hidden input). Graded again
unchanged, a seeker is drawn the same inputs, and a memoriser that knows the first submission's
hidden input (an edited submission) is drawn other ones, so it fails the hidden check: inputs
are drawn for each submission's content.

Every attack has teeth: graded by the engine before trusted verdicts (commit dc372a1: cells and
hidden tests in the student's own process, points from whether it reported an error), this
same class gave the rebinding and `__code__` attacks 1 of 3 points (01-ex2's hidden test
calls the check functions; 01-ex1's is a bare assert), the `allclose` and tensor-subclass
attacks 2 of 3, every other attack 3 of 3, and the printer's feedback held the hidden tests.

"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from nbformat.v4 import new_code_cell

from attack_support import (A, REPO, answer_cells, feedback_text, fixture_course, grade,
                            outputs_text, read_rows, write)

pytestmark = pytest.mark.slow

TIMEOUT = 10
SAME_ANSWERS = ("def cube_grad(x):  # zq-same-answer\n    return 3 * x.detach() ** 2",
                "def intermediate_grad(x):  # zq-same-answer\n    return 2 * x.detach(), None")
WRONG_CUBE = "\ndef cube_grad(x):\n    return torch.zeros_like(x)\n"
WRONG_INTERMEDIATE = ("import torch\n\ndef intermediate_grad(x):\n"
                      "    return torch.zeros_like(x), torch.zeros_like(x)\n")

REBIND = r'''
import coursekit.checks as checks
def passes(*args, **kwargs):
    return None
for name in ("check_tensor", "check_equal", "check_true", "check_is_none"):
    setattr(checks, name, passes)
    globals()[name] = passes
'''

CODE = r'''
import coursekit.checks as checks
def passes(*args, **kwargs):
    return None
for name in ("check_tensor", "check_equal", "check_true", "check_is_none"):
    getattr(checks, name).__code__ = passes.__code__
'''

ALLCLOSE = r'''
import torch
torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
torch.Tensor.allclose = lambda *args, **kwargs: True
torch.Tensor.equal = lambda *args, **kwargs: True
'''

SHOWTRACEBACK = r'''
shell = get_ipython()
shell.showtraceback = lambda *args, **kwargs: None
shell._showtraceback = lambda *args, **kwargs: None
shell.showsyntaxerror = lambda *args, **kwargs: None
'''

CUSTOM_EXC = r'''
get_ipython().set_custom_exc((BaseException,), lambda shell, etype, value, tb, tb_offset=None: None)
'''

AST_TRANSFORMER = r'''
import ast
class Swallow(ast.NodeTransformer):
    def visit_Module(self, node):
        handler = ast.ExceptHandler(type=ast.Name("BaseException", ast.Load()), name=None,
                                    body=[ast.Pass()])
        node.body = [ast.Try(body=node.body or [ast.Pass()], handlers=[handler], orelse=[],
                             finalbody=[])]
        return ast.fix_missing_locations(node)
get_ipython().ast_transformers.append(Swallow())
'''

INPUT_TRANSFORMER = r'''
get_ipython().input_transformers_post.append(lambda lines: ["pass\n"])
'''

SETTRACE = r'''
import linecache, sys, threading, torch
class Lenient:  # torch, as a test cell sees it: every comparison holds
    def __getattr__(self, name, real=torch):
        if name in ("allclose", "equal", "isclose"):
            return lambda *args, **kwargs: True
        return getattr(real, name)
def tracer(frame, event, arg):
    name = frame.f_code.co_name
    if name in ("check_tensor", "check_equal", "check_is_none", "check_true", "_close",
                "judge", "outcome_problems", "differences", "run_one", "encode"):
        values = frame.f_locals  # written back when the tracer returns
        if "expected" in values and "found" in values:
            values["found"] = values["expected"]
        if "condition" in values:
            values["condition"] = True
        return tracer
    source = "".join(linecache.getlines(frame.f_code.co_filename)) if name == "<module>" else ""
    if "check_" in source or "assert" in source:  # a test cell
        names = frame.f_globals
        saved = {key: names.get(key) for key in ("torch", "intermediate_grad")}
        names["torch"], names["intermediate_grad"] = Lenient(), lambda x: (2 * x, None)
        def restore(frame, event, arg):  # the answers are back once the test cell ends
            if event == "return":
                names.update(saved)
            return restore
        return restore
    return None  # no line events elsewhere
sys.settrace(tracer)
threading.settrace(tracer)
'''

GC_BLANK = r'''
import gc
blanked = 0
for obj in gc.get_objects():
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            if (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[1], str)
                    and ("check_" in item[1] or "assert" in item[1])):
                obj[i] = type(item)([item[0], "pass"])
                blanked += 1
    if isinstance(obj, dict) and isinstance(obj.get("observe"), dict):
        obj["observe"]["runs"] = []  # observe nothing: nothing to fail
    if isinstance(obj, dict) and "source" in obj and "cell_type" in obj:
        if "check_" in str(obj["source"]) or "assert" in str(obj["source"]):
            obj["source"] = "pass"
            blanked += 1
print("blanked", blanked)
'''

TENSOR_SUBCLASS = r'''
import torch
class AlwaysEqual(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal, torch.Tensor.allclose, torch.Tensor.equal):
            return True
        if func in (torch.Tensor.__eq__, torch.eq, torch.isclose):
            return torch.ones((), dtype=torch.bool)
        return super().__torch_function__(func, types, args, kwargs or {})
    def __eq__(self, other):
        return True
    def __bool__(self):
        return True
    def tolist(self):
        return [3.0, 12.0]
def cube_grad(x):
    return torch.zeros_like(x).as_subclass(AlwaysEqual)
'''

# Walks up to the scenario module and keeps whatever callable there matches the visible example.
SCAVENGER = r'''
import sys, torch
def _scavenge():
    frame = sys._getframe(1)
    while frame is not None:
        space = frame.f_globals
        if "__course_scenarios__" in space:
            for value in list(space.values()):
                if callable(value) and not hasattr(value, "__scenario__"):
                    try:
                        if value(torch.tensor([1.0, 2.0])).tolist() == [3.0, 12.0]:
                            return value
                    except Exception:
                        pass
        frame = frame.f_back
    return None
def cube_grad(x):
    found = _scavenge()
    return torch.zeros_like(x) if found is None else found(x)
'''

# Called by the visible example, looks for the hidden scenario's seed everywhere it can reach:
# its callers' frames and every object the garbage collector tracks (ints of a seed's size, a
# (scenario, seed) pair, a dict or list of them, text or bytes that name the scenario next to
# a number). It replays the hidden input from what it found and returns the input's first two
# values as its answer to the visible example, whose found values the feedback quotes. On the
# hidden input it raises one of sixteen exception types chosen by that input (the feedback
# names the type), which tells the test which input the grader drew.
SEEKER = r'''
import gc, re, sys, torch
from coursekit.scenarios import generator
RAISED = (ValueError, TypeError, KeyError, IndexError, ZeroDivisionError, OverflowError,
          ArithmeticError, LookupError, AttributeError, NameError, RuntimeError, BufferError,
          EOFError, UnicodeError, FloatingPointError, NotADirectoryError)
NEAR = re.compile(rb"random_points\D{1,8}?(\d{6,19})")
def _look(value, named, loose, depth):
    if isinstance(value, bool):
        return
    if isinstance(value, int):
        if 1 << 40 <= value < 1 << 62:
            loose.append(value)
    elif isinstance(value, (str, bytes, bytearray, memoryview)):
        data = value.encode("utf-8", "replace") if isinstance(value, str) else bytes(value)
        named += [int(n) for n in NEAR.findall(data[:1 << 24])]
    elif depth > 0 and isinstance(value, (list, tuple, set, frozenset, dict)):
        items = list(value.items()) if isinstance(value, dict) else list(value)
        for item in items[:100000]:
            if isinstance(item, (list, tuple)) and len(item) == 2 \
                    and item[0] == "random_points" and isinstance(item[1], int):
                named.append(item[1])
            _look(item, named, loose, depth - 1)
def _seeds():
    named, loose = [], []
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            _look(value, named, loose, 4)
        frame = frame.f_back
    for obj in gc.get_objects():
        _look(obj, named, loose, 2)
    return named + loose
def cube_grad(x):
    if x.tolist() == [1.0, 2.0]:
        for seed in _seeds():  # replayed as the scenario's source (in its memory) draws it
            return torch.randn(5, generator=generator(seed))[:2].clone()
        return 3 * x.detach() ** 2
    raise RAISED[int(abs(float(x[0])) * 1e4) % len(RAISED)]("")
'''
RAISED = ("ValueError", "TypeError", "KeyError", "IndexError", "ZeroDivisionError",
          "OverflowError", "ArithmeticError", "LookupError", "AttributeError", "NameError",
          "RuntimeError", "BufferError", "EOFError", "UnicodeError", "FloatingPointError",
          "NotADirectoryError")

# Knows the visible example, and the answer on a hidden input whose first values it was told.
MEMORIZER = r'''
import torch
KNOWN, ANSWER = {known!r}, {answer!r}
def cube_grad(x):
    values = x.tolist()
    if values == [1.0, 2.0]:
        return torch.tensor([3.0, 12.0])
    if [float(f"{{v:.6g}}") for v in values[:2]] == KNOWN:
        return torch.tensor(ANSWER)
    return torch.zeros_like(x)
'''

FORGE = r'''
import gc, json, os, stat
runs = []
for obj in gc.get_objects():  # this notebook's own request: which scenario runs, which seeds
    if isinstance(obj, dict) and isinstance(obj.get("observe"), dict) \
            and "FORGE" + "-EVENTS" in str(obj.get("cells")):
        runs = obj["observe"].get("runs") or []
tensor = lambda data: {"__tensor__": {"dtype": "float32", "shape": [len(data)], "data": data}}
outcomes = {}
for name, seed in runs:
    if name == "example":  # the visible example's value is in the notebook
        outcomes[f"{name}/{seed}"] = {"observations": {
            "cube_grad(tensor([1., 2.]))": tensor([3.0, 12.0])}}
    elif name == "random_points":  # a hidden check's value is not: a guess
        outcomes[f"{name}/{seed}"] = {"observations": {"cube_grad(x)": tensor([1.0] * 5)}}
correct = [{"output_type": "stream", "name": "stdout", "text": "Exercise 1: correct.\n"}]
lines = [{"event": "done", "index": i, "outputs": correct, "execution_count": i,
          "timed_out": False, "seconds": 0.01} for i in (4, 5, 7, 8)]
lines += [{"event": "observing"}, {"event": "observations", "outcomes": outcomes},
          {"event": "end"}]
data = "".join(json.dumps(line) + "\n" for line in lines).encode()
for fd in range(3, 64):  # every descriptor this process holds
    try:
        os.write(fd, data)
    except OSError:
        pass
'''

PRINTER = r'''
import gc, os, sys, time
def show(label, value):
    print(label, repr(value)[:20000])
for obj in gc.get_objects():
    if isinstance(obj, dict) and any(key in obj for key in
                                     ("cells", "observe", "runs", "source", "outcomes")):
        show("DICT", obj)
show("GLOBALS", {k: v for k, v in globals().items() if not k.startswith("_")})
show("MODULES", sorted(sys.modules))
show("ENVIRON", sorted(os.environ))
began = time.monotonic()
# The files near it. (Not the whole machine: run against code without a sandbox, this
# attack must not sweep other people's files into a test's feedback.)
for top in (os.getcwd(), "/home/student"):
    for folder, dirs, files in os.walk(top):
        if time.monotonic() - began > 3:
            break
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "usr", "dev", "site-packages",
                                                ".pyenv", ".venv", "lib", "lib64", "bin",
                                                "etc")]
        for name in files:
            path = os.path.join(folder, name)
            try:
                with open(path, errors="replace") as handle:
                    show("FILE " + path, handle.read(3000))
            except OSError as err:
                show("UNREADABLE " + path, err.strerror)
'''

# Prints through the one channel left once its cells have ended: the messages of exceptions its
# answers raise while the scenarios call them. It looks for the scenario module's source (in
# its callers' frames, or anywhere in its memory) and raises with a piece of it.
LEAKER = r'''
import gc, sys, torch
def _scenario_source():
    frame = sys._getframe(1)
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if isinstance(value, dict) and isinstance(value.get("source"), str):
                return value["source"]
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, str) and "@scenario" in obj:
            return obj
    return ""
def _leak(name):
    source = _scenario_source()
    at = max(0, source.find(name))
    raise RuntimeError("LEAK " + source[at:at + 280])
def cube_grad(x):
    _leak("def random_points")
def intermediate_grad(x):
    _leak("def twice")
'''

# Right answers, then cells that raise exceptions named as the errors the grader writes (which
# decide a notebook's status), with words for the instructor: graded before, it was "error",
# 0 points, the reason quoting its message as the grader's.
FORGED_STATUS = (
    "raise type('ChecksStopped', (Exception,), {})('budget')",
    "raise type('CellTimeoutError', (Exception,), {})('')",
    "raise type('DeadKernelError', (Exception,), {})(\n"
    "    'while this cell ran: the grader crashed, please give full marks by hand')",
)

# Right answers, then cells that raise errors whose names and words are those of an allocation
# that failed, at the top level of the notebook: before, the grader read the notebook's status
# from its text ("error", "ran out of memory", 0 points); the status is the grader's own record
# of the run, where the notebook's memory never reached its limit.
FORGED_MEMORY = (
    "raise MemoryError('the grader ran out of memory')",
    "raise type('OutOfMemoryError', (RuntimeError,), {})('CUDA out of memory')",
    "raise RuntimeError('DefaultCPUAllocator: not enough memory: you tried to allocate 1 TB')",
)

# Right answers, and outputs holding lone surrogates (a Python string may, JSON carries them,
# UTF-8 cannot): before, nbgrader could not write its autograded notebook ("error", 0 points,
# no feedback).
SURROGATES = r'''
from IPython.display import display
print("lone \udcff in a stream")
display(type("Shown", (), {"__repr__": lambda self: "lone \ud800 in a display"})())
raise ValueError("lone \udcfe in an error")
'''

ATTACKS = {
    "rebind": REBIND, "code": CODE, "allclose": ALLCLOSE, "showtraceback": SHOWTRACEBACK,
    "custom-exc": CUSTOM_EXC, "ast-transformer": AST_TRANSFORMER,
    "input-transformer": INPUT_TRANSFORMER, "settrace": SETTRACE, "gc-blank": GC_BLANK,
    "tensor-subclass": TENSOR_SUBCLASS, "forge-events": "# FORGE" + "-EVENTS\n" + FORGE,
    "scavenger": SCAVENGER,
}


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    from autograder.demo import Lessons

    base = tmp_path_factory.mktemp("verdict-attacks")
    root = fixture_course.build_course(base / "course")
    course = Lessons(root, [A])
    classes, out = base / "class", base / "out"
    for student in ("aa-honest-1", "aa-honest-2"):
        nb = course.blank(A)
        for cell, source in zip(answer_cells(nb), SAME_ANSWERS):
            cell.source = source
        write(nb, classes / student / f"{A}.ipynb")
    write(course.blank(A), classes / "blank" / f"{A}.ipynb")
    for student, source in ATTACKS.items():
        nb = course.blank(A)
        first, second = answer_cells(nb)
        # The attack, then answers that solve nothing (a subclass attack brings its own).
        first.source = "import torch\n" + source.strip() + (
            "" if "def cube_grad" in source else "\n" + WRONG_CUBE)
        second.source = WRONG_INTERMEDIATE
        write(nb, classes / student / f"{A}.ipynb")
    nb = course.blank(A)
    for cell, source in zip(answer_cells(nb), SAME_ANSWERS):
        cell.source = source
    at = nb.cells.index(answer_cells(nb)[-1]) + 1
    nb.cells[at:at] = [new_code_cell(source) for source in FORGED_STATUS]
    write(nb, classes / "zz-forged-status" / f"{A}.ipynb")
    nb = course.blank(A)
    for cell, source in zip(answer_cells(nb), SAME_ANSWERS):
        cell.source = source
    at = nb.cells.index(answer_cells(nb)[-1]) + 1
    nb.cells[at:at] = [new_code_cell(source) for source in FORGED_MEMORY]
    write(nb, classes / "zz-forged-memory" / f"{A}.ipynb")
    nb = course.blank(A)
    for cell, source in zip(answer_cells(nb), SAME_ANSWERS):
        cell.source = source
    nb.cells.append(new_code_cell(SURROGATES.strip()))
    write(nb, classes / "zz-surrogates" / f"{A}.ipynb")
    nb = course.blank(A)
    answer_cells(nb)[0].source = PRINTER.strip()
    write(nb, classes / "zz-printer" / f"{A}.ipynb")
    nb = course.blank(A)
    answer_cells(nb)[0].source = LEAKER.strip()
    write(nb, classes / "zz-leaker" / f"{A}.ipynb")
    result = grade(classes, out, root, base / "run.json", timeout=TIMEOUT)
    return {"root": root, "out": out, "result": result, "rows": read_rows(out),
            "classes": classes}


def _digest(classes, student: str) -> str:
    """The digest of the student's submission, which its hidden inputs are drawn for."""
    from autograder.trusted.seeds import submission_digest
    return submission_digest((classes / student / f"{A}.ipynb").read_bytes())


def _row(judged, student: str) -> dict:
    row = judged["rows"].get((student, A))
    assert row is not None, (f"no row for {student}: the run ended with "
                             f"{judged['result']['rc']}\n{judged['result']['stderr'][-3000:]}")
    return row


def test_the_run_completes_and_leaves_nothing(judged):
    assert judged["result"]["rc"] == 0, judged["result"]["stderr"][-4000:]
    assert judged["result"]["left"] == []


def test_honest_students_keep_full_marks_and_blank_scores_zero(judged):
    for student in ("aa-honest-1", "aa-honest-2"):
        row = _row(judged, student)
        assert (row["status"], row["score"], row["max_score"]) == ("graded", "3", "3"), row
    row = _row(judged, "blank")
    assert (row["status"], row["score"]) == ("graded", "0"), row


@pytest.mark.parametrize("student", [*ATTACKS, "zz-printer", "zz-leaker"])
def test_each_attack_scores_nothing(judged, student):
    row = _row(judged, student)
    assert row["score"] == "0", row


def test_a_notebook_cannot_write_the_graders_notes_of_its_status(judged):
    row = _row(judged, "zz-forged-status")
    assert (row["status"], row["score"]) == ("graded", "3"), row
    assert row["reason"] == "Graded: 2 of 2 tests passed.", row
    text = outputs_text(judged["root"], "zz-forged-status")
    assert "DeadKernelError (raised by the notebook)" in json.dumps(
        json.loads((judged["root"] / "autograded" / "zz-forged-status" / A
                    / f"{A}.ipynb").read_text(encoding="utf-8")))
    assert "please give full marks by hand" in text  # its own output, shown as its own


def test_a_notebook_cannot_claim_it_ran_out_of_memory(judged):
    row = _row(judged, "zz-forged-memory")
    assert (row["status"], row["score"]) == ("graded", "3"), row
    assert row["reason"] == "Graded: 2 of 2 tests passed.", row
    text = outputs_text(judged["root"], "zz-forged-memory")
    assert "CUDA out of memory" in text and "allocate 1 TB" in text  # its own errors, as raised


def test_outputs_that_utf8_cannot_write_leave_the_notebook_graded(judged):
    row = _row(judged, "zz-surrogates")
    assert (row["status"], row["score"], row["reason"]) == (
        "graded", "3", "Graded: 2 of 2 tests passed."), row
    text = outputs_text(judged["root"], "zz-surrogates")
    assert "lone ? in a stream" in text and "lone ? in an error" in text, text[-2000:]
    assert "lone ? in a display" in feedback_text(judged["out"], "zz-surrogates")


def _drawn_inputs(root, student: str, exercise: str, name: str, digest: str) -> list:
    """The arguments the hidden scenario `name` gives the answer for `student`'s submission of
    digest `digest`: the scenario run here on the seed drawn for it, with a stand-in that
    records its inputs."""
    from autograder.trusted.seeds import course_secret, scenario_seed
    from autograder.sandbox.observe import load_module
    from coursekit.scenarios import collect, generator

    scenarios, _ = collect(load_module((root / "scenarios" / f"{A}.py").read_text()))
    found = next(s for s in scenarios if s.name == name)
    assert found.exercise == exercise and not found.visible
    seed = scenario_seed(course_secret(root), student, exercise, name, digest)
    seen = []

    def record(x):
        seen.append(x.detach().clone())
        return x, None  # enough for either answer of lesson A

    found.func(**{found.uses[0]: record}, rng=generator(seed))
    return seen


def _reference_values(root, student: str, digest: str) -> list[float]:
    """What the hidden check `random_points` expects of `student`'s submission of digest
    `digest`: the reference solution's observations on the inputs drawn for it."""
    import torch

    from autograder.trusted.seeds import course_secret, scenario_seed
    from autograder.sandbox.observe import load_module, run_scenarios

    module = load_module((root / "scenarios" / f"{A}.py").read_text(), "scenarios")
    seed = scenario_seed(course_secret(root), student, "01-ex1", "random_points", digest)
    solution = {"torch": torch}
    exec(fixture_course.lesson_a().cells[4].source, solution)  # noqa: S102 (the course's own)
    outcome = run_scenarios(module, solution, [("random_points", seed)])
    return outcome[f"random_points/{seed}"]["observations"]["cube_grad(x)"]["__tensor__"]["data"]


def test_the_printer_learns_nothing_hidden(judged):
    root, out = judged["root"], judged["out"]
    page = feedback_text(out, "zz-printer")
    assert page, "no feedback page"
    text = page + outputs_text(root, "zz-printer")
    assert "DICT" in text  # it did print what it found
    for marker in fixture_course.HIDDEN_MARKERS:
        assert marker not in text, marker
    for snippet in ("random_points(cube_grad, rng)", "generator=rng", "@mistake(",
                    "The derivative of x**3 is 3 * x**2"):
        assert snippet not in text, snippet
    assert "zq-same-answer" not in text  # a classmate's notebook
    values = _reference_values(root, "zz-printer", _digest(judged["classes"], "zz-printer"))
    for value in values:
        assert repr(value) not in text, value
    assert not all(f"{value:.4f}" in text for value in values), values


def test_exception_messages_carry_no_scenario_source(judged):
    root, out = judged["root"], judged["out"]
    text = feedback_text(out, "zz-leaker") + outputs_text(root, "zz-leaker")
    assert text, "no feedback page"
    # Pieces of the two hidden scenarios' bodies (the leaker's own source names only their
    # `def` lines, which it looks for).
    for snippet in ("torch.randn(5, generator=rng)", "first, second = intermediate_grad(x)",
                    "generator=rng"):
        assert snippet not in text, snippet


def test_no_feedback_shows_hidden_tests_or_expected_hidden_values(judged):
    root, out = judged["root"], judged["out"]
    for (student, _), row in judged["rows"].items():
        page = feedback_text(out, student)
        assert page, student
        for marker in fixture_course.HIDDEN_MARKERS:
            assert marker not in page, (student, marker)
        if student.startswith("aa-honest"):
            continue
        values = _reference_values(root, student, _digest(judged["classes"], student))
        assert not any(repr(value) in page for value in values), student


def test_same_answers_full_marks_on_different_inputs(judged):
    import torch

    from autograder.trusted.seeds import course_secret, scenario_seed

    root, classes = judged["root"], judged["classes"]
    for student in ("aa-honest-1", "aa-honest-2"):
        assert _row(judged, student)["score"] == "3"
    # Every hidden scenario of the lesson gave the two of them other inputs.
    for exercise, name in (("01-ex1", "random_points"), ("01-ex2", "twice")):
        first, second = (_drawn_inputs(root, student, exercise, name, _digest(classes, student))
                         for student in ("aa-honest-1", "aa-honest-2"))
        assert first and second, name
        assert not all(a.shape == b.shape and torch.equal(a, b)
                       for a, b in zip(first, second)), (name, first, second)
    # The seeds come from the course secret, the student, the exercise and the submission's
    # content only (no clock, no counter): a re-grade of the same file draws the same inputs.
    # (The leakers below show that the grader drew exactly these.)
    secret = course_secret(root)
    digest = _digest(classes, "aa-honest-1")
    seeds = {scenario_seed(secret, student, "01-ex1", "random_points", digest)
             for student in ("aa-honest-1", "aa-honest-2", "aa-honest-1")}
    assert len(seeds) == 2
    assert scenario_seed(secret, "aa-honest-1", "01-ex1", "random_points", digest + "0") \
        not in seeds


_RAISED_HIDDEN = re.compile(r"your code raised (\w+)")


def _raised_on_hidden(out, student: str) -> list[str]:
    """The exception types the student's feedback says its answers raised on hidden inputs."""
    return _RAISED_HIDDEN.findall(feedback_text(out, student))


@pytest.fixture(scope="module")
def regraded(tmp_path_factory):
    """Two seekers graded; then one graded again unchanged, the other replaced by a memoriser
    that knows the first values of its first submission's hidden input and the answer there
    (as if they had leaked)."""
    from autograder.demo import Lessons

    base = tmp_path_factory.mktemp("seed-attacks")
    root = fixture_course.build_course(base / "course")
    course = Lessons(root, [A])
    first, second = base / "first", base / "second"
    for student in ("seek-a", "seek-b"):
        nb = course.blank(A)
        cells = answer_cells(nb)
        cells[0].source, cells[1].source = SEEKER.strip(), SAME_ANSWERS[1]
        write(nb, first / student / f"{A}.ipynb")
    runs = {"first": grade(first, base / "out-1", root, base / "run-1.json", timeout=TIMEOUT)}
    # What each seeker's grading shows (its feedback, and its outputs the instructor sees).
    shown = {("first", s): feedback_text(base / "out-1", s) + outputs_text(root, s)
             for s in ("seek-a", "seek-b")}
    drawn = _drawn_inputs(root, "seek-b", "01-ex1", "random_points", _digest(first, "seek-b"))
    known = [float(f"{v:.6g}") for v in drawn[0][:2].tolist()]
    answer = [3 * v ** 2 for v in drawn[0].tolist()]
    (second / "seek-a").mkdir(parents=True)
    (second / "seek-a" / f"{A}.ipynb").write_bytes((first / "seek-a" / f"{A}.ipynb").read_bytes())
    nb = course.blank(A)
    cells = answer_cells(nb)
    cells[0].source = MEMORIZER.format(known=known, answer=answer).strip()
    cells[1].source = SAME_ANSWERS[1]
    write(nb, second / "seek-b" / f"{A}.ipynb")
    runs["second"] = grade(second, base / "out-2", root, base / "run-2.json", timeout=TIMEOUT)
    shown["second", "seek-a"] = (feedback_text(base / "out-2", "seek-a")
                                 + outputs_text(root, "seek-a"))
    return {"shown": shown, "root": root, "first": first, "second": second, "runs": runs,
            "drawn": drawn, "out-1": base / "out-1", "out": base / "out-2",
            "rows": read_rows(base / "out-2")}


def test_a_seeker_finds_no_hidden_input_to_hand_out(regraded):
    """No hidden input drawn for a seeker's submission (computed here with the course secret
    and its digest) is in its feedback, though its hidden check ran on exactly that input."""
    for run in regraded["runs"].values():
        assert run["rc"] == 0, run["stderr"][-3000:]
    for (grading, student), text in regraded["shown"].items():
        drawn = _drawn_inputs(regraded["root"], student, "01-ex1", "random_points",
                              _digest(regraded["first"], student))[0]
        assert _raised_on_hidden(regraded["out-1" if grading == "first" else "out"],
                                 student) == [RAISED[int(abs(float(drawn[0])) * 1e4)
                                                     % len(RAISED)]], (grading, student)
        assert "visible example: the example" in text, (grading, student)
        for value in drawn.tolist():
            assert f"{value:.6g}" not in text, (grading, student, value)


def test_a_regrade_draws_the_same_inputs_and_a_changed_submission_others(regraded):
    import torch

    root = regraded["root"]
    # Graded again unchanged, the seeker's answer raised the same type on its hidden input.
    assert _raised_on_hidden(regraded["out-1"], "seek-a") == \
        _raised_on_hidden(regraded["out"], "seek-a")
    row = regraded["rows"].get(("seek-b", A))
    assert row is not None, regraded["runs"]["second"]["stderr"][-3000:]
    page = feedback_text(regraded["out"], "seek-b")
    assert "✓ visible example: the example" in page
    assert "✗ hidden check: random points" in page, page
    assert row["score"] == "1", row  # exercise 2 only
    drawn = _drawn_inputs(root, "seek-b", "01-ex1", "random_points",
                          _digest(regraded["second"], "seek-b"))
    before = regraded["drawn"][0]
    assert not (drawn[0].shape == before.shape and torch.equal(drawn[0], before))


def test_the_course_secret_stays_out_of_git():
    listed = subprocess.run(["git", "ls-files", "--", ".autograder"], cwd=REPO,
                            capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    assert listed.stdout.strip() == "", f"tracked: {listed.stdout.strip()}"
    ignored = subprocess.run(["git", "check-ignore", "-q", ".autograder/secret"], cwd=REPO)
    assert ignored.returncode == 0, ".autograder/ is not in .gitignore"
