"""coursekit.resnet against torchvision 0.28 resnet50() facts: fixtures/resnet50_reference.json."""

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from torch import nn

from coursekit.resnet import Bottleneck, ResNet, resnet50

REF = json.loads((Path(__file__).parent / "fixtures" / "resnet50_reference.json").read_text())
INPUT_SHAPE = (10, 3, 224, 224)


@pytest.fixture(scope="module")
def run() -> dict:
    """One seeded forward+backward, as the reference did it, with hooks recording what it saw."""
    torch.manual_seed(REF["seed"])
    model = resnet50()
    children: dict[str, tuple[list[int], float]] = {}

    def record(name: str) -> Callable[..., None]:
        def hook(_module: nn.Module, _inputs: tuple, out: torch.Tensor) -> None:
            children[name] = (list(out.shape), out.mean().item())

        return hook

    for name, child in model.named_children():
        child.register_forward_hook(record(name))
    grads: list[tuple[str, float]] = []
    for name, param in model.named_parameters():
        param.register_hook(lambda grad, name=name: grads.append((name, grad.mean().item())))
    logits = model(torch.ones(INPUT_SHAPE))
    loss = nn.CrossEntropyLoss()(logits, torch.zeros(INPUT_SHAPE[0], dtype=torch.long))
    loss.backward()
    return {"model": model, "children": children, "loss": loss.item(), "grads": grads}


def test_fixture_describes_this_setup() -> None:
    assert REF["input"] == "torch.ones(10, 3, 224, 224)"
    assert REF["mode"].startswith("train")


def test_types_and_custom_head() -> None:
    model = resnet50(num_classes=7)
    assert isinstance(model, ResNet) and isinstance(model.layer1[0], Bottleneck)
    assert model.fc.out_features == 7 and model.fc.in_features == 2048


def test_parameter_names_and_shapes_in_order(run: dict) -> None:
    got = [[name, list(p.shape)] for name, p in run["model"].named_parameters()]
    assert got == REF["named_parameters"]


def test_buffer_names_and_shapes_in_order(run: dict) -> None:
    got = [[name, list(b.shape)] for name, b in run["model"].named_buffers()]
    assert got == REF["named_buffers"]


def test_child_output_shapes(run: dict) -> None:
    assert {name: shape for name, (shape, _) in run["children"].items()} == {
        name: shape for name, (shape, _) in REF["forward_hook_children"].items()
    }
    assert list(run["children"]) == list(REF["forward_hook_children"])


def test_seeded_child_output_means(run: dict) -> None:
    # Exact on the reference's CPU with 2 threads; other thread counts move them by ~1e-7.
    # atol covers bn1, whose output mean is 0 up to rounding (3.6e-8).
    for name, (_, mean) in REF["forward_hook_children"].items():
        assert run["children"][name][1] == pytest.approx(mean, rel=1e-4, abs=1e-6), name


def test_seeded_loss(run: dict) -> None:
    assert run["loss"] == pytest.approx(REF["loss"], rel=1e-5)


def test_gradient_hooks_fire_once_per_parameter_in_reference_order(run: dict) -> None:
    expected = [name for name, _ in REF["param_grad_means_in_hook_order"]]
    assert [name for name, _ in run["grads"]] == expected


def test_seeded_gradient_means(run: dict) -> None:
    # A gradient's mean is a sum with heavy cancellation (fc.bias: exactly 0, prints 4.47e-11), so
    # float32 rounding moves it by up to ~3e-3 of the gradient's mean magnitude with other thread
    # counts or in float64. Tolerance: 1% of mean(|grad|), per parameter.
    params = dict(run["model"].named_parameters())
    got = dict(run["grads"])
    for name, mean in REF["param_grad_means_in_hook_order"]:
        scale = params[name].grad.abs().mean().item()
        assert got[name] == pytest.approx(mean, rel=0, abs=1e-2 * scale), name
