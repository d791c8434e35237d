"""The grading command's parts, without grading: names, archives, checks, feedback, options."""

from __future__ import annotations

import io
import json
import os
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.__main__ import memory_size
from autograder.nbgrader_glue.hide_test_tracebacks import HideTestTracebacks
from autograder.outputs import Progress
from autograder.intake.collect import collect, pick_newest, recognise_lesson
from autograder.intake.validate import check, read_notebook

pytestmark = pytest.mark.fast

LESSONS = ["01_leaf_and_intermediate", "02_retain_grad", "03_tensor_hooks",
           "06_module_hooks", "07_hooks_in_practice"]


@pytest.mark.parametrize("name, lesson", [
    ("01_leaf_and_intermediate.ipynb", "01_leaf_and_intermediate"),
    ("01_leaf_and_intermediate (1).ipynb", "01_leaf_and_intermediate"),
    ("01_leaf_and_intermediate (12).ipynb", "01_leaf_and_intermediate"),
    ("01_leaf_and_intermediate-Copy1.ipynb", "01_leaf_and_intermediate"),
    ("01_Leaf_And_Intermediate.IPYNB", "01_leaf_and_intermediate"),
    ("01 leaf and intermediate.ipynb", "01_leaf_and_intermediate"),
    ("doejane_12345_678_02_retain_grad-3.ipynb", "02_retain_grad"),
    ("doejane_LATE_12345_678_03_tensor_hooks.ipynb", "03_tensor_hooks"),
    ("tensor_hooks.ipynb", "03_tensor_hooks"),
    ("hooks_in_practice_final.ipynb", "07_hooks_in_practice"),
    ("homework.ipynb", None),
    ("lesson1.ipynb", None),
    ("01.ipynb", None),
    ("02_retain_grad and 03_tensor_hooks.ipynb", None),  # two lessons: not guessed
])
def test_recognise_lesson(name, lesson):
    assert recognise_lesson(name, LESSONS) == lesson


def test_the_longer_lesson_name_wins():
    assert recognise_lesson("01_a_b (1).ipynb", ["01_a", "01_a_b"]) == "01_a_b"
    assert recognise_lesson("01_a (1).ipynb", ["01_a", "01_a_b"]) == "01_a"


