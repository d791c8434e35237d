"""The per-module and per-parameter bar charts of lesson 06."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from coursekit.module_plots import plot_by_name, stage_of

pytestmark = pytest.mark.fast


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_stage_of_takes_the_top_level_name():
    assert stage_of("layer4.2.bn3.weight") == "layer4"
    assert stage_of("fc.bias") == "fc"
    assert stage_of("conv1") == "conv1"


def test_one_bar_per_value_in_order_with_signed_heights():
    values = {"conv1": -0.5, "bn1": 0.25, "relu": 1.0}
    ax = plot_by_name(values, title="means", ylabel="mean")
    assert [bar.get_height() for bar in ax.patches] == [-0.5, 0.25, 1.0]
    assert [label.get_text() for label in ax.get_xticklabels()] == list(values)
    assert ax.get_title() == "means" and ax.get_ylabel() == "mean"
    assert ax.get_legend() is None  # one bar per stage: colours need no legend
    assert len({matplotlib.colors.to_hex(bar.get_facecolor()) for bar in ax.patches}) == 1


def test_log_scale_plots_magnitudes_and_hatches_negatives():
    values = {"fc.bias": 4e-11, "fc.weight": -6e-11, "conv1.weight": -0.1}
    ax = plot_by_name(values, log=True)
    assert ax.get_yscale() == "log"
    assert [bar.get_height() for bar in ax.patches] == pytest.approx([4e-11, 6e-11, 0.1])
    assert [bar.get_hatch() for bar in ax.patches] == [None, "///", "///"]
    assert "hatched" in ax.get_ylabel()
    ax = plot_by_name({"a.weight": 2.0, "b.weight": 1e-3}, log=True, ylabel="norm")
    assert ax.get_ylabel() == "norm"  # nothing negative, nothing hatched


def test_bars_are_coloured_by_stage_with_a_legend():
    values = {"layer1.0.conv1.weight": 1.0, "layer1.0.bn1.weight": 2.0,
              "layer2.0.conv1.weight": 3.0, "fc.weight": 4.0}
    ax = plot_by_name(values)
    colours = [matplotlib.colors.to_hex(bar.get_facecolor()) for bar in ax.patches]
    assert colours[0] == colours[1] != colours[2] != colours[3]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["layer1", "layer2", "fc"]
    assert plot_by_name(values, legend=False).get_legend() is None


def test_tick_labels_are_thinned():
    values = {f"layer1.{i}.weight": float(i + 1) for i in range(161)}
    ax = plot_by_name(values, max_labels=20)
    labels = [label.get_text() for label in ax.get_xticklabels()]
    assert 1 < len(labels) <= 20
    assert labels[0] == "layer1.0.weight"


def test_empty_values_are_refused_and_given_axes_are_used():
    with pytest.raises(ValueError, match="at least one"):
        plot_by_name({})
    with pytest.raises(ValueError, match="max_labels"):
        plot_by_name({"a": 1.0}, max_labels=0)
    _, ax = plt.subplots()
    assert plot_by_name({"a": 1.0}, ax=ax) is ax
