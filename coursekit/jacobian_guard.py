"""For lesson 04's test cells: run an answer with the functions that build a full Jacobian
disabled, and count how often it runs a function and differentiates through it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.autograd.functional
import torch.func

__all__ = ["FullJacobianBuilt", "full_jacobian_blocked", "PassCounts", "counting_passes"]

# (module, attribute) of each public function that materialises a whole Jacobian or Hessian
_BUILDERS: tuple[tuple[Any, str], ...] = (
    (torch.autograd.functional, "jacobian"),
    (torch.autograd.functional, "hessian"),
    (torch.func, "jacrev"),
    (torch.func, "jacfwd"),
    (torch.func, "hessian"),
)


class FullJacobianBuilt(AssertionError):
    """Raised when an answer calls a function that builds the whole Jacobian."""


REASON = "this exercise asks you not to build the whole Jacobian"


def refusal(qualified: str, reason: str = REASON) -> str:
    """The message of the FullJacobianBuilt raised when `qualified` is called."""
    return (f"{qualified} was called, but {reason}: use backward(), torch.autograd.grad or "
            "torch.func.vjp/jvp instead.")


def refusals() -> frozenset[str]:
    """Every message the guard raises with its usual reason (the grader shows them whole)."""
    return frozenset(refusal(f"{module.__name__}.{name}") for module, name in _BUILDERS)


@contextlib.contextmanager
def full_jacobian_blocked(namespace: MutableMapping[str, Any] | None = None,
                          reason: str = REASON) -> Iterator[None]:
    """Within the block, calling jacobian, jacrev, jacfwd or hessian raises FullJacobianBuilt.

    `namespace` (for example a notebook's `globals()`) also has its names for those functions
    replaced, so that `from torch.func import jacrev` imported earlier is caught too.
    """
    originals = {id(getattr(module, name)): f"{module.__name__}.{name}"
                 for module, name in _BUILDERS}

    def refuse(qualified: str):
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise FullJacobianBuilt(refusal(qualified, reason))
        return refused

    patched: list[tuple[Any, str, Any]] = []
    try:
        for module, name in _BUILDERS:
            original = getattr(module, name)
            patched.append((module, name, original))
            setattr(module, name, refuse(f"{module.__name__}.{name}"))
        if namespace is not None:
            for key, value in list(namespace.items()):
                if id(value) in originals:
                    patched.append((namespace, key, value))
                    namespace[key] = refuse(originals[id(value)])
        yield
    finally:
        for target, name, original in reversed(patched):
            if isinstance(target, MutableMapping):
                target[name] = original
            else:
                setattr(target, name, original)


@dataclass
class PassCounts:
    """How often a function wrapped by `counting_passes` ran, and was differentiated.

    `calls`: forward evaluations; `reverse`: backward passes that went through its output
    (`backward`, `torch.autograd.grad`, a vjp function); `forward_mode`: forward-mode passes
    that pushed a tangent through it (`torch.func.jvp`, `torch.autograd.forward_ad`).
    `vectors` and `tangents` count what those passes carried: a pass batched over k vectors
    (`vmap`, `is_grads_batched=True`) adds 1 to `reverse` and k to `vectors`."""

    calls: int = 0
    reverse: int = 0
    forward_mode: int = 0
    vectors: int = 0
    tangents: int = 0


def _batch_size(t: torch.Tensor) -> int:
    """How many vectors a tensor seen inside a pass stands for: the product of the sizes of the
    dimensions that `torch.func.vmap` or `is_grads_batched=True` batch it over (1 if none)."""
    functorch = torch._C._functorch
    size = 1
    while True:
        if functorch.is_legacy_batchedtensor(t):  # is_grads_batched=True
            level = torch._C._vmapmode_increment_nesting()
            torch._C._vmapmode_decrement_nesting()
            for below in range(level - 1, 0, -1):
                t = torch._remove_batch_dim(t, below, 1, 0)
                size *= t.shape[0]
            return size
        if functorch.is_batchedtensor(t):
            dim = functorch.maybe_get_bdim(t)
            t = functorch.get_unwrapped(t)
            size *= t.shape[dim] if dim >= 0 else 1
        elif functorch.is_functorch_wrapped_tensor(t):
            t = functorch.get_unwrapped(t)
        else:
            return size


def counting_passes(f: Callable[[torch.Tensor], torch.Tensor]
                    ) -> tuple[Callable[[torch.Tensor], torch.Tensor], PassCounts]:
    """`f` wrapped so that each call, each reverse pass and each forward-mode pass through its
    output is counted in the returned PassCounts. The wrapped function returns the same values;
    it works under `backward`, `torch.autograd.grad`, `torch.func.vjp`/`jvp`/`vmap` and
    `torch.autograd.forward_ad` (a batched pass counts once in `reverse` or `forward_mode`,
    and once per vector in `vectors` or `tangents`)."""
    counts = PassCounts()

    class Counted(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(output: torch.Tensor) -> torch.Tensor:
            counts.calls += 1
            return output.clone()

        @staticmethod
        def setup_context(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
            pass

        @staticmethod
        def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
            counts.reverse += 1
            counts.vectors += _batch_size(grad_output)
            return grad_output

        @staticmethod
        def jvp(ctx: Any, tangent: torch.Tensor) -> torch.Tensor:
            counts.forward_mode += 1
            counts.tangents += _batch_size(tangent)
            return tangent.clone()

    def counted(x: torch.Tensor) -> torch.Tensor:
        output = f(x)
        if not isinstance(output, torch.Tensor):
            raise TypeError(f"f must return a tensor, not {type(output).__name__}")
        return Counted.apply(output)

    counted.__name__ = getattr(f, "__name__", "f")
    return counted, counts
