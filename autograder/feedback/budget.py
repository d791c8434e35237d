"""What rendering a notebook's markdown and colouring its code may cost the grader: bounded by
counts decided before rendering (never by a clock), so the same notebook always gives the same
page; what is over a bound is shown as escaped text with a note."""

from __future__ import annotations

import functools
import html

from autograder.feedback.cleaning import CleanHTML, clean_markdown_html

# Rendered markdown (and highlighted code) kept across notebooks by a worker: at most this much
# each, of pieces this large
# (a lesson's longest markdown cell renders to a few KB).
MARKDOWN_CACHE_BYTES = 64 << 20
MARKDOWN_CACHE_ITEM = 64 << 10


class _CachedHighlighter:
    """nbconvert's code highlighter, remembering what it highlighted: a lesson's code cells
    are the same in every student's notebook."""

    def __init__(self, highlighter) -> None:
        self.highlighter = highlighter
        self.cache: dict = {}
        self.cached_bytes = 0

    def __call__(self, source, language=None, metadata=None):
        key = (source, language, repr(metadata) if metadata else "")
        found = self.cache.get(key)
        if found is None:
            found = self.highlighter(source, language, metadata)
            # As for markdown: only small pieces, and a bounded total (it lives as long as
            # the worker, and a student's own code is unique to their notebook).
            size = len(source) + len(str(found))
            if size <= MARKDOWN_CACHE_ITEM and \
                    self.cached_bytes + size <= MARKDOWN_CACHE_BYTES:
                self.cache[key] = found
                self.cached_bytes += size
        return found


# The work of rendering a markdown cell (nbconvert's mistune, then the sanitiser), estimated
# from its text and attachments before anything renders it, in units of about a microsecond
# of a 2020s core. A lesson's markdown cell is under 10,000 and a lesson under 60,000; a cell
# over the first limit, and the cells after a notebook has spent the second, are shown as
# plain text.
MARKDOWN_CELL_WORK = 1_000_000
MARKDOWN_NOTEBOOK_WORK = 2_000_000


def markdown_work(source: str) -> int:
    """The estimated work of rendering `source`: its size, and the constructs whose cost
    grows faster than their size (benchmarks/feedback_cost.py measures them): elements
    side by side (lines, headings, table cells) and open raw-HTML tags cost the sanitiser
    their number squared, and each `\\begin{` makes mistune search the rest of the text for
    its `\\end{`."""
    size, lines = len(source), source.count("\n")
    blocks = lines + source.count("#") + source.count("|")
    tags = source.count("<")
    return (2 * size + 20 * lines + 10 * source.count(">") + 20 * source.count("[")
            + 5 * (source.count("`") + source.count("*") + source.count("_"))
            + blocks * blocks // 100 + tags * tags // 20
            + source.count("\\begin") * size // 100)


def attachments_work(source: str, attachments) -> int:
    """The estimated work of embedding a markdown cell's attachments (pictures pasted into
    it): nbconvert writes an attachment's data into the page at each image that names it,
    and every image of the source starts with `![`, so at most that many times the largest
    (a reference-style image names it once for any number of uses)."""
    if not isinstance(attachments, dict) or not attachments:
        return 0
    largest = max((len(value) if isinstance(value, str) else sum(map(len, map(str, value)))
                   for data in attachments.values() if isinstance(data, dict)
                   for value in data.values() if isinstance(value, (str, list))), default=0)
    return source.count("![") * largest


def markdown_as_text(source: str, why: str) -> str:
    """`source` shown escaped as plain text, after a note that says `why`."""
    return CleanHTML(f'<div class="markdown-as-text"><p><em>This cell\'s markdown is shown as '
                     f"plain text: {html.escape(why, quote=False)}</em></p>"
                     f"<pre>{html.escape(source, quote=False)}</pre></div>")


def too_costly(work: int) -> str:
    """Why a cell of estimated `work` is shown as plain text."""
    return (f"rendering it would cost the grader too much (an estimated {work:,} units of "
            f"work, over the {MARKDOWN_CELL_WORK:,} a cell may take).")


def markdown_to_clean_html(source: str) -> str:
    """Markdown rendered by nbconvert, then cleaned (a filter for the formgrader's pages);
    plain text when it would cost more than a cell may."""
    from nbconvert.filters.markdown import markdown2html_mistune

    work = markdown_work(source)
    if work > MARKDOWN_CELL_WORK:
        return markdown_as_text(source, too_costly(work))
    return clean_markdown_html(markdown2html_mistune(source))


# Pygments colours code in about 20 µs a token with the course's lexer (a notebook of 1 MiB of
# code took half a minute), and some of its other lexers take time that grows with the cube
# of a line's length (`autoit`: 5 KB of blanks, 17 s). So code is always coloured by the
# course's lexer, never by one the notebook's metadata names (`language_info.pygments_lexer`,
# a cell's `magics_language`), and only so much of it: a cell over CODE_CELL_CHARS, and the
# cells after a notebook's first CODE_NOTEBOOK_CHARS, are shown without colours. A lesson's
# longest code cell is under 4,000 characters and all its code under 30,000.
CODE_LEXER = "ipython3"
CODE_CELL_CHARS = 20_000
CODE_NOTEBOOK_CHARS = 100_000


def code_as_text(source: str, why: str) -> str:
    """`source` shown escaped, without colours, after a note that says `why`."""
    return (f'<div class="highlight code-as-text"><p><em>This cell\'s code is shown without '
            f"colours: {html.escape(why, quote=False)}</em></p>"
            f"<pre>{html.escape(source, quote=False)}</pre></div>")


@functools.lru_cache(maxsize=1)
def _code_highlighter() -> _CachedHighlighter:
    from nbconvert.filters.highlight import Highlight2HTML

    return _CachedHighlighter(Highlight2HTML(pygments_lexer=CODE_LEXER))


def highlight_code(source: str, language: str | None = None, metadata=None) -> str:
    """A code cell in colour by the course's lexer, whatever `language` and `metadata` name
    (a filter for the formgrader's pages); without colours when longer than a cell may be."""
    if len(source) > CODE_CELL_CHARS:
        return code_as_text(source, f"it is longer than the {CODE_CELL_CHARS:,} characters "
                                    "a cell is coloured for.")
    return _code_highlighter()(source, CODE_LEXER)


