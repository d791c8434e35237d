"""The patches of nbgrader, nbconvert and jsonschema (autograder/nbgrader_glue/patches.py), and
the library internals the glue relies on: each test fails, naming the patch, when the pinned
library no longer has what the patch was written against (its source, its signature), and
checks that the patch still does what it is for. Fast: no notebook is graded."""

from __future__ import annotations

import fcntl
import hashlib
import inspect
import os
import subprocess
import sys

import pytest

from autograder.nbgrader_glue import patches

pytestmark = pytest.mark.fast

HOW = ("read the library's new version, adapt autograder/nbgrader_glue/patches.py (or the "
       "module named) to it, then pin the new digest in tests/test_patches.py")


def digest(thing) -> str:
    return hashlib.sha256(inspect.getsource(thing).encode()).hexdigest()[:16]


def assert_unchanged(patch: str, thing, pinned: str) -> None:
    """`thing`'s source is still the one `patch` was written against."""
    assert digest(thing) == pinned, (
        f"patch {patch}: {thing.__module__}.{thing.__qualname__} changed since the pinned "
        f"version the patch was written against; {HOW}")


def test_import_jsonschema_quickly():
    """jsonschema still imports rfc3987_syntax for its "iri" format (else the patch is moot),
    and after the patch jsonschema is imported without it, which stays importable."""
    import jsonschema._format

    source = inspect.getsource(jsonschema._format)
    assert "from rfc3987_syntax import" in source and "except ImportError" in source, (
        "patch import_jsonschema_quickly: jsonschema no longer imports rfc3987_syntax as it "
        f"did; {HOW}")
    done = subprocess.run([sys.executable, "-c", (
        "import sys; from autograder.nbgrader_glue import patches; "
        "print('jsonschema' in sys.modules, 'rfc3987_syntax' in sys.modules); "
        "import rfc3987_syntax; print('importable')")],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "importable"], (
        f"patch import_jsonschema_quickly no longer keeps rfc3987_syntax out: {done.stdout}")


def test_quick_gradebook_creation():
    """nbgrader still stamps a new gradebook through api.get_alembic_version(), which runs
    `alembic heads` over api._temp_alembic_ini; alembic_head reads the same revision."""
    from nbgrader import api

    name = "quick_gradebook_creation"
    get_version = patches.original(api, "get_alembic_version")
    assert inspect.signature(get_version).parameters == {}, f"patch {name}: signature changed"
    assert_unchanged(name, get_version, "40160af67d70e523")
    assert_unchanged(name, api._temp_alembic_ini, "cfca4f6e22540be4")
    nbgrader_init = patches.original(api.Gradebook, "__init__")
    assert "alembic_version = get_alembic_version()" in inspect.getsource(nbgrader_init), (
        f"patch {name}: Gradebook.__init__ no longer calls get_alembic_version(); {HOW}")
    patches.quick_gradebook_creation()
    assert api.get_alembic_version is patches.alembic_head
    assert patches.original(api, "get_alembic_version") is get_version


def test_lock_gradebooks(tmp_path):
    """Gradebook.__init__ and close are still nbgrader 0.9.6's (the patch repeats part of
    __init__ on a shared engine); while a Gradebook is open the run's lock file is held, and
    two Gradebooks of one database share one engine."""
    from nbgrader import api

    from autograder.nbgrader_glue.gradebook import (forget_gradebook_lock, gradebook,
                                                    install_gradebook_lock)

    name = "lock_gradebooks"
    nbgrader_init = patches.original(api.Gradebook, "__init__")
    assert list(inspect.signature(nbgrader_init).parameters) == [
        "self", "db_url", "course_id", "authenticator"], f"patch {name}: signature changed"
    assert_unchanged(name, nbgrader_init, "c60c420276e8355e")
    assert_unchanged(name, patches.original(api.Gradebook, "close"), "089cf56cf4f8a224")

    lock = tmp_path / "gradebook.lock"
    db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"

    def held() -> bool:
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    install_gradebook_lock(lock)
    try:
        with gradebook(db_url=db_url, course_id="c") as first:
            assert held()
            first.update_or_create_student("ann")
            engine = first.engine
        assert not held()
        with gradebook(db_url=db_url, course_id="c") as second:
            assert second.engine is engine
            assert [s.id for s in second.students] == ["ann"]
    finally:
        forget_gradebook_lock()


