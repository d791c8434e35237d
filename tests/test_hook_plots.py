"""The hook-order figure of lesson 03: one numbered box per event, in order, coloured by kind."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from coursekit.hook_plots import HOOK_COLOURS, plot_hook_order

pytestmark = pytest.mark.fast


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def boxes(ax):
    """The labelled boxes, without the arrows (annotations are texts too)."""
    return [text for text in ax.texts if type(text).__name__ != "Annotation"]


def test_one_numbered_box_per_event_top_to_bottom():
    events = ["tensor hook on z", "retain_grad fills z.grad", "Node pre-hook",
              "Node post-hook"]
    ax = plot_hook_order(events, title="order")
    labels = [text.get_text() for text in boxes(ax)]
    assert labels == ["1. tensor hook on z", "2. retain_grad fills z.grad",
                      "3. Node pre-hook", "4. Node post-hook"]
    heights = [text.get_position()[1] for text in boxes(ax)]
    assert heights == sorted(heights, reverse=True)
    # one arrow between each pair of neighbours
    assert len([child for child in ax.get_children()
                if type(child).__name__ == "Annotation"]) == 3
    assert ax.get_title() == "order"


def test_boxes_are_coloured_by_kind_of_hook():
    ax = plot_hook_order(["Tensor hook", "retain_grad", "Node post-hook",
                          "post-accumulate-grad hook on x", "something else"])
    colours = [matplotlib.colors.to_hex(text.get_bbox_patch().get_facecolor())
               for text in boxes(ax)]
    assert colours[:4] == [HOOK_COLOURS["tensor"], HOOK_COLOURS["retain_grad"],
                           HOOK_COLOURS["node"], HOOK_COLOURS["post-accumulate"]]
    assert colours[4] == "#eeeeee"


def test_empty_list_is_refused_and_given_axes_are_used():
    with pytest.raises(ValueError, match="at least one"):
        plot_hook_order([])
    _, ax = plt.subplots()
    assert plot_hook_order(["tensor hook"], ax=ax) is ax
