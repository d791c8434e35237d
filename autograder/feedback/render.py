"""Feedback for students: nbgrader's HTML without hidden tests, safe to open, and offline.

nbgrader's ClearHiddenTests removes the hidden tests from the cells' source, but the traceback
of a failing hidden test still shows the lines around the failure, hidden or not.
`HideTestTracebacks` (run before ClearHiddenTests) reduces every error in a test cell to its
last line, `ExceptionName: message`, which says what went wrong without the test's code.

`FeedbackHTMLExporter` writes the page (nbgrader's GenerateFeedback uses it through
nbgrader_config.py, and so does `python -m autograder grade`):

- nothing a student wrote runs as script when anyone opens the page. The HTML of markdown
  cells and of outputs (text/html, text/markdown, SVG, raw cells) is cleaned by an allow-list
  (`clean_html`): no `<script>`, no event attributes such as `onerror=`, no `javascript:`
  links; JavaScript and widget outputs are dropped; output metadata that the templates write
  into attributes is reduced to numbers and text. Behind that, the page carries a Content
  Security Policy that lets only its own scripts run (by their hashes), and loads nothing
  from the network;
- maths renders offline: when the page has maths, it carries MathJax, from Jupyter's own
  copy (the jupyter-server-mathjax package), in the page itself; MathJax turns the TeX into
  MathML, which the browser draws;
- code has colours: Pygments' CSS, and colours for the ANSI codes of tracebacks.
"""

from __future__ import annotations

from autograder import _imports  # noqa: F401 (first: a quicker jsonschema import)

import base64
import contextlib
import functools
import hashlib
import html
import json
import logging
import re
from pathlib import Path

import bleach
from bleach.css_sanitizer import CSSSanitizer
from nbconvert.exporters.html import HTMLExporter, contextfilter
from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from traitlets import Bool, Unicode

from nbgrader import utils
from nbgrader.preprocessors import NbGraderPreprocessor

from autograder.trusted.notes import (DEAD_ENAME, NOT_RUN_ENAME, TIMEOUT_ENAME,
                                      ansi_red as _ansi_red, withhold_hidden_checks)

# Errors the grader writes itself: their one-line traceback is a message for the student.
_OWN_ERRORS = {TIMEOUT_ENAME, DEAD_ENAME, NOT_RUN_ENAME}


def _short_traceback(output: NotebookNode) -> list[str]:
    if output.get("ename") in _OWN_ERRORS and len(output.get("traceback", [])) == 1:
        return list(output.traceback)
    ename, evalue = output.get("ename", "Error"), output.get("evalue", "")
    return [f"{_ansi_red(ename)}: {evalue}" if evalue else _ansi_red(ename)]


# Rendered markdown (and highlighted code) kept across notebooks by a worker: at most this much
# each, of pieces this large
# (a lesson's longest markdown cell renders to a few KB).
MARKDOWN_CACHE_BYTES = 64 << 20
MARKDOWN_CACHE_ITEM = 64 << 10


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


class WithholdHiddenChecks(NbGraderPreprocessor):
    """Before a deadline: test cells' verdicts without the hidden checks' results
    (executor.withhold_hidden_checks); on only when `enabled` (grade --withhold-hidden-checks)."""

    enabled = Bool(False).tag(config=True)

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        if self.enabled and cell.cell_type == "code" and utils.is_grade(cell):
            withhold_hidden_checks(cell)
        return cell, resources


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{title}</title>
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


# --------------------------------------------------------------------------------------------
# Cleaning what a student wrote

# What rendered markdown and notebook outputs may hold: text, tables, lists, code, images.
_TAGS = frozenset({
    "a", "abbr", "acronym", "b", "blockquote", "br", "caption", "cite", "code", "col",
    "colgroup", "dd", "del", "details", "div", "dl", "dt", "em", "figcaption", "figure", "h1",
    "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre",
    "q", "s", "samp", "small", "span", "strike", "strong", "sub", "summary", "sup", "table",
    "tbody", "td", "tfoot", "th", "thead", "tr", "tt", "u", "ul", "var",
})
_COMMON_ATTRIBUTES = {"class", "title", "style", "align", "lang", "dir"}
_TAG_ATTRIBUTES = {
    "a": {"href", "rel"},
    "img": {"src", "alt", "width", "height"},
    "td": {"colspan", "rowspan", "valign"},
    "th": {"colspan", "rowspan", "valign", "scope"},
    "col": {"span"}, "colgroup": {"span"},
    "table": {"border"},
    "ol": {"start", "type"},
    **{f"h{level}": {"id"} for level in range(1, 7)},  # the anchors nbconvert gives headings
}
_IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml)[;,]", re.IGNORECASE)
_NUMBER = re.compile(r"\d{1,5}(\.\d{1,3})?(px|%)?")
# Elements dropped with their content before cleaning (the allow-list escapes any others).
_DROPPED = re.compile(r"<(style|script)\b[^>]*>.*?</\1\s*>", re.IGNORECASE | re.DOTALL)


