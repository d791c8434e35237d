"""A run's options, tasks and results as plain data, the command line's options, and the order
in which the local pool hands tasks to its workers."""

from __future__ import annotations

import json

import pytest

from autograder.dispatch.pool import _Queue
from autograder.outputs import Report
from autograder.tasks import DEFAULT_MEMORY_LIMIT, GradingOptions, Result, Task

pytestmark = pytest.mark.fast


def test_options_and_tasks_cross_a_process_as_json_and_come_back_equal():
    options = GradingOptions(course_root="/course", out="/out", timeout=20,
                             memory_limit=512 << 20, lessons=("01_a", "02_b"), jobs=2)
    task = Task(student="ann", lesson="01_a", digest="d1", path="/class/ann.ipynb",
                notes=("two files: the newest is graded",), classmates={"ann": "d1", "bo": "d2"})
    assert GradingOptions.from_dict(json.loads(json.dumps(options.to_dict()))) == options
    assert Task.from_dict(json.loads(json.dumps(task.to_dict()))) == task


def test_plain_data_that_is_no_task_or_result_is_refused():
    try:
        Task.from_dict({"student": "ann", "lesson": "01_a", "command": "rm -rf /"})
    except ValueError as err:
        assert "command" in str(err)
    else:
        raise AssertionError("a task with an unknown key was accepted")
    assert Result.from_dict({"student_id": "ann", "lesson": "01_a", "__class__": "x"}) is None
    assert Result.from_dict(["ann", "01_a"]) is None
    assert Result.from_dict({"lesson": "01_a"}) is None  # no student_id
    assert Result.from_dict({"student_id": "ann", "lesson": "01_a", "score": 2.0}).score == 2.0


def test_a_failed_task_keeps_its_notes():
    task = Task(student="ann", lesson="01_a", notes=("a note",))
    result = Result.failed(task, "The grading process died.", log="exit code -9")
    assert (result.student_id, result.lesson, result.status) == ("ann", "01_a", "error")
    assert result.notes == ["a note"] and result.log == "exit code -9"


def test_the_command_line_gives_the_memory_limit_in_bytes_once(tmp_path, monkeypatch):
    import autograder.grading
    from autograder.__main__ import main

    seen = []

    def grade_class(submissions, options, **_):
        seen.append(options)
        return Report([], 0.0, tmp_path)

    monkeypatch.setattr(autograder.grading, "grade_class", grade_class)
    out = str(tmp_path / "out")
    assert main(["grade", str(tmp_path), "--out", out, "--memory-limit", "512M",
                 "--lessons", "01_a", "02_b", "--no-progress"]) == 0
    assert main(["grade", str(tmp_path), "--out", out, "--timeout", "7", "-j", "3"]) == 0
    first, second = seen
    assert first.memory_limit == 512 << 20 and first.lessons == ("01_a", "02_b")
    assert first.timeout == 0 and first.jobs == 0 and first.cluster == ""  # the defaults
    assert second.memory_limit == DEFAULT_MEMORY_LIMIT == 4 << 30
    assert (second.timeout, second.jobs, second.out) == (7, 3, out)


def test_a_worker_keeps_to_its_lesson_and_else_takes_one_nobody_is_on():
    tasks = [Task(student=f"s{i}", lesson=lesson) for lesson in ("01_a", "02_b")
             for i in range(3)]
    queue = _Queue(tasks)
    assert queue.take("02_b", set()).lesson == "02_b"  # its own lesson first
    assert queue.take(None, {"01_a"}).lesson == "02_b"  # a lesson no other worker is on
    queue.put_back(tasks[3])
    assert [t.student for t in queue.lessons["02_b"]] == ["s0", "s2"]
    assert len(queue) == 5 and queue.take(None, {"01_a", "02_b"}).lesson == "01_a"
