"""coursekit.practice: the shapes data, the models, the training loop and the figures."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn

from coursekit.practice import (
    SHAPE_NAMES, accuracy, deep_mlp, make_shapes, plot_layer_curves, plot_per_layer,
    replaced_outputs, shape_cnn, show_images, show_overlays, tensor_bytes, train,
    watch_outputs,
)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_make_shapes_shapes_and_balance():
    images, labels, masks = make_shapes(5, size=16, seed=3)
    assert images.shape == (15, 1, 16, 16) and images.dtype == torch.float32
    assert masks.shape == (15, 16, 16) and masks.dtype == torch.bool
    assert labels.bincount().tolist() == [5, 5, 5]


def test_make_shapes_is_reproducible_and_leaves_global_rng_alone():
    torch.manual_seed(0)
    before = torch.rand(1)
    torch.manual_seed(0)
    first = make_shapes(4, seed=7)
    after = torch.rand(1)
    second = make_shapes(4, seed=7)
    assert torch.equal(before, after)
    for a, b in zip(first, second):
        assert torch.equal(a, b)
    assert not torch.equal(first[0], make_shapes(4, seed=8)[0])


def test_make_shapes_draws_inside_the_masks():
    images, labels, masks = make_shapes(20, size=16, noise=0.0, seed=1)
    assert torch.all(images.squeeze(1)[~masks] == 0)
    assert torch.all(images.squeeze(1)[masks] >= 0.6)
    assert all(masks[i].any() for i in range(len(masks)))


def test_shape_classes_have_their_shapes():
    _, labels, masks = make_shapes(10, size=16, noise=0.0, seed=2)
    rows_filled = masks.any(dim=2).sum(dim=1)
    cols_filled = masks.any(dim=1).sum(dim=1)
    area = masks.sum(dim=(1, 2))
    squares = labels == SHAPE_NAMES.index("square")
    crosses = labels == SHAPE_NAMES.index("cross")
    # A square fills its bounding box; a cross is one row plus one column.
    assert torch.equal(area[squares], rows_filled[squares] * cols_filled[squares])
    assert torch.equal(area[crosses], rows_filled[crosses] + cols_filled[crosses] - 1)


def test_shape_cnn_output_and_names():
    model = shape_cnn()
    assert model(torch.zeros(2, 1, 16, 16)).shape == (2, 3)
    assert [name for name, _ in model.named_children()] == [
        "conv1", "relu1", "pool1", "conv2", "relu2", "pool2", "flatten", "fc"]


def test_deep_mlp_layers_and_init():
    torch.manual_seed(0)
    model = deep_mlp(4, 50, 256, 3, "tanh", init_std=0.02)
    linears = [m for m in model if isinstance(m, nn.Linear)]
    assert [name for name, m in model.named_children() if isinstance(m, nn.Linear)] == [
        "fc1", "fc2", "fc3", "fc4"]
    assert [type(m) for m in model][2] is nn.Tanh
    assert linears[0].in_features == 256 and linears[-1].out_features == 3
    assert abs(linears[1].weight.std().item() - 0.02) < 0.002
    assert all(torch.all(m.bias == 0) for m in linears)
    assert model(torch.zeros(2, 1, 16, 16)).shape == (2, 3)


def test_train_lowers_the_loss_and_accuracy_counts():
    images, labels, _ = make_shapes(30, seed=0)
    torch.manual_seed(0)
    model = shape_cnn()
    losses = train(model, images, labels, epochs=4, batch_size=30, lr=0.01)
    assert len(losses) == 4 * 3
    assert losses[-1] < losses[0]
    assert 0.0 <= accuracy(model, images, labels) <= 1.0
    constant = nn.Sequential(nn.Flatten(), nn.Linear(256, 3))
    nn.init.zeros_(constant[1].weight)
    with torch.no_grad():
        constant[1].bias.copy_(torch.tensor([1.0, 0.0, 0.0]))
    assert accuracy(constant, images, labels) == pytest.approx(1 / 3)


def test_train_is_reproducible():
    images, labels, _ = make_shapes(10, seed=0)
    runs = []
    for _ in range(2):
        torch.manual_seed(1)
        runs.append(train(shape_cnn(), images, labels, epochs=2, batch_size=8))
    assert runs[0] == runs[1]


def test_tensor_bytes():
    assert tensor_bytes(torch.zeros(3, 4)) == 48
    assert tensor_bytes(torch.zeros(3, 4, dtype=torch.float16)) == 24
    assert tensor_bytes(torch.zeros(5, dtype=torch.int64).t()) == 40


def test_watch_outputs_counts_outputs_kept_past_the_forward_pass():
    torch.manual_seed(0)
    model = deep_mlp(4, 5, 6, 3, "tanh")
    kept = []
    with watch_outputs(model) as honest:
        model(torch.randn(2, 6))
    handle = model.fc2.register_forward_hook(lambda m, a, out: kept.append(out))
    with watch_outputs(model) as keeper:
        model(torch.randn(2, 6))
        model(torch.randn(2, 6))
    handle.remove()
    assert honest.per_pass == [0]
    assert keeper.per_pass == [1, 1] and keeper.kept == 1  # fc2's output, once per pass
    assert all(not m._forward_hooks for m in model.modules())


def test_replaced_outputs_names_the_child_whose_output_a_forward_hook_replaced():
    torch.manual_seed(0)
    model = deep_mlp(3, 5, 6, 3, "tanh")
    x = torch.randn(2, 6)
    quiet = [model.fc1.register_forward_hook(lambda m, a, out: None),
             model.fc2.register_forward_hook(lambda m, a, out: out)]  # its own output: no change
    with replaced_outputs(model) as unchanged:
        model(x)
    for handle in quiet:
        handle.remove()
    # registered before the watch, and still seen: the watch's hooks run first
    handle = model.fc2.register_forward_hook(
        lambda m, a, out: out.register_hook(lambda grad: None))
    with replaced_outputs(model) as by_handle, pytest.raises(TypeError):
        model(x)
    handle.remove()
    handle = model.fc3.register_forward_hook(lambda m, a, out: out.detach())  # the last child
    with replaced_outputs(model) as by_tensor:
        model(x)
    handle.remove()
    assert unchanged == {}
    assert by_handle == {"fc2": "RemovableHandle"}
    assert by_tensor == {"fc3": "Tensor"}
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_figures_have_their_axes():
    images, labels, masks = make_shapes(2, seed=0)
    fig = show_images(images, [SHAPE_NAMES[k] for k in labels], ncols=4)
    assert len(fig.axes) == 8
    ax = plot_layer_curves({"a": [1.0, 2.0], "b": [2.0, 1.0]}, ylabel="y", title="t", log=True)
    assert len(ax.get_lines()) == 2 and ax.get_yscale() == "log"
    ax = plot_per_layer({"m": {"fc1": 1.0, "fc2": 0.1}}, ylabel="y", title="t")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["fc1", "fc2"]
    fig = show_overlays(images[:3], {"map": masks[:3].float(), "zeros": torch.zeros(3, 16, 16)},
                        ["a", "b", "c"])
    assert len(fig.axes) == 9
