"""Figures for lesson 03: the order in which autograd ran the hooks of one backward pass."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from coursekit.figures import describe

__all__ = ["plot_hook_order", "HOOK_COLOURS"]

# Colour of a step, chosen by the first word of its label that names a kind of hook.
HOOK_COLOURS: dict[str, str] = {
    "tensor": "#9ecae1",
    "retain_grad": "#c7e9c0",
    "node": "#fdd0a2",
    "post-accumulate": "#dadaeb",
}
_DEFAULT_COLOUR = "#eeeeee"


def _colour(label: str) -> str:
    lowered = label.lower()
    for word in ("post-accumulate", "retain_grad", "tensor", "node"):
        if word in lowered:
            return HOOK_COLOURS[word]
    return _DEFAULT_COLOUR


def plot_hook_order(events: Sequence[str], *, ax: Axes | None = None,
                    title: str | None = None) -> Axes:
    """Draw `events` (the steps of a backward pass, in the order they ran) as numbered boxes.

    A label that mentions "tensor", "retain_grad", "node" or "post-accumulate" gets that colour.
    """
    if not events:
        raise ValueError("plot_hook_order needs at least one recorded event")
    count = len(events)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 0.65 * count + 0.6))
    for step, label in enumerate(events):
        y = count - 1 - step
        ax.text(0.5, y, f"{step + 1}. {label}", ha="center", va="center", fontsize=10,
                bbox={"boxstyle": "round,pad=0.4", "facecolor": _colour(label),
                      "edgecolor": "#555555"})
        if step:
            ax.annotate("", xy=(0.5, y + 0.3), xytext=(0.5, y + 0.7),
                        arrowprops={"arrowstyle": "->", "color": "#555555"})
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.6, count - 0.4)
    ax.axis("off")
    if title:
        ax.set_title(title)
    steps = "; ".join(f"{step + 1}. {label}" for step, label in enumerate(events))
    describe(ax, f"{title + ': ' if title else ''}the steps in the order they ran, {steps}")
    return ax
