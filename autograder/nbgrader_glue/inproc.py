"""nbgrader's converters run in this process, with the course's configuration.

The command line starts a new Python for every `nbgrader ...` call; grading a class calls
nbgrader's converters (GenerateAssignment, Autograde, GenerateFeedback) directly instead, with
the configuration the `nbgrader` command would load from the course root's nbgrader_config.py.
"""

from __future__ import annotations

from autograder.nbgrader_glue import patches  # noqa: F401 (first: a quicker jsonschema import)

import contextlib
import copy
import logging
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from autograder.intake.validate import LessonSpec, cell_ids
from autograder.nbgrader_glue.cells import labels
from autograder.nbgrader_glue.gradebook import gradebook
from autograder.nbgrader_glue.patches import (quick_gradebook_creation, quick_html_export,
                                             start_keeping_the_exporter)
from autograder.release import COURSE_ROOT
from autograder.text import one_line

LOG = logging.getLogger("autograder.nbgrader")

# nbgrader runs `alembic` by name when it creates a gradebook: this Python's bin goes first.
_BIN = os.path.dirname(os.path.abspath(os.sys.executable))
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _BIN + os.pathsep + os.environ.get("PATH", "")


# --------------------------------------------------------------------------------------------
# Configuration

def course_config(root: Path, extra: Config | None = None) -> Config:
    """The configuration `nbgrader` would use in `root`, with `extra` merged on top."""
    root = Path(root).resolve()
    config_file = root / "nbgrader_config.py"
    if not config_file.is_file():
        config_file = COURSE_ROOT / "nbgrader_config.py"
    config = PyFileConfigLoader(config_file.name, path=str(config_file.parent)).load_config()
    config.CourseDirectory.root = str(root)
    if config_file.parent != root or "db_url" not in config.CourseDirectory:
        config.CourseDirectory.db_url = "sqlite:///" + str(root / "gradebook.db")
    if extra is not None:
        config.merge(extra)
    return config


def coursedir(config: Config, **traits: str):
    from nbgrader.coursedir import CourseDirectory
    course = CourseDirectory(config=config)
    for name, value in traits.items():
        setattr(course, name, value)
    return course


# --------------------------------------------------------------------------------------------
# Logging: nbgrader's messages for one submission, kept for the grading log

class CaptureLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[str] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            # One line per record: a message may quote a student's text (a cell's source, a
            # grade id), whose newlines must not add lines to the grading log.
            self.records.append(one_line(self.format(record), 4000))
        except Exception:  # noqa: BLE001 (a log line is never worth a failed grade)
            pass

    def text(self) -> str:
        return "\n".join(self.records)


@contextlib.contextmanager
def captured_log() -> Iterator[CaptureLog]:
    handler = CaptureLog()
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False
    try:
        yield handler
    finally:
        LOG.removeHandler(handler)


# --------------------------------------------------------------------------------------------
# Converters

def generate_assignment(config: Config, lesson: str, release_dir: Path,
                        db_url: str | None = None) -> None:
    """nbgrader generate_assignment for `lesson` into `release_dir` (and the gradebook)."""
    from nbgrader.converters import GenerateAssignment

    quick_gradebook_creation()
    extra = Config()
    extra.CourseDirectory.release_directory = str(release_dir)
    if db_url:
        extra.CourseDirectory.db_url = db_url
    extra.BaseConverter.force = True
    cfg = copy.deepcopy(config)
    cfg.merge(extra)
    course = coursedir(cfg, assignment_id=lesson)
    converter = GenerateAssignment(coursedir=course, config=cfg, log=LOG)
    converter.force = True
    converter.start()


def release_notebooks(root: Path, release_dir: Path, lessons: list[str] | None = None) -> Path:
    """Student notebooks for `root`'s lessons in `release_dir`, with a scratch gradebook."""
    from autograder.release import lessons as all_lessons

    root, release_dir = Path(root), Path(release_dir)
    config = course_config(root)
    with tempfile.TemporaryDirectory(prefix="release-gradebook-") as scratch:
        for lesson in lessons or all_lessons(root):
            generate_assignment(config, lesson, release_dir,
                                db_url=f"sqlite:///{scratch}/gradebook.db")
    for leftover in release_dir.glob("*/.ipynb_checkpoints"):
        shutil.rmtree(leftover)
    return release_dir


