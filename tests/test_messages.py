"""The grader's reader of a sandbox's reports (autograder.trusted.messages), over real pipes.

Each test plays a notebook and its runner host: a thread writes the notebook's lines on a real
events pipe, another the host's messages on a real control pipe, and a real process stands for
the notebook (the grader's kill ends it, and its end is reported as the host reports it). The
rules are those the end-to-end attack suites (tests/test_attacks_*.py) check through the
grading command; here each takes a fraction of a second and runs no notebook. No rule below
depends on a clock: the limits are far away, except where a test moves the notebook's CPU time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autograder import protocol
from autograder.trusted.messages import Messages, collect
from autograder.trusted.run import Run
from autograder.trusted.payload import Payload

pytestmark = pytest.mark.fast

CELLS = [(0, "a = 1"), (2, "b = 2"), (5, "c = 3")]


def line(message: dict) -> bytes:
    return json.dumps(message).encode() + b"\n"


def done(index: int, outputs=(), **extra) -> dict:
    return {"event": protocol.DONE, "index": index, "outputs": list(outputs),
            "execution_count": 1, "timed_out": False, "seconds": 0.5, **extra}


def finished(*cells: int) -> list[dict]:
    """A notebook's lines when every cell in `cells` ends and it has nothing more to say."""
    return [*(done(i) for i in cells), {"event": protocol.CELLS_DONE}, {"event": protocol.END}]


def _write(fd: int, chunks) -> None:
    try:
        for chunk in chunks:
            data = chunk
            while data:
                data = data[os.write(fd, data):]
    except OSError:  # the grader stopped reading and closed its end
        pass


def report(notebook: list, *, request: dict | None = None, before=(), after=(),
           host_kills: bool = False, limit_hit: bool = False, timeout: float = 60.0,
           payload: bool = False) -> tuple[Run, bytes]:
    """Run the grader's reader over a notebook that writes `notebook` (messages, or raw bytes)
    on its events pipe, then closes it. Its host first sends `before`, then "forked" (a real
    process, which the grader's kill ends), then `after`; with `host_kills` it ends the process
    itself (as on reaching the memory limit); it reports the end with `limit_hit` as the
    memory's. Returns the Run and what the notebook could read of its payload."""
    request = request or {"cells": CELLS, "prologue": 0}
    events_r, events_w = os.pipe()
    control_r, control_w = os.pipe()
    payload_r, payload_w = os.pipe() if payload else (None, None)
    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    forked = threading.Event()  # the host's messages come first, as the host sends them

    def notebook_side() -> None:
        forked.wait(30)
        _write(events_w, [m if isinstance(m, bytes) else line(m) for m in notebook])
        os.close(events_w)

    def host_side() -> None:
        _write(control_w, [line(m) for m in [*before, {"event": protocol.FORKED,
                                                         "pid": child.pid, "cpu_file": None},
                                              *after]])
        forked.set()
        if host_kills:
            child.kill()
        code = child.wait()
        _write(control_w, [line({"event": protocol.EXITED, "pid": child.pid,
                                 "status": _status(code), "oom": host_kills,
                                 "memory_limit_hit": limit_hit or host_kills})])

    threads = [threading.Thread(target=notebook_side), threading.Thread(target=host_side)]
    writer = Payload(payload_w, request) if payload else None
    for thread in threads:
        thread.start()
    try:
        run = collect(events_r, control_r, request, timeout, 600, writer)
    finally:
        child.kill()
        os.close(events_r)
        os.close(control_r)
        for thread in threads:
            thread.join(30)
        os.close(control_w)
    held = b""
    if writer is not None:
        writer.close()  # its thread closes the write end
        while chunk := os.read(payload_r, 1 << 20):
            held += chunk
        os.close(payload_r)
    return run, held


def _status(code: int) -> int:
    """A Popen return code as os.waitpid reports it."""
    return -code if code < 0 else code << 8


# --------------------------------------------------------------------------------------------
# A notebook that behaves

