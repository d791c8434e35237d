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


def _wide(t: torch.Tensor) -> torch.Tensor:
    return torch.stack([t[0] * t[1], t[1] ** 2, t[0] - t[2], t.sum()])


def test_counting_passes_counts_reverse_passes_however_they_are_asked_for():
    from torch.func import vjp, vmap

    from coursekit.jacobian_guard import counting_passes
    x = torch.tensor([1.0, 2.0, 3.0])
    v = torch.tensor([1.0, 0.0, 2.0, -1.0])
    expected = v @ jacobian(_wide, x)
    f, counts = counting_passes(_wide)
    leaf = x.clone().requires_grad_()
    f(leaf).backward(v)
    (by_grad,) = torch.autograd.grad(f(leaf), leaf, grad_outputs=v)
    _, vjp_fn = vjp(f, x)
    (by_vjp,) = vjp_fn(v)
    for found in (leaf.grad, by_grad, by_vjp):
        assert torch.allclose(found, expected)
    assert (counts.calls, counts.reverse, counts.forward_mode) == (3, 3, 0)
    output = f(leaf)
    for i in range(4):  # J row by row: one reverse pass per row
        torch.autograd.grad(output[i], leaf, retain_graph=True)
    assert (counts.calls, counts.reverse) == (4, 7)
    batched = vmap(vjp_fn)(torch.eye(4))[0]  # one batched pass
    assert torch.allclose(batched, jacobian(_wide, x))
    assert counts.reverse == 8


def test_counting_passes_counts_forward_mode_and_tells_it_from_double_backward():
    import torch.autograd.forward_ad as fwAD
    from torch.func import jvp

    from coursekit.jacobian_guard import counting_passes
    x = torch.tensor([1.0, 2.0, 3.0])
    u = torch.tensor([0.0, 1.0, 0.0])
    column = jacobian(_wide, x)[:, 1]
    f, counts = counting_passes(_wide)
    _, by_jvp = jvp(f, (x,), (u,))
    with fwAD.dual_level():
        by_dual = fwAD.unpack_dual(f(fwAD.make_dual(x, u))).tangent
    assert torch.equal(by_jvp, column) and torch.equal(by_dual, column)
    assert (counts.calls, counts.reverse, counts.forward_mode) == (2, 0, 2)
    # torch.autograd.functional.jvp is reverse mode twice over (the double-backward trick)
    _, by_double_backward = torch.autograd.functional.jvp(f, x, u)
    assert torch.equal(by_double_backward, column)
    assert (counts.calls, counts.reverse, counts.forward_mode) == (3, 1, 2)


def test_counting_passes_rejects_a_function_that_returns_no_tensor():
    from coursekit.jacobian_guard import counting_passes
    f, _ = counting_passes(lambda t: [t])
    with pytest.raises(TypeError, match="f must return a tensor, not list"):
        f(torch.ones(2))


def test_counting_passes_counts_the_vectors_a_batched_pass_carries():
    from torch.func import jvp, vjp, vmap

    from coursekit.jacobian_guard import counting_passes
    x = torch.tensor([1.0, 2.0, 3.0])
    f, counts = counting_passes(_wide)
    leaf = x.clone().requires_grad_()
    output = f(leaf)
    output.backward(torch.ones(4), retain_graph=True)
    assert (counts.reverse, counts.vectors) == (1, 1)
    torch.autograd.grad(output, leaf, torch.eye(4)[:2], is_grads_batched=True,
                        retain_graph=True)
    assert (counts.reverse, counts.vectors) == (2, 3)
    _, vjp_fn = vjp(f, x)
    rows = vmap(vjp_fn)(torch.eye(4))[0]  # all of J in one batched pass
    assert torch.allclose(rows, jacobian(_wide, x))
    assert (counts.reverse, counts.vectors) == (3, 7)
    vmap(vmap(vjp_fn))(torch.ones(2, 3, 4))
    assert (counts.reverse, counts.vectors) == (4, 13)
    vmap(lambda u: jvp(f, (x,), (u,))[1])(torch.eye(3))
    jvp(f, (x,), (torch.ones(3),))
    assert (counts.forward_mode, counts.tangents) == (2, 4)