def register_lessons(config: Config, lessons: list[str]) -> dict:
    """Record the lessons in the course's gradebook (generate_assignment into a scratch folder,
    so that notebooks/ is left alone); return each lesson's LessonSpec."""
    import nbformat

    specs = {}
    with tempfile.TemporaryDirectory(prefix="grading-release-") as scratch:
        for lesson in lessons:
            generate_assignment(config, lesson, Path(scratch))
            released = nbformat.read(Path(scratch) / lesson / f"{lesson}.ipynb", as_version=4)
            with gradebook(config) as gb:
                notebook = gb.find_notebook(lesson, lesson)
                locked = {cell.name: {cell.checksum} for cell in notebook.source_cells
                          if cell.locked}
                tests = {cell.name: float(cell.max_score) for cell in notebook.grade_cells
                         if cell.name not in {c.name for c in notebook.solution_cells}}
                max_score = float(gb.find_assignment(lesson).max_score)
            for cell in released.cells:
                meta = labels(cell)
                if meta.get("grade_id") in locked and meta.get("checksum"):
                    locked[meta["grade_id"]].add(meta["checksum"])
            specs[lesson] = LessonSpec(name=lesson, graded_ids=cell_ids(released), tests=tests,
                                       locked=locked, max_score=max_score)
    return specs


# The steps of nbgrader's autograde pass that leave nbgrader's cell metadata as they found it.
_KEEP_METADATA = {"Execute", "IgnorePattern", "LimitOutput", "SaveAutoGrades",
                  "AssignLatePenalties", "CheckCellMetadata"}


def _step_name(item) -> str:
    return item.split(".")[-1] if isinstance(item, str) else item.__name__


def autograde_preprocessors(config: Config, executor) -> list:
    """The course's Autograde preprocessors with nbgrader's Execute replaced by `executor` and
    SaveAutoGrades by `SaveAutoGradesOnce`. The pass's CheckCellMetadata is left out when the
    sanitising pass checks the same metadata and no step between changes it: its result is
    known before it runs."""
    from nbgrader.converters import Autograde

    from autograder.nbgrader_glue.save_auto_grades_once import SaveAutoGradesOnce

    traits = Autograde.class_traits()
    configured = config.Autograde.get("autograde_preprocessors") \
        or traits["autograde_preprocessors"].default()
    sanitize = config.Autograde.get("sanitize_preprocessors") \
        or traits["sanitize_preprocessors"].default()
    names = [_step_name(item) for item in configured]
    keep = _KEEP_METADATA | ({"ClearMetadataPreprocessor"}  # nbconvert's: off unless enabled
                             if not config.ClearMetadataPreprocessor.get("enabled") else set())
    checked = "CheckCellMetadata" in map(_step_name, sanitize) and set(names) <= keep
    instead = {"Execute": executor, "SaveAutoGrades": SaveAutoGradesOnce}
    return [instead.get(name, item) for item, name in zip(configured, names)
            if not (checked and name == "CheckCellMetadata")]


def autograde(config: Config, student: str, lesson: str, preprocessors: list | None = None) -> None:
    """nbgrader autograde `lesson` --student `student` --force, in this process; with
    `preprocessors` (instances among them: config would copy them) as its autograde steps."""
    from nbgrader.converters import Autograde

    from autograder.intake.validate import count_problem
    from autograder.nbgrader_glue.drop_free_metadata import DropFreeMetadata

    course = coursedir(config, assignment_id=lesson, student_id=student)
    # nbgrader parses every notebook of the submission's folder whole: each is counted first
    # (intake did so too, but this is the copy nbgrader reads).
    folder = Path(course.format_path(course.submitted_directory, student, lesson))
    for path in sorted(folder.glob("*.ipynb")):
        problem = count_problem(path)
        if problem:
            raise ValueError(f"{path.name}: {problem}")
    converter = Autograde(coursedir=course, config=config, log=LOG)
    if preprocessors is not None:
        converter.autograde_preprocessors = preprocessors
    converter.sanitize_preprocessors = [DropFreeMetadata, *converter.sanitize_preprocessors]
    converter.force = True
    converter.start()


