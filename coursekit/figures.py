"""Figures a screen reader can describe: every matplotlib figure a lesson shows also comes as
`<img alt="...">` HTML, which JupyterLab shows in place of the bare PNG (that has no alt text).

The alt text is the description given with `describe(fig, text)` (or one each axes got, which
the course's plot helpers give theirs); without one it is built from the figure's suptitle and
each plot's title and axis labels. `install()` runs when a lesson imports `coursekit.checks`.
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["describe", "alt_text", "figure_html", "install"]

_DESCRIPTION = "_coursekit_description"


def describe(target: Any, text: str) -> Any:
    """Give a figure, or one plot (axes) of it, the description its alt text uses; returns it."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("describe needs a non-empty text that says what the figure shows")
    setattr(target, _DESCRIPTION, " ".join(text.split()))
    return target


def _axes_text(ax: Any) -> str:
    given = getattr(ax, _DESCRIPTION, None)
    if given:
        return given
    title = " ".join(part for part in (ax.get_title(loc) for loc in ("left", "center", "right"))
                     if part)
    axis_labels = [f"{name}: {label}" for name, label in
                   (("x", ax.get_xlabel()), ("y", ax.get_ylabel())) if label]
    if title and axis_labels:
        return f"{title} ({', '.join(axis_labels)})"
    return title or (f"a plot of {' against '.join(reversed(axis_labels))}" if axis_labels else "")


def alt_text(fig: Any) -> str:
    """The figure's description if it has one, else what its titles and axis labels say."""
    given = getattr(fig, _DESCRIPTION, None)
    if given:
        return given
    suptitle = getattr(fig, "_suptitle", None)
    parts = [suptitle.get_text()] if suptitle is not None and suptitle.get_text() else []
    parts += [text for text in (_axes_text(ax) for ax in fig.axes) if text]
    parts = [" ".join(part.split()) for part in parts]
    return ". ".join(part for part in parts if part) or "A figure without a title or a description."


def figure_html(fig: Any) -> str | None:
    """`fig` as an embedded PNG `<img>` with its alt text; None for what is not a whole figure
    (a subfigure is drawn with its parent)."""
    from IPython.core.pylabtools import print_figure
    from matplotlib.figure import Figure

    if not isinstance(fig, Figure) or not fig.axes:
        return None
    png = print_figure(fig, "png", bbox_inches="tight", base64=True)
    if not png:
        return None
    return f'<img src="data:image/png;base64,{png}" alt="{html.escape(alt_text(fig), quote=True)}">'


def install(shell: Any = None) -> bool:
    """Show figures as HTML with alt text in `shell` (the running IPython kernel by default);
    returns whether the formatter is registered."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
        if shell is None:
            return False
    # Registered for FigureBase, by name (matplotlib need not be imported yet): the inline
    # backend, when it starts, removes every formatter registered for Figure itself.
    shell.display_formatter.formatters["text/html"].for_type_by_name(
        "matplotlib.figure", "FigureBase", figure_html)
    return True
