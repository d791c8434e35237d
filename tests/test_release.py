"""The committed student notebooks are exactly what `make release` generates from solutions/."""

from __future__ import annotations

import filecmp

from autograder.release import release
from conftest import COURSE_ROOT, LESSONS


def test_notebooks_folder_is_up_to_date(tmp_path):
    generated = release(release_dir=tmp_path / "notebooks")
    committed = COURSE_ROOT / "notebooks"
    stale = []
    for lesson in LESSONS:
        ours = sorted(p.name for p in (generated / lesson).iterdir())
        theirs = sorted(p.name for p in (committed / lesson).iterdir()) if (committed / lesson).is_dir() else []
        if ours != theirs:
            stale.append(f"{lesson}: files {theirs} committed, {ours} generated")
            continue
        _, mismatch, errors = filecmp.cmpfiles(generated / lesson, committed / lesson, ours, shallow=False)
        stale += [f"{lesson}/{name}" for name in mismatch + errors]
    assert not stale, "notebooks/ is out of date; run `make release` and commit: " + "; ".join(stale)
