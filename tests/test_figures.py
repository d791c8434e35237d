"""Figures shown as HTML with alt text (coursekit.figures): where the text comes from, that it is
escaped, and that the formatter survives the inline backend's own set-up."""

import base64
import html
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.pylabtools import select_figure_formats

from coursekit import figures
from coursekit.hook_plots import plot_hook_order
from coursekit.jacobian_plots import plot_jacobian
from coursekit.practice import show_images

_IMG = re.compile(r'^<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)">$')


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def alt_of(page: str) -> str:
    match = _IMG.match(page)
    assert match, page[:200]
    assert base64.b64decode(match[1]).startswith(b"\x89PNG")
    return html.unescape(match[2])


def test_the_description_given_is_the_alt_text():
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3])
    ax.set_title("a title the description replaces")
    figures.describe(fig, "The loss falls   from 3 to 1\nover three steps.")
    assert alt_of(figures.figure_html(fig)) == "The loss falls from 3 to 1 over three steps."


def test_without_a_description_the_alt_text_says_the_titles_and_axis_labels():
    fig, (left, right) = plt.subplots(1, 2)
    fig.suptitle("Training")
    left.plot([3, 2, 1])
    left.set(title="loss", xlabel="step", ylabel="cross-entropy")
    right.plot([1, 2])
    right.set(xlabel="step", ylabel="accuracy")
    assert figures.alt_text(fig) == ("Training. loss (x: step, y: cross-entropy). "
                                     "a plot of y: accuracy against x: step")


def test_an_axes_description_stands_in_for_its_titles():
    fig, (left, right) = plt.subplots(1, 2)
    left.set_title("left")
    figures.describe(right, "right: a heat map")
    assert figures.alt_text(fig) == "left. right: a heat map"


def test_a_figure_with_no_text_still_gets_an_alt_text():
    fig, ax = plt.subplots()
    ax.plot([1, 2])
    assert figures.alt_text(fig) == "A figure without a title or a description."


def test_quotes_and_angle_brackets_in_the_alt_text_are_escaped():
    fig, ax = plt.subplots()
    ax.plot([1, 2])
    figures.describe(fig, 'x" onerror="alert(1)" <script>alert(2)</script> & more')
    page = figures.figure_html(fig)
    assert "<script" not in page and 'x" onerror' not in page
    assert page.count('"') == 4  # the quotes around src and alt, none from the text
    assert alt_of(page) == 'x" onerror="alert(1)" <script>alert(2)</script> & more'


def test_describe_refuses_an_empty_text():
    fig, _ = plt.subplots()
    with pytest.raises(ValueError, match="non-empty text"):
        figures.describe(fig, "  ")


def test_an_empty_figure_or_a_subfigure_gives_no_html():
    assert figures.figure_html(plt.figure()) is None
    fig = plt.figure()
    sub = fig.subfigures(1, 2)[0]
    sub.add_subplot().plot([1, 2])
    assert figures.figure_html(sub) is None
    assert figures.figure_html(fig) is not None


def test_the_formatter_survives_the_inline_backend_set_up():
    """The inline backend removes every formatter registered for Figure when it starts (after a
    lesson's first cell): a figure shown later must still come as HTML beside its PNG."""
    shell = InteractiveShell.instance()
    try:
        assert figures.install(shell)
        select_figure_formats(shell, {"png"})
        fig, ax = plt.subplots()
        ax.plot([1, 2])
        figures.describe(fig, "a rising line")
        data, _ = shell.display_formatter.format(fig)
        assert "image/png" in data
        assert alt_of(data["text/html"]) == "a rising line"
    finally:
        InteractiveShell.clear_instance()


def test_the_course_plots_describe_their_data():
    ax = plot_hook_order(["tensor hook on z", "Node AccumulateGrad"], title="order")
    assert figures.alt_text(ax.figure) == ("order: the steps in the order they ran, "
                                           "1. tensor hook on z; 2. Node AccumulateGrad")
    ax = plot_jacobian(torch.tensor([[1.0, 0.5], [0.0, -2.0]]), highlight_row=1)
    assert figures.alt_text(ax.figure) == (
        "a 2×2 Jacobian as a heat map (rows: outputs, columns: inputs x0, x1); "
        "row y0: 1, 0.5; row y1: 0, -2; row y1 outlined")
    fig = show_images(torch.zeros(2, 1, 4, 4), ["circle", "square"])
    assert figures.alt_text(fig) == "2 images, each titled with its label: circle, square"
