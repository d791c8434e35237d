"""Figures for lesson 04: a Jacobian as an annotated heat map, with a row or column marked."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from coursekit.figures import describe

__all__ = ["plot_jacobian"]


def _labels(given: Sequence[str] | None, prefix: str, count: int) -> list[str]:
    if given is None:
        return [f"{prefix}{index}" for index in range(count)]
    if len(given) != count:
        raise ValueError(f"expected {count} labels, got {len(given)}")
    return list(given)


def _format(value: float, decimals: int) -> str:
    text = f"{value:.{decimals}f}".rstrip("0").rstrip(".") if decimals else f"{value:.0f}"
    return "0" if text in ("-0", "") else text


def plot_jacobian(jacobian: torch.Tensor, *, ax: Axes | None = None, title: str | None = None,
                  output_labels: Sequence[str] | None = None,
                  input_labels: Sequence[str] | None = None,
                  highlight_row: int | None = None, highlight_column: int | None = None,
                  annotate: bool = True, decimals: int = 2) -> Axes:
    """Draw a 2-D Jacobian (rows: outputs, columns: inputs) as a heat map and return its axes.

    `highlight_row` outlines the row one backward pass with a one-hot v reads;
    `highlight_column` outlines the column one forward-mode pass with a one-hot u reads.
    """
    matrix = torch.as_tensor(jacobian).detach().to(torch.float64).cpu()
    if matrix.dim() != 2:
        raise ValueError(f"plot_jacobian needs a 2-D matrix, got shape {tuple(matrix.shape)}")
    rows, columns = matrix.shape
    if ax is None:
        _, ax = plt.subplots(figsize=(2.4 + 1.0 * columns, 1.6 + 0.8 * rows))
    largest = float(matrix.abs().max()) or 1.0
    image = ax.imshow(matrix.numpy(), cmap="RdBu_r", vmin=-largest, vmax=largest)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    ax.set_xticks(range(columns), _labels(input_labels, "x", columns))
    ax.set_yticks(range(rows), _labels(output_labels, "y", rows))
    ax.set_xlabel("input (column j: ∂/∂x_j)")
    ax.set_ylabel("output (row i: y_i)")
    if annotate:
        for i in range(rows):
            for j in range(columns):
                value = float(matrix[i, j])
                colour = "white" if abs(value) > 0.6 * largest else "black"
                ax.text(j, i, _format(value, decimals), ha="center", va="center",
                        color=colour, fontsize=9)
    if highlight_row is not None:
        if not 0 <= highlight_row < rows:
            raise ValueError(f"highlight_row {highlight_row} is outside 0..{rows - 1}")
        ax.add_patch(Rectangle((-0.5, highlight_row - 0.5), columns, 1, fill=False,
                               edgecolor="gold", linewidth=3))
    if highlight_column is not None:
        if not 0 <= highlight_column < columns:
            raise ValueError(f"highlight_column {highlight_column} is outside 0..{columns - 1}")
        ax.add_patch(Rectangle((highlight_column - 0.5, -0.5), 1, rows, fill=False,
                               edgecolor="limegreen", linewidth=3))
    if title:
        ax.set_title(title)
    outputs, inputs = _labels(output_labels, "y", rows), _labels(input_labels, "x", columns)
    cells = "; ".join(f"row {outputs[i]}: " + ", ".join(_format(float(matrix[i, j]), decimals)
                                                       for j in range(columns))
                      for i in range(rows)) if rows * columns <= 64 else "values not listed"
    marked = [f"row {outputs[highlight_row]} outlined" if highlight_row is not None else "",
              f"column {inputs[highlight_column]} outlined" if highlight_column is not None else ""]
    describe(ax, f"{title + ': ' if title else ''}a {rows}×{columns} Jacobian as a heat map "
                 f"(rows: outputs, columns: inputs {', '.join(inputs)}); {cells}"
                 + "".join(f"; {mark}" for mark in marked if mark))
    return ax