def _notebook_file(path: Path, mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(new_notebook(cells=[new_code_cell("1")]), path)
    if mtime:
        os.utime(path, (mtime, mtime))
    return path


def test_collect_layouts_and_skipped_files(tmp_path):
    root = tmp_path / "class"
    _notebook_file(root / "ann" / "01_leaf_and_intermediate.ipynb")
    _notebook_file(root / "bob" / "02_retain_grad" / "02_retain_grad.ipynb")
    _notebook_file(root / "bob" / "03_tensor_hooks" / "submission.ipynb")  # lesson from folder
    _notebook_file(root / "bob" / ".ipynb_checkpoints" / "02_retain_grad-checkpoint.ipynb")
    _notebook_file(root / "loose.ipynb")
    (root / "ann" / "notes.txt").write_text("x")
    found, skipped = collect(root, LESSONS, tmp_path / "work")
    got = {(s.student, s.lesson) for s in found}
    assert got == {("ann", "01_leaf_and_intermediate"), ("bob", "02_retain_grad"),
                   ("bob", "03_tensor_hooks"), ("", None)}
    assert any("notes.txt" in item for item in skipped)


def test_collect_zip_wrapped_and_unsafe(tmp_path):
    archive = tmp_path / "class.zip"
    buffer = io.BytesIO()
    nbformat.write(new_notebook(), buffer_text := io.StringIO())
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("export/ann/01_leaf_and_intermediate.ipynb", buffer_text.getvalue())
        zf.writestr("export/bob/02_retain_grad.ipynb", buffer_text.getvalue())
        zf.writestr("__MACOSX/export/ann/._01_leaf_and_intermediate.ipynb", b"junk")
        zf.writestr("../../escape.ipynb", buffer_text.getvalue())
    del buffer
    found, skipped = collect(archive, LESSONS, tmp_path / "work")
    assert {(s.student, s.lesson) for s in found} == {("ann", "01_leaf_and_intermediate"),
                                                     ("bob", "02_retain_grad")}
    assert any("outside" in item for item in skipped)
    assert not (tmp_path / "escape.ipynb").exists()


def test_a_single_student_in_nbgrader_layout_is_not_a_wrapper(tmp_path):
    root = tmp_path / "class"
    _notebook_file(root / "ann" / "02_retain_grad" / "02_retain_grad.ipynb")
    found, _ = collect(root, LESSONS, tmp_path / "work")
    assert [(s.student, s.lesson) for s in found] == [("ann", "02_retain_grad")]


def test_newest_duplicate_wins(tmp_path):
    now = time.time()
    old = _notebook_file(tmp_path / "ann" / "02_retain_grad.ipynb", now - 100)
    new = _notebook_file(tmp_path / "ann" / "02_retain_grad (1).ipynb", now)
    found, _ = collect(tmp_path, LESSONS, tmp_path / "work")
    chosen, note = pick_newest(found)
    assert chosen.path == new and old.name in note and "newest" in note
    os.utime(old, (now + 100, now + 100))
    found, _ = collect(tmp_path, LESSONS, tmp_path / "work")
    assert pick_newest(found)[0].path == old


@pytest.mark.parametrize("content, words", [
    (b"", "empty"),
    (b"{\"cells\": [", "JSON"),
    (b"\xff\xfe\x00garbage", "not text"),
    (b"[1, 2, 3]", "not a Jupyter notebook"),
    (b'{"cells": [{"cell_type": "code"}], "metadata": {}, "nbformat": 4, '
     b'"nbformat_minor": 5}', "not a valid Jupyter notebook"),
])
def test_unreadable_notebooks(tmp_path, content, words):
    path = tmp_path / "x.ipynb"
    path.write_bytes(content)
    nb, reason = read_notebook(path)
    assert nb is None and words in reason


@pytest.fixture(scope="module")
def fixture_specs(tmp_path_factory):
    from autograder.nbgrader_glue.inproc import course_config, register_lessons

    root = fixture_course.build_course(tmp_path_factory.mktemp("course"))
    specs = register_lessons(course_config(root), list(fixture_course.LESSONS))
    ids = {lesson: set(spec.graded_ids) for lesson, spec in specs.items()}
    return root, specs, ids


def test_check_lesson_cells(tmp_path, fixture_specs):
    from autograder.demo import Lessons

    root, specs, ids = fixture_specs
    a, b = fixture_course.LESSONS
    course = Lessons(root)

    def checked(nb, lesson=a):
        path = tmp_path / "nb.ipynb"
        nbformat.write(nb, path)
        return check(path, lesson, specs[lesson], ids)

    assert checked(course.blank(a)) == (None, "", [])
    assert checked(course.correct(a)) == (None, "", [])
    status, reason, _ = checked(course.correct(b))
    assert status == "invalid" and f"lesson {b}" in reason
    status, reason, _ = checked(course.without_first_test(a))
    assert status == "invalid" and "01-ex1-test" in reason
    status, _, notes = checked(course.with_edited_test(a))
    assert status is None and "01-ex1-test" in notes[0] and "restored" in notes[0]
    status, reason, _ = checked(new_notebook(cells=[new_code_cell("print(1)")]))
    assert status == "invalid" and "None of the exercise cells" in reason
    # A copied exercise cell (its grading label with it), and a label nbgrader cannot read:
    # nbgrader's autograding stopped on them ("error", "One or more notebooks ... use an old
    # version", "see the above traceback"), which told the student nothing.
    nb = course.correct(a)
    answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    copy = nbformat.from_dict(json.loads(json.dumps(answer)))
    copy["id"] = "a-copy"
    nb.cells.insert(nb.cells.index(answer) + 1, copy)
    status, reason, _ = checked(nb)
    assert status == "invalid", reason
    assert reason.startswith("Cells copied: the exercise cell 01-ex1-answer appears more")
    nb = course.correct(a)
    nb.cells.append(new_code_cell("print('ok')", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "schema_version": 3, "points": 9,
        "grade_id": "01-ex9-test"}}))
    status, reason, _ = checked(nb)
    assert status == "invalid" and "01-ex9-test" in reason, reason
    nb = course.correct(a)
    nb.cells.append(new_code_cell("x = 1", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "schema_version": 3, "points": 9}}))
    status, reason, _ = checked(nb)
    assert status == "invalid" and "grading labels" in reason and "grade_id" in reason, reason


