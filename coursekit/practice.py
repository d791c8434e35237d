"""Data, models, a training loop and figures for lesson 07 (hooks in practice)."""

from __future__ import annotations

import contextlib
import gc
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import nn

from coursekit.figures import describe

__all__ = [
    "SHAPE_NAMES", "make_shapes", "shape_cnn", "deep_mlp", "train", "accuracy",
    "tensor_bytes", "watch_outputs", "replaced_outputs", "show_images", "plot_layer_curves", "plot_per_layer",
    "show_overlays",
]

SHAPE_NAMES: tuple[str, ...] = ("square", "circle", "cross")


def _shape_masks(kinds: torch.Tensor, size: int, generator: torch.Generator) -> torch.Tensor:
    """Boolean masks [n, size, size] of one shape each, at a random place and radius."""
    n = kinds.numel()
    radius = torch.randint(2, size // 3 + 1, (n,), generator=generator)
    # Integer centres far enough from the border for the whole shape to fit.
    low = radius
    high = size - 1 - radius
    centre_y = low + (torch.rand(n, generator=generator) * (high - low + 1)).long()
    centre_x = low + (torch.rand(n, generator=generator) * (high - low + 1)).long()
    grid = torch.arange(size)
    dy = (grid.view(1, size, 1) - centre_y.view(n, 1, 1)).abs()
    dx = (grid.view(1, 1, size) - centre_x.view(n, 1, 1)).abs()
    r = radius.view(n, 1, 1)
    square = (dy <= r) & (dx <= r)
    circle = (dy**2 + dx**2) <= (r.float() + 0.5) ** 2
    cross = ((dy == 0) & (dx <= r)) | ((dx == 0) & (dy <= r))
    kind = kinds.view(n, 1, 1)
    return torch.where(kind == 0, square, torch.where(kind == 1, circle, cross))


def make_shapes(n_per_class: int, size: int = 16, noise: float = 0.1,
                seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Noisy images of squares, circles and crosses: (images [n,1,size,size], labels, masks).

    The classes follow `SHAPE_NAMES`; the order is shuffled; `seed` makes it reproducible
    without touching the global random state.
    """
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(len(SHAPE_NAMES)).repeat_interleave(n_per_class)
    labels = labels[torch.randperm(labels.numel(), generator=generator)]
    masks = _shape_masks(labels, size, generator)
    brightness = 0.6 + 0.4 * torch.rand(labels.numel(), 1, 1, generator=generator)
    images = masks.float() * brightness
    images = images + noise * torch.randn(images.shape, generator=generator)
    return images.unsqueeze(1), labels, masks


def shape_cnn(n_classes: int = len(SHAPE_NAMES), size: int = 16) -> nn.Sequential:
    """A small CNN for `size`×`size` grey images: two conv blocks and a linear classifier."""
    return nn.Sequential(OrderedDict([
        ("conv1", nn.Conv2d(1, 8, kernel_size=3, padding=1)),
        ("relu1", nn.ReLU()),
        ("pool1", nn.MaxPool2d(2)),
        ("conv2", nn.Conv2d(8, 16, kernel_size=3, padding=1)),
        ("relu2", nn.ReLU()),
        ("pool2", nn.MaxPool2d(2)),
        ("flatten", nn.Flatten()),
        ("fc", nn.Linear(16 * (size // 4) ** 2, n_classes)),
    ]))


_ACTIVATIONS: dict[str, type[nn.Module]] = {"sigmoid": nn.Sigmoid, "tanh": nn.Tanh,
                                            "relu": nn.ReLU}


def deep_mlp(depth: int, width: int, in_features: int, n_classes: int,
             activation: str = "relu", init_std: float | None = None) -> nn.Sequential:
    """A plain MLP of `depth` Linear layers named fc1…fcN with `activation` in between.

    With `init_std` every weight is drawn from N(0, init_std²) and every bias is zero;
    without it the layers keep PyTorch's default initialisation.
    """
    layers: list[tuple[str, nn.Module]] = []
    features = in_features
    for index in range(1, depth + 1):
        out_features = n_classes if index == depth else width
        linear = nn.Linear(features, out_features)
        if init_std is not None:
            nn.init.normal_(linear.weight, std=init_std)
            nn.init.zeros_(linear.bias)
        layers.append((f"fc{index}", linear))
        if index < depth:
            layers.append((f"act{index}", _ACTIVATIONS[activation]()))
        features = out_features
    return nn.Sequential(OrderedDict([("flatten", nn.Flatten()), *layers]))


def train(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, *, epochs: int,
          batch_size: int = 32, lr: float = 0.01, seed: int = 0,
          optimizer: torch.optim.Optimizer | None = None) -> list[float]:
    """Train with cross-entropy (Adam at `lr` unless an optimizer is given); return each step's loss."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = optimizer or torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses: list[float] = []
    for _ in range(epochs):
        order = torch.randperm(labels.numel(), generator=generator)
        for start in range(0, labels.numel(), batch_size):
            batch = order[start:start + batch_size]
            loss = F.cross_entropy(model(images[batch]), labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    """The fraction of `images` that `model` classifies as `labels`."""
    model.eval()
    with torch.no_grad():
        predictions = model(images).argmax(dim=1)
    return (predictions == labels).float().mean().item()


def tensor_bytes(tensor: torch.Tensor) -> int:
    """The bytes a tensor's elements take: numel × element size (views count in full)."""
    return tensor.numel() * tensor.element_size()


class KeptOutputs:
    """What `watch_outputs` saw: `kept` for each forward pass of the model."""

    def __init__(self) -> None:
        self.per_pass: list[int] = []

    @property
    def kept(self) -> int:
        """Outputs still alive at the end of the last forward pass (0 if none ran)."""
        return self.per_pass[-1] if self.per_pass else 0


@contextlib.contextmanager
def watch_outputs(model: nn.Module,
                  kind: type[nn.Module] = nn.Linear) -> Iterator[KeptOutputs]:
    """Count, at the end of each forward pass of `model`, the outputs of its `kind` children
    that something still keeps alive, besides the model's own output."""
    seen: list[weakref.ref] = []
    watched = KeptOutputs()

    def note(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
        seen.append(weakref.ref(output))

    def count(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
        gc.collect(1)  # young objects only: a full collection is slow in a large notebook
        alive = [ref() for ref in seen]
        watched.per_pass.append(sum(t is not None and t is not output for t in alive))
        seen.clear()

    handles = [child.register_forward_hook(note) for child in model.children()
               if isinstance(child, kind)]
    handles.append(model.register_forward_hook(count))
    try:
        yield watched
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def replaced_outputs(model: nn.Module) -> Iterator[dict[str, str]]:
    """Note, during each forward pass of `model` (an nn.Sequential), every child whose output
    did not reach the next child (or the model's caller) as its forward returned it: a forward
    hook returned something else, which took its place. Yields {child name: type of what took
    its place}. Only the effect is seen, whatever hook, lambda or def, did it."""
    replaced: dict[str, str] = {}
    last: list = []  # [name, weak reference to the output its forward returned]

    def note(name: str) -> Callable:
        def hook(module: nn.Module, args: tuple, output: object) -> None:
            try:
                last[:] = [name, weakref.ref(output)]
            except TypeError:  # an output no weak reference can point to: not watched
                last.clear()
        return hook

    def compare(given: object) -> None:
        if last and given is not last[1]():
            replaced.setdefault(last[0], type(given).__name__)
        last.clear()

    handles = []
    for name, child in model.named_children():
        handles.append(child.register_forward_pre_hook(
            lambda module, args: compare(args[0] if args else None), prepend=True))
        handles.append(child.register_forward_hook(note(name), prepend=True))
    handles.append(model.register_forward_hook(lambda module, args, output: compare(output),
                                               prepend=True))
    try:
        yield replaced
    finally:
        for handle in handles:
            handle.remove()


def show_images(images: torch.Tensor, titles: Sequence[str], ncols: int = 8) -> Figure:
    """A grid of grey images [n,1,h,w] with a title each."""
    nrows = -(-len(images) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(1.3 * ncols, 1.5 * nrows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, image, title in zip(axes.flat, images, titles):
        ax.imshow(image.squeeze(0).detach(), cmap="gray")
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return describe(fig, f"{len(images)} images, each titled with its label: {', '.join(titles)}")


def plot_layer_curves(curves: Mapping[str, Sequence[float]], *, ylabel: str, title: str,
                      log: bool = False, ax: plt.Axes | None = None) -> plt.Axes:
    """One line per layer of a statistic recorded at every training step."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for name, values in curves.items():
        ax.plot(values, label=name)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    lines = "; ".join(f"{name} from {values[0]:.2g} to {values[-1]:.2g}"
                      for name, values in curves.items() if len(values))
    return describe(ax, f"{title}: {ylabel} against training step{', log scale' if log else ''}, "
                        f"one line per layer: {lines}")


def plot_per_layer(series: Mapping[str, Mapping[str, float]], *, ylabel: str, title: str,
                   log: bool = True, ax: plt.Axes | None = None) -> plt.Axes:
    """One line per model across its layers (input side on the left): {model: {layer: value}}."""
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    for label, values in series.items():
        ax.plot(list(values), list(values.values()), marker="o", label=label)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("layer")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.tick_params(axis="x", labelsize=8)
    ax.legend(fontsize=8)
    lines = "; ".join(f"{label}: " + ", ".join(f"{layer} {value:.2g}"
                                                for layer, value in values.items())
                      for label, values in series.items())
    return describe(ax, f"{title}: {ylabel} at each layer, input side first"
                        f"{', log scale' if log else ''}, one line per model. {lines}")


def show_overlays(images: torch.Tensor, maps: Mapping[str, torch.Tensor],
                  titles: Sequence[str],
                  normalise: Callable[[torch.Tensor], torch.Tensor] | None = None) -> Figure:
    """The images in the top row, then one row per map drawn over them as a heat map."""
    normalise = normalise or (lambda m: m / m.amax().clamp_min(1e-12))
    rows = 1 + len(maps)
    fig, axes = plt.subplots(rows, len(images), figsize=(1.4 * len(images), 1.5 * rows),
                             squeeze=False)
    for column, (image, title) in enumerate(zip(images, titles)):
        axes[0, column].imshow(image.squeeze(0).detach(), cmap="gray")
        axes[0, column].set_title(title, fontsize=9)
        for row, (name, heat) in enumerate(maps.items(), start=1):
            axes[row, column].imshow(image.squeeze(0).detach(), cmap="gray")
            axes[row, column].imshow(normalise(heat[column].detach()), cmap="jet",
                                     alpha=0.5, vmin=0.0, vmax=1.0)
            if column == 0:
                axes[row, column].set_ylabel(name, fontsize=9)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    return describe(fig, f"{len(images)} images, titled {', '.join(titles)}; under each, "
                         f"{' and '.join(maps)} drawn over it as a heat map, one row each "
                         "(red where the map is largest, blue where it is near zero)")
