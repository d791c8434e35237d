"""Answers to lesson 04's exercises that the grader must fail (naming the mistake) or pass.

Each entry: the exercise, a short name, whether it must "pass" or "fail", for a failing one a
phrase that the feedback's named mistake must contain (None: any failure will do) or a phrase
of the relation it must state (`relation=`), and the source that replaces the answer cell.
tests/test_scenarios.py runs them in-process.
"""

VARIANTS = [
    # ------------------------------------------------------------------------ 04-ex1
    dict(exercise="04-ex1", name="jv-instead-of-vjp", expect="fail", mistake="J @ v",
         source='''
def vector_jacobian_product(f, x, v):
    _, product = jvp(f, (x,), (v,))
    return product
'''),
    dict(exercise="04-ex1", name="sum-gradient-times-v", expect="fail",
         mistake="entry by entry", source='''
def vector_jacobian_product(f, x, v):
    leaf = x.detach().clone().requires_grad_()
    f(leaf).sum().backward()
    return leaf.grad * v
'''),
    dict(exercise="04-ex1", name="ignores-v", expect="fail", mistake="as if v were all ones",
         source='''
def vector_jacobian_product(f, x, v):
    leaf = x.detach().clone().requires_grad_()
    f(leaf).sum().backward()
    return leaf.grad
'''),
    dict(exercise="04-ex1", name="jacobian-row-by-row", expect="fail", mistake="row by row",
         source='''
def vector_jacobian_product(f, x, v):
    leaf = x.detach().clone().requires_grad_()
    y = f(leaf)
    rows = []
    for i in range(len(y)):
        (row,) = torch.autograd.grad(y[i], leaf, retain_graph=True)
        rows.append(row)
    return v @ torch.stack(rows)
'''),
    dict(exercise="04-ex1", name="jacrev", expect="fail", mistake="whole Jacobian",
         source='''
def vector_jacobian_product(f, x, v):
    return v @ jacrev(f)(x)
'''),
    dict(exercise="04-ex1", name="requires-grad-on-x", drawn="caller's tensors unchanged", expect="fail", mistake="x was changed",
         source='''
def vector_jacobian_product(f, x, v):
    x.requires_grad_(True)
    f(x).backward(v)
    return x.grad
'''),
    dict(exercise="04-ex1", name="hard-coded-visible", expect="fail", mistake=None,
         relation="the test cell example's value",
         source='''
def vector_jacobian_product(f, x, v):
    return torch.tensor([5.0, 5.0, -3.0])
'''),
    dict(exercise="04-ex1", name="func-vjp", expect="pass", mistake=None, source='''
def vector_jacobian_product(f, x, v):
    _, vjp_fn = vjp(f, x)
    return vjp_fn(v)[0]
'''),
    dict(exercise="04-ex1", name="weighted-sum-backward", expect="pass", mistake=None,
         source='''
def vector_jacobian_product(f, x, v):
    leaf = x.clone().requires_grad_(True)
    (f(leaf) * v).sum().backward()
    return leaf.grad
'''),
    # -------------------------------- blind review (issue 32): forward mode for vᵀJ
    dict(exercise="04-ex1", name="jvp-with-v-as-tangent", expect="fail", mistake=None,
         source='''
from torch.func import jvp
def vector_jacobian_product(f, x, v):
    _, out = jvp(f, (x,), (v,))
    return out
'''),
    # ------------------------------------------------------------------------ 04-ex2
    dict(exercise="04-ex2", name="column-instead-of-row", expect="fail", mistake="column of J",
         source='''
def jacobian_row(f, x, i):
    tangent = torch.zeros_like(x)
    tangent[i] = 1.0
    return jvp(f, (x,), (tangent,))[1]
'''),
    dict(exercise="04-ex2", name="ones", expect="fail", mistake="sum of all rows", source='''
def jacobian_row(f, x, i):
    leaf = x.detach().clone().requires_grad_()
    out = f(leaf)
    out.backward(torch.ones_like(out))
    return leaf.grad
'''),
    dict(exercise="04-ex2", name="accumulates-into-x-grad", drawn="caller's tensors unchanged", expect="fail",
         mistake="accumulates", source='''
def jacobian_row(f, x, i):
    x.requires_grad_()
    out = f(x)
    v = torch.zeros_like(out)
    v[i] = 1.0
    out.backward(v)
    return x.grad
'''),
    dict(exercise="04-ex2", name="all-rows-then-pick", expect="fail",
         mistake="one backward pass per output", source='''
def jacobian_row(f, x, i):
    leaf = x.detach().clone().requires_grad_()
    out = f(leaf)
    rows = [torch.autograd.grad(out[k], leaf, retain_graph=True)[0] for k in range(len(out))]
    return rows[i]
'''),
    dict(exercise="04-ex2", name="jacobian", expect="fail", mistake="whole Jacobian",
         source='''
def jacobian_row(f, x, i):
    return jacobian(f, x)[i]
'''),
    dict(exercise="04-ex2", name="hard-coded-visible", expect="fail", mistake=None,
         relation="reverse passes through f (two calls) is 0",
         source='''
def jacobian_row(f, x, i):
    rows = {2: [1.0, 0.0, -1.0], 0: [2.0, 1.0, 0.0], 1: [2.0, -2.0, 4.0]}
    return torch.tensor(rows[i])
'''),
    dict(exercise="04-ex2", name="grad-of-one-output", expect="pass", mistake=None,
         source='''
def jacobian_row(f, x, i):
    leaf = x.detach().clone().requires_grad_()
    (row,) = torch.autograd.grad(f(leaf)[i], leaf)
    return row
'''),
    dict(exercise="04-ex2", name="func-vjp-one-hot", expect="pass", mistake=None, source='''
def jacobian_row(f, x, i):
    out, vjp_fn = vjp(f, x)
    v = torch.nn.functional.one_hot(torch.tensor(i), out.numel()).to(out.dtype)
    return vjp_fn(v)[0]
'''),
    # -------------------------------- blind review (issue 32): state kept between calls
    dict(exercise="04-ex2", name="rows-memoised-by-index", expect="fail", mistake=None,
         source='''
_ROWS = {}
def jacobian_row(f, x, i):
    if i not in _ROWS:
        leaf = x.detach().clone().requires_grad_()
        out = f(leaf)
        v = torch.zeros_like(out)
        v[i] = 1.0
        out.backward(v)
        _ROWS[i] = leaf.grad
    return _ROWS[i]
'''),
    # ------------------------------------------------------------------------ 04-ex3
    dict(exercise="04-ex3", name="row-instead-of-column", expect="fail", mistake="row of J",
         source='''
def jacobian_column(f, x, j):
    leaf = x.detach().clone().requires_grad_()
    out = f(leaf)
    v = torch.zeros_like(out)
    v[j] = 1.0
    out.backward(v)
    return leaf.grad
'''),
    dict(exercise="04-ex3", name="functional-jvp", expect="fail", mistake="double-backward",
         source='''
def jacobian_column(f, x, j):
    u = torch.zeros_like(x)
    u[j] = 1.0
    _, column = torch.autograd.functional.jvp(f, x, u)
    return column
'''),
    dict(exercise="04-ex3", name="ones-tangent", expect="fail", mistake="sum of all columns",
         source='''
def jacobian_column(f, x, j):
    return jvp(f, (x,), (torch.ones_like(x),))[1]
'''),
    dict(exercise="04-ex3", name="rows-then-entry", expect="fail", mistake="row by row",
         source='''
def jacobian_column(f, x, j):
    leaf = x.detach().clone().requires_grad_()
    out = f(leaf)
    return torch.stack([torch.autograd.grad(out[k], leaf, retain_graph=True)[0][j]
                        for k in range(out.shape[0])])
'''),
    dict(exercise="04-ex3", name="jacfwd", expect="fail", mistake="whole Jacobian",
         source='''
from torch.func import jacfwd

def jacobian_column(f, x, j):
    return jacfwd(f)(x)[:, j]
'''),
    dict(exercise="04-ex3", name="hard-coded-visible", expect="fail", mistake=None,
         relation="forward-mode passes through f is 0",
         source='''
def jacobian_column(f, x, j):
    if len(f(x)) == 2:
        return torch.tensor([1.0, 4.0])
    return torch.tensor({1: [1.0, 4.0, 0.0], 2: [0.0, 0.0, -1.0]}[j])
'''),
    dict(exercise="04-ex3", name="forward-ad-dual", expect="pass", mistake=None, source='''
def jacobian_column(f, x, j):
    tangent = torch.zeros_like(x)
    tangent[j] = 1.0
    with fwAD.dual_level():
        out = f(fwAD.make_dual(x, tangent))
        return fwAD.unpack_dual(out).tangent
'''),
    # ------------------------------------------------------------------------ 04-ex4
    dict(exercise="04-ex4", name="never-resets", expect="fail", mistake="sum of all the products",
         source='''
def vjps_from_one_forward(f, x, vs):
    leaf = x.detach().clone().requires_grad_()
    out = f(leaf)
    rows = []
    for v in vs:
        out.backward(v, retain_graph=True)
        rows.append(leaf.grad)
    return torch.stack(rows)
'''),
    dict(exercise="04-ex4", name="zero-without-copy", expect="fail", mistake="last product",
         source='''
def vjps_from_one_forward(f, x, vs):
    leaf = x.detach().clone().requires_grad_()
    out = f(leaf)
    rows = []
    for v in vs:
        if leaf.grad is not None:
            leaf.grad.zero_()
        out.backward(v, retain_graph=True)
        rows.append(leaf.grad)
    return torch.stack(rows)
'''),
    dict(exercise="04-ex4", name="running-sum", expect="fail", mistake="running sum",
         source='''
def vjps_from_one_forward(f, x, vs):
    leaf = x.detach().clone().requires_grad_()
    out = f(leaf)
    rows = []
    for v in vs:
        out.backward(v, retain_graph=True)
        rows.append(leaf.grad.clone())
    return torch.stack(rows)
'''),
    dict(exercise="04-ex4", name="forward-per-row", expect="fail", mistake="once per row",
         source='''
def vjps_from_one_forward(f, x, vs):
    rows = []
    for v in vs:
        leaf = x.detach().clone().requires_grad_()
        f(leaf).backward(v)
        rows.append(leaf.grad)
    return torch.stack(rows)
'''),
    dict(exercise="04-ex4", name="transposed", expect="fail", mistake="transposed", source='''
def vjps_from_one_forward(f, x, vs):
    leaf = x.detach().clone().requires_grad_()
    out = f(leaf)
    rows = []
    for v in vs:
        leaf.grad = None
        out.backward(v, retain_graph=True)
        rows.append(leaf.grad)
    return torch.stack(rows).T
'''),
    dict(exercise="04-ex4", name="no-retain-graph", expect="fail", mistake="retain_graph",
         source='''
def vjps_from_one_forward(f, x, vs):
    leaf = x.detach().clone().requires_grad_()
    out = f(leaf)
    rows = []
    for v in vs:
        leaf.grad = None
        out.backward(v)
        rows.append(leaf.grad)
    return torch.stack(rows)
'''),
    dict(exercise="04-ex4", name="hard-coded-visible", expect="fail", mistake=None,
         relation="the test cell example's value", source='''
def vjps_from_one_forward(f, x, vs):
    f(x)
    return torch.tensor([[0.0, 4.0, 0.0], [4.0, 4.0, -4.0], [4.0, 3.0, 2.0]])
'''),
    dict(exercise="04-ex4", name="autograd-grad-per-row", expect="pass", mistake=None,
         source='''
def vjps_from_one_forward(f, x, vs):
    leaf = x.detach().clone().requires_grad_()
    out = f(leaf)
    return torch.stack([torch.autograd.grad(out, leaf, v, retain_graph=True)[0] for v in vs])
'''),
    dict(exercise="04-ex4", name="vmap-over-vjp", expect="pass", mistake=None, source='''
from torch.func import vmap

def vjps_from_one_forward(f, x, vs):
    _, vjp_fn = vjp(f, x)
    return vmap(vjp_fn)(vs)[0]
'''),
    dict(exercise="04-ex4", name="batched-grad", expect="pass", mistake=None, source='''
def vjps_from_one_forward(f, x, vs):
    leaf = x.detach().clone().requires_grad_()
    (rows,) = torch.autograd.grad(f(leaf), leaf, vs, is_grads_batched=True)
    return rows
'''),
    # -------------------------------- blind review (issue 32): a count equal to the example's
    # by chance is not told as "the test cell example's value, whatever the inputs"
    dict(exercise="04-ex4", name="squeezes-vs", expect="fail", mistake=None,
         source='''
def vjps_from_one_forward(f, x, vs):
    leaf = x.detach().clone().requires_grad_()
    out = f(leaf)
    rows = []
    vs = vs.squeeze()
    for v in vs:
        g = torch.autograd.grad(out, leaf, v * torch.ones_like(out), retain_graph=True)[0] \\
            if v.dim() == 0 else torch.autograd.grad(out, leaf, v, retain_graph=True)[0]
        rows.append(g)
    return torch.stack(rows)
'''),
    # ------------------------------------------------ more slips of each exercise (issue 22)
    dict(exercise="04-ex1", name="returns-the-scalar", expect="fail", mistake=None,
         relation="a dimension is missing", source='''
def vector_jacobian_product(f, x, v):
    leaf = x.detach().clone().requires_grad_()
    return (f(leaf) * v).sum()
'''),
    dict(exercise="04-ex1", name="backward-of-weighted-sum", expect="pass", mistake=None,
         source='''
def vector_jacobian_product(f, x, v):
    leaf = x.detach().clone().requires_grad_()
    (f(leaf) * v).sum().backward()
    return leaf.grad
'''),
    dict(exercise="04-ex2", name="ones-like-typo", expect="fail", mistake="sum of all rows",
         source='''
def jacobian_row(f, x, i):
    leaf = x.detach().clone().requires_grad_()
    output = f(leaf)
    one_hot = torch.ones_like(output)
    one_hot[i] = 1.0
    output.backward(one_hot)
    return leaf.grad
'''),
    dict(exercise="04-ex2", name="one-hot-like-x", expect="fail", mistake=None,
         relation="another shape than the output", source='''
def jacobian_row(f, x, i):
    leaf = x.detach().clone().requires_grad_()
    one_hot = torch.zeros_like(x)
    one_hot[i] = 1.0
    f(leaf).backward(one_hot)
    return leaf.grad
'''),
    dict(exercise="04-ex3", name="tangent-like-output", expect="fail", mistake=None,
         relation="another shape than the input", source='''
def jacobian_column(f, x, j):
    tangent = torch.zeros_like(f(x))
    tangent[j] = 1.0
    return jvp(f, (x,), (tangent,))[1]
'''),
    dict(exercise="04-ex3", name="returns-the-output", expect="fail", mistake=None,
         relation="every item is the same", source='''
def jacobian_column(f, x, j):
    tangent = torch.zeros_like(x)
    tangent[j] = 1.0
    return jvp(f, (x,), (tangent,))[0]
'''),
    dict(exercise="04-ex3", name="one-hot-function", expect="pass", mistake=None, source='''
def jacobian_column(f, x, j):
    tangent = torch.nn.functional.one_hot(torch.tensor(j), x.numel()).to(x.dtype)
    return jvp(f, (x,), (tangent.reshape(x.shape),))[1]
'''),
    dict(exercise="04-ex4", name="one-backward-for-all-rows", expect="fail", mistake=None,
         relation="another shape than the output", source='''
def vjps_from_one_forward(f, x, vs):
    leaf = x.detach().clone().requires_grad_()
    f(leaf).backward(vs)
    return leaf.grad
'''),
    # ------------------------------------ all of J in one batched pass, then the asked product
    dict(exercise="04-ex1", name="vmap-jacobian-then-product", expect="fail",
         mistake="one batched pass", source='''
def vector_jacobian_product(f, x, v):
    _, vjp_fn = torch.func.vjp(f, x)
    J = torch.func.vmap(vjp_fn)(torch.eye(v.numel()))[0]
    return v @ J
'''),
    dict(exercise="04-ex1", name="batched-grad-jacobian", expect="fail",
         mistake="one batched pass", source='''
def vector_jacobian_product(f, x, v):
    leaf = x.detach().clone().requires_grad_()
    out = f(leaf)
    J, = torch.autograd.grad(out, leaf, torch.eye(len(out)), is_grads_batched=True)
    return v @ J
'''),
    dict(exercise="04-ex2", name="vmap-all-rows", expect="fail", mistake="one batched pass",
         source='''
def jacobian_row(f, x, i):
    out, vjp_fn = torch.func.vjp(f, x)
    return torch.func.vmap(vjp_fn)(torch.eye(out.numel()))[0][i]
'''),
    dict(exercise="04-ex3", name="vmap-all-columns", expect="fail", mistake="one batched pass",
         source='''
def jacobian_column(f, x, j):
    columns = torch.func.vmap(lambda u: jvp(f, (x,), (u,))[1])(torch.eye(x.numel()))
    return columns[j]
'''),
    dict(exercise="04-ex4", name="rows-of-j-then-matmul", expect="fail", mistake="vs @ J",
         source='''
def vjps_from_one_forward(f, x, vs):
    leaf = x.detach().clone().requires_grad_()
    out = f(leaf)
    J = torch.stack([torch.autograd.grad(out[i], leaf, retain_graph=True)[0]
                     for i in range(len(out))])
    return vs @ J
'''),
    dict(exercise="04-ex4", name="vmap-j-then-matmul", expect="fail", mistake="vs @ J",
         source='''
def vjps_from_one_forward(f, x, vs):
    out, vjp_fn = torch.func.vjp(f, x)
    J = torch.func.vmap(vjp_fn)(torch.eye(out.shape[0]))[0]
    return vs @ J
'''),
    # Reverse mode batched over every one-hot v (all of J), then a column picked.
    dict(exercise="04-ex3", name="vmap-of-vjp", expect="fail", mistake="reverse-mode (backward)",
         source='''
def jacobian_column(f, x, j):
    y, vjp_fn = torch.func.vjp(f, x)
    rows = torch.func.vmap(vjp_fn)(torch.eye(y.numel()))[0]
    return rows[:, j]
'''),
    # ---------------------------------------------- more valid alternatives (issue 32: 3 or more)
    dict(exercise="04-ex2", name="autograd-grad-with-one-hot", expect="pass", mistake=None, source='''
def jacobian_row(f, x, i):
    x = x.detach().requires_grad_(True)
    y = f(x)
    v = torch.zeros_like(y)
    v[i] = 1
    (row,) = torch.autograd.grad(y, x, grad_outputs=v)
    return row
'''),
    dict(exercise="04-ex3", name="one-hot-by-index-put", expect="pass", mistake=None, source='''
def jacobian_column(f, x, j):
    u = torch.zeros_like(x).index_fill(0, torch.tensor([j]), 1.0)
    return jvp(f, (x,), (u,))[1]
'''),
    # ---------------------------------------------- more wrong answers (issue 32: 10 or more)
    dict(exercise="04-ex2", name="uses-the-caller-s-x", drawn="caller's tensors unchanged", expect="fail", mistake="added together", source='''
def jacobian_row(f, x, i):
    x.requires_grad_(True)
    y = f(x)
    v = torch.zeros_like(y)
    v[i] = 1.0
    y.backward(v)
    return x.grad
'''),
    # ------------------------------------- issue 32, item 3: inputs from the whole domain
    # One input (or one output): squeeze() drops the one dimension the result must keep.
    dict(exercise="04-ex1", name="squeezed-product", expect="fail", mistake=None,
         relation="a dimension of size 1 added or missing", drawn="batch of one", source='''
def vector_jacobian_product(f, x, v):
    leaf = x.detach().clone().requires_grad_()
    f(leaf).backward(v)
    return leaf.grad.squeeze()
'''),
    # An x of 2 dimensions: the result has the shape of x.
    dict(exercise="04-ex1", name="flattens-x", expect="fail", mistake=None,
         relation="laid out in another shape", drawn="other shapes", source='''
def vector_jacobian_product(f, x, v):
    leaf = x.detach().clone().view(-1).requires_grad_()
    f(leaf.view(x.shape)).backward(v)
    return leaf.grad
'''),
    dict(exercise="04-ex1", name="dot-then-backward", expect="pass", mistake=None,
         drawn="other shapes", source='''
def vector_jacobian_product(f, x, v):
    leaf = x.detach().clone().requires_grad_()
    torch.dot(f(leaf), v).backward()
    return leaf.grad
'''),
    dict(exercise="04-ex2", name="squeezed-row", expect="fail", mistake=None,
         relation="a dimension of size 1 added or missing", drawn="batch of one", source='''
def jacobian_row(f, x, i):
    leaf = x.detach().clone().requires_grad_()
    output = f(leaf)
    output.backward(torch.nn.functional.one_hot(torch.tensor(i), output.numel()).to(output.dtype))
    return leaf.grad.squeeze()
'''),
    dict(exercise="04-ex2", name="backward-from-one-output", expect="pass", mistake=None,
         drawn="batch of one", source='''
def jacobian_row(f, x, i):
    leaf = x.detach().clone().requires_grad_()
    f(leaf)[i].backward()
    return leaf.grad
'''),
    dict(exercise="04-ex3", name="squeezed-column", expect="fail", mistake=None,
         relation="a dimension of size 1 added or missing", drawn="batch of one", source='''
def jacobian_column(f, x, j):
    u = torch.zeros_like(x)
    u[j] = 1.0
    return jvp(f, (x,), (u,))[1].squeeze()
'''),
    dict(exercise="04-ex3", name="row-of-the-identity-as-tangent", expect="pass", mistake=None,
         drawn="batch of one", source='''
def jacobian_column(f, x, j):
    return torch.func.jvp(f, (x,), (torch.eye(x.numel())[j],))[1]
'''),
    # blind round: uses torch.func.vjp but returns the tuple vjp_fn(v) instead of its first
    # element
    dict(exercise='04-ex1', name='blind-vjp-tuple', expect='fail', mistake=None, relation='one item', not_said='torch.stack', cell='not tuple', source='''
def vector_jacobian_product(f, x, v):
    _, vjp_fn = torch.func.vjp(f, x)
    return vjp_fn(v)
'''),
    # blind round: returns the tuple torch.autograd.grad gives back instead of its only element
    dict(exercise='04-ex2', name='blind-grad-tuple', expect='fail', mistake=None, relation='one item', not_said='torch.stack', cell='not tuple', source='''
def jacobian_row(f, x, i):
    leaf = x.detach().clone().requires_grad_()
    y = f(leaf)
    v = torch.zeros_like(y)
    v[i] = 1.0
    return torch.autograd.grad(y, leaf, v)
'''),
    # blind round: computes row j with a backward pass from a one-hot v instead of column j with
    # forward mode
    dict(exercise='04-ex3', name='blind-row-by-backward', expect='fail', mistake=None, cell='That is row 1 of J', source='''
def jacobian_column(f, x, j):
    xc = x.detach().clone().requires_grad_()
    y = f(xc)
    v = torch.zeros_like(y)
    v[j] = 1.0
    (row,) = torch.autograd.grad(y, xc, v)
    return row
'''),
    # blind round: computes every product in the loop but, by an indentation slip, stacks only
    # the last one once per row (never touches .grad)
    dict(exercise='04-ex4', name='blind-indent-last-only', expect='fail', mistake='Every row is the last product: keep each', source='''
def vjps_from_one_forward(f, x, vs):
    leaf = x.detach().clone().requires_grad_()
    y = f(leaf)
    for v in vs:
        g = torch.autograd.grad(y, leaf, v, retain_graph=True)[0]
    return torch.stack([g for _ in vs])
'''),
    # blind round: adds all rows of vs into one v and runs a single backward from it, then
    # repeats that one product for every row
    dict(exercise='04-ex4', name='blind-summed-v-once', expect='fail', mistake=None, cell='take one product per row', cell_not='same .grad tensor. Set leaf.grad', source='''
def vjps_from_one_forward(f, x, vs):
    leaf = x.detach().clone().requires_grad_()
    f(leaf).backward(vs.sum(0))
    return leaf.grad.expand(vs.shape[0], *leaf.grad.shape).clone()
'''),
]
