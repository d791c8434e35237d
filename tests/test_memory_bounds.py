"""The grading machine's memory against what a student sends: a valid notebook, or a line on a
sandbox's events pipe, is counted (`autograder.intake.jsonscan`) before it is parsed, and one
that holds far more than a lesson is refused with a reason instead of being built in memory.

Memory is measured as the peak resident size (ru_maxrss) of a fresh Python that reads one
file, against the same Python's peak before it reads it; no clock decides anything here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.intake.jsonscan import scan
from autograder.intake.validate import MAX_OTHER_BYTES, read_notebook

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parent.parent
LESSON = REPO / "notebooks" / "01_leaf_and_intermediate" / "01_leaf_and_intermediate.ipynb"
NEST = "[" * 89 + "]" * 89  # empty lists nested 89 deep: some 32 bytes of objects per byte


def _with_metadata(path: Path, value_json: str) -> Path:
    """The lesson's notebook with a notebook-level metadata field whose JSON is `value_json`."""
    nb = json.loads(LESSON.read_text(encoding="utf-8"))
    nb["metadata"]["extra"] = "PLACEHOLDER"
    path.write_text(json.dumps(nb, indent=1).replace('"PLACEHOLDER"', value_json),
                    encoding="utf-8")
    return path


_MEASURE = """
import resource, sys
from pathlib import Path
from autograder.intake.validate import read_notebook
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
nb, reason = read_notebook(Path(sys.argv[1]))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) >> 10)
print(reason)
"""


def _read_in_a_fresh_python(path: Path) -> tuple[int, str]:
    """(MiB the read added to a fresh Python's peak, the reason it gave)."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], cwd=REPO,
                          capture_output=True, text=True, check=True)
    grown, reason = done.stdout.split("\n", 1)
    return int(grown), reason.strip()


def test_a_notebook_of_nested_empty_lists_is_refused_before_it_is_built(tmp_path):
    """Red team, round 5: a metadata field of empty lists nested 90 deep (a valid notebook
    under the size cap) took intake to 14 GiB. 4 MB of it cost over 500 MiB before."""
    path = _with_metadata(tmp_path / "bomb.ipynb", "[" + ",".join([NEST] * 22_000) + "]")
    assert 3_900_000 < path.stat().st_size < 4_100_000
    grown, reason = _read_in_a_fresh_python(path)
    assert grown < 64, f"reading a 4 MB notebook grew the reader by {grown} MiB"
    assert "values in its outputs and metadata" in reason and "Clear its outputs" in reason


def test_too_many_bytes_outside_the_cells_sources_are_refused(tmp_path):
    text = json.dumps("x" * (MAX_OTHER_BYTES + 1))
    nb, reason = read_notebook(_with_metadata(tmp_path / "big.ipynb", text))
    assert nb is None and "MB in its outputs and metadata" in reason


def test_a_lesson_notebook_and_its_executed_solution_are_read():
    for path in (LESSON, REPO / "solutions" / "07_hooks_in_practice" /
                 "07_hooks_in_practice.ipynb"):
        nb, reason = read_notebook(path)
        assert nb is not None and reason is None, reason


def _values(data) -> tuple[int, int]:
    """(containers and values, keys included; the deepest nesting) of parsed JSON."""
    count, deepest, stack = 0, 0, [(data, 1)]
    while stack:
        item, depth = stack.pop()
        count += 1
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return count, deepest


@pytest.mark.parametrize("text", [
    '{"a": [1, 2, {"b": "x,]}[\\"\\\\"}], "c": null, "d": [[], {}]}',
    '[true, false, 1.5e3, -2, "\\u005b", [[[["deep"]]]]]',
    LESSON.read_text(encoding="utf-8"),
])
def test_the_count_is_what_parsing_builds(text):
    """The scan counts what `json.loads` builds, whatever brackets strings hold."""
    data = text.encode()
    found = scan(data, 10 ** 9, 10 ** 6)
    assert found.over == "" and (found.items, found.depth) == _values(json.loads(data))


def test_the_scan_stops_at_its_caps_and_tells_sources_apart():
    assert scan(b"[" * 50 + b"]" * 50, 10 ** 6, 10).over == "depth"
    assert scan(b"[" + b"1, " * 1000 + b"1]", 100, 10).over == "items"
    cell = b'{"cells": [{"source": ["ab", "cd"], "metadata": {"k": "xyz"}}]}'
    found = scan(cell, 100, 10, notebook=True)
    assert (found.source_bytes, found.other_bytes) == (4, 3)
    assert scan(cell, 100, 10, notebook=True, max_other_bytes=2).over == "other_bytes"


def test_a_text_of_unclosed_strings_is_scanned_in_one_pass():
    """A quote that never closes made the scanner try the string again at every later quote
    (2 MB of `\\"` took hours of CPU); it now stops at the first such quote, having counted
    nothing after it, and json.loads rejects the text."""
    from autograder.intake.jsonscan import scan

    found = scan(b'"' + b'\\"' * 5000, 10**6, 100)
    assert found.items == 0 and found.over == "", found
    found = scan(b'[1, 2, "open' + b'\\"' * 5000, 10**6, 100)
    assert found.items == 3, found


def test_a_source_given_twice_is_counted_before_it_is_parsed(tmp_path):
    """json.loads keeps the last of two "source" keys: a first one of 20 MB was built in
    memory and then passed the size check of the parsed text, which saw the second."""
    from autograder.intake.validate import count_problem

    cell = ('{"cell_type":"code","metadata":{},"outputs":[],"execution_count":null,'
            '"source":"%s","source":"x = 1"}' % ("a" * (20 << 20)))
    path = tmp_path / "twice.ipynb"
    path.write_text('{"cells":[%s],"metadata":{},"nbformat":4,"nbformat_minor":5}' % cell)
    problem = count_problem(path)
    assert problem and "characters of text in all" in problem, problem


_SCAN_UNDER_A_CPU_LIMIT = """
import resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_CPU, (60, 60))
from autograder.dispatch.cluster_guard import read_reply
from autograder.intake.validate import read_notebook
nb, reason = read_notebook(Path(sys.argv[1]))
print(len(nb["cells"]) if nb else reason)
print(read_reply(b'{"refused": null, "warm": true}' + b" " * (4 << 20)))
"""


def test_json_that_ends_in_megabytes_of_spaces_is_counted_in_one_pass(tmp_path):
    """Red team (the ways in): each space at the end of a JSON text began a new try of the
    scanner's pattern that ran to the end of the text, so the time grew with the square of
    their number (80 KB of them took 50 s of CPU). A student's notebook ending in 8 MB of
    spaces (valid JSON, far under the size cap) held the grading of the whole batch for days,
    and a cluster peer's reply to the command (a worker's warm answer, a chunk's grades)
    ending in 4 MB held the command as long. Measured by what a fresh Python does under a
    60-second CPU limit (the scan takes well under a second), never by a clock."""
    nb = json.loads(LESSON.read_text(encoding="utf-8"))
    path = tmp_path / "spaces.ipynb"
    path.write_text(json.dumps(nb, indent=1) + " " * (8 << 20), encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", _SCAN_UNDER_A_CPU_LIMIT, str(path)], cwd=REPO,
                          capture_output=True, text=True)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split("\n")[:2] == [str(len(nb["cells"])),
                                           "{'refused': None, 'warm': True}"], done.stdout