def feedback_preprocessors(config: Config) -> list:
    """The course's feedback preprocessors, with hidden tests cleared and graded cells'
    tracebacks reduced to their last line (before the hidden tests are cleared)."""
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.converters import GenerateFeedback
    from nbgrader.preprocessors import ClearHiddenTests, GetGrades

    from autograder.nbgrader_glue.hide_test_tracebacks import HideTestTracebacks
    from autograder.nbgrader_glue.withhold_hidden_checks import WithholdHiddenChecks

    configured = list(config.GenerateFeedback.get("preprocessors")
                      or GenerateFeedback.class_traits()["preprocessors"].default()
                      or [GetGrades, CSSHTMLHeaderPreprocessor])

    def name(item) -> str:
        return item.split(".")[-1] if isinstance(item, str) else item.__name__

    names = [name(item) for item in configured]
    if "ClearHiddenTests" not in names:
        position = names.index("GetGrades") + 1 if "GetGrades" in names else 0
        configured.insert(position, ClearHiddenTests)
        names.insert(position, "ClearHiddenTests")
    if "HideTestTracebacks" not in names:
        configured.insert(names.index("ClearHiddenTests"), HideTestTracebacks)
    if config.WithholdHiddenChecks.get("enabled") and "WithholdHiddenChecks" not in names:
        configured.append(WithholdHiddenChecks)
    return configured


_FEEDBACK: dict[int, tuple] = {}  # id(config) -> (config, derived config, converter class)


def _feedback_converter_class():
    from nbgrader.converters import GenerateFeedback
    from traitlets import default

    from autograder.feedback.render import feedback_exporter_class

    exporter_class = feedback_exporter_class()

    class ReusingGenerateFeedback(GenerateFeedback):
        """GenerateFeedback that keeps its HTML exporter (and its compiled Jinja templates)
        from one notebook to the next; nbgrader builds a new one for every call."""

        shared_exporter: list = []

        @default("exporter_class")
        def _exporter_class_default(self):
            return exporter_class

        start = start_keeping_the_exporter  # nbgrader's own start, in patches.py

    return ReusingGenerateFeedback


def _feedback_setup(config: Config) -> tuple:
    """The feedback config and converter class for `config`, made once and then reused."""
    cached = _FEEDBACK.get(id(config))
    if cached is None or cached[0] is not config:
        derived = copy.deepcopy(config)
        derived.GenerateFeedback.preprocessors = feedback_preprocessors(config)
        cached = _FEEDBACK[id(config)] = (config, derived, _feedback_converter_class())
    return cached[1], cached[2]


def generate_feedback(config: Config, student: str, lesson: str) -> Path:
    """nbgrader generate_feedback for one submission; return the HTML file it wrote."""
    derived, converter_class = _feedback_setup(config)
    course = coursedir(derived, assignment_id=lesson, student_id=student)
    converter = converter_class(coursedir=course, config=derived, log=LOG)
    converter.force = True
    converter.start()
    return Path(course.format_path(course.feedback_directory, student, lesson)) / f"{lesson}.html"


def warm_feedback(config: Config) -> None:
    """Compile the feedback templates now (in a worker's start-up, not its first notebook)."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    derived, converter_class = _feedback_setup(config)
    if converter_class.shared_exporter:
        return
    course = coursedir(derived)
    converter = converter_class(coursedir=course, config=derived, log=LOG)
    exporter = converter.exporter_class(parent=converter, config=converter.config)
    converter_class.shared_exporter.append(exporter)
    cell = new_code_cell("print(1)\n1 / 0", outputs=[
        new_output("stream", name="stdout", text="1\n"),
        new_output("error", ename="ZeroDivisionError", evalue="division by zero",
                   traceback=["ZeroDivisionError"])])
    nb = new_notebook(cells=[new_markdown_cell("# Warm-up\n*text*"), cell],
                      metadata={"language_info": {"name": "python",
                                                  "pygments_lexer": "ipython3"}})
    resources = {"nbgrader": {"score": 0, "max_score": 0, "late_penalty": 0}}
    with quick_html_export():
        exporter.from_notebook_node(nbformat.from_dict(nb), resources=resources)


def safe_student_id(student: str) -> bool:
    """Whether nbgrader can use `student` as a student id (and as a folder name)."""
    return bool(student) and student == student.strip() and not student.startswith(".") \
        and re.search(r"[*?\[\]/\\\x00-\x1f]", student) is None