def _allowed_attribute(tag: str, name: str, value: str) -> bool:
    if name in _COMMON_ATTRIBUTES:
        return True
    if name not in _TAG_ATTRIBUTES.get(tag, ()):
        return False
    if tag == "img" and name == "src":
        # Pictures embedded in the page; anything else would be fetched (and is refused by the
        # page's policy anyway).
        return bool(_IMAGE_DATA.match(value))
    if tag == "a" and name == "href":
        return not value.strip().lower().startswith("data:")
    if name in ("width", "height", "colspan", "rowspan", "span", "start", "border"):
        return bool(_NUMBER.fullmatch(value.strip()))
    return True


_CLEANER = bleach.sanitizer.Cleaner(
    tags=_TAGS, attributes=_allowed_attribute,
    protocols={"http", "https", "mailto", "data"}, strip=False, strip_comments=True,
    css_sanitizer=CSSSanitizer(),
)


class _Clean(str):
    """HTML this module made safe: cleaned, its files/ links already resolved."""


def clean_html(fragment) -> str:
    """`fragment` with only harmless HTML left: elements outside the allow-list are shown as
    text (`<script>` and `<style>` are dropped with their content), attributes outside it (every
    `on...=` handler among them) removed, links only to http(s) and mail, pictures only
    embedded ones."""
    if isinstance(fragment, _Clean):  # the templates clean rendered markdown a second time
        return fragment
    text = fragment.decode("utf-8", "replace") if isinstance(fragment, bytes) else str(fragment)
    return _CLEANER.clean(_DROPPED.sub("", text))


# nbconvert's strip_files_prefix, its markdown link's caption and location bounded: its lazy
# `.*?` searched the rest of the line from every `[` (minutes for a long line of them).
_FILES_URL = re.compile(r"(src|href)\=(['\"]?)/?files/")
_MARKDOWN_FILES_URL = re.compile(r"(!?)\[([^\[\]\n]{0,2000})\]\(/?files/([^)\[\n]{0,2000})\)")


def strip_files_prefix(text) -> str:
    """Links to `files/...` (Jupyter's old URLs) made relative, in linear time; HTML this module
    made safe is left as it is (its prefixes were stripped before it was cleaned: stripping
    after cleaning could turn `files/javascript:...` into a `javascript:` link)."""
    if isinstance(text, _Clean):
        return text
    return _MARKDOWN_FILES_URL.sub(r"\1[\2](\3)", _FILES_URL.sub(r"\1=\2", str(text)))


def _clean_markdown_html(rendered: str) -> _Clean:
    return _Clean(clean_html(strip_files_prefix(rendered)))


# Output types that are programs for the browser, not something to show.
_SCRIPT_MIMETYPES = ("application/javascript", "text/javascript",
                     "application/vnd.jupyter.widget-view+json",
                     "application/vnd.jupyter.widget-state+json")


def _clean_output_metadata(metadata) -> dict:
    """What the templates read from an output's metadata (an image's size, alt text and
    `unconfined`), as numbers and text; nothing else (file names, `isolated`, ...)."""
    kept = {}
    for mimetype, values in (metadata or {}).items():
        if not isinstance(values, dict) or not mimetype.startswith("image/"):
            continue
        entry = {}
        for key in ("width", "height"):
            value = values.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                entry[key] = int(value)
        if isinstance(values.get("alt"), str):
            entry["alt"] = values["alt"]
        if values.get("unconfined") is True:
            entry["unconfined"] = True
        if entry:
            kept[mimetype] = entry
    return kept


