"""Lesson 07's claims about saved tensors that only a GPU can show, measured on one.

On the course's CPU-only machines `save_on_cpu` stores exactly what the default does (`.cpu()`
of a CPU tensor is the tensor itself), so the lesson can only state what it does on a GPU.
This script checks those statements on a CUDA device, with the lesson's own CNN
(`coursekit.practice.shape_cnn`) on a larger batch of the lesson's images:

- under `save_on_cpu` the activations autograd saves leave GPU memory (GPU memory held by the
  graph after the forward pass, with and without it);
- the tensors `pack` stores are CPU tensors, page-locked with `pin_memory=True`;
- the gradients are the same as with the default (bit for bit, deterministic algorithms on);
- the float16 storage of the lesson (one copy per tensor) saves GPU memory too (the lesson
  measures 36% of the bytes stored, on the CPU).

It prints what it measured and exits with 1 if a claim does not hold. Needs a CUDA device
(on a machine without one it says so and exits 0):

    .venv/bin/python benchmarks/gpu_saved_tensors.py [--batch 4096]
"""

from __future__ import annotations

import argparse
import os
import sys
import weakref
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import torch.nn.functional as F

from coursekit.practice import make_shapes, shape_cnn


def forward_and_grads(model, images, labels, hooks=None):
    """GPU memory the graph holds after the forward pass, the gradients, what pack stored."""
    stored = []
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    if hooks is None:
        loss = F.cross_entropy(model(images), labels)
    else:
        pack, unpack = hooks

        def recording_pack(tensor):
            packed = pack(tensor)
            stored.append(packed)
            return packed

        with torch.autograd.graph.saved_tensors_hooks(recording_pack, unpack):
            loss = F.cross_entropy(model(images), labels)
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated() - before
    grads = torch.autograd.grad(loss, list(model.parameters()))
    return held, [g.clone() for g in grads], stored


def save_on_cpu_hooks(pin_memory: bool):
    """The pack and unpack `save_on_cpu` installs (it is a saved_tensors_hooks subclass)."""
    context = torch.autograd.graph.save_on_cpu(pin_memory=pin_memory)
    return context.pack_hook, context.unpack_hook


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4096, help="images per forward pass")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device here: nothing to measure")
        return 0
    torch.use_deterministic_algorithms(True)
    device = torch.device("cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(device)}")
    per_class = -(-args.batch // 3)
    images, labels, _ = make_shapes(per_class, seed=0)
    images, labels = images[:args.batch].to(device), labels[:args.batch].to(device)
    torch.manual_seed(0)
    model = shape_cnn().to(device)

    # A first pass allocates what stays allocated afterwards (cuBLAS's workspace, cuDNN's
    # plans): not the graph's, so not measured.
    forward_and_grads(model, images, labels)
    failures = []
    held_default, reference, _ = forward_and_grads(model, images, labels)
    print(f"batch {len(images)}: the graph holds {held_default / 2**20:.1f} MiB of GPU memory "
          "after the forward pass by default")
    for pin in (False, True):
        held, grads, stored = forward_and_grads(model, images, labels,
                                                save_on_cpu_hooks(pin))
        tensors = [packed[1] for packed in stored]
        on_cpu = all(t.device.type == "cpu" for t in tensors)
        pinned = all(t.is_pinned() for t in tensors)
        same = all(torch.equal(g, r) for g, r in zip(grads, reference))
        print(f"save_on_cpu(pin_memory={pin}): {held / 2**20:.1f} MiB on the GPU "
              f"({held / held_default:.0%} of the default), {len(tensors)} tensors stored, "
              f"all on the CPU: {on_cpu}, all pinned: {pinned}, identical gradients: {same}")
        if not (on_cpu and same and held < held_default / 2):
            failures.append(f"save_on_cpu(pin_memory={pin})")
        if pinned != pin:
            failures.append(f"pinned storage with pin_memory={pin}")

    parameter_storages = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def pack_half(tensor):  # the lesson's float16 storage: parameters, integers kept as is
        keep_as_is = (tensor.untyped_storage().data_ptr() in parameter_storages
                      or not tensor.is_floating_point())
        return tensor.dtype, tensor if keep_as_is else tensor.to(torch.float16)

    def unpack_half(packed):
        return packed[1].to(packed[0])

    copies: dict[int, tuple] = {}

    def pack_shared(tensor):
        seen = copies.get(id(tensor))
        if seen is not None and seen[0]() is tensor:
            return seen[1]
        packed = pack_half(tensor)
        copies[id(tensor)] = (weakref.ref(tensor), packed)
        return packed

    held_half, grads, _ = forward_and_grads(model, images, labels, (pack_shared, unpack_half))
    copies.clear()
    difference = max(((g - r).abs().max() / r.abs().max()).item()
                     for g, r in zip(grads, reference))
    print(f"float16, one copy per tensor: {held_half / 2**20:.1f} MiB on the GPU "
          f"({1 - held_half / held_default:.0%} saved), largest gradient difference "
          f"{difference:.1e}")
    if not (held_half < held_default and difference < 0.01):
        failures.append("float16 storage")
    print("all claims hold" if not failures else "did not hold: " + ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
