"""The student's side of `make lab`: own copies of the lessons in work/, the start page with
progress and newer releases, `make reset`, the post-save hook, the students' Jupyter settings,
and the Validate summary."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import shutil
import subprocess

import nbformat
import pytest
from nbformat.v4 import new_output

import coursekit.lab as lab
from coursekit.progress import (exercise_results, summary_line, validation_cell_started,
                                validation_started)
from conftest import COURSE_ROOT, LESSONS
from notebook_support import grading

FIRST = LESSONS[0]


@pytest.fixture
def course(tmp_path):
    """A course root with the README and the released notebooks, and an empty work folder."""
    root = tmp_path / "course"
    (root / "notebooks").mkdir(parents=True)
    shutil.copy2(COURSE_ROOT / "README.md", root)
    for lesson in LESSONS:
        shutil.copytree(COURSE_ROOT / "notebooks" / lesson, root / "notebooks" / lesson)
    return root, tmp_path / "work"


def _copy(work, lesson=FIRST):
    return nbformat.read(lab.copy_path(lesson, work), as_version=4)


def _pass(cell) -> None:
    cell.execution_count = 3
    cell.outputs = [new_output("stream", name="stdout", text="Exercise passed.\n")]


def _fail(cell, ename="CheckFailed", evalue="p.grad is not what was expected.\n  expected: 1",
          traceback=None) -> None:
    cell.execution_count = 4
    cell.outputs = [new_output("error", ename=ename, evalue=evalue, traceback=traceback or [])]


def _tests(notebook):
    return [c for c in notebook.cells if grading(c).get("grade")]


def test_prepare_copies_each_lesson_once_and_records_its_release(course):
    root, work = course
    lab.prepare(work, root)
    state = lab.read_state(work)
    for lesson in LESSONS:
        copy, release = lab.copy_path(lesson, work), lab.release_path(lesson, root)
        assert copy.read_bytes() == release.read_bytes()
        assert state["lessons"][lesson]["release_sha256"] == lab.sha256(release)
    (work / FIRST / f"{FIRST}.ipynb").write_text("{}")  # the student's work, however odd
    lab.prepare(work, root)
    assert lab.copy_path(FIRST, work).read_text() == "{}"


def test_prepare_without_a_release_says_what_to_run(tmp_path):
    (tmp_path / "notebooks").mkdir()
    with pytest.raises(lab.LabError, match="make release"):
        lab.prepare(tmp_path / "work", tmp_path)


def test_start_page_lists_the_lessons_in_order_with_links_and_what_they_teach(course):
    root, work = course
    lab.prepare(work, root)
    page = (work / lab.START_PAGE).read_text()
    rows = [line for line in page.splitlines() if line.startswith("| 0")]
    released = lab.lesson_names(root)
    assert [row.split("|")[1].strip() for row in rows] == [name[:2] for name in released]
    assert [name[:2] for name in released] == [f"{n:02d}" for n in range(1, len(released) + 1)]
    assert "[Leaf and intermediate tensors](01_leaf_and_intermediate/01_leaf_and_intermediate.ipynb)" in rows[0]
    assert "freeze parameters" in rows[0]  # from the README's table of lessons
    assert "Eight Jupyter lessons on how PyTorch computes gradients" in page
    assert all("not started" in row for row in rows)
    assert "make reset LESSON=01_leaf_and_intermediate" in page
    assert "Kernel ▸ Restart Kernel and Run All Cells" in page


def test_progress_comes_from_the_saved_test_cells_of_the_students_copy(course):
    root, work = course
    lab.prepare(work, root)
    notebook = _copy(work)
    tests = _tests(notebook)
    _pass(tests[0])
    _fail(tests[1], ename="NotImplementedError", evalue="",
          traceback=["\x1b[1;31mExercise 2 is not answered yet.\x1b[0m"])
    nbformat.write(notebook, lab.copy_path(FIRST, work))
    lab.write_start_page(work, root)
    page = (work / lab.START_PAGE).read_text()
    points = [grading(c)["points"] for c in tests]
    assert f"| 1 of {len(tests)} exercises pass ({points[0]:g} of {sum(points):g} points) |" in page
    for cell in tests:
        _pass(cell)
    nbformat.write(notebook, lab.copy_path(FIRST, work))
    lab.write_start_page(work, root)
    assert f"✓ {len(tests)} of {len(tests)} exercises pass" in (work / lab.START_PAGE).read_text()


def test_the_start_page_says_when_a_lesson_has_a_newer_release(course):
    root, work = course
    lab.prepare(work, root)
    assert "newer version" not in (work / lab.START_PAGE).read_text()
    release = nbformat.read(lab.release_path("03_tensor_hooks", root), as_version=4)
    release.cells[1].source += "\n\nA corrected sentence."
    nbformat.write(release, lab.release_path("03_tensor_hooks", root))  # as after `git pull`
    lab.write_start_page(work, root)
    page = (work / lab.START_PAGE).read_text()
    row = next(line for line in page.splitlines() if line.startswith("| 03"))
    assert "newer version available" in row
    assert "    make reset LESSON=03_tensor_hooks" in page
    assert sum("newer version available" in line for line in page.splitlines()) == 1
    lab.reset("03_tensor_hooks", work, root)
    assert "newer version" not in (work / lab.START_PAGE).read_text()


def test_reset_keeps_a_dated_backup_and_restores_the_release(course):
    root, work = course
    lab.prepare(work, root)
    notebook = _copy(work)
    _pass(_tests(notebook)[0])
    nbformat.write(notebook, lab.copy_path(FIRST, work))
    worked = lab.copy_path(FIRST, work).read_bytes()
    now = dt.datetime(2025, 3, 4, 5, 6, 7)
    backup = lab.reset(FIRST, work, root, now=now)
    assert backup == work / "backups" / f"{FIRST}-2025-03-04-050607.ipynb"
    assert backup.read_bytes() == worked
    assert lab.copy_path(FIRST, work).read_bytes() == lab.release_path(FIRST, root).read_bytes()
    second = lab.reset(FIRST, work, root, now=now)
    assert second != backup and second.exists() and backup.read_bytes() == worked


def test_reset_of_an_unknown_lesson_lists_the_lessons(course):
    root, work = course
    lab.prepare(work, root)
    with pytest.raises(lab.LabError) as info:
        lab.reset("02", work, root)
    message = str(info.value)
    assert "There is no lesson '02'" in message and "Did you mean 02_retain_grad?" in message
    assert ", ".join(LESSONS) in message


def test_make_reset_without_a_lesson_prints_its_usage():
    done = subprocess.run(["make", "-s", "reset"], cwd=COURSE_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0
    assert "usage: make reset LESSON=<lesson>" in done.stderr


def test_the_post_save_hook_rewrites_the_start_page_after_a_lesson_is_saved(course, monkeypatch):
    root, work = course
    monkeypatch.setattr(lab, "COURSE_ROOT", root)
    lab.prepare(work, root)
    notebook = _copy(work)
    _pass(_tests(notebook)[0])
    path = lab.copy_path(FIRST, work)
    nbformat.write(notebook, path)

    class Contents:
        root_dir = str(work)

    before = (work / lab.START_PAGE).read_text()
    lab.after_save(model={}, os_path=str(work / "notes.ipynb"), contents_manager=Contents())
    assert (work / lab.START_PAGE).read_text() == before  # not a lesson: nothing to do
    lab.after_save(model={}, os_path=str(path), contents_manager=Contents())
    assert (work / lab.START_PAGE).read_text() != before
    assert "| 1 of " in (work / lab.START_PAGE).read_text()
    lab.after_save(model={}, os_path=str(path), contents_manager=None)  # never raises


def test_work_done_in_the_tracked_notebooks_becomes_the_students_copy(course):
    """A student who worked in notebooks/ before the course had copies keeps that work."""
    root, work = course
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "notebooks"], check=True)
    subprocess.run([*git, "commit", "-qm", "release"], check=True)
    release = lab.release_path(FIRST, root)
    committed = release.read_bytes()
    notebook = nbformat.read(release, as_version=4)
    _pass(_tests(notebook)[0])
    nbformat.write(notebook, release)
    said = lab.prepare(work, root)
    assert lab.copy_path(FIRST, work).read_bytes() == release.read_bytes()
    assert any(f"git checkout -- notebooks/{FIRST}/{FIRST}.ipynb" in line for line in said)
    # The copy was made from the committed release, not from what the student changed.
    assert lab.read_state(work)["lessons"][FIRST]["release_sha256"] == \
        hashlib.sha256(committed).hexdigest()


def test_make_lab_starts_jupyterlab_on_the_copies_with_the_students_settings(tmp_path):
    work = tmp_path / "work"
    command, env = lab.lab_command(work)
    assert command[1] == "lab"
    assert f"--ServerApp.root_dir={work}" in command
    assert "--LabApp.default_url=/lab/tree/START-HERE.md" in command
    assert env["JUPYTER_CONFIG_PATH"] == str(COURSE_ROOT / "jupyter" / "student")
    assert not any("notebooks" in part for part in command)
    settings = lab.seed_lab_settings(work)
    notification = settings / "@jupyterlab/apputils-extension/notification.jupyterlab-settings"
    assert json.loads(notification.read_text())["fetchNews"] == "false"
    assert "/work/" in (COURSE_ROOT / ".gitignore").read_text().splitlines()


def test_the_file_browser_hides_backups_and_the_start_page_links_them(tmp_path):
    """`make lab` on a work folder with a backup: JupyterLab's listing (what its file browser
    shows) has the lessons and not backups/, and the backup still opens from the start page's
    link."""
    import urllib.parse

    from browser_support import JupyterLab

    work = tmp_path / "work"
    backup = work / "backups" / f"{FIRST}-2025-03-04-050607.ipynb"
    backup.parent.mkdir(parents=True)
    shutil.copyfile(lab.release_path(FIRST), backup)
    server = JupyterLab(root_dir=work, state_dir=tmp_path / "jupyter", cwd=COURSE_ROOT,
                        command=lambda address: ["make", "--no-print-directory", "-s", "lab",
                                                 f"WORK={work}", "LAB_ARGS=" + " ".join(address)])
    server.start(timeout=120)
    try:
        listed = {item["name"] for item in server.api("GET", "api/contents/")["content"]}
        opened = server.api("GET", f"api/contents/backups/{backup.name}?content=1")
    finally:
        server.stop()
    assert FIRST in listed and lab.START_PAGE in listed and "backups" not in listed
    assert opened["type"] == "notebook" and opened["content"]["cells"]
    page = (work / lab.START_PAGE).read_text(encoding="utf-8")
    assert "## Your backups" in page
    link = re.search(rf"\]\((backups/{re.escape(backup.name)})\)", page)[1]
    assert (work / urllib.parse.unquote(link)).samefile(backup)


def test_the_students_jupyter_configuration():
    student = COURSE_ROOT / "jupyter" / "student"
    disabled = json.loads((student / "labconfig" / "page_config.json").read_text())
    assert disabled["disabledExtensions"]["@jupyter/nbgrader:menu"] is True
    assert disabled["disabledExtensions"]["@jupyterlab/apputils-extension:announcements"] is True
    assert "@jupyter/nbgrader:validate-assignment" not in disabled["disabledExtensions"]
    from traitlets.config.loader import PyFileConfigLoader

    server = PyFileConfigLoader("jupyter_server_config.py", str(student)).load_config()
    assert server.ContentsManager.post_save_hook == "coursekit.lab.after_save"
    nbgrader = PyFileConfigLoader("nbgrader_config.py", str(student)).load_config()
    assert nbgrader.Execute.on_notebook_start is validation_started
    assert nbgrader.Execute.on_cell_start is validation_cell_started


# --- exercise results and the Validate summary -------------------------------------------------

def _released(lesson=FIRST):
    return nbformat.read(COURSE_ROOT / "notebooks" / lesson / f"{lesson}.ipynb", as_version=4)


def test_exercise_results_read_each_test_cell():
    notebook = _released()
    tests = _tests(notebook)
    _pass(tests[0])
    _fail(tests[1])
    _fail(tests[2], ename="NotImplementedError", evalue="",
          traceback=["\x1b[1;31m`freeze` is not written yet.\x1b[0m"])
    results = exercise_results(notebook)
    assert [r.number for r in results] == list(range(1, len(tests) + 1))
    assert [r.status for r in results][:4] == ["passed", "failed", "unanswered", "not run"]
    assert results[1].message == "p.grad is not what was expected."
    total = sum(grading(c)["points"] for c in tests)
    assert summary_line(results) == (f"1 of {len(tests)} exercises pass "
                                      f"({grading(tests[0])['points']:g} of {total:g} points)")


def test_a_test_that_fails_because_its_answer_cell_fails_says_so():
    notebook = _released()
    answer = next(c for c in notebook.cells if grading(c).get("grade_id") == "01-ex1-answer")
    _fail(answer, ename="SyntaxError", evalue="invalid syntax (3877796108.py, line 2)")
    _fail(_tests(notebook)[0], ename="NameError", evalue="name 'leaf_gradients' is not defined")
    assert exercise_results(notebook)[0].message == \
        "its answer cell fails: SyntaxError: invalid syntax (line 2)"


def test_validate_lists_a_summary_first_and_nothing_more_when_all_pass():
    from nbgrader.validator import Validator

    notebook = _released()
    tests = _tests(notebook)
    _pass(tests[0])
    _fail(tests[1])
    for cell in tests[2:]:
        _fail(cell, ename="NotImplementedError", evalue="",
              traceback=["`x` is not written yet."])
    validation_started(notebook=notebook)
    for index in range(len(notebook.cells) - 1):
        validation_cell_started(cell=notebook.cells[index], cell_index=index)
    assert notebook.cells[0].source == ""  # filled only when the last cell starts
    validation_cell_started(cell=notebook.cells[-1], cell_index=len(notebook.cells) - 1)
    failed = Validator()._get_failed_cells(notebook)
    assert failed[0] is notebook.cells[0] and failed[1:] == tests[1:]
    lines = failed[0].source.splitlines()
    assert lines[0].startswith("Validate ran this notebook from the top in a fresh kernel")
    assert lines[1] == f"Result: {summary_line(exercise_results(notebook))}."
    points = [f"{grading(c)['points']:g} points" for c in tests]
    assert f"  Exercise 1 ({points[0]}): its example passes" in lines
    assert f"  Exercise 2 ({points[1]}): fails: p.grad is not what was expected." in lines
    assert f"  Exercise 3 ({points[2]}): not answered yet" in lines
    assert Validator()._get_changed_cells(notebook) == []

    passing = _released()
    for cell in _tests(passing):
        _pass(cell)
    validation_started(notebook=passing)
    validation_cell_started(cell=passing.cells[-1], cell_index=len(passing.cells) - 1)
    assert Validator()._get_failed_cells(passing) == []


def test_copies_and_resets_never_touch_the_release(course):
    """Students never change notebooks/, so `git pull` of corrected lessons cannot conflict."""
    root, work = course
    before = {p: p.read_bytes() for p in (root / "notebooks").rglob("*") if p.is_file()}
    lab.prepare(work, root)
    for lesson in LESSONS:
        notebook = _copy(work, lesson)
        _pass(_tests(notebook)[0])
        nbformat.write(notebook, lab.copy_path(lesson, work))
    lab.reset(FIRST, work, root)
    lab.prepare(work, root)
    after = {p: p.read_bytes() for p in (root / "notebooks").rglob("*") if p.is_file()}
    assert after == before