def test_a_notebook_that_runs_every_cell_and_ends():
    run, _ = report(finished(0, 2, 5))
    assert (run.outcome, run.cell, run.finished, run.forged) == ("ok", None, True, False)
    assert sorted(run.executed) == [0, 2, 5]
    assert run.cell_seconds == pytest.approx(1.5)


def test_its_observations_are_kept_only_for_the_runs_asked():
    observe = {"runs": [["example", 0]], "later": []}
    run, _ = report([*(done(i) for i in (0, 2, 5)), {"event": protocol.CELLS_DONE},
                     {"event": protocol.OBSERVING},
                     {"event": protocol.OBSERVATIONS, "outcomes": {
                         "example/0": {"v": 1}, "example/0/mistake/1": {"v": 2},
                         "other/7": {"v": 3}, "example/01": {"v": 4}}},
                     {"event": protocol.END}],
                    request={"cells": CELLS, "prologue": 0, "observe": observe})
    assert run.outcome == "ok" and run.observing
    assert run.outcomes == {"example/0": {"v": 1}, "example/0/mistake/1": {"v": 2}}


def test_a_second_report_of_its_observations_changes_nothing():
    observe = {"runs": [["example", 0]], "later": []}
    run, _ = report([*(done(i) for i in (0, 2, 5)), {"event": protocol.OBSERVING},
                     {"event": protocol.OBSERVATIONS, "outcomes": {"example/0": {"v": 1}}},
                     {"event": protocol.OBSERVATIONS, "outcomes": {"example/0": {"v": 2}}},
                     {"event": protocol.END}],
                    request={"cells": CELLS, "prologue": 0, "observe": observe})
    assert run.outcomes == {"example/0": {"v": 1}}


# --------------------------------------------------------------------------------------------
# What it may send that is no message, or not its own

@pytest.mark.parametrize("junk", [b"not json", b"[1, 2]", b'"done"', b"{", b"[" * 100_000,
                                  b'{"event": {"done": 1}}', b'{"event": ["done"]}',
                                  b'{"event": 5}', b'{"event": "__init__"}',
                                  b'{"event": "forked", "pid": 1}',
                                  b'{"event": "exited", "status": 0}',
                                  b'{"event": "oom"}', b'{"event": "failed", "detail": "x"}',
                                  b'{"event": "prologue", "executed": []}'])
def test_lines_that_are_no_message_of_a_notebook_are_ignored(junk):
    """Invalid JSON, JSON nested past Python's limit, values that are no message, events of
    no name or of the host's (the notebook cannot speak on the control pipe) change nothing."""
    run, _ = report([done(0), junk + b"\n", done(2), junk + b"\n", done(5),
                     {"event": protocol.END}])
    assert (run.outcome, run.finished, sorted(run.executed)) == ("ok", True, [0, 2, 5])
    assert run.pid is not None and run.pid != 1


@pytest.mark.parametrize("bad", [{"index": 2}, {"index": "2", "outputs": []},
                                 {"index": 2, "outputs": "x"}, {"index": 9, "outputs": []},
                                 {"index": 5, "outputs": []}])
def test_a_cell_end_that_is_malformed_or_not_awaited_is_ignored(bad):
    run, _ = report([done(0), dict({"event": protocol.DONE}, **bad), {"event": protocol.END}])
    assert sorted(run.executed) == [0] and run.outcome == "ok"


def test_a_cell_end_sent_twice_is_caught_and_voids_what_followed():
    """A notebook that forges a cell's end (to re-arm the grader's clock) is stopped: what it
    claimed after the earlier end is void, and so are its observations."""
    run, _ = report([done(0), done(2), done(0), done(5), {"event": protocol.END}])
    assert run.forged and run.outcome == "died" and run.cell == 0
    assert "forged" in run.detail
    assert sorted(run.executed) == [0] and run.outcomes is None and not run.finished


