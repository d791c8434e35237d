"""For lesson 04's test cells: run an answer with the functions that build a full Jacobian disabled."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, MutableMapping
from typing import Any

import torch
import torch.autograd.functional
import torch.func

__all__ = ["FullJacobianBuilt", "full_jacobian_blocked"]

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


@contextlib.contextmanager
def full_jacobian_blocked(namespace: MutableMapping[str, Any] | None = None,
                          reason: str = "this exercise asks you not to build the whole "
                                        "Jacobian") -> Iterator[None]:
    """Within the block, calling jacobian, jacrev, jacfwd or hessian raises FullJacobianBuilt.

    `namespace` (for example a notebook's `globals()`) also has its names for those functions
    replaced, so that `from torch.func import jacrev` imported earlier is caught too.
    """
    originals = {id(getattr(module, name)): f"{module.__name__}.{name}"
                 for module, name in _BUILDERS}

    def refuse(qualified: str):
        def refused(*args: Any, **kwargs: Any) -> Any:
            raise FullJacobianBuilt(f"{qualified} was called, but {reason}: use backward(), "
                                    "torch.autograd.grad or torch.func.vjp/jvp instead.")
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
