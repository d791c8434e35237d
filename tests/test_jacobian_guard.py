"""The guard of lesson 04: answers that build the whole Jacobian are caught, others run freely."""

import pytest
import torch
import torch.autograd.functional
import torch.func
from torch.autograd.functional import jacobian
from torch.func import jacrev

from coursekit.jacobian_guard import FullJacobianBuilt, full_jacobian_blocked


def square(x: torch.Tensor) -> torch.Tensor:
    return x ** 2


def test_module_functions_are_refused_inside_and_restored_after():
    x = torch.tensor([1.0, 2.0])
    with full_jacobian_blocked():
        with pytest.raises(FullJacobianBuilt, match="torch.autograd.functional.jacobian"):
            torch.autograd.functional.jacobian(square, x)
        with pytest.raises(FullJacobianBuilt, match="torch.func.jacrev"):
            torch.func.jacrev(square)(x)
        with pytest.raises(FullJacobianBuilt, match="torch.func.jacfwd"):
            torch.func.jacfwd(square)
    assert torch.equal(torch.autograd.functional.jacobian(square, x),
                       torch.tensor([[2.0, 0.0], [0.0, 4.0]]))
    assert torch.func.jacrev is jacrev


def test_names_imported_into_a_namespace_are_refused_too():
    namespace = {"jacobian": jacobian, "J": jacrev, "other": 3}
    with full_jacobian_blocked(namespace, reason="testing"):
        with pytest.raises(FullJacobianBuilt, match="but testing"):
            namespace["jacobian"](square, torch.ones(2))
        with pytest.raises(FullJacobianBuilt):
            namespace["J"](square)
        assert namespace["other"] == 3
    assert namespace == {"jacobian": jacobian, "J": jacrev, "other": 3}


def test_products_without_the_full_jacobian_still_work():
    x = torch.tensor([1.0, 2.0])
    v = torch.tensor([1.0, 1.0])
    with full_jacobian_blocked():
        _, vjp_fn = torch.func.vjp(square, x)
        assert torch.equal(vjp_fn(v)[0], torch.tensor([2.0, 4.0]))
        _, jv = torch.func.jvp(square, (x,), (v,))
        assert torch.equal(jv, torch.tensor([2.0, 4.0]))
        leaf = x.clone().requires_grad_()
        square(leaf).backward(v)
        assert torch.equal(leaf.grad, torch.tensor([2.0, 4.0]))


def test_restored_even_when_the_block_raises():
    with pytest.raises(ValueError):
        with full_jacobian_blocked():
            raise ValueError("answer crashed")
    assert torch.autograd.functional.jacobian is jacobian