def clean_notebook(nb: NotebookNode) -> NotebookNode:
    """Remove from `nb` what the page would run or write unescaped into attributes."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for output in cell.get("outputs", []) or []:
            if "metadata" in output:
                output["metadata"] = _clean_output_metadata(output.get("metadata"))
            data = output.get("data")
            if isinstance(data, dict):
                for mimetype in _SCRIPT_MIMETYPES:
                    data.pop(mimetype, None)
    return nb


class CleanNotebook(Preprocessor):
    """`clean_notebook` as an nbconvert preprocessor (for the formgrader's HTML exporter)."""

    enabled = True

    def preprocess(self, nb, resources):
        return clean_notebook(nb), resources


# --------------------------------------------------------------------------------------------
# What rendering markdown may cost the grader

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
    return _Clean(f'<div class="markdown-as-text"><p><em>This cell\'s markdown is shown as '
                  f"plain text: {html.escape(why)}</em></p><pre>{html.escape(source)}</pre></div>")


def _too_costly(work: int) -> str:
    return (f"rendering it would cost the grader too much (an estimated {work:,} units of "
            f"work, over the {MARKDOWN_CELL_WORK:,} a cell may take).")


def markdown_to_clean_html(source: str) -> str:
    """Markdown rendered by nbconvert, then cleaned (a filter for the formgrader's pages);
    plain text when it would cost more than a cell may."""
    from nbconvert.filters.markdown import markdown2html_mistune

    work = markdown_work(source)
    if work > MARKDOWN_CELL_WORK:
        return markdown_as_text(source, _too_costly(work))
    return _clean_markdown_html(markdown2html_mistune(source))


# --------------------------------------------------------------------------------------------
# What colouring code may cost the grader

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
            f"colours: {html.escape(why)}</em></p><pre>{html.escape(source)}</pre></div>")


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


# --------------------------------------------------------------------------------------------
# The page's head: its policy, colours and MathJax

LOG = logging.getLogger("autograder.feedback.render")

# Colours of code (Pygments' default style) and of the ANSI codes in tracebacks.
_ANSI_COLOURS = {"black": "#3e424d", "red": "#c33", "green": "#00a250", "yellow": "#a07c00",
                 "blue": "#208ffb", "magenta": "#d160c4", "cyan": "#60c6c8", "white": "#c5c1b4"}


@functools.lru_cache(maxsize=1)
def page_css() -> str:
    from pygments.formatters import HtmlFormatter

    css = [HtmlFormatter(style="default").get_style_defs(".highlight")]
    for name, colour in _ANSI_COLOURS.items():
        css.append(f".ansi-{name}-fg {{ color: {colour}; }}")
        css.append(f".ansi-{name}-intense-fg {{ color: {colour}; font-weight: bold; }}")
        css.append(f".ansi-{name}-bg {{ background-color: {colour}; }}")
    css.append(".ansi-bold { font-weight: bold; } .ansi-underline { text-decoration: underline; }")
    css.append("math[display=block] { margin: 0.5em 0; }")
    return "\n".join(css)


# MathJax 2 as Jupyter ships it: MathJax.js, and the parts of its combined configuration
# TeX-AMS-MML_HTMLorMML-full.js that read TeX and write MathML (the browser draws MathML:
# no fonts to load). Each part is a line of that file, in the order of its Preloading list.
_MATHJAX_PARTS = (
    "[MathJax]/jax/input/TeX/config.js",
    "[MathJax]/jax/output/NativeMML/config.js",
    "[MathJax]/extensions/tex2jax.js",
    "[MathJax]/extensions/MathEvents.js",
    "[MathJax]/jax/element/mml/jax.js",
    "[MathJax]/extensions/toMathML.js",
    "[MathJax]/extensions/TeX/noErrors.js",
    "[MathJax]/extensions/TeX/noUndefined.js",
    "[MathJax]/jax/input/TeX/jax.js",
    "[MathJax]/extensions/TeX/AMSmath.js",
    "[MathJax]/extensions/TeX/AMSsymbols.js",
    "[MathJax]/jax/output/NativeMML/jax.js",
)
_MATHJAX_COMBINED = "config/TeX-AMS-MML_HTMLorMML-full.js"
_MATHJAX_CONFIG = {
    # Nothing starts until the last script says so: by then every part is in the page.
    "delayStartupUntil": "configured",
    "root": ".",
    "jax": ["input/TeX", "output/NativeMML"],
    "extensions": ["tex2jax.js", "Safe.js"],  # Safe: no javascript: links or styles from TeX
    "TeX": {"extensions": ["AMSmath.js", "AMSsymbols.js", "noErrors.js", "noUndefined.js"]},
    "tex2jax": {"inlineMath": [["$", "$"], ["\\(", "\\)"]],
                "displayMath": [["$$", "$$"], ["\\[", "\\]"]],
                "processEscapes": True, "processEnvironments": True},
    "showMathMenu": False, "messageStyle": "none", "menuSettings": {"zoom": "None"},
}


