"""What a student wrote, made harmless for a feedback page or the formgrader's view: HTML
cleaned by an allow-list, `files/` links resolved first, script outputs and odd metadata dropped.
"""

from __future__ import annotations

import re

import bleach
from bleach.css_sanitizer import CSSSanitizer
from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode

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


class CleanHTML(str):
    """HTML this module made safe: cleaned, its files/ links already resolved."""


def clean_html(fragment) -> str:
    """`fragment` with only harmless HTML left: elements outside the allow-list are shown as
    text (`<script>` and `<style>` are dropped with their content), attributes outside it (every
    `on...=` handler among them) removed, links only to http(s) and mail, pictures only
    embedded ones."""
    if isinstance(fragment, CleanHTML):  # the templates clean rendered markdown a second time
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
    if isinstance(text, CleanHTML):
        return text
    return _MARKDOWN_FILES_URL.sub(r"\1[\2](\3)", _FILES_URL.sub(r"\1=\2", str(text)))


def clean_markdown_html(rendered: str) -> CleanHTML:
    return CleanHTML(clean_html(strip_files_prefix(rendered)))


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