def test_quick_html_export():
    """HTMLExporter still passes its page through BeautifulSoup only to add alt text and
    tabindex; without that pass the feedback page's images get the same alt text."""
    import nbformat
    from nbconvert.exporters import html as html_exporter
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    name = "quick_html_export"
    assert patches.original(html_exporter, "BeautifulSoup").__name__ == "BeautifulSoup", (
        f"patch {name}: nbconvert.exporters.html no longer uses BeautifulSoup; {HOW}")
    assert_unchanged(name, html_exporter.HTMLExporter.from_notebook_node, "3dccafff45cc4e74")
    pixel = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA"
             "60e6kgAAAABJRU5ErkJggg==")
    nb = nbformat.from_dict(new_notebook(cells=[new_code_cell("plot()", outputs=[
        new_output("display_data", data={"image/png": pixel})])]))
    exporter = html_exporter.HTMLExporter(template_name="classic")
    plain, _ = exporter.from_notebook_node(nb)
    with patches.quick_html_export():
        quick, _ = exporter.from_notebook_node(nb)
    assert html_exporter.BeautifulSoup is patches.original(html_exporter, "BeautifulSoup")
    alt = 'alt="No description has been provided for this image"'
    assert plain.count(alt) == quick.count(alt) == 1, f"patch {name}: the alt text differs"


def test_internals_the_feedback_converter_repeats():
    """patches.start_keeping_the_exporter (inproc's ReusingGenerateFeedback.start) is
    nbgrader's BaseConverter.start keeping one exporter, whose preprocessors it resets through
    nbconvert's `_preprocessors`."""
    from nbconvert.exporters.exporter import Exporter
    from nbgrader.converters import GenerateFeedback
    from nbgrader.converters.base import BaseConverter

    from autograder.nbgrader_glue.inproc import _feedback_converter_class

    name = "start_keeping_the_exporter (nbgrader_glue/patches.py)"
    assert _feedback_converter_class().start is patches.start_keeping_the_exporter, (
        f"{name}: the feedback converter no longer starts with the patch")
    assert GenerateFeedback.start is BaseConverter.start, f"{name}: GenerateFeedback.start changed"
    assert_unchanged(name, BaseConverter.start, "10d6830579cdca63")
    for method in (Exporter.register_preprocessor, Exporter._preprocess):
        assert "self._preprocessors" in inspect.getsource(method), (
            f"{name}: nbconvert's Exporter no longer keeps its preprocessors in _preprocessors")


def test_internals_restore_locked_cells_calls():
    """locked_cells.RestoreLockedCells removes hidden tests with ClearHiddenTests's own
    `_remove_hidden_test_region(cell)`."""
    from nbgrader.preprocessors import ClearHiddenTests

    name = "RestoreLockedCells (nbgrader_glue/locked_cells.py)"
    method = getattr(ClearHiddenTests, "_remove_hidden_test_region", None)
    assert method is not None, f"{name}: ClearHiddenTests._remove_hidden_test_region is gone"
    assert list(inspect.signature(method).parameters) == ["self", "cell"], (
        f"{name}: the signature of _remove_hidden_test_region changed")
    assert_unchanged(name, method, "68ef91dd19232924")


@pytest.mark.parametrize("owner, attribute", [("api", "get_alembic_version"),
                                              ("Gradebook", "__init__"),
                                              ("Gradebook", "close")])
def test_every_patch_keeps_the_librarys_own(owner, attribute, tmp_path):
    """Once the patches are applied, `original` still gives nbgrader's own function."""
    from nbgrader import api

    from autograder.nbgrader_glue.gradebook import forget_gradebook_lock, install_gradebook_lock

    install_gradebook_lock(tmp_path / "lock")
    forget_gradebook_lock()
    target = api.Gradebook if owner == "Gradebook" else api
    assert getattr(target, attribute) is not patches.original(target, attribute)
    assert patches.original(target, attribute).__module__ == "nbgrader.api"


def test_internals_save_auto_grades_once_repeats():
    """save_auto_grades_once.SaveAutoGradesOnce repeats SaveAutoGrades.preprocess and turns the commits of its
    `_add_score` and `_add_comment` (through `self.gradebook.db`) into one."""
    from nbgrader.preprocessors import SaveAutoGrades

    name = "SaveAutoGradesOnce (nbgrader_glue/save_auto_grades_once.py)"
    assert_unchanged(name, SaveAutoGrades, "7b0810cdd99384f5")
    for method in (SaveAutoGrades._add_score, SaveAutoGrades._add_comment):
        assert "self.gradebook.db.commit()" in inspect.getsource(method), (
            f"{name}: SaveAutoGrades no longer commits through self.gradebook.db")
