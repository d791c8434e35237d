"""The Jacobian heat map of lesson 04: right cells, values written in, rows and columns marked."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.patches import Rectangle

from coursekit.jacobian_plots import plot_jacobian

pytestmark = pytest.mark.fast


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_heat_map_holds_the_matrix_and_writes_each_value():
    jacobian = torch.tensor([[8.0, 2.0], [2.0, 96.0]])
    ax = plot_jacobian(jacobian, title="J")
    image = ax.get_images()[0]
    assert image.get_array().tolist() == [[8.0, 2.0], [2.0, 96.0]]
    assert sorted(text.get_text() for text in ax.texts) == ["2", "2", "8", "96"]
    assert ax.get_title() == "J"
    # symmetric colour scale: zero sits in the middle of the colour map
    assert image.get_clim() == (-96.0, 96.0)


def test_default_and_given_labels():
    ax = plot_jacobian(torch.zeros(2, 3))
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x0", "x1", "x2"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["y0", "y1"]
    ax = plot_jacobian(torch.eye(2), output_labels=["out_a", "out_b"],
                       input_labels=["in_a", "in_b"])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["out_a", "out_b"]
    with pytest.raises(ValueError, match="expected 2 labels"):
        plot_jacobian(torch.eye(2), input_labels=["only one"])


def test_highlighted_row_and_column_are_outlined():
    ax = plot_jacobian(torch.ones(3, 4), highlight_row=1, highlight_column=2, annotate=False)
    outlines = [patch for patch in ax.patches if isinstance(patch, Rectangle)]
    assert len(outlines) == 2
    row, column = outlines
    assert (row.get_xy(), row.get_width(), row.get_height()) == ((-0.5, 0.5), 4, 1)
    assert (column.get_xy(), column.get_width(), column.get_height()) == ((1.5, -0.5), 1, 3)
    assert len(ax.texts) == 0


def test_rounding_and_bad_input():
    ax = plot_jacobian(torch.tensor([[0.125, -0.0001], [1.5, 2.0]]), decimals=2)
    assert sorted(text.get_text() for text in ax.texts) == ["0", "0.12", "1.5", "2"]
    with pytest.raises(ValueError, match="2-D"):
        plot_jacobian(torch.ones(2, 2, 2))
    with pytest.raises(ValueError, match="outside"):
        plot_jacobian(torch.ones(2, 2), highlight_row=2)


def test_draws_into_given_axes_and_accepts_tensors_that_require_grad():
    _, (left, right) = plt.subplots(1, 2)
    jacobian = torch.ones(2, 2, requires_grad=True) * 3
    assert plot_jacobian(jacobian, ax=right) is right
    assert not left.get_images()
