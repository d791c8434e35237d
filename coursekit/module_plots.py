"""Figures for lesson 06: one value per module or parameter, as recorded by module hooks."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from coursekit.figures import describe

__all__ = ["plot_by_name", "stage_of"]

_STAGE_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860",
                  "#da8bc3", "#8c8c8c")


def stage_of(name: str) -> str:
    """The top-level module a dotted name belongs to: ``"layer4.2.bn3.weight"`` -> ``"layer4"``."""
    return name.split(".", 1)[0]


def plot_by_name(values: Mapping[str, float], *, ax: Axes | None = None,
                 title: str | None = None, ylabel: str = "value", log: bool = False,
                 max_labels: int = 24, legend: bool = True) -> Axes:
    """Draw one bar per entry of `values`, in its order, coloured by `stage_of` its name.

    With ``log=True`` the bars show absolute values on a log axis and negative entries are
    hatched. At most `max_labels` names are written under the axis, evenly spaced. Names
    that share a stage share a colour, explained by a legend unless ``legend=False``.
    """
    if not values:
        raise ValueError("plot_by_name needs at least one value")
    if max_labels < 1:
        raise ValueError("max_labels must be at least 1")
    names = list(values)
    numbers = [float(values[name]) for name in names]
    stages = list(dict.fromkeys(stage_of(name) for name in names))
    grouped = len(stages) < len(names)  # otherwise every bar is its own stage: one colour
    colour = {stage: _STAGE_COLOURS[i % len(_STAGE_COLOURS)] if grouped else _STAGE_COLOURS[0]
              for i, stage in enumerate(stages)}
    if ax is None:
        _, ax = plt.subplots(figsize=(min(max(6, 2 + 0.12 * len(names)), 14), 3.5))
    heights = [abs(v) for v in numbers] if log else numbers
    bars = ax.bar(range(len(names)), heights, color=[colour[stage_of(n)] for n in names])
    if log:
        ax.set_yscale("log")
        for bar, number in zip(bars, numbers):
            if number < 0:
                bar.set_hatch("///")
                bar.set_edgecolor("black")
    step = max(1, -(-len(names) // max_labels))  # ceiling division
    ticks = list(range(0, len(names), step))
    ax.set_xticks(ticks, [names[i] for i in ticks], rotation=90, fontsize=8)
    negatives = log and any(v < 0 for v in numbers)
    ax.set_ylabel(f"|{ylabel}|, hatched if < 0" if negatives else ylabel)
    if legend and grouped and len(stages) > 1:
        ax.legend(handles=[Patch(color=colour[s], label=s) for s in stages], fontsize=7,
                  ncol=min(len(stages), 5))
    if title:
        ax.set_title(title)
    # Sizes below a ten-thousandth of the largest are rounding noise (a normalised mean): "about 0".
    largest = max(abs(number) for number in numbers)
    if len(names) <= 12:
        listed = ", ".join(f"{name} {number:.2g}" if abs(number) >= 1e-4 * largest
                           else f"{name} about 0" for name, number in zip(names, numbers))
    else:
        top = max(zip(names, numbers), key=lambda pair: abs(pair[1]))
        listed = (f"{len(names)} bars from {names[0]} to {names[-1]}, the largest in size "
                  f"{top[0]} ({top[1]:.2g})")
    describe(ax, f"{title + ': ' if title else ''}a bar chart of {ylabel}"
                 f"{' on a log scale' if log else ''}, one bar per name: {listed}")
    return ax
