"""A student's free metadata never reaches grading nor autograded/ (red team, round 5: a
metadata field of nested empty lists went into the autograded copy, 50 times larger by
nbgrader's indentation), and the copy nbgrader reads is counted before nbgrader parses it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from nbgrader.preprocessors import NbGraderPreprocessor

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course  # noqa: E402

from autograder.nbgrader_glue import patches  # noqa: E402,F401

A = fixture_course.LESSON_A
NEST = "[" * 60 + "]" * 60


class NoExecution(NbGraderPreprocessor):
    """Stands in for Execute: these tests are about what is written, not what runs."""

    def preprocess(self, nb, resources):
        return nb, resources


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    from autograder.nbgrader_glue.inproc import course_config, register_lessons

    root = fixture_course.build_course(tmp_path_factory.mktemp("metadata") / "course")
    config = course_config(root)
    register_lessons(config, [A])
    config.Autograde.autograde_preprocessors = [NoExecution]
    return root, config


def _submit(root: Path, student: str, change) -> Path:
    folder = root / "submitted" / student / A
    folder.mkdir(parents=True, exist_ok=True)
    nb = json.loads((root / "notebooks" / A / f"{A}.ipynb").read_text(encoding="utf-8"))
    change(nb)
    (folder / f"{A}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    return root / "autograded" / student / A / f"{A}.ipynb"


def test_free_metadata_is_not_written_into_autograded(course):
    from autograder.nbgrader_glue.inproc import autograde

    root, config = course

    def add_free_fields(nb):
        nb["metadata"]["bomb"] = json.loads("[" + ",".join([NEST] * 50) + "]")
        nb["metadata"]["language_info"]["secret_note"] = {"x": NEST}
        for cell in nb["cells"]:
            cell["metadata"]["mine"] = {"deep": json.loads(NEST)}
            cell["metadata"]["tags"] = [*cell["metadata"].get("tags", []), "kept-tag"]

    autograded = _submit(root, "meta", add_free_fields)
    autograde(config, "meta", A)
    text = autograded.read_text(encoding="utf-8")
    written = json.loads(text)
    assert "bomb" not in written["metadata"] and "secret_note" not in text
    assert written["metadata"]["language_info"]["name"] == "python"
    assert not any("mine" in cell["metadata"] for cell in written["cells"])
    assert all("kept-tag" in cell["metadata"]["tags"] for cell in written["cells"])
    graded = [cell for cell in written["cells"] if "nbgrader" in cell["metadata"]]
    assert graded and all(cell["metadata"]["nbgrader"]["grade_id"] for cell in graded)
    assert "[[[[" not in text


def test_the_copy_nbgrader_reads_is_counted_before_it_is_parsed(course):
    from autograder.intake.validate import MAX_OTHER_VALUES
    from autograder.nbgrader_glue.inproc import autograde

    root, config = course

    def add_values(nb):
        nb["metadata"]["many"] = [0] * (MAX_OTHER_VALUES + 1)

    autograded = _submit(root, "counted", add_values)
    with pytest.raises(ValueError, match="values in its outputs and metadata"):
        autograde(config, "counted", A)
    assert not autograded.exists()
