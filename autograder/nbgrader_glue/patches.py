"""Every change this project makes to the code of nbgrader, nbconvert and jsonschema, in one place.

Each patch says why it exists. `replace` records what it replaced (`original`), so that
tests/test_patches.py can check the pinned library's own version still is what the patch was
written against, and fail naming the patch when an upgrade changes it. Importing this module
applies only the first patch (it must run before anything imports jsonschema); the others are
applied by the functions that need them.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from typing import Iterator

_ORIGINALS: dict[tuple[object, str], object] = {}


def replace(owner: object, name: str, value: object) -> None:
    """Set `owner.name` to `value`, remembering the library's own value the first time."""
    _ORIGINALS.setdefault((owner, name), getattr(owner, name))
    setattr(owner, name, value)


def original(owner: object, name: str) -> object:
    """The library's own `owner.name`, whether or not a patch replaced it."""
    return _ORIGINALS.get((owner, name), getattr(owner, name))


# --------------------------------------------------------------------------------------------
# jsonschema: imported without rfc3987_syntax

def import_jsonschema_quickly() -> None:
    """jsonschema imports `rfc3987_syntax`, when installed, to check the "iri" string format;
    that module compiles an Earley grammar on import, about 2 s in every grading process.
    Neither nbformat nor nbgrader checks formats, so jsonschema is imported with that module
    hidden (it then leaves the "iri" check out); the module stays importable afterwards."""
    if "jsonschema" in sys.modules:
        return
    hidden = "rfc3987_syntax" not in sys.modules
    if hidden:
        sys.modules["rfc3987_syntax"] = None  # makes `import rfc3987_syntax` raise ImportError
    try:
        import jsonschema  # noqa: F401
    except ImportError:  # pragma: no cover (jsonschema comes with nbformat)
        pass
    finally:
        if hidden and sys.modules.get("rfc3987_syntax", 0) is None:
            del sys.modules["rfc3987_syntax"]


import_jsonschema_quickly()


# --------------------------------------------------------------------------------------------
# nbgrader.api: a new gradebook stamped in this process

_ALEMBIC_HEAD: str | None = None


def alembic_head() -> str:
    """The revision of nbgrader's newest gradebook schema, as `alembic heads` prints it, read
    in this process from nbgrader's own migration scripts."""
    global _ALEMBIC_HEAD
    if _ALEMBIC_HEAD is None:
        from alembic.config import Config as AlembicConfig
        from alembic.script import ScriptDirectory
        from nbgrader import api

        with api._temp_alembic_ini("sqlite:////tmp/gradebook.db") as ini:
            _ALEMBIC_HEAD = ScriptDirectory.from_config(AlembicConfig(ini)).get_current_head()
    return _ALEMBIC_HEAD


def quick_gradebook_creation() -> None:
    """nbgrader stamps a new gradebook with the output of a separate `alembic heads` command
    (`api.get_alembic_version`): a second Python that imports SQLAlchemy and alembic, seconds
    on a busy machine, for every new gradebook. `alembic_head` reads the same revision here."""
    from nbgrader import api

    if api.get_alembic_version is not alembic_head:
        replace(api, "get_alembic_version", alembic_head)


# --------------------------------------------------------------------------------------------
# nbgrader.api.Gradebook: a lock while open, one SQLAlchemy engine per database

_ENGINES: dict[str, tuple[object, int, int]] = {}  # db_url -> (engine, pid, inode)


def _inode(db_url: str) -> int:
    path = db_url[len("sqlite:///"):] if db_url.startswith("sqlite:///") else ""
    try:
        return os.stat(path).st_ino if path else 0
    except OSError:
        return -1


