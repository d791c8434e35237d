"""The class report's figures: matplotlib drawings (without pyplot's global state) as base64 PNG
for the page to inline."""

from __future__ import annotations

import base64
import io
import math

from autograder.report.tally import Exercise


def _png(figure) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def score_histograms(scores: dict[str, list[float]], maxima: dict[str, float]) -> str | None:
    """One histogram per lesson of the graded notebooks' scores (base64 PNG)."""
    from matplotlib.figure import Figure

    lessons = [lesson for lesson in scores if scores[lesson]]
    if not lessons:
        return None
    columns = min(4, len(lessons))
    rows = math.ceil(len(lessons) / columns)
    figure = Figure(figsize=(3.3 * columns, 2.3 * rows), layout="constrained")
    for index, lesson in enumerate(lessons):
        axes = figure.add_subplot(rows, columns, index + 1)
        top = maxima.get(lesson) or max(scores[lesson]) or 1.0
        if top <= 20 and float(top).is_integer():
            bins = [edge - 0.5 for edge in range(int(top) + 2)]
            axes.set_xticks(range(int(top) + 1))
        else:
            bins = [top * step / 10 for step in range(11)]
        axes.hist(scores[lesson], bins=bins, color="#4c72b0", edgecolor="white")
        axes.set_title(lesson, fontsize=10)
        axes.set_xlabel(f"score (of {top:g})", fontsize=9)
        axes.set_ylabel("notebooks", fontsize=9)
        axes.yaxis.get_major_locator().set_params(integer=True)
        axes.tick_params(labelsize=8)
        axes.spines[["top", "right"]].set_visible(False)
    return _png(figure)


def pass_rate_bars(exercises: list[Exercise]) -> str | None:
    """Horizontal bars: each exercise's pass rate on visible and on hidden checks (or on its
    test cells when no checks are known)."""
    from matplotlib.figure import Figure

    if not exercises:
        return None
    labels = [f"{e.lesson} · {e.exercise}" for e in exercises]
    figure = Figure(figsize=(8.5, 0.9 + 0.42 * len(exercises)), layout="constrained")
    axes = figure.add_subplot(1, 1, 1)
    height = 0.38
    series = [("visible", "visible checks", "#55a868"), ("hidden", "hidden checks", "#c44e52"),
              ("cell", "test cell (no per-check results)", "#8172b2")]
    shown = [s for s in series if any(e.rate(s[0]) is not None for e in exercises)]
    for offset, (kind, label, colour) in enumerate(shown):
        values = [100 * (e.rate(kind) or 0.0) for e in exercises]
        positions = [i + (offset - (len(shown) - 1) / 2) * height for i in range(len(exercises))]
        axes.barh(positions, values, height=height, color=colour, label=label)
    axes.set_yticks(range(len(exercises)), labels, fontsize=8)
    axes.set_ylim(len(exercises) - 0.5, -0.5)  # the first exercise on top, no margins
    axes.set_xlim(0, 100)
    axes.set_xlabel("pass rate (%)", fontsize=9)
    axes.tick_params(axis="x", labelsize=8)
    axes.spines[["top", "right"]].set_visible(False)
    axes.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=len(shown),
                frameon=False)
    return _png(figure)
