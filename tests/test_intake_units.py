"""Unit tests of the seams between intake's modules (autograder/intake/, autograder/text.py):
what one module hands the next, checked without a course. Fast: no notebook runs."""

from __future__ import annotations

import json
import os
import zipfile

import pytest

from autograder.intake.archives import extract_zip
from autograder.intake.files import copy_regular_file, read_regular
from autograder.intake.lms import blackboard_receipt, parse_blackboard, receipt_key
from autograder.intake.safe_copy import Limits, Refused, read_small, scan
from autograder.intake.state import read_state, write_state
from autograder.text import has_control, one_line, printable

pytestmark = pytest.mark.fast


ATTEMPT = "Lesson_3_jdoe_attempt_2030-01-02-03-04-05"


@pytest.mark.parametrize("name, key", [(f"{ATTEMPT}.txt", ATTEMPT),
                                       (f"{ATTEMPT}_03_tensor_hooks.ipynb", None),
                                       ("notes.txt", None)])
def test_receipt_key_names_the_attempt_a_receipt_belongs_to(name, key):
    assert receipt_key(name) == key


def test_a_receipt_tells_where_a_username_with_underscores_starts(tmp_path):
    receipt = tmp_path / "Lesson_3_j_doe_attempt_2030-01-02-03-04-05.txt"
    receipt.write_text("Name: Jane Doe (j_doe)\nAssignment: Lesson 3\n")
    key = receipt_key(receipt.name)
    found = {key: blackboard_receipt(receipt)}
    assert found[key] == ("j_doe", "Jane Doe")
    identity = parse_blackboard(f"{key}_03_tensor_hooks.ipynb", found)
    assert (identity.student, identity.assignment) == ("j_doe", "Lesson_3")
    assert parse_blackboard(f"{key}_03_tensor_hooks.ipynb").student == "doe"  # without it


def test_text_helpers_agree_on_control_characters():
    for text in ("a\nb", "a\x1b[31mb", "a\u202eb", "a\u200bb"):
        assert has_control(text) and not has_control(one_line(text))
        assert not has_control(printable(text))
    assert not has_control("José Núñez")


def test_files_are_read_and_copied_only_when_regular(tmp_path):
    source = tmp_path / "a.ipynb"
    source.write_bytes(b"{}")
    (tmp_path / "link.ipynb").symlink_to(source)
    assert read_regular(source, 10) == b"{}"
    with pytest.raises(ValueError, match="symbolic link"):
        read_regular(tmp_path / "link.ipynb", 10)
    with pytest.raises(ValueError, match="larger"):
        read_regular(source, 1)
    with pytest.raises(ValueError, match="symbolic link"):
        copy_regular_file(tmp_path / "link.ipynb", tmp_path / "copy.ipynb")
    assert not (tmp_path / "copy.ipynb").exists()


def test_an_archive_member_outside_it_is_skipped_and_named(tmp_path):
    archive = tmp_path / "class.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("ann/01_x.ipynb", "{}")
        zf.writestr("../evil.ipynb", "{}")
    problems = extract_zip(archive, tmp_path / "out")
    assert (tmp_path / "out" / "ann" / "01_x.ipynb").is_file()
    assert not (tmp_path / "evil.ipynb").exists()
    assert problems == ["../evil.ipynb: skipped (a path outside the archive)"]


def test_state_round_trips_and_an_unreadable_one_is_empty(tmp_path):
    path = tmp_path / "autograded" / "state.json"
    write_state(path, {"ann/01_x.ipynb": {"digest": "abc", "graded": True}})
    assert read_state(path) == {"ann/01_x.ipynb": {"digest": "abc", "graded": True}}
    path.write_text("[not json")
    assert read_state(path) == {}


def test_one_state_file_keeps_both_sections_and_takes_over_the_earlier_two(tmp_path):
    from autograder.intake.state import STATE_FILE, read_notebooks, write_notebooks

    folder = tmp_path / "autograded"
    folder.mkdir()
    # A course graded before the state was one file: its two files, as they were written.
    (folder / ".autograder-graded.json").write_text(json.dumps(
        {"version": 1, "graded": {"ann/01_x/01_x.ipynb": {"digest": "abc", "graded": True}}}))
    (folder / ".autograder-notebooks.json").write_text(json.dumps(
        {"version": 1, "notebooks": {"ann": {"01_x": "def"}}}))
    path = folder / STATE_FILE
    assert read_state(path) == {"ann/01_x/01_x.ipynb": {"digest": "abc", "graded": True}}
    assert read_notebooks(path) == {"ann": {"01_x": "def"}}
    write_notebooks(path, {"ann": {"01_x": "123"}})  # the other section is kept
    assert sorted(p.name for p in folder.iterdir()) == [STATE_FILE]
    assert read_state(path) == {"ann/01_x/01_x.ipynb": {"digest": "abc", "graded": True}}
    write_state(path, {})
    assert read_notebooks(path) == {"ann": {"01_x": "123"}} and read_state(path) == {}


def test_safe_copy_scans_without_following_links(tmp_path):
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "a.ipynb").write_text("{}")
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        found = scan(fd, os.getuid(), Limits(10, 100, 100), [])
        assert found.files == ["a.ipynb"]
        (folder / "link").symlink_to("/etc/passwd")
        with pytest.raises(Refused, match="symbolic link"):
            scan(fd, os.getuid(), Limits(10, 100, 100), [])
    finally:
        os.close(fd)
    with pytest.raises(Refused, match="symbolic link"):
        read_small(str(folder / "link"), 100)
