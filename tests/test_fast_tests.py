"""The Makefile's FAST_TESTS (`make test-fast`): the unit-test files only, none of whose tests
runs a notebook, starts a grader or the hub, or takes more than a few seconds. A new test file
goes in by hand; these tests hold the files checked so far to where they were put."""

from __future__ import annotations

import re

from conftest import COURSE_ROOT

# Test files added since the list was last gone through (commit 334d803), timed with
# `--durations` (each test under 2 s on a busy two-core machine), that belong in it.
FAST = {"lesson_text", "memory_bounds", "onsubmit_batch", "onsubmit_hostile", "sandbox_leaks",
        "cluster_settings", "fast_tests"}
# The others added since, and why they stay out.
SLOW = {
    "attacks_hub": "makes accounts and runs the hub's instructors' commands as them",
    "hub_cgroups": "starts the feedback-on-submit service and sandboxed notebooks in cgroups",
    "lesson_feedback_08": "runs lesson 08's notebook (its DDP exercise starts two processes)",
    "onsubmit_report": "grades on submit (about 9 s) and drives a browser",
    "sandbox_filter": "enters the sandbox and runs torch.distributed under its filter",
    "sandbox_loopback": "confines two notebooks side by side",
    "socket_queues": "runs a notebook's probe in the sandbox",
    "thread_count": "runs every solution notebook again with nbval",
}


def fast_tests() -> set[str]:
    """The files FAST_TESTS names, as "name" for tests/test_name.py."""
    text = (COURSE_ROOT / "Makefile").read_text(encoding="utf-8")
    found = re.search(r"^FAST_TESTS := \$\(addprefix tests/test_,\$\(addsuffix \.py,(.*?)\)\)\s*$",
                      text, re.M | re.S)
    assert found, "the Makefile's FAST_TESTS is not the list of names it was"
    return set(found[1].replace("\\\n", " ").split())


def test_every_file_fast_tests_names_exists():
    missing = [n for n in fast_tests() if not (COURSE_ROOT / "tests" / f"test_{n}.py").is_file()]
    assert not missing, f"FAST_TESTS names test files that do not exist: {missing}"


def test_the_new_unit_test_files_are_in_fast_tests_and_the_slow_ones_are_not():
    names = fast_tests()
    assert FAST <= names, f"not in FAST_TESTS: {sorted(FAST - names)}"
    assert not names & set(SLOW), f"slow, yet in FAST_TESTS: {sorted(names & set(SLOW))}"