def mathjax_directory() -> Path | None:
    """The MathJax of the environment (the jupyter-server-mathjax package), or None."""
    try:
        import jupyter_server_mathjax
    except ImportError:
        return None
    folder = Path(jupyter_server_mathjax.__file__).parent / "static"
    return folder if (folder / "MathJax.js").is_file() else None


@functools.lru_cache(maxsize=1)
def mathjax_scripts() -> tuple[str, ...]:
    """The inline scripts that typeset the page's maths offline; () without MathJax."""
    folder = mathjax_directory()
    if folder is None:
        LOG.warning("MathJax is not installed (the jupyter-server-mathjax package): feedback "
                    "pages show maths as TeX. Run `make setup` to install it.")
        return ()
    combined = (folder / _MATHJAX_COMBINED).read_text(encoding="utf-8")
    listed = re.findall(r'"([^"]+)"', re.search(r"MathJax\.Ajax\.Preloading\(([^)]*)\)",
                                                combined).group(1))
    lines = combined.split("\n")
    first = lines.index("});", lines.index("MathJax.Hub.Config({")) + 1
    parts = dict(zip(listed, (line for line in lines[first:] if line.strip())))
    chosen = []
    for name in _MATHJAX_PARTS:
        text = parts.get(name, "")
        short = name.rsplit("/", 1)[-1]
        if short.endswith("jax.js") or short == "config.js":
            short = name.split("/")[-2]  # e.g. TeX, NativeMML, mml
        if short not in text:
            raise RuntimeError(f"MathJax's {_MATHJAX_COMBINED} is not laid out as expected "
                               f"(no {name}); see _MATHJAX_PARTS in autograder/feedback/render.py")
        chosen.append(text)
    safe = (folder / "extensions" / "Safe.js").read_text(encoding="utf-8")
    preloaded = list(_MATHJAX_PARTS) + ["[MathJax]/extensions/Safe.js"]
    return (
        "window.MathJax = " + json.dumps(_MATHJAX_CONFIG) + ";",
        (folder / "MathJax.js").read_text(encoding="utf-8"),
        "MathJax.Ajax.Preloading(" + ", ".join(json.dumps(p) for p in preloaded) + ");\n"
        + "\n".join(chosen) + "\n" + safe,
        "MathJax.Hub.Configured();",
    )


def _script_hash(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def content_security_policy(scripts: tuple[str, ...] = ()) -> str:
    """The page's policy: its own inline `scripts` may run, nothing else; nothing is loaded
    from anywhere (pictures and fonts only from the page itself)."""
    policy = ["default-src 'none'", "style-src 'unsafe-inline'", "img-src data:",
              "font-src data:", "base-uri 'none'", "form-action 'none'"]
    if scripts:
        policy.append("script-src " + " ".join(_script_hash(script) for script in scripts))
    return "; ".join(policy)


@functools.lru_cache(maxsize=2)
def page_head(with_maths: bool) -> str:
    """What goes first into the page's <head>: the policy, the colours, MathJax if needed."""
    scripts = mathjax_scripts() if with_maths else ()
    parts = [f'<meta http-equiv="Content-Security-Policy" '
             f'content="{html.escape(content_security_policy(scripts))}">',
             f"<style>\n{page_css()}\n</style>"]
    parts += [f"<script>{script}</script>" for script in scripts]
    return "\n".join(parts) + "\n"


# What the TeX-to-maths step looks for, as MathJax is configured above.
_MATHS = re.compile(r"\$|\\\(|\\\[|\\begin\{")
# nbconvert's MathJax (from the internet), written by its `mathjax()` macro.
_ONLINE_MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->",
                             re.DOTALL)
_ANY_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script\s*>", re.IGNORECASE | re.DOTALL)
_HEAD = re.compile(r"<head\b[^>]*>(\s*<meta charset=[^>]*>)?", re.IGNORECASE)


