"""The stored outputs of every solution notebook hold the values the course specification documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import LESSONS, read_notebook, solution_path

pytestmark = pytest.mark.fast

DOCUMENTED = json.loads((Path(__file__).parent / "fixtures" / "documented_values.json").read_text())


def output_text(cell) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            parts.append(output.text)
        elif output.output_type == "error":
            parts.append(f"{output.ename}: {output.evalue}\n")
        else:
            parts.append(output.get("data", {}).get("text/plain", "") + "\n")
    return "".join(parts)


def test_documented_values_are_in_the_stored_outputs(lesson):
    notebook = read_notebook(solution_path(lesson))
    expected = DOCUMENTED[lesson]
    all_outputs = "".join(output_text(c) for c in notebook.cells if c.cell_type == "code")
    notes = "".join(c.source for c in notebook.cells if c.cell_type == "markdown"
                    and ("**Then and now.**" in c.source or "**Erratum.**" in c.source))
    missing = []
    for example, values in expected.items():
        if example == "notes":
            missing += [f"Erratum or Then-and-now note about {v!r}"
                        for v in values if v not in notes]
            continue
        missing += [f"{example}: {v!r}" for v in values if v not in all_outputs]
    assert not missing, f"{lesson}: documented values missing from stored outputs: {missing}"


def test_every_lesson_is_listed():
    assert sorted(k for k in DOCUMENTED if not k.startswith("_")) == LESSONS
