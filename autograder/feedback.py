"""Feedback for students: nbgrader's HTML without hidden tests, and pages for what was not graded.

nbgrader's ClearHiddenTests removes the hidden tests from the cells' source, but the traceback
of a failing hidden test still shows the lines around the failure, hidden or not.
`HideTestTracebacks` (run before ClearHiddenTests) reduces every error in a test cell to its
last line, `ExceptionName: message`, which says what went wrong without the test's code.
"""

from __future__ import annotations

from autograder import _imports  # noqa: F401 (first: a quicker jsonschema import)

import contextlib
import html
import re
from pathlib import Path

from nbformat import NotebookNode
from traitlets import Unicode

from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.executor import DEAD_ENAME, NOT_RUN_ENAME, TIMEOUT_ENAME, _ansi_red

# Errors the grader writes itself: their one-line traceback is a message for the student.
_OWN_ERRORS = {TIMEOUT_ENAME, DEAD_ENAME, NOT_RUN_ENAME}


def _short_traceback(output: NotebookNode) -> list[str]:
    if output.get("ename") in _OWN_ERRORS and len(output.get("traceback", [])) == 1:
        return list(output.traceback)
    ename, evalue = output.get("ename", "Error"), output.get("evalue", "")
    return [f"{_ansi_red(ename)}: {evalue}" if evalue else _ansi_red(ename)]


class HideTestTracebacks(NbGraderPreprocessor):
    """Reduce the tracebacks in test cells (and cells with hidden tests) to their last line."""

    begin_test_delimeter = Unicode("BEGIN HIDDEN TESTS").tag(config=True)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        if cell.cell_type != "code":
            return cell, resources
        if utils.is_grade(cell) or self.begin_test_delimeter in cell.source:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output.traceback = _short_traceback(output)
        return cell, resources


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:46em;margin:3em auto;line-height:1.5}}
.status{{font-weight:bold}}</style></head>
<body><h1>{title}</h1>
<p>Student: {student}</p>
<p class="status">Status: {status} &mdash; score {score:g} of {max_score:g}</p>
<p>{reason}</p>
</body></html>
"""


def write_notice(path: Path, *, student: str, lesson: str, status: str, reason: str,
                 score: float, max_score: float) -> Path:
    """A one-paragraph feedback page for a submission that has no graded notebook."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_PAGE.format(title=html.escape(f"Feedback: {lesson}"),
                                 student=html.escape(student), status=html.escape(status),
                                 reason=html.escape(reason), score=score,
                                 max_score=max_score), encoding="utf-8")
    return path


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


class _CachedHighlighter:
    """nbconvert's code highlighter, remembering what it highlighted: a lesson's code cells
    are the same in every student's notebook."""

    def __init__(self, highlighter) -> None:
        self.highlighter = highlighter
        self.cache: dict = {}

    def __call__(self, source, language=None, metadata=None):
        key = (source, language, repr(metadata) if metadata else "")
        found = self.cache.get(key)
        if found is None:
            found = self.highlighter(source, language, metadata)
            if len(self.cache) < 50_000:
                self.cache[key] = found
        return found


_HIGHLIGHTERS: dict = {}


def feedback_exporter_class():
    """HTMLExporter that remembers rendered markdown and highlighted code across notebooks."""
    from nbconvert.exporters.html import HTMLExporter, contextfilter

    class FeedbackHTMLExporter(HTMLExporter):
        _markdown: dict = {}

        @contextfilter
        def markdown2html(self, context, source):
            cell = context.get("cell", {})
            if cell.get("attachments"):
                return super().markdown2html(context, source)
            path = context.get("resources", {}).get("metadata", {}).get("path", "")
            key = (source, path)
            found = self._markdown.get(key)
            if found is None:
                found = super().markdown2html(context, source)
                if len(self._markdown) < 50_000:
                    self._markdown[key] = found
            return found

    return FeedbackHTMLExporter


@contextlib.contextmanager
def quick_html_export():
    """While active, HTMLExporter skips its BeautifulSoup pass (see `_NoSoup`) and highlights
    code through a cache."""
    from nbconvert.exporters import html as html_exporter

    original_soup, original_highlight = html_exporter.BeautifulSoup, html_exporter.Highlight2HTML

    def highlighter(pygments_lexer=None, **kwargs):
        found = _HIGHLIGHTERS.get(pygments_lexer)
        if found is None:
            found = _HIGHLIGHTERS[pygments_lexer] = _CachedHighlighter(
                original_highlight(pygments_lexer=pygments_lexer, **kwargs))
        return found

    html_exporter.BeautifulSoup = _NoSoup
    html_exporter.Highlight2HTML = highlighter
    try:
        yield
    finally:
        html_exporter.BeautifulSoup = original_soup
        html_exporter.Highlight2HTML = original_highlight