def has_maths(nb: NotebookNode) -> bool:
    """Whether any text that MathJax would typeset holds maths delimiters."""
    for cell in nb.cells:
        if cell.cell_type == "markdown" and _MATHS.search(cell.source):
            return True
        comment = cell.get("metadata", {}).get("nbgrader", {}).get("comment")
        if isinstance(comment, str) and _MATHS.search(comment):
            return True
        for output in cell.get("outputs", []) or []:
            data = output.get("data", {}) or {}
            for mimetype in ("text/markdown", "text/latex", "text/html"):
                if isinstance(data.get(mimetype), str) and _MATHS.search(data[mimetype]):
                    return True
    return False


def offline_page(page: str, with_maths: bool) -> str:
    """`page` (nbgrader's feedback template, rendered) with its head made safe and offline:
    the policy, colours and MathJax first, and no script from the internet."""
    page = _ONLINE_MATHJAX.sub("", page, count=1)
    head = _HEAD.search(page)
    if head is None:
        raise ValueError("the feedback page has no <head>: cannot make it safe")
    before, after = page[:head.end()], page[head.end():]
    # The template's own head has no script left; student content is in the body.
    body_at = after.lower().find("<body")
    head_rest, body = (after[:body_at], after[body_at:]) if body_at >= 0 else (after, "")
    head_rest = _ANY_SCRIPT.sub("", head_rest)
    return before + "\n" + page_head(with_maths) + head_rest + body


class FeedbackHTMLExporter(HTMLExporter):
    """nbconvert's HTMLExporter for feedback pages: safe to open, offline, with code colours;
    it remembers rendered markdown across notebooks (a lesson's text is the same for all)."""

    _markdown: dict = {}
    _markdown_bytes = 0
    # What is left of the notebook's markdown work (see MARKDOWN_NOTEBOOK_WORK); every cell
    # counts, rendered or found in the cache, so that the same notebook always renders alike.
    _work_left = MARKDOWN_NOTEBOOK_WORK
    _code_left = CODE_NOTEBOOK_CHARS  # likewise, of the characters of code it colours

    def highlight_code(self, source: str, language: str | None = None, metadata=None) -> str:
        """As the module's `highlight_code`, within the notebook's budget of code coloured."""
        if len(source) <= CODE_CELL_CHARS:
            self._code_left -= len(source)
            if self._code_left < 0:
                return code_as_text(source, f"the notebook's code before it used up the "
                                            f"{CODE_NOTEBOOK_CHARS:,} characters coloured "
                                            "per notebook.")
        return highlight_code(source)

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
            return markdown_as_text(source, _too_costly(work))
        self._work_left -= work
        if self._work_left < 0:
            return markdown_as_text(source, (
                f"the notebook's markdown before it used up the work its rendering may take "
                f"({MARKDOWN_NOTEBOOK_WORK:,} units, estimated from each cell's text)."))
        if cell.get("attachments"):
            return _clean_markdown_html(super().markdown2html(context, source))
        # The notebook's folder matters only to embed images it links to: otherwise the same
        # markdown (the lesson's, in every student's notebook) renders once per worker.
        path = context.get("resources", {}).get("metadata", {}).get("path", "") \
            if self.embed_images else ""
        key = (source, path)
        found = self._markdown.get(key)
        if found is None:
            found = _clean_markdown_html(super().markdown2html(context, source))
            # Kept only while small: a student's own markdown is unique to their notebook,
            # and the cache lives as long as the worker.
            size = len(source) + len(found)
            if size <= MARKDOWN_CACHE_ITEM and \
                    type(self)._markdown_bytes + size <= MARKDOWN_CACHE_BYTES:
                self._markdown[key] = found
                type(self)._markdown_bytes += size
        return found

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
        return clean_notebook(nb), resources

    def from_notebook_node(self, nb, resources=None, **kw):
        self._work_left = MARKDOWN_NOTEBOOK_WORK
        self._code_left = CODE_NOTEBOOK_CHARS
        page, resources = super().from_notebook_node(nb, resources, **kw)
        return offline_page(page, has_maths(nb)), resources


def feedback_exporter_class():
    """The exporter for feedback pages (nbgrader_config.py names it to GenerateFeedback)."""
    return FeedbackHTMLExporter


@contextlib.contextmanager
def quick_html_export():
    """While active, HTMLExporter skips its BeautifulSoup pass (see `_NoSoup`); the feedback
    exporter colours code through a cache of its own (`highlight_code`)."""
    from nbconvert.exporters import html as html_exporter

    original_soup = html_exporter.BeautifulSoup
    html_exporter.BeautifulSoup = _NoSoup
    try:
        yield
    finally:
        html_exporter.BeautifulSoup = original_soup
