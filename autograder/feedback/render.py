"""Feedback for students: nbgrader's page without hidden tests, safe to open, and offline.

The course's own steps of nbgrader's feedback pass are one file each in nbgrader_glue/:
hide_test_tracebacks.py (before ClearHiddenTests) and withhold_hidden_checks.py (before a
deadline).

`FeedbackHTMLExporter` writes the page (nbgrader's GenerateFeedback uses it through
nbgrader_config.py, and so does `python -m autograder grade`), from nbgrader's feedback
template with the head of templates/course_feedback (head.py):

- nothing a student wrote runs as script when anyone opens the page: its HTML is cleaned
  (cleaning.py), and the page's Content Security Policy lets only its own scripts run and
  loads nothing from the network;
- maths renders offline (MathJax from Jupyter's own copy, in the page itself);
- code has colours, each readable on the code's grey (head.py);
- each of the grader's paragraphs is said once, where it first applies (once.py);
- it stands alone: the lesson's navigation cells (links to the start page and the
  neighbouring lessons) are left out, and headings carry no "¶" links;
- what it may cost the grader is bounded by counts (budget.py).
"""

from __future__ import annotations

from autograder.nbgrader_glue import patches  # noqa: F401 (first: a quicker jsonschema import)

import re
from pathlib import Path

from nbconvert.exporters.html import HTMLExporter, contextfilter
from nbformat import NotebookNode

import nbgrader

from autograder.feedback import head
from autograder.feedback.budget import (CODE_CELL_CHARS, CODE_NOTEBOOK_CHARS,
                                        MARKDOWN_CACHE_BYTES, MARKDOWN_CACHE_ITEM,
                                        MARKDOWN_CELL_WORK, MARKDOWN_NOTEBOOK_WORK,
                                        attachments_work, code_as_text, highlight_code,
                                        markdown_as_text, markdown_work, too_costly)
from autograder.feedback.cleaning import (clean_html, clean_markdown_html, clean_notebook,
                                          strip_files_prefix)
from autograder.feedback.once import say_once
from autograder.nbgrader_glue.patches import quick_html_export
from autograder.release import NAV_TAG