def test_hidden_test_tracebacks_are_reduced():
    test_cell = new_code_cell(
        "check()\n### BEGIN HIDDEN TESTS\nassert secret_probe() == 3\n### END HIDDEN TESTS",
        metadata={"nbgrader": {"grade": True, "grade_id": "t", "locked": True, "points": 1,
                               "schema_version": 3, "solution": False, "task": False}})
    traceback = ["-----", "Cell In[3], line 3", "----> 3 assert secret_probe() == 3",
                 "\x1b[0;31mAssertionError\x1b[0m: "]
    test_cell.outputs = [new_output("error", ename="AssertionError", evalue="",
                                    traceback=traceback)]
    answer = new_code_cell("secret_probe()", metadata={})
    answer.outputs = [new_output("error", ename="NameError", evalue="x",
                                 traceback=["line with secret_probe", "NameError: x"])]
    nb = new_notebook(cells=[answer, test_cell])
    nb, _ = HideTestTracebacks().preprocess(nb, {})
    assert nb.cells[1].outputs[0].traceback == ["\x1b[0;31mAssertionError\x1b[0m"]
    assert len(nb.cells[0].outputs[0].traceback) == 2  # the student's own cells keep theirs


def test_feedback_preprocessors_hide_before_clearing():
    from autograder.nbgrader_glue.inproc import course_config, feedback_preprocessors

    names = [p.__name__ if isinstance(p, type) else p
             for p in feedback_preprocessors(course_config(fixture_course.REPO))]
    assert names.index("HideTestTracebacks") < names.index("ClearHiddenTests")
    assert "GetGrades" in names