def test_nothing_it_writes_after_its_end_counts():
    run, _ = report([done(0), {"event": protocol.END}, done(2), done(5),
                     {"event": protocol.EXIT, "index": 5},
                     {"event": protocol.CRASH, "detail": "late"}])
    assert (run.outcome, run.finished, sorted(run.executed), run.detail) == (
        "ok", True, [0], "")


def test_closing_its_pipe_early_is_a_death_at_the_awaited_cell():
    run, _ = report([done(0)])
    assert (run.outcome, run.cell, run.finished) == ("died", 2, False)
    assert run.detail.startswith("it was ended by SIGKILL")


def test_a_crash_report_is_kept_short_and_after_the_graders_words():
    run, _ = report([done(0), {"event": protocol.CRASH, "detail": "x" * 10_000 + "END"}])
    first, rest = run.detail.split("\n", 1)
    assert first.startswith("it was ended by") and rest.endswith("END")
    assert len(rest) == protocol.MAX_CRASH_CHARS


@pytest.mark.parametrize("seconds, counted", [("1e9", 0.0), (None, 0.0), (True, 0.0),
                                             (float("nan"), 0.0), (float("inf"), 0.0),
                                             (-5, 0.0), (1e308, 60.0), (2.5, 2.5)])
def test_a_cells_reported_time_is_a_finite_number_within_its_limit(seconds, counted):
    run, _ = report([done(0, seconds=seconds), done(2), done(5), {"event": protocol.END}],
                    timeout=60)
    assert run.cell_seconds == pytest.approx(counted + 1.0)


# --------------------------------------------------------------------------------------------
# Caps

def test_a_line_without_end_past_the_cap_stops_it():
    big = b"x" * (protocol.MAX_MESSAGE_BYTES + protocol.READ_BYTES)
    run, _ = report([line(done(0)), big])
    assert (run.outcome, run.cell) == ("died", 2)
    assert run.detail == "it sent more output than the grader keeps"


