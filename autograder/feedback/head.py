"""The feedback page's head: its Content Security Policy, its styles (Bootstrap as nbgrader's
feedback template has it, without the icon font; nbgrader's own rules; code colours at a
contrast of at least 4.5:1) and, when the page has maths, MathJax, all in the page itself.
Rendered from templates/head.html.j2 with autoescaping on."""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import re
from pathlib import Path

import jinja2
import nbgrader
from markupsafe import Markup
from nbformat import NotebookNode

LOG = logging.getLogger("autograder.feedback.head")

TEMPLATES = Path(__file__).parent / "templates"
_ENVIRONMENT = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                                  keep_trailing_newline=True)

# The grey behind code and outputs (Bootstrap's `pre`), which every code colour is measured
# against; WCAG's AA level asks 4.5:1 for text.
CODE_BACKGROUND = "#f5f5f5"
MIN_CONTRAST = 4.5

# Colours of the ANSI codes in tracebacks (before they are darkened to the contrast above).
_ANSI_COLOURS = {"black": "#3e424d", "red": "#c33", "green": "#00a250", "yellow": "#a07c00",
                 "blue": "#208ffb", "magenta": "#d160c4", "cyan": "#60c6c8", "white": "#c5c1b4"}

_BOOTSTRAP = (Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "static"
              / "node_modules" / "bootstrap" / "dist" / "css" / "bootstrap.min.css")
_FONT_FACE = re.compile(r"@font-face\s*\{[^}]*\}")


def _rgb(colour: str) -> tuple[int, int, int]:
    digits = colour.lstrip("#")
    if len(digits) == 3:
        digits = "".join(digit * 2 for digit in digits)
    return int(digits[0:2], 16), int(digits[2:4], 16), int(digits[4:6], 16)


def relative_luminance(colour: str) -> float:
    """WCAG 2.1's relative luminance of a `#rgb` or `#rrggbb` colour."""
    def linear(channel: int) -> float:
        value = channel / 255
        return value / 12.92 if value <= 0.03928 else ((value + 0.055) / 1.055) ** 2.4

    red, green, blue = map(linear, _rgb(colour))
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def contrast(foreground: str, background: str) -> float:
    """WCAG 2.1's contrast ratio of two colours (1 to 21)."""
    lighter, darker = sorted((relative_luminance(foreground), relative_luminance(background)),
                             reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def readable(colour: str, background: str = CODE_BACKGROUND) -> str:
    """`colour`, darkened in small steps of the same hue until it reads at MIN_CONTRAST on
    `background` (unchanged when it already does)."""
    red, green, blue = _rgb(colour)
    scale = 1.0
    found = colour
    while contrast(found, background) < MIN_CONTRAST:
        scale *= 0.97
        found = "#{:02x}{:02x}{:02x}".format(*(int(c * scale) for c in (red, green, blue)))
    return found


_CSS_COLOUR = re.compile(r"(?<![-\w])(color:\s*)(#[0-9A-Fa-f]{6}|#[0-9A-Fa-f]{3})\b")


@functools.lru_cache(maxsize=1)
def code_css() -> str:
    """Pygments' default style and the ANSI colours, each text colour readable on the grey."""
    from pygments.formatters import HtmlFormatter

    css = [HtmlFormatter(style="default").get_style_defs(".highlight"),
           f".highlight, .highlight pre, .output_area pre "
           f"{{ background-color: {CODE_BACKGROUND}; }}"]
    for name, colour in _ANSI_COLOURS.items():
        css.append(f".ansi-{name}-fg {{ color: {colour}; }}")
        css.append(f".ansi-{name}-intense-fg {{ color: {colour}; font-weight: bold; }}")
        css.append(f".ansi-{name}-bg {{ background-color: {colour}; }}")
    css.append(".ansi-bold { font-weight: bold; } .ansi-underline { text-decoration: underline; }")
    return _CSS_COLOUR.sub(lambda m: m.group(1) + readable(m.group(2)), "\n".join(css))


@functools.lru_cache(maxsize=1)
def bootstrap_css() -> str:
    """nbgrader's Bootstrap, without its icon font (which the page does not use and could only
    fetch from a folder it does not have)."""
    return _FONT_FACE.sub("", _BOOTSTRAP.read_text(encoding="utf-8"))


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
                               f"(no {name}); see _MATHJAX_PARTS in autograder/feedback/head.py")
        chosen.append(text)
    safe = (folder / "extensions" / "Safe.js").read_text(encoding="utf-8")
    preloaded = list(_MATHJAX_PARTS) + ["[MathJax]/extensions/Safe.js"]
    config = {**_MATHJAX_CONFIG, "NativeMML": {"styles": _local_fonts("\n".join(chosen))}}
    return (
        "window.MathJax = " + json.dumps(config) + ";",
        (folder / "MathJax.js").read_text(encoding="utf-8"),
        "MathJax.Ajax.Preloading(" + ", ".join(json.dumps(p) for p in preloaded) + ");\n"
        + "\n".join(chosen) + "\n" + safe,
        "MathJax.Hub.Configured();",
    )


# The web fonts MathJax's MathML output names for some variants (double-struck, script,
# fraktur, caligraphic): Jupyter's copy does not ship them and the page may load none, so each
# is asked for from the reader's machine only (`local()`), else the browser's own maths font.
_WEB_FONT = re.compile(r'"(@font-face /\*\d+\*/)":\{"font-family":"(MathJax_[\w-]+)-WEB"')


def _local_fonts(jax: str) -> dict:
    return {key: {"src": f"local('{family}')"} for key, family in _WEB_FONT.findall(jax)}


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
def _head_parts(with_maths: bool) -> dict:
    scripts = mathjax_scripts() if with_maths else ()
    return {"policy": content_security_policy(scripts), "bootstrap": Markup(bootstrap_css()),
            "code_css": Markup(code_css()), "scripts": [Markup(script) for script in scripts]}


def head(nb: NotebookNode, title: str) -> Markup:
    """The <head> of the feedback page for `nb`: the policy, the title, the styles, and
    MathJax when the page has maths."""
    return Markup(_ENVIRONMENT.get_template("head.html.j2").render(
        title=title, **_head_parts(has_maths(nb))))


def notice_page(**fields) -> str:
    """The one-paragraph page of templates/notice.html.j2 (write_notice's)."""
    return _ENVIRONMENT.get_template("notice.html.j2").render(**fields)


# What the TeX-to-maths step looks for, as MathJax is configured above.
_MATHS = re.compile(r"\$|\\\(|\\\[|\\begin\{")

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