def test_progress_is_quiet_under_ci(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setenv("CI", "true")
    assert not Progress(3, stream=Terminal()).enabled
    monkeypatch.delenv("CI")
    assert Progress(3, stream=Terminal()).enabled
    assert not Progress(3, stream=io.StringIO()).enabled


@pytest.mark.parametrize("text, size", [("4G", 4 << 30), ("512M", 512 << 20), ("2.5GiB", int(2.5 * (1 << 30))),
                                        ("3", 3 << 30), ("0", 0), ("none", 0)])
def test_memory_size(text, size):
    assert memory_size(text) == size


def test_command_reports_bad_input(tmp_path, capsys):
    from autograder.__main__ import main

    assert main(["grade", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("source", [
    "x = 1\n### BEGIN HIDDEN TESTS\nSECRET = 2\n### END HIDDEN TESTS\ny = 3\n",
    "x = 1\n# BEGIN HIDDEN TESTS\nSECRET = 2\n# END HIDDEN TESTS\ny = 3\n",
    "x = 1\n    ## BEGIN HIDDEN TESTS\n    SECRET = 2\n## END HIDDEN TESTS\ny = 3",
    "x = 1\nif True:  # BEGIN HIDDEN TESTS\n    SECRET = 2\ny = 3  # END HIDDEN TESTS\n",
    # nbgrader splits lines at "\n" only: what follows another line break on the end line
    # is still hidden (red team, round 3).
    "x = 1\n### BEGIN HIDDEN TESTS\nSECRET = 2\n### END HIDDEN TESTS\u2028SECRET = 3\n",
])
def test_hidden_regions_are_stripped_by_nbgraders_rule(source):
    """nbgrader hides every line from one holding BEGIN HIDDEN TESTS to one holding END
    HIDDEN TESTS, whatever comes before them on the line; the grader used to strip only
    `### ...` lines, so a region nbgrader hid went into the sandbox (red team, round 2)."""
    from autograder.trusted.sources import strip_hidden
    stripped = strip_hidden(source)
    assert "SECRET" not in stripped and "HIDDEN" not in stripped
    assert stripped.startswith("x = 1\n")


def test_a_hidden_region_without_end_hides_the_rest():
    from autograder.trusted.sources import strip_hidden
    assert strip_hidden("a\n# BEGIN HIDDEN TESTS\nSECRET\nmore SECRET\n") == "a\n"


@pytest.mark.parametrize("value, expected", [
    ("=1+2", "'=1+2"), ("@SUM(1)", "'@SUM(1)"), ("+x", "'+x"), ("-cmd", "'-cmd"),
    ("-1.5", "-1.5"), ("3", "3"), ("alice", "alice"), (3, 3), ("a=b", "a=b"),
])
def test_spreadsheet_cells(value, expected):
    from autograder.text import spreadsheet_cell
    assert spreadsheet_cell(value) == expected


def test_a_log_record_is_one_line():
    """nbgrader's messages quote a student's grade ids and cell sources: their newlines must
    not add lines to grading.log (red team, round 2)."""
    import logging

    from autograder.nbgrader_glue.inproc import CaptureLog
    handler = CaptureLog()
    logger = logging.getLogger("test-capture-log")
    logger.addHandler(handler)
    logger.warning("Cell 'zz\n== mallory / 01: graded, 3/3\nWARNING forged' does not exist")
    logger.removeHandler(handler)
    assert len(handler.text().splitlines()) == 1
    assert handler.text().startswith("WARNING Cell 'zz == mallory")


def test_a_cgroup_is_never_shared():
    """Two grading runs in two PID namespaces can have runner hosts of the same pid: a group
    named after it was shared by two notebooks, which mixed their CPU time and memory and
    ended one with the other (a flaky attack test, two fixtures grading at once). A name that
    exists is never taken again."""
    from autograder.sandbox.limits import Cgroup
    if Cgroup.base() is None:
        pytest.skip("no cgroup this process may create children in (CI runs as root)")
    name = f"autograder-test-{os.getpid()}-{os.urandom(4).hex()}"
    first = Cgroup.create(name, 1 << 30, 64)
    assert first is not None
    try:
        second = Cgroup.create(name, 1 << 30, 64)
        assert second is None
        assert all(os.path.isdir(path) for path in first.paths.values())
    finally:
        first.remove()


def test_hidden_seeds_are_sent_only_after_the_visible_outcomes():
    """The grader's side of a notebook's pipes, driven by hand: the payload holds no hidden
    run's seed until the notebook has reported the visible runs' outcomes, and a later report
    cannot change those outcomes."""
    import json
    import select
    import threading

    from autograder.trusted.messages import collect as _collect
    from autograder.trusted.payload import Payload as _Payload

    seed = 3141592653589793
    request = {"cells": [(0, "x = 1")], "prologue": 0, "timeout": 5, "max_lines": 10,
               "observe": {"source": "", "filename": "<scenarios>", "mistakes": False,
                           "runs": [("example", 0)], "later": [("random_points", seed)]}}
    events_r, events_w = os.pipe()
    control_r, control_w = os.pipe()
    payload_r, payload_w = os.pipe()
    writer = _Payload(payload_w, request)
    found = {}
    collector = threading.Thread(target=lambda: found.update(
        run=_collect(events_r, control_r, request, 5, 60, writer)))
    collector.start()

    def send(message: dict) -> None:
        os.write(events_w, (json.dumps(message) + "\n").encode())

    def line() -> bytes:  # the next payload line (never waits for ever)
        data = b""
        while not data.endswith(b"\n"):
            ready = select.select([payload_r], [], [], 60)[0]
            byte = os.read(payload_r, 1) if ready else b""
            assert byte, f"the payload ended after {data!r}"
            data += byte
        return data

    try:
        assert json.loads(line())["cells"] == [[0, "x = 1"]]
        send({"event": "done", "index": 0, "outputs": [], "execution_count": 1,
              "timed_out": False, "seconds": 0.1})
        send({"event": "cells-done"})
        observe = line()
        assert str(seed).encode() not in observe and b"random_points" not in observe
        assert json.loads(observe)["observe"]["runs"] == [["example", 0]]
        send({"event": "observing"})
        send({"event": "observed", "outcomes": {"example/0": {"observations": {"v": 1}}}})
        assert json.loads(line()) == {"runs": [["random_points", seed]]}
        send({"event": "observations", "outcomes": {
            "example/0": {"observations": {"v": 2}},
            f"random_points/{seed}": {"observations": {"h": 3}}}})
        send({"event": "end"})
        os.write(control_w, b'{"event": "exited", "status": 0}\n')
        collector.join(30)
    finally:
        writer.close()
        for fd in (events_r, events_w, control_r, control_w, payload_r):
            os.close(fd)
    assert found["run"].outcomes == {"example/0": {"observations": {"v": 1}},
                                     f"random_points/{seed}": {"observations": {"h": 3}}}


# Starts a runner host, which runs notebooks: in `make test`, not in `make test-fast`.
@pytest.mark.slow
def test_a_notebook_forked_from_a_shared_prologue_can_use_every_thread_it_is_given():
    """torch's OpenMP pool does not survive fork(): a prologue that ran with several threads
    left a zygote whose forked notebooks hung at their first parallel operation (0 CPU, until
    the wall clock's 10x limit said "timeout"). The prologue runs on one thread; the notebook
    then gets its share of the cores and finishes."""
    from autograder.sandbox.probe import check_available
    from autograder.sandbox.policy import SandboxPolicy
    from autograder.trusted.executor import Host, host_config

    host = Host(host_config(SandboxPolicy.build(memory_limit=2 << 30, threads=2,
                                                confined=check_available() is None)))
    request = {"cells": [(0, "import torch\nbig = torch.ones(2000, 2000) * 2\nbig.sum()"),
                         (1, "print(torch.get_num_threads(), (torch.ones(2000, 2000) * 3)"
                             ".sum().item())")],
               "prologue": 1, "timeout": 3, "max_lines": 100, "files_from": None}
    try:
        run = host.run(request, timeout=3, budget=120)
    finally:
        host.stop()
    assert run.outcome == "ok", (run.outcome, run.detail)
    printed = "".join(o.get("text", "") for o in run.executed[1]["outputs"])
    assert printed.split() == ["2", "12000000.0"]


def test_the_lessons_cells_after_its_last_exercise_are_left_out_unless_changed():
    """Going further: the lesson's own code cells after its last test cell decide no grade, so
    the grader runs neither the student's copies nor the reference's; a cell the student
    changed or added there still runs (it could rebind an answer the scenarios call)."""
    from nbformat.v4 import new_code_cell, new_notebook

    from autograder.trusted.sources import Lesson, last_test

    def graded(cell, **meta):
        cell.metadata["nbgrader"] = meta
        return cell

    nb = new_notebook(cells=[
        new_code_cell("import torch"),
        graded(new_code_cell("def f(x):\n    return 2 * x"), solution=True, grade=False,
               grade_id="09-ex1-answer"),
        graded(new_code_cell("assert f(1) == 2"), solution=False, grade=True,
               grade_id="09-ex1-test", points=1),
        new_code_cell("slow = torch.ones(3)  # going further"),
        new_code_cell("slow = torch.ones(4)  # going further, changed"),
        new_code_cell("def f(x):\n    return 3 * x  # added by the student"),
    ])
    lesson = Lesson("09", "", "<none>", [], [], [], ["import torch"],
                    epilogue=frozenset({"slow = torch.ones(3)  # going further",
                                        "slow = torch.ones(5)  # going further"}))
    cells = [(i, c.source) for i, c in enumerate(nb.cells)]
    kept, skipped = lesson.graded_cells(nb, cells)
    assert last_test(nb) == 2
    assert skipped == [3]
    assert [i for i, _ in kept] == [0, 1, 2, 4, 5]
    # The same source before the last test cell always runs.
    nb.cells[0].source = "slow = torch.ones(3)  # going further"
    assert lesson.graded_cells(nb, [(0, nb.cells[0].source)]) == ([(0, nb.cells[0].source)], [])


def test_progress_off_a_terminal_is_a_plain_line_a_minute_and_none_when_asked():
    from autograder.tasks import Result

    now = [0.0]
    log = io.StringIO()
    progress = Progress(5, stream=log, clock=lambda: now[0])
    for seconds, status in ((10, "graded"), (61, "timeout"), (90, "graded"), (125, "graded"),
                            (200, "graded")):
        now[0] = seconds
        progress.update(Result("s", "01", status=status))
    assert log.getvalue().splitlines() == ["2/5 notebooks done, 1 not graded, 61 s",
                                           "4/5 notebooks done, 1 not graded, 125 s"]
    quiet = io.StringIO()
    silent = Progress(5, enabled=False, stream=quiet, clock=lambda: now[0])
    now[0] = 1000
    silent.update(Result("s", "01"))
    assert quiet.getvalue() == ""
