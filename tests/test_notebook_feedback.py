"""What a student sees under a test cell, in a real IPython kernel driven as JupyterLab drives it
(each execute request carries the cell's metadata and id): a failing check's message first, an
unanswered exercise named, a missing answer run explained, a stale definition noticed; a real
error keeps its traceback; and every failure stays an error for the kernel and for nbgrader."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from nbgrader.utils import determine_grade

ANSI = re.compile(r"\x1b\[[0-9;]*m")
LESSON = "01"


def _meta(role: str, number: int = 1, points: int = 2) -> dict:
    """The metadata JupyterLab sends with a cell of the released lessons."""
    grade_id = f"{LESSON}-ex{number}-{role}"
    nbgrader = {"grade": role == "test", "grade_id": grade_id, "locked": role == "test",
                "schema_version": 3, "solution": role == "answer", "task": False}
    if role == "test":
        nbgrader["points"] = points
    return {"nbgrader": nbgrader, "tags": ["raises-exception"] if role == "test" else [],
            "cellId": grade_id, "deletedCells": [], "recordTiming": False}


class Kernel:
    """An ipykernel, with `run` sending one cell the way JupyterLab does."""

    def __init__(self, session_file: Path, cwd: Path):
        self.session_file = session_file
        self.km = KernelManager(kernel_name="python3")
        env = dict(os.environ, JPY_SESSION_NAME=str(session_file))
        self.km.start_kernel(env=env, cwd=str(cwd))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def run(self, code: str, meta: dict | None = None) -> tuple[dict, list[dict]]:
        """(execute reply content, outputs in nbformat shape) of one cell."""
        content = {"code": code, "silent": False, "store_history": True,
                   "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}
        msg = self.kc.session.msg("execute_request", content, metadata=meta or {})
        self.kc.shell_channel.send(msg)
        msg_id = msg["header"]["msg_id"]
        outputs = []
        while True:
            message = self.kc.get_iopub_msg(timeout=120)
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            kind, body = message["msg_type"], message["content"]
            if kind == "status" and body["execution_state"] == "idle":
                break
            if kind in ("stream", "display_data", "execute_result", "error"):
                outputs.append(nbformat.v4.output_from_msg(message))
        while True:
            reply = self.kc.get_shell_msg(timeout=120)
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"], outputs

    def stop(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kernel")
    session_file = folder / "lesson.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), session_file)
    started = Kernel(session_file, folder)
    reply, _ = started.run("import torch\nfrom coursekit.checks import check_tensor, check_true")
    assert reply["status"] == "ok", reply
    try:
        yield started
    finally:
        started.stop()


def _text(outputs: list[dict]) -> str:
    parts = []
    for output in outputs:
        if output["output_type"] == "error":
            parts.append("\n".join(output["traceback"]))
        elif output["output_type"] == "stream":
            parts.append(output["text"])
        elif "data" in output:
            parts.append(output["data"].get("text/plain", ""))
    return ANSI.sub("", "\n".join(parts))


def _scored(outputs: list[dict], points: int = 2) -> float:
    """The score nbgrader gives a test cell with these outputs."""
    cell = nbformat.v4.new_code_cell("", outputs=outputs, execution_count=1)
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "x", "points": points,
                                 "solution": False, "locked": True, "schema_version": 3}
    return determine_grade(cell)[0]


STUB = ('def add_one(values):\n    """Return values + 1."""\n'
        "    # YOUR CODE HERE\n    raise NotImplementedError()")
TEST = ('check_tensor("add_one(x)", add_one(torch.tensor([1.0, 2.0])), [2.0, 3.0],\n'
        '             mistakes={"you returned the input unchanged": [1.0, 2.0]})\n'
        'print("Exercise 1 passed.")')


def test_an_unanswered_exercise_is_named_without_a_traceback(kernel):
    reply, _ = kernel.run(STUB, _meta("answer"))
    assert reply["status"] == "ok"
    reply, outputs = kernel.run(TEST, _meta("test"))
    assert reply["status"] == "error" and reply["ename"] == "NotImplementedError"
    errors = [o for o in outputs if o["output_type"] == "error"]
    assert len(errors) == 1 and _scored(outputs) == 0
    lines = ANSI.sub("", "\n".join(errors[0]["traceback"])).splitlines()
    assert lines[0] == "Exercise 1 is not answered yet."
    assert "`add_one`" in lines[1] and "# YOUR CODE HERE" in lines[1]
    assert "Traceback" not in _text(outputs) and "coursekit" not in _text(outputs)


def test_a_failing_check_shows_its_message_first(kernel):
    kernel.run("def add_one(values):\n    return values", _meta("answer"))
    reply, outputs = kernel.run(TEST, _meta("test"))
    assert reply["status"] == "error"
    assert _scored(outputs) == 0
    lines = _text(outputs).splitlines()
    assert lines[0] == "add_one(x) is not what was expected."
    assert lines[1] == "  likely mistake: you returned the input unchanged"
    assert "  expected: [2.0, 3.0]" in lines
    assert lines[-1] == "(failed: the check on line 1 of this cell)"
    text = _text(outputs)
    assert "Traceback" not in text and "checks.py" not in text and "raise CheckFailed" not in text


def test_an_error_in_the_students_own_code_keeps_its_traceback(kernel):
    kernel.run("def add_one(values):\n    return values + undefined_name", _meta("answer"))
    reply, outputs = kernel.run(TEST, _meta("test"))
    assert reply["status"] == "error" and reply["ename"] == "NameError"
    text = _text(outputs)
    assert "Traceback (most recent call last)" in text
    assert "return values + undefined_name" in text
    assert _scored(outputs) == 0


def test_a_passing_test_prints_only_its_success_line(kernel):
    kernel.run("def add_one(values):\n    return values + 1", _meta("answer"))
    reply, outputs = kernel.run(TEST, _meta("test"))
    assert reply["status"] == "ok"
    assert _text(outputs).strip() == "Exercise 1 passed."
    assert _scored(outputs) == 2


def test_a_broken_answer_cell_gives_a_stale_definition_notice(kernel):
    kernel.run("def add_one(values):\n    return values + 1", _meta("answer"))
    reply, _ = kernel.run("def add_one(values)\n    return values + 2", _meta("answer"))
    assert reply["status"] == "error" and reply["ename"] == "SyntaxError"
    reply, outputs = kernel.run(TEST, _meta("test"))
    # The old definition still passes; the notice says that it is the old one.
    assert reply["status"] == "ok"
    text = _text(outputs)
    assert text.startswith("Note: This test checks an old version of your answer: Exercise 1's "
                           "answer cell failed when it last ran (SyntaxError"), text
    assert "Exercise 1 passed." in text
    assert not [o for o in outputs if o["output_type"] == "stream" and o["name"] == "stderr"]
    # Once the answer cell runs again, the notice is gone.
    kernel.run("def add_one(values):\n    return values + 1", _meta("answer"))
    _, outputs = kernel.run(TEST, _meta("test"))
    assert _text(outputs).strip() == "Exercise 1 passed."


def test_an_answer_edited_and_saved_after_it_ran_gives_a_notice(kernel):
    """JupyterLab tells the kernel its notebook (JPY_SESSION_NAME); a save after the answer ran
    that holds another answer means the test checks the older definition."""
    answer = "def add_one(values):\n    return values + 1"
    kernel.run(answer, _meta("answer"))
    time.sleep(0.05)
    _write_session_notebook(kernel, answer.replace("+ 1", "+ 1.0"))
    _, outputs = kernel.run(TEST, _meta("test"))
    assert "answer cell was changed after it last ran" in _text(outputs)
    # Saved again as it ran: no notice.
    _write_session_notebook(kernel, answer)
    _, outputs = kernel.run(TEST, _meta("test"))
    assert _text(outputs).strip() == "Exercise 1 passed."


def _write_session_notebook(kernel, answer_source: str) -> None:
    """Save the kernel's notebook with `answer_source` in exercise 1's answer cell, later than
    the answer cell last ran."""
    path = kernel.session_file
    notebook = nbformat.v4.new_notebook()
    answer = nbformat.v4.new_code_cell(answer_source)
    answer.metadata["nbgrader"] = _meta("answer")["nbgrader"]
    notebook.cells = [answer]
    nbformat.write(notebook, path)
    os.utime(path, (time.time() + 1, time.time() + 1))


def test_a_test_run_before_its_answer_cell_says_so(kernel):
    reply, outputs = kernel.run('check_true(double(2) == 4, "double(2) should be 4")',
                                _meta("test", number=2))
    assert reply["status"] == "error" and reply["ename"] == "NameError"
    lines = _text(outputs).splitlines()
    assert lines[0] == ("Exercise 2's answer cell has not run yet (name 'double' is not "
                        "defined).")
    assert _scored(outputs) == 0


def test_an_assert_in_a_test_cell_shows_its_message_first(kernel):
    kernel.run("def double(x):\n    return x + 2", _meta("answer", number=2))
    reply, outputs = kernel.run('assert double(3) == 6, "double(3) should be 6"',
                                _meta("test", number=2))
    assert reply["status"] == "error" and reply["ename"] == "AssertionError"
    lines = _text(outputs).splitlines()
    assert lines == ["double(3) should be 6", "(failed: the assert on line 1 of this cell)"]


def test_without_jupyterlabs_metadata_an_unanswered_function_is_named(kernel):
    """nbgrader and Validate send no cell metadata: the function is named instead."""
    kernel.run(STUB.replace("add_one", "add_two"))
    reply, outputs = kernel.run("add_two(1)")
    assert reply["status"] == "error"
    assert _text(outputs).splitlines()[0] == "`add_two` is not written yet."
    assert _scored(outputs) == 0