def lock_gradebooks(lock) -> None:
    """Make every nbgrader Gradebook in this process hold `lock` (acquire/release) while open,
    and share one SQLAlchemy engine per database: nbgrader makes a new engine for each
    Gradebook, which re-inspects the schema and recompiles every query (most of its cost).
    The first Gradebook of a database in a process runs nbgrader's own __init__ (tables,
    alembic stamp); later ones repeat the rest of it (session, course check) on the shared
    engine."""
    from nbgrader import api
    from sqlalchemy.orm import scoped_session, sessionmaker

    if getattr(api.Gradebook, "_autograder_lock", None) is lock:
        return
    nbgrader_init = original(api.Gradebook, "__init__")
    nbgrader_close = original(api.Gradebook, "close")

    def __init__(self, db_url, course_id="default_course", authenticator=None):
        lock.acquire()
        self._autograder_locked = True
        try:
            engine, pid, inode = _ENGINES.get(db_url, (None, 0, 0))
            if engine is None or pid != os.getpid() or inode != _inode(db_url):
                nbgrader_init(self, db_url, course_id, authenticator)
                _ENGINES[db_url] = (self.engine, os.getpid(), _inode(db_url))
                return
            self.engine = engine
            self.db = scoped_session(sessionmaker(autoflush=True, bind=engine, future=True))
            self.check_course(course_id=course_id)
            self.course_id = course_id
            self.authenticator = authenticator
        except BaseException:
            self._autograder_locked = False
            lock.release()
            raise

    def close(self):
        try:
            if any(cached[0] is self.engine for cached in _ENGINES.values()):
                self.db.remove()  # the engine stays for the next Gradebook
            else:
                nbgrader_close(self)
        finally:
            if self.__dict__.pop("_autograder_locked", False):
                lock.release()

    replace(api.Gradebook, "__init__", __init__)
    replace(api.Gradebook, "close", close)
    api.Gradebook._autograder_lock = lock


# --------------------------------------------------------------------------------------------
# nbconvert's HTMLExporter: no BeautifulSoup pass over the feedback page

_IMG_WITHOUT_ALT = re.compile(r"<img(?![^>]*\balt=)", flags=re.IGNORECASE)


class _NoSoup:
    """Stands in for BeautifulSoup in nbconvert's HTMLExporter while feedback is written.

    After rendering, HTMLExporter re-parses the whole page with BeautifulSoup's pure-Python
    parser to add alt text to images and tabindex to JupyterLab-template cells: most of the
    cost of a feedback page. nbgrader's feedback template has no JupyterLab cells, so the alt
    text (the same words) is all there is to add, which a regular expression does."""

    def __init__(self, markup: str, features: str | None = None) -> None:
        self.markup = _IMG_WITHOUT_ALT.sub(
            '<img alt="No description has been provided for this image"', markup)

    def select(self, selector: str) -> list:
        return []

    def __str__(self) -> str:
        return self.markup


@contextlib.contextmanager
def quick_html_export() -> Iterator[None]:
    """While active, nbconvert's HTMLExporter skips its BeautifulSoup pass (see `_NoSoup`)."""
    from nbconvert.exporters import html as html_exporter

    replace(html_exporter, "BeautifulSoup", _NoSoup)
    try:
        yield
    finally:
        html_exporter.BeautifulSoup = original(html_exporter, "BeautifulSoup")


# --------------------------------------------------------------------------------------------
# nbgrader's GenerateFeedback: one HTML exporter for every notebook of a worker

def start_keeping_the_exporter(self) -> None:
    """nbgrader's `BaseConverter.start` (GenerateFeedback's), repeated but for its exporter:
    kept in the converter class's `shared_exporter` from one notebook to the next (with its
    compiled Jinja templates), its preprocessors reset through nbconvert's `_preprocessors`,
    where nbgrader builds a new exporter for every call; and the page written without the
    BeautifulSoup pass (`quick_html_export`). tests/test_patches.py pins the method repeated."""
    from nbconvert.writers import FilesWriter

    self.init_notebooks()
    self.writer = FilesWriter(parent=self, config=self.config)
    if not self.shared_exporter:
        self.shared_exporter.append(self.exporter_class(parent=self, config=self.config))
    self.exporter = self.shared_exporter[0]
    self.exporter._preprocessors = []
    for pp in self.preprocessors:
        self.exporter.register_preprocessor(pp)
    currdir = os.getcwd()
    os.chdir(self.coursedir.root)
    try:
        with quick_html_export():
            self.convert_notebooks()
    finally:
        os.chdir(currdir)