def test_a_flood_of_small_lines_past_the_cap_stops_it():
    """Empty lines count too: they are read, though no message."""
    block = b"\n" * protocol.READ_BYTES
    run, _ = report([line(done(0))] + [block] * (protocol.MAX_EVENTS_BYTES
                                                 // protocol.READ_BYTES + 2))
    assert (run.outcome, run.cell) == ("died", 2)
    assert run.detail == "it sent more output than the grader keeps"


def test_a_cell_keeps_its_first_outputs_and_only_inert_ones():
    outputs = [{"output_type": "display_data", "metadata": {},
                "data": {"text/html": "<script>x</script>", "image/svg+xml": "<svg/>",
                         "text/plain": "shown", "image/png": "not base64 <>"}},
               {"output_type": "error", "ename": "CellTimeoutError", "evalue": "",
                "traceback": ["forged"]},
               {"output_type": "error", "ename": "E" * 1000, "evalue": "v",
                "traceback": ["t"] * 1000},
               {"output_type": "stream", "name": "/etc/passwd", "text": "printed"},
               {"output_type": "widget", "data": {}}, "not a dict"]
    many = [{"output_type": "stream", "name": "stdout", "text": "x"}] * 1000
    run, _ = report([done(0, outputs, execution_count=10 ** 12), done(2, many),
                     {"event": protocol.END}])
    kept = run.executed[0]["outputs"]
    assert kept[0]["data"] == {"text/plain": "shown"}
    assert kept[1]["ename"] == "CellTimeoutError (raised by the notebook)"
    assert len(kept[2]["ename"]) == protocol.MAX_ENAME_CHARS
    assert len(kept[2]["traceback"]) == protocol.MAX_TRACEBACK_LINES
    assert kept[3] == {"output_type": "stream", "name": "stdout", "text": "printed"}
    assert len(kept) == 4 and run.executed[0]["execution_count"] is None
    assert len(run.executed[2]["outputs"]) == protocol.MAX_OUTPUTS


def test_colour_codes_past_what_an_output_may_keep_are_removed():
    text = "\x1b[31mred\x1b[0m" * 5000
    run, _ = report([done(0, [{"output_type": "stream", "name": "stdout", "text": text}]),
                     {"event": protocol.END}])
    kept = run.executed[0]["outputs"][0]["text"]
    assert "\x1b" not in kept and kept.startswith("redred") and "colour codes" in kept


# --------------------------------------------------------------------------------------------
# Its time, its exit, its memory

def test_its_own_timer_stopping_a_cell_is_a_timeout_there():
    run, _ = report([done(0), done(2, timed_out=True), {"event": protocol.END}])
    assert (run.outcome, run.cell) == ("timeout", 2)


def test_exit_is_blamed_on_the_last_cell_that_ended():
    run, _ = report([done(0), done(2), {"event": protocol.EXIT, "index": 2},
                     {"event": protocol.END}])
    assert (run.outcome, run.cell) == ("exit", 2)


def test_its_cpu_time_past_a_cells_limit_is_a_timeout_at_the_awaited_cell(tmp_path):
    """The grader reads the notebook's CPU time from a file its host names (a cgroup's, or the
    one the host keeps from /proc): a notebook that computes past a cell's limit is stopped
    whatever it reports, its pipe quiet and open, long before the wall clock's limit."""
    cpu = tmp_path / "autograder-cpu-1"
    cpu.write_text("usage_usec 1000000\n")
    events_r, events_w = os.pipe()
    control_r, control_w = os.pipe()
    child = subprocess.Popen(["sleep", "600"], start_new_session=True)
    os.write(control_w, line({"event": protocol.FORKED, "pid": child.pid,
                              "cpu_file": str(cpu)}))
    os.write(events_w, line(done(0)))
    reader = Messages({"cells": CELLS, "prologue": 0}, 30.0, 600)
    found = {}
    collector = threading.Thread(target=lambda: found.update(
        run=reader.collect(events_r, control_r)))
    collector.start()
    try:
        for _ in range(600):  # once the grader awaits the second cell, the notebook computes
            if reader.position == 1:
                break
            time.sleep(0.05)
        cpu.write_text(f"usage_usec {1_000_000 + 40_000_000}\n")
        code = child.wait(60)  # killed by the grader (its wall clock allows 303 s)
        os.write(control_w, line({"event": protocol.EXITED, "pid": child.pid,
                                  "status": _status(code)}))
        collector.join(60)
    finally:
        child.kill()
        collector.join(60)
        for fd in (events_r, events_w, control_r, control_w):
            os.close(fd)
    run = found["run"]
    assert (run.outcome, run.cell, run.budget_spent) == ("timeout", 2, False)
    assert sorted(run.executed) == [0]


def test_memory_reaching_the_limit_is_memorys_at_the_awaited_cell():
    run, _ = report([], after=[{"event": protocol.OOM}], host_kills=True)
    assert (run.outcome, run.cell) == ("oom", 0)


def test_a_death_once_the_memory_limit_was_hit_is_memorys():
    run, _ = report([done(0), done(2)], limit_hit=True)
    assert (run.outcome, run.cell) == ("oom", 5)


def test_a_host_that_could_not_start_it_is_a_death():
    events_r, events_w = os.pipe()
    control_r, control_w = os.pipe()
    os.write(control_w, line({"event": protocol.FAILED, "detail": "Traceback ..."}))
    try:
        run = collect(events_r, control_r, {"cells": CELLS, "prologue": 0}, 60, 600)
    finally:
        for fd in (events_r, events_w, control_r, control_w):
            os.close(fd)
    assert (run.outcome, run.detail) == ("died", "the grader could not start it")


# --------------------------------------------------------------------------------------------
# The shared prologue, and the payload

def test_a_shared_prologues_cells_count_as_ended_and_only_those():
    prologue = {"event": protocol.PROLOGUE, "executed": [done(0, seconds=2.0),
                                                          done(2, seconds=3.0), done(5)]}
    run, _ = report([done(2), done(5), {"event": protocol.END}], before=[prologue],
                    request={"cells": CELLS, "prologue": 1})
    assert run.outcome == "ok" and sorted(run.executed) == [0, 2, 5]
    assert (run.shared_seconds, run.cell_seconds) == (2.0, 1.0)


def test_a_lost_prologue_runs_every_cell_again():
    prologue = {"event": protocol.PROLOGUE, "executed": [done(0, seconds=2.0)]}
    run, _ = report(finished(0, 2, 5), before=[prologue, {"event": protocol.PROLOGUE_LOST}],
                    request={"cells": CELLS, "prologue": 1})
    assert run.outcome == "ok" and run.shared_seconds == 0.0 and run.cell_seconds == 1.5


def test_the_scenarios_are_sent_only_once_every_cell_has_ended():
    observe = {"source": "SCENARIOS", "filename": "<scenarios>", "mistakes": False,
               "runs": [["example", 0]], "later": [["hidden", 42]]}
    request = {"cells": CELLS, "prologue": 0, "observe": observe}
    early = [done(0), {"event": protocol.CELLS_DONE}, {"event": protocol.OBSERVING},
             {"event": protocol.OBSERVED, "outcomes": {"example/0": {"v": 1}}},
             {"event": protocol.END}]
    run, held = report(early, request=request, payload=True)
    assert b"SCENARIOS" not in held and b"hidden" not in held
    assert json.loads(held)[protocol.PAYLOAD_CELLS] == [list(c) for c in CELLS]
    assert not run.observing and run.outcomes is None


def test_observations_before_its_cells_have_ended_count_for_nothing():
    observe = {"runs": [["example", 0]], "later": []}
    run, _ = report([done(0), {"event": protocol.OBSERVING},
                     {"event": protocol.OBSERVATIONS, "outcomes": {"example/0": {"v": 1}}},
                     done(2), done(5), {"event": protocol.END}],
                    request={"cells": CELLS, "prologue": 0, "observe": observe})
    assert run.outcomes is None and not run.observing and run.outcome == "ok"


def test_its_own_timer_stopping_the_scenarios_is_a_timeout_of_no_cell():
    observe = {"runs": [["example", 0]], "later": []}
    run, _ = report([*(done(i) for i in (0, 2, 5)), {"event": protocol.OBSERVING},
                     {"event": protocol.OBSERVING_TIMED_OUT}],
                    request={"cells": CELLS, "prologue": 0, "observe": observe})
    assert (run.outcome, run.cell, run.observing, run.outcomes) == ("timeout", None, True, None)


def test_the_event_names_are_the_protocols():
    """Every message the reader acts on is one the protocol lists, on its own pipe."""
    reader = Messages({"cells": CELLS}, 60, 600)
    assert set(reader.on_event) == set(protocol.NOTEBOOK_EVENTS) - {protocol.START}
    assert set(reader.on_control) == set(protocol.CONTROL_EVENTS)


# --------------------------------------------------------------------------------------------
# Lines counted before they are parsed (red team, round 5: a 46 MiB line of nested lists took
# a worker to 2.6 GiB; the notebook's own cost was under a second)

_NESTED_LINE = """
import json, resource, sys
from autograder import protocol
from autograder.trusted.messages import Messages
line = (b'{"event": "done", "index": 0, "outputs": [' + b"[[[[[[[[]]]]]]]]," * 1_500_000
        + b'[]]}')
messages = Messages({"cells": [(0, "a = 1"), (2, "b = 2")], "prologue": 0}, 60.0, 600.0)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
messages.notebook_lines([line])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) >> 10)
print(json.dumps([messages.run.outcome, messages.run.detail, sorted(messages.run.executed)]))
"""


def test_a_line_of_nested_lists_is_refused_before_it_is_parsed():
    """A 25 MB cell end of nested empty lists (under the message cap): parsing it grew the
    reader by over 600 MiB; now it is counted and the notebook stopped."""
    done_ = subprocess.run([sys.executable, "-c", _NESTED_LINE], capture_output=True, text=True,
                           check=True, cwd=Path(__file__).resolve().parent.parent)
    grown, result = done_.stdout.split("\n", 1)
    assert int(grown) < 64, f"one line grew the reader by {grown} MiB"
    assert json.loads(result) == ["died", "it sent more output than the grader keeps", []]


def test_events_other_than_the_outcomes_get_a_much_smaller_cap():
    padded = {"event": protocol.CELLS_DONE, "pad": ["x"] * (protocol.MAX_OTHER_EVENT_VALUES + 1)}
    run, _ = report([done(0), done(2), done(5), padded, {"event": protocol.END}])
    assert (run.outcome, run.detail) == ("died", "it sent more output than the grader keeps")
    long = {"event": protocol.CELLS_DONE, "pad": "x" * protocol.MAX_OTHER_EVENT_BYTES}
    run, _ = report([done(0), done(2), done(5), long, {"event": protocol.END}])
    assert run.outcome == "died" and not run.finished


def test_outcomes_of_the_size_scenarios_may_report_are_read():
    """A scenario may report 200,000 tensor elements: the outcomes' caps are far above that."""
    observe = {"runs": [["example", 0], ["example", 1]], "later": []}
    tensor = {"__tensor__": {"dtype": "float32", "shape": [200_000],
                             "data": [0.5] * 200_000}}
    outcomes = {"example/0": {"observations": {"t": tensor}},
                "example/1": {"observations": {"t": tensor, "items": [[1, 2]] * 5_000}}}
    run, _ = report([*(done(i) for i in (0, 2, 5)), {"event": protocol.OBSERVING},
                     {"event": protocol.OBSERVATIONS, "outcomes": outcomes},
                     {"event": protocol.END}],
                    request={"cells": CELLS, "prologue": 0, "observe": observe})
    assert run.outcome == "ok" and run.outcomes == outcomes


def test_a_visible_runs_fresh_start_outcome_is_kept_and_no_other_key():
    """The outcome of a visible example run on a fresh start ("<run>/fresh") is what
    the page reads the test cell's words from; it is kept, and only for a run asked for."""
    from autograder.trusted.messages import _outcomes_of

    reported = {"a/0": 1, "a/0/fresh": 2, "a/0/mistake/1": 3, "b/0/fresh": 4,
                "a/0/freshly": 5, "a/0/fresh/fresh": 6, "fresh": 7}
    assert _outcomes_of(reported, [("a", 0)]) == {"a/0": 1, "a/0/fresh": 2, "a/0/mistake/1": 3}


def test_the_fresh_start_reported_after_the_later_runs_is_kept():
    """The fresh start runs after every scored run (what the answer cell changes when run
    again must reach no verdict), so the visible run's "<run>/fresh" comes in the last report,
    with the later runs'; the visible run's own outcome there (not its first report's) is not
    kept."""
    observe = {"source": "SCENARIOS", "filename": "<scenarios>", "mistakes": False,
               "runs": [["example", 0]], "later": [["hidden", 42]]}
    run, _ = report([*(done(i) for i in (0, 2, 5)), {"event": protocol.CELLS_DONE},
                     {"event": protocol.OBSERVING},
                     {"event": protocol.OBSERVED, "outcomes": {"example/0": {"v": 1}}},
                     {"event": protocol.OBSERVATIONS, "outcomes": {
                         "hidden/42": {"v": 2}, "example/0/fresh": {"v": 3},
                         "example/0": {"v": 4}, "other/0/fresh": {"v": 5}}},
                     {"event": protocol.END}],
                    request={"cells": CELLS, "prologue": 0, "observe": observe}, payload=True)
    assert run.outcomes == {"example/0": {"v": 1}, "hidden/42": {"v": 2},
                            "example/0/fresh": {"v": 3}}