def write_notice(path: Path, *, student: str, lesson: str, status: str, reason: str,
                 score: float, max_score: float) -> Path:
    """A one-paragraph feedback page for a submission that has no graded notebook."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(head.notice_page(title=f"Feedback: {lesson}", student=student,
                                     status=status, reason=reason, score=f"{score:g}",
                                     max_score=f"{max_score:g}"), encoding="utf-8")
    return path


def drop_navigation(nb: NotebookNode) -> NotebookNode:
    """`nb` without the lesson's navigation cells (their links lead nowhere from a feedback
    page: the start page and the neighbouring lessons are not beside it)."""
    nb.cells = [cell for cell in nb.cells
                if NAV_TAG not in (cell.get("metadata", {}).get("tags") or [])]
    return nb


# The link nbconvert appends to each heading of rendered markdown.
_ANCHOR_LINK = re.compile(r'<a class="anchor-link" href="#[^"<>]*">[^<>]*</a>')

# nbgrader's templates, where the course's page finds the feedback template it extends.
NBGRADER_TEMPLATES = str(Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
                         / "templates")
TEMPLATE_NAME = "course_feedback"


class FeedbackHTMLExporter(HTMLExporter):
    """nbconvert's HTMLExporter for feedback pages: safe to open, offline, with code colours;
    it remembers rendered markdown across notebooks (a lesson's text is the same for all)."""

    _markdown: dict = {}
    _markdown_bytes = 0
    # What is left of the notebook's markdown work (see MARKDOWN_NOTEBOOK_WORK); every cell
    # counts, rendered or found in the cache, so that the same notebook always renders alike.
    _work_left = MARKDOWN_NOTEBOOK_WORK
    _code_left = CODE_NOTEBOOK_CHARS  # likewise, of the characters of code it colours

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        # Whatever the configuration names: nbgrader's feedback template with the course's head.
        self.extra_template_basedirs = [str(head.TEMPLATES), *self.extra_template_basedirs]
        self.extra_template_paths = [*self.extra_template_paths, NBGRADER_TEMPLATES]
        self.template_name = TEMPLATE_NAME
        self.template_paths = self._template_paths()  # computed once, before the above
        # The notebook is checked once, after all preprocessors, not after each: it is only
        # rendered, never saved (a quarter of a page's time went to the checks).
        self.optimistic_validation = True

    def highlight_code(self, source: str, language: str | None = None, metadata=None) -> str:
        """As budget's `highlight_code`, within the notebook's budget of code coloured."""
        if len(source) <= CODE_CELL_CHARS:
            self._code_left -= len(source)
            if self._code_left < 0:
                return code_as_text(source, f"the notebook's code before it used up the "
                                            f"{CODE_NOTEBOOK_CHARS:,} characters coloured "
                                            "per notebook.")
        # Pygments' class attribute starts with a blank, which nbgrader's template keeps.
        return highlight_code(source).replace('<div class=" highlight', '<div class="highlight', 1)

    def register_filter(self, name, jinja_filter):
        # HTMLExporter registers a highlighter for the lexer the notebook's metadata names.
        if name == "highlight_code":
            jinja_filter = self.highlight_code
        return super().register_filter(name, jinja_filter)

    @contextfilter
    def markdown2html(self, context, source):
        cell = context.get("cell", {})
        work = markdown_work(source) + attachments_work(source, cell.get("attachments"))
        if work > MARKDOWN_CELL_WORK:
            return markdown_as_text(source, too_costly(work))
        self._work_left -= work
        if self._work_left < 0:
            return markdown_as_text(source, (
                f"the notebook's markdown before it used up the work its rendering may take "
                f"({MARKDOWN_NOTEBOOK_WORK:,} units, estimated from each cell's text)."))
        if cell.get("attachments"):
            return clean_markdown_html(self._rendered(context, source))
        # The notebook's folder matters only to embed images it links to: otherwise the same
        # markdown (the lesson's, in every student's notebook) renders once per worker.
        path = context.get("resources", {}).get("metadata", {}).get("path", "") \
            if self.embed_images else ""
        key = (source, path)
        found = self._markdown.get(key)
        if found is None:
            found = clean_markdown_html(self._rendered(context, source))
            # Kept only while small: a student's own markdown is unique to their notebook,
            # and the cache lives as long as the worker.
            size = len(source) + len(found)
            if size <= MARKDOWN_CACHE_ITEM and \
                    type(self)._markdown_bytes + size <= MARKDOWN_CACHE_BYTES:
                self._markdown[key] = found
                type(self)._markdown_bytes += size
        return found

    def _rendered(self, context, source) -> str:
        """nbconvert's markdown, its headings without their "¶" links (links inside text, which
        lead nowhere useful on a page that is read, not linked to); the headings keep their ids."""
        return _ANCHOR_LINK.sub("", super().markdown2html(context, source))

    def _create_environment(self):
        environment = super()._create_environment()
        # After the configured filters: these keep a page safe, whatever the config says.
        self._register_filter(environment, "clean_html", clean_html)
        self._register_filter(environment, "markdown2html", self.markdown2html)
        self._register_filter(environment, "strip_files_prefix", strip_files_prefix)
        return environment

    def _init_resources(self, resources):
        resources = super()._init_resources(resources)
        # Whatever the configuration says: clean outputs' HTML, keep SVG inside <img>.
        resources["should_sanitize_html"] = True
        resources["should_not_encode_svg"] = False
        return resources

    def _preprocess(self, nb, resources):
        nb, resources = super()._preprocess(nb, resources)
        nb = say_once(drop_navigation(clean_notebook(nb)))
        # nbgrader's GetGrades sets these; a page rendered without it scores nothing.
        grades = resources.setdefault("nbgrader", {})
        grades.setdefault("notebook", resources.get("metadata", {}).get("name") or "Notebook")
        for key in ("score", "max_score", "late_penalty"):
            grades.setdefault(key, 0)
        resources["feedback_head"] = head.head(nb, str(grades["notebook"]))
        return nb, resources

    def from_notebook_node(self, nb, resources=None, **kw):
        self._work_left = MARKDOWN_NOTEBOOK_WORK
        self._code_left = CODE_NOTEBOOK_CHARS
        with quick_html_export():  # the page as the template wrote it (see patches._NoSoup)
            return super().from_notebook_node(nb, resources, **kw)


def feedback_exporter_class():
    """The exporter for feedback pages (nbgrader_config.py names it to GenerateFeedback)."""
    return FeedbackHTMLExporter
