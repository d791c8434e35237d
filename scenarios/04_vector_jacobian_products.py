"""Scenarios of lesson 04 (vector–Jacobian products): what the grader observes of each answer.

Instructors only: never released to students. See docs/AUTHORING.md, "Scenarios".

Every answer receives a function wrapped by `counting_passes`, so the scenarios observe how
often it ran `f`, how many reverse-mode and forward-mode passes went through `f`'s output, and
how many vectors (or tangents) those passes carried, a batched pass counting each of its
vectors: that is how the rules "without building J", "one backward pass", "one forward-mode
pass" and "call f once" are checked. The functions that build a whole Jacobian are blocked while the
answer runs (they raise FullJacobianBuilt), in the answer's own namespace too.
"""

import torch
from torch.func import jvp

from coursekit.drawing import domain
from coursekit.jacobian_guard import counting_passes, full_jacobian_blocked
from coursekit.scenarios import (cell_checks, expect_equal, expect_tensor, expect_true, mistake,
                                 scenario)

domain("04-ex1", "random functions with more outputs than inputs, fewer outputs than inputs and "
                 "a square Jacobian that is not symmetric, with random x and v; one input and "
                 "one output, a v of zeros, an x of 2 dimensions")
domain("04-ex2", "random functions and inputs, every row of the Jacobian (one call each, on the "
                 "same x), a function of many inputs, one input and one output, a function of "
                 "one output")
domain("04-ex3", "random functions with more inputs than outputs and with more outputs than "
                 "inputs, every column of the Jacobian, one input and one output, a function of "
                 "one input")
domain("04-ex4", "random functions and inputs, `vs` of one row or of several rows, one input and "
                 "one output, a row of zeros")


class NotApplicable(Exception):
    """Raised by a mistake whose wrong formula has no meaning for a scenario's shapes (J @ v
    for an output-sized v of a non-square J, say). No student answer raises it, so the mistake is
    named only where it applies."""


def _blocked(answer):
    """full_jacobian_blocked over the answer's own module namespace as well."""
    return full_jacobian_blocked(getattr(answer, "__globals__", None))


def _x_left_alone(x, original):
    return {"x.requires_grad afterwards": x.requires_grad, "x.grad afterwards": x.grad,
            "x unchanged": torch.equal(x, original)}


def _visible_f(t):
    return torch.stack([t[0] * t[1], t[1] ** 2, t[0] - t[2]])


def _size(rng, low, high):
    """A size drawn from [low, high]."""
    return int(torch.randint(low, high + 1, (), generator=rng))


def _one_hot(like, index):
    one_hot = torch.zeros_like(like)
    one_hot[index] = 1.0
    return one_hot


def _fresh_leaf(x):
    return x.detach().clone().requires_grad_()


def _one_to_one(rng):
    """A function of one input and one output, drawn from `rng`."""
    scale = torch.randn((), generator=rng)

    def one(t):
        return torch.sin(t) * scale + t ** 3

    return one


def _prefixed(label, observed):
    """`observed` with each key said after `label` ("one input and one output: vᵀJ")."""
    return {f"{label}: {key}": value for key, value in observed.items()}


# ------------------------------------------------------ 04-ex1: vector_jacobian_product

def _vjp_observations(vector_jacobian_product, f, x, v):
    counted, passes = counting_passes(f)
    original = x.clone()
    with _blocked(vector_jacobian_product):
        product = vector_jacobian_product(counted, x, v)
    return {"vᵀJ": product, "reverse passes through f": passes.reverse,
            "vector-Jacobian products through f": passes.vectors,
            **_x_left_alone(x, original)}


@scenario("04-ex1", uses=["vector_jacobian_product"], visible=True,
          title="the example of the test cell")
def vjp_visible_example(vector_jacobian_product, rng):
    x = torch.tensor([1.0, 2.0, 3.0])
    v = torch.tensor([1.0, 1.0, 3.0])
    return _vjp_observations(vector_jacobian_product, _visible_f, x, v)


def _left_alone(message):
    return expect_true(lambda seen: not seen["x.requires_grad afterwards"]
                       and seen["x.grad afterwards"] is None and seen["x unchanged"], message)


_COPY = "x must be left as it was: work on a copy of x that requires grad."
CELL_04_EX1 = cell_checks(
    "04-ex1",
    expect_tensor("vᵀJ", name="vector_jacobian_product(f, x, v)", mistakes={
        "That is J @ v, J times v taken as a column (possible only because "
        "this J is square), not vᵀJ: backward(v) and autograd.grad(..., "
        "grad_outputs=v) give vᵀJ.": [3.0, 4.0, -2.0],
        "That is the gradient of f(x).sum() multiplied by v entry by "
        "entry. v weights the outputs before the backward pass: pass it "
        "as the gradient to start from.": [3.0, 5.0, -3.0],
        "That is the gradient of f(x).sum(), as if v were all ones: pass "
        "v as the gradient to start from.": [3.0, 5.0, -1.0]}),
    expect_equal("reverse passes through f",
                 hint="vᵀJ takes a single backward pass that starts from v. One pass per "
                      "output builds J row by row, which this exercise rules out."),
    expect_equal("vector-Jacobian products through f",
                 hint="vᵀJ is one product. A pass batched over one-hot vectors (vmap or "
                      "is_grads_batched) builds all of J, which this exercise rules out."),
    _left_alone(_COPY))


@scenario("04-ex1", uses=["vector_jacobian_product"], rtol=1e-4, atol=1e-5,
          title="a function with more outputs than inputs")
def vjp_tall(vector_jacobian_product, rng):
    n = _size(rng, 2, 4)
    m = n + _size(rng, 1, 3)
    weight = torch.randn(m, n, generator=rng)

    def f(t):
        return torch.tanh(weight @ t) + t.prod()

    x = torch.randn(n, generator=rng)
    v = torch.randn(m, generator=rng)
    return _vjp_observations(vector_jacobian_product, f, x, v)


@scenario("04-ex1", uses=["vector_jacobian_product"], rtol=1e-4, atol=1e-5,
          title="a function with two outputs of many inputs")
def vjp_wide(vector_jacobian_product, rng):
    n = _size(rng, 4, 7)
    scale = torch.randn(n, generator=rng)

    def f(t):
        return torch.stack([t.exp().sum(), (scale * t ** 3).sum()])

    x = torch.rand(n, generator=rng) * 2 - 1
    v = torch.randn(2, generator=rng)
    return _vjp_observations(vector_jacobian_product, f, x, v)


@scenario("04-ex1", uses=["vector_jacobian_product"], rtol=1e-4, atol=1e-5,
          title="a square Jacobian that is not symmetric")
def vjp_square(vector_jacobian_product, rng):
    n = _size(rng, 3, 5)
    weight = torch.randn(n, n, generator=rng)

    def f(t):
        return torch.sin(weight @ t) * t

    x = torch.randn(n, generator=rng)
    v = torch.randn(n, generator=rng)
    return _vjp_observations(vector_jacobian_product, f, x, v)


@scenario("04-ex1", uses=["vector_jacobian_product"], rtol=1e-4, atol=1e-5,
          title="one input and one output, and a v of zeros")
def vjp_edges(vector_jacobian_product, rng):
    one = _one_to_one(rng)
    m, n = _size(rng, 2, 4), _size(rng, 2, 4)
    weight = torch.randn(m, n, generator=rng)

    def f(t):
        return torch.tanh(weight @ t) * t.sum()

    return {**_prefixed("one input and one output", _vjp_observations(
                vector_jacobian_product, one, torch.randn(1, generator=rng),
                torch.randn(1, generator=rng))),
            **_prefixed("a v of zeros", _vjp_observations(
                vector_jacobian_product, f, torch.randn(n, generator=rng), torch.zeros(m)))}


@scenario("04-ex1", uses=["vector_jacobian_product"], rtol=1e-4, atol=1e-5,
          title="an x of 2 dimensions")
def vjp_matrix_input(vector_jacobian_product, rng):
    rows, columns, m = _size(rng, 2, 3), _size(rng, 2, 3), _size(rng, 2, 4)
    weight = torch.randn(m, rows * columns, generator=rng)

    def f(t):
        return torch.tanh(weight @ t.reshape(-1)) + (t ** 2).sum()

    x = torch.randn(rows, columns, generator=rng)
    return _vjp_observations(vector_jacobian_product, f, x, torch.randn(m, generator=rng))


@mistake("04-ex1", "That is J @ v (J times v as a column), not vᵀJ: pass v as the gradient "
                   "to start from, with backward(v) or autograd.grad(..., grad_outputs=v).",
         replaces="vector_jacobian_product")
def jv_instead_of_vjp(f, x, v):
    if v.shape != x.shape:
        raise NotApplicable
    return jvp(f, (x,), (v,))[1]


@mistake("04-ex1", "That is the gradient of f(x).sum() multiplied by v entry by entry. v "
                   "weights the outputs before the backward pass: pass it as the gradient to "
                   "start from (backward(v) or grad_outputs=v).",
         replaces="vector_jacobian_product")
def sum_gradient_times_v(f, x, v):
    if v.shape != x.shape:
        raise NotApplicable
    leaf = _fresh_leaf(x)
    f(leaf).sum().backward()
    return leaf.grad * v


@mistake("04-ex1", "That is the gradient of f(x).sum(), as if v were all ones: pass v as the "
                   "gradient to start from.", replaces="vector_jacobian_product")
def ignores_v(f, x, v):
    leaf = _fresh_leaf(x)
    f(leaf).sum().backward()
    return leaf.grad


@mistake("04-ex1", "The answer builds J row by row, one backward pass per output, and then "
                   "multiplies: vᵀJ takes a single backward pass that starts from v.",
         replaces="vector_jacobian_product")
def rows_then_product(f, x, v):
    leaf = _fresh_leaf(x)
    output = f(leaf)
    rows = [torch.autograd.grad(output[i], leaf, retain_graph=True)[0]
            for i in range(output.numel())]
    return v @ torch.stack(rows)


@mistake("04-ex1", "The answer builds the whole Jacobian (jacobian, jacrev, jacfwd), which "
                   "this exercise rules out: take vᵀJ from one backward pass instead.",
         replaces="vector_jacobian_product")
def builds_jacobian(f, x, v):
    return v @ torch.autograd.functional.jacobian(f, x)


@mistake("04-ex1", "The answer builds all of J in one batched pass (vmap or is_grads_batched "
                   "over one-hot vectors, one product per output) and then multiplies: vᵀJ is "
                   "a single product, one backward pass that starts from v.",
         replaces="vector_jacobian_product")
def batched_jacobian_then_product(f, x, v):
    leaf = _fresh_leaf(x)
    output = f(leaf)
    eye = torch.eye(output.numel())
    (rows,) = torch.autograd.grad(output, leaf, eye, is_grads_batched=True)
    return v @ rows


@mistake("04-ex1", "x was changed: the answer made x itself require grad (or gave it a "
                   ".grad). Work on a copy: x.detach().clone().requires_grad_().",
         replaces="vector_jacobian_product")
def works_on_x(f, x, v):
    x.requires_grad_()
    f(x).backward(v)
    return x.grad


# ------------------------------------------------------------------ 04-ex2: jacobian_row

@scenario("04-ex2", uses=["jacobian_row"], visible=True, title="the example of the test cell")
def row_visible_example(jacobian_row, rng):
    x = torch.tensor([1.0, 2.0, 3.0])
    counted, passes = counting_passes(_visible_f)
    with _blocked(jacobian_row):
        row_2 = jacobian_row(counted, x, 2)
        row_0 = jacobian_row(counted, x, 0)
    observed = {"row 2": row_2, "row 0": row_0,
                "reverse passes through f (two calls)": passes.reverse,
                "vector-Jacobian products through f (two calls)": passes.vectors,
                **_x_left_alone(x, torch.tensor([1.0, 2.0, 3.0]))}

    def h(t):
        return torch.stack([t.sum(), (t ** 2).sum()])

    with _blocked(jacobian_row):
        observed["row 1 of h"] = jacobian_row(h, torch.tensor([1.0, -1.0, 2.0]), 1)
    return observed


_ALL_ROWS = "That is the sum of all rows (v = ones): use a one-hot v, 1 at position i."
_ACCUMULATED = ("That is rows 2 and 0 added together: the second call added into the "
                ".grad of the first (.grad accumulates, and a returned .grad tensor is "
                "updated in place). Work on a fresh copy of x in every call: "
                "x.detach().clone().requires_grad_().")
CELL_04_EX2 = cell_checks(
    "04-ex2",
    expect_tensor("row 2", name="jacobian_row(f, x, 2)", mistakes={
        "That is column 2 of J. A one-hot v in backward(v) picks a row: vᵀJ.": [0.0, 0.0, -1.0],
        _ALL_ROWS: [3.0, 5.0, -1.0], _ACCUMULATED: [3.0, 1.0, -1.0]}),
    expect_tensor("row 0", name="jacobian_row(f, x, 0)", mistakes={
        "That is column 0 of J, not row 0.": [2.0, 0.0, 1.0],
        _ALL_ROWS: [3.0, 5.0, -1.0], _ACCUMULATED: [3.0, 1.0, -1.0]}),
    expect_equal("reverse passes through f (two calls)",
                 hint="each row takes exactly one backward pass, with a one-hot v; one pass "
                      "per output builds all of J."),
    expect_equal("vector-Jacobian products through f (two calls)",
                 hint="each row is one product, with a one-hot v; a pass batched over every "
                      "one-hot vector (vmap or is_grads_batched) builds all of J."),
    _left_alone(_COPY),
    expect_tensor("row 1 of h", name="jacobian_row(h, [1, -1, 2], 1)"))


@scenario("04-ex2", uses=["jacobian_row"], rtol=1e-4, atol=1e-5,
          title="every row of a random Jacobian, one call each")
def every_row(jacobian_row, rng):
    n = _size(rng, 3, 5)
    m = n + _size(rng, 1, 2)
    weight = torch.randn(m, n, generator=rng)

    def f(t):
        return torch.sin(weight @ t) * t.sum()

    x = torch.randn(n, generator=rng)
    original = x.clone()
    counted, passes = counting_passes(f)
    rows = []
    with _blocked(jacobian_row):
        for i in range(m):
            rows.append(jacobian_row(counted, x, i))
    return {"rows": rows, "reverse passes through f": passes.reverse,
            "vector-Jacobian products through f": passes.vectors,
            "calls of f": passes.calls, **_x_left_alone(x, original)}


@scenario("04-ex2", uses=["jacobian_row"], rtol=1e-4, atol=1e-5,
          title="one row of a function with many inputs")
def row_of_wide(jacobian_row, rng):
    n = _size(rng, 4, 7)
    weights = torch.randn(n, generator=rng)

    def f(t):
        return torch.stack([(weights * t ** 2).sum(), torch.cos(t).prod()])

    x = torch.randn(n, generator=rng)
    i = _size(rng, 0, 1)
    counted, passes = counting_passes(f)
    with _blocked(jacobian_row):
        row = jacobian_row(counted, x, i)
    return {"row": row, "reverse passes through f": passes.reverse,
            "vector-Jacobian products through f": passes.vectors}


@scenario("04-ex2", uses=["jacobian_row"], rtol=1e-4, atol=1e-5,
          title="one input and one output, and a function of one output")
def row_edges(jacobian_row, rng):
    one = _one_to_one(rng)
    n = _size(rng, 2, 5)
    weights = torch.randn(n, generator=rng)

    def single(t):
        return (weights * torch.tanh(t)).sum().reshape(1)

    x, y = torch.randn(1, generator=rng), torch.randn(n, generator=rng)
    with _blocked(jacobian_row):
        return {"row 0, one input and one output": jacobian_row(one, x, 0),
                "row 0 of a function of one output": jacobian_row(single, y, 0)}


@mistake("04-ex2", "That is a column of J, not a row: a one-hot v in backward(v) picks row i "
                   "(vᵀJ); a one-hot tangent in jvp picks a column.", replaces="jacobian_row")
def column_instead_of_row(f, x, i):
    if i >= x.numel():
        raise NotApplicable
    return jvp(f, (x,), (_one_hot(x, i),))[1]


@mistake("04-ex2", "That is the sum of all rows of J (v = ones): use a one-hot v, 1 at "
                   "position i and 0 elsewhere.", replaces="jacobian_row")
def sum_of_rows(f, x, i):
    leaf = _fresh_leaf(x)
    f(leaf).sum().backward()
    return leaf.grad


@mistake("04-ex2", "Rows of several calls came back added together: the answer runs "
                   "backward on x itself, so .grad accumulates from call to call (and a "
                   "returned .grad tensor is updated in place). Work on a fresh copy of x in "
                   "every call: x.detach().clone().requires_grad_().", replaces="jacobian_row")
def accumulates_into_x(f, x, i):
    x.requires_grad_()
    output = f(x)
    output.backward(_one_hot(output, i))
    return x.grad


@mistake("04-ex2", "The answer runs one backward pass per output (all of J) to return one "
                   "row: a single backward with a one-hot v gives row i.",
         replaces="jacobian_row")
def all_rows_then_pick(f, x, i):
    leaf = _fresh_leaf(x)
    output = f(leaf)
    rows = [torch.autograd.grad(output[k], leaf, retain_graph=True)[0]
            for k in range(output.numel())]
    return rows[i]


@mistake("04-ex2", "The answer builds the whole Jacobian (jacobian, jacrev, jacfwd), which "
                   "this exercise rules out: one backward pass with a one-hot v gives the row.",
         replaces="jacobian_row")
def builds_jacobian_for_a_row(f, x, i):
    return torch.func.jacrev(f)(x)[i]


@mistake("04-ex2", "The answer builds all of J in one batched pass (vmap or is_grads_batched "
                   "over one-hot vectors) to return one row: a single backward pass with a "
                   "one-hot v gives row i.", replaces="jacobian_row")
def batched_rows_then_pick(f, x, i):
    output, vjp_fn = torch.func.vjp(f, x)
    return torch.func.vmap(vjp_fn)(torch.eye(output.numel()))[0][i]


# ---------------------------------------------------------------- 04-ex3: jacobian_column

def _column_observations(jacobian_column, f, x, columns):
    original = x.clone()
    counted, passes = counting_passes(f)
    found = []
    with _blocked(jacobian_column):
        for j in columns:
            found.append(jacobian_column(counted, x, j))
    observed = {"columns": found, "forward-mode passes through f": passes.forward_mode,
                "tangents pushed through f": passes.tangents,
                "reverse passes through f": passes.reverse, **_x_left_alone(x, original)}
    if passes.forward_mode != len(columns):  # what the test cell tells apart (a failing answer)
        observed["several backward passes per call of f"] = passes.reverse > passes.calls
    return observed


@scenario("04-ex3", uses=["jacobian_column"], visible=True,
          title="the example of the test cell")
def column_visible_example(jacobian_column, rng):
    x = torch.tensor([1.0, 2.0, 3.0])
    observed = _column_observations(jacobian_column, _visible_f, x, [1, 2])

    def h(t):
        return torch.stack([t.sum(), (t ** 2).sum()])

    try:
        with _blocked(jacobian_column):
            observed["column 2 of h"] = jacobian_column(h, torch.tensor([1.0, -1.0, 2.0]), 2)
    except Exception:  # noqa: BLE001 (an answer that failed a check above may raise here: the
        return observed  # cell stopped before, and the page says what its checks said)
    return observed


_ALL_COLUMNS = "That is the sum of all columns (u = ones): the tangent must be one-hot."
CELL_04_EX3 = cell_checks(
    "04-ex3",
    expect_tensor("columns", name="jacobian_column(f, x, 1)",
                  read=lambda seen: seen["columns"][0],
                  mistakes={"That is row 1 of J. A one-hot tangent u in jvp picks a column: "
                            "Ju.": [0.0, 4.0, 0.0], _ALL_COLUMNS: [3.0, 4.0, 0.0]}),
    expect_tensor("columns", name="jacobian_column(f, x, 2)",
                  read=lambda seen: seen["columns"][1],
                  mistakes={"That is row 2 of J, not column 2.": [1.0, 0.0, -1.0],
                            _ALL_COLUMNS: [3.0, 4.0, 0.0]}),
    expect_equal("forward-mode passes through f",
                 name="forward-mode passes through f, for two calls",
                 hint=lambda seen: (
                     "one backward pass per output builds J row by row; a column takes "
                     "a single forward-mode pass with a one-hot tangent: torch.func.jvp, "
                     "or a dual tensor of torch.autograd.forward_ad.")
                 if seen.get("several backward passes per call of f") else (
                     "each column takes one forward-mode pass: torch.func.jvp, or a dual "
                     "tensor of torch.autograd.forward_ad. torch.autograd.functional.jvp "
                     "is not forward mode: it runs backward twice.")),
    expect_equal("tangents pushed through f", name="tangents pushed through f, for two calls",
                 hint="each column takes one one-hot tangent; a pass batched over every "
                      "one-hot tangent (vmap over jvp) builds all of J."),
    expect_equal("reverse passes through f", name="backward passes through f",
                 hint="a column needs no backward pass: one forward-mode pass gives it."),
    expect_tensor("column 2 of h", name="jacobian_column(h, [1, -1, 2], 2)"),
    _left_alone("x must be left as it was: forward mode needs no copy that requires grad, "
                "and x must not change."))


@scenario("04-ex3", uses=["jacobian_column"], rtol=1e-4, atol=1e-5,
          title="every column of a random Jacobian with more inputs than outputs")
def every_column(jacobian_column, rng):
    m = _size(rng, 2, 4)
    n = m + _size(rng, 1, 3)
    weight = torch.randn(m, n, generator=rng)

    def f(t):
        return torch.exp(-(weight @ t) ** 2) + t[0]

    x = torch.randn(n, generator=rng)
    return _column_observations(jacobian_column, f, x, range(n))


@scenario("04-ex3", uses=["jacobian_column"], rtol=1e-4, atol=1e-5,
          title="one column of a function with more outputs than inputs")
def column_of_tall(jacobian_column, rng):
    n = _size(rng, 2, 3)
    m = n + _size(rng, 2, 4)
    weight = torch.randn(m, n, generator=rng)

    def f(t):
        return torch.tanh(weight @ t) * t.sum()

    x = torch.randn(n, generator=rng)
    return _column_observations(jacobian_column, f, x, [_size(rng, 0, n - 1)])


@scenario("04-ex3", uses=["jacobian_column"], rtol=1e-4, atol=1e-5,
          title="one input and one output, and a function of one input")
def column_edges(jacobian_column, rng):
    one = _one_to_one(rng)
    m = _size(rng, 2, 5)
    weights = torch.randn(m, generator=rng)

    def spread(t):
        return torch.tanh(weights * t) + t ** 2

    x, y = torch.randn(1, generator=rng), torch.randn(1, generator=rng)
    with _blocked(jacobian_column):
        return {"column 0, one input and one output": jacobian_column(one, x, 0),
                "column 0 of a function of one input": jacobian_column(spread, y, 0)}


@mistake("04-ex3", "That is a row of J, not a column: a one-hot tangent u in jvp gives the "
                   "column Ju; a one-hot v in backward gives a row.", replaces="jacobian_column")
def row_instead_of_column(f, x, j):
    leaf = _fresh_leaf(x)
    output = f(leaf)
    if j >= output.numel():
        raise NotApplicable
    output.backward(_one_hot(output, j))
    return leaf.grad


@mistake("04-ex3", "The column came from reverse-mode (backward) passes, not from a forward-mode "
                   "one: torch.autograd.functional.jvp, for one, runs backward twice (the "
                   "double-backward trick). Use torch.func.jvp or torch.autograd.forward_ad, "
                   "one forward-mode pass.", replaces="jacobian_column")
def double_backward_jvp(f, x, j):
    return torch.autograd.functional.jvp(f, x, _one_hot(x, j))[1]


@mistake("04-ex3", "That is the sum of all columns of J (u = ones): the tangent must be "
                   "one-hot, 1 at position j.", replaces="jacobian_column")
def sum_of_columns(f, x, j):
    return jvp(f, (x,), (torch.ones_like(x),))[1]


@mistake("04-ex3", "The answer runs one backward pass per output and picks entry j of each "
                   "row: that is J built row by row. One forward-mode pass with a one-hot "
                   "tangent gives the column.", replaces="jacobian_column")
def column_from_all_rows(f, x, j):
    leaf = _fresh_leaf(x)
    output = f(leaf)
    return torch.stack([torch.autograd.grad(output[k], leaf, retain_graph=True)[0][j]
                        for k in range(output.numel())])


@mistake("04-ex3", "The answer builds the whole Jacobian (jacobian, jacrev, jacfwd), which "
                   "this exercise rules out: one jvp with a one-hot tangent gives the column.",
         replaces="jacobian_column")
def builds_jacobian_for_a_column(f, x, j):
    return torch.func.jacfwd(f)(x)[:, j]


@mistake("04-ex3", "The answer pushes every one-hot tangent through f in one batched pass "
                   "(vmap over jvp: all of J) to return one column: one tangent, 1 at "
                   "position j, gives the column.", replaces="jacobian_column")
def batched_columns_then_pick(f, x, j):
    def column(u):
        return jvp(f, (x,), (u,))[1]

    return torch.func.vmap(column)(torch.eye(x.numel()))[j]


# --------------------------------------------------------- 04-ex4: vjps_from_one_forward

def _products_observations(vjps_from_one_forward, f, x, vs):
    original = x.clone()
    counted, passes = counting_passes(f)
    with _blocked(vjps_from_one_forward):
        products = vjps_from_one_forward(counted, x, vs)
    return {"products": products, "calls of f": passes.calls,
            "vector-Jacobian products through f": passes.vectors, **_x_left_alone(x, original)}


@scenario("04-ex4", uses=["vjps_from_one_forward"], visible=True,
          title="the example of the test cell")
def products_visible_example(vjps_from_one_forward, rng):
    def f(t):
        return torch.stack([t[0] * t[1], t[1] ** 2, t[0] - t[2], t.sum()])

    x = torch.tensor([1.0, 2.0, 3.0])
    vs = torch.tensor([[0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 3.0, -1.0], [2.0, 0.0, -1.0, 1.0]])
    return _products_observations(vjps_from_one_forward, f, x, vs)


CELL_04_EX4 = cell_checks(
    "04-ex4",
    expect_tensor("products", name="vjps_from_one_forward(f, x, vs)", mistakes={
        "Every row is the sum of all the products: take one product per "
        "row of vs. If the rows are leaf.grad, .grad accumulates over the "
        "backward calls and every row is the same tensor: set leaf.grad = "
        "None before each backward.": [[8.0, 11.0, -2.0]] * 3,
        "Every row is the last product: keep each product as it is "
        "computed. If the rows are leaf.grad, .grad.zero_() resets the one "
        "tensor they all point to: store a copy (leaf.grad.clone()), or set "
        "leaf.grad = None before each backward.": [[4.0, 3.0, 2.0]] * 3,
        "Each row is the running sum of the products so far: .grad "
        "accumulates, so reset it (leaf.grad = None) before each "
        "backward.": [[0.0, 4.0, 0.0], [4.0, 8.0, -4.0], [8.0, 11.0, -2.0]],
        "The result is transposed: row k must be vₖᵀJ, so stack the "
        "products along dimension 0.": [[0.0, 4.0, 4.0], [4.0, 4.0, 3.0], [0.0, -4.0, 2.0]]}),
    expect_equal("calls of f", name="number of calls of f",
                 hint="build the graph once with f(...) and call backward(v, "
                      "retain_graph=True) for each row v."),
    expect_equal("vector-Jacobian products through f",
                 hint="one product per row of vs. Building J first (one product per output "
                      "of f) and then multiplying vs @ J is another computation."),
    _left_alone(_COPY))


@scenario("04-ex4", uses=["vjps_from_one_forward"], rtol=1e-4, atol=1e-5,
          title="several products of a random Jacobian")
def several_products(vjps_from_one_forward, rng):
    n = _size(rng, 3, 5)
    m = _size(rng, 2, 5)
    k = max(n, m) + _size(rng, 1, 2)  # more rows than inputs (a transposed result has another
    #                                   shape) and than outputs (J has fewer rows than vs)
    weight = torch.randn(m, n, generator=rng)

    def f(t):
        return torch.tanh(weight @ t) * t.norm()

    x = torch.randn(n, generator=rng)
    vs = torch.randn(k, m, generator=rng)
    return _products_observations(vjps_from_one_forward, f, x, vs)


@scenario("04-ex4", uses=["vjps_from_one_forward"], rtol=1e-4, atol=1e-5,
          title="a single row still gives a 2-D result")
def single_product(vjps_from_one_forward, rng):
    n = _size(rng, 2, 5)
    weight = torch.randn(3, n, generator=rng)

    def f(t):
        return torch.sin(weight @ t)

    x = torch.randn(n, generator=rng)
    vs = torch.randn(1, 3, generator=rng)
    return _products_observations(vjps_from_one_forward, f, x, vs)


@scenario("04-ex4", uses=["vjps_from_one_forward"], rtol=1e-4, atol=1e-5,
          title="one input and one output, and a row of zeros")
def products_edges(vjps_from_one_forward, rng):
    one = _one_to_one(rng)
    n, m = _size(rng, 2, 4), _size(rng, 2, 4)
    weight = torch.randn(m, n, generator=rng)

    def f(t):
        return torch.tanh(weight @ t) * t.norm()

    k = _size(rng, 2, 4)
    vs = torch.randn(k, m, generator=rng)
    vs[_size(rng, 0, k - 1)] = 0.0
    return {**_prefixed("one input and one output", _products_observations(
                vjps_from_one_forward, one, torch.randn(1, generator=rng),
                torch.randn(_size(rng, 1, 3), 1, generator=rng))),
            **_prefixed("a row of zeros", _products_observations(
                vjps_from_one_forward, f, torch.randn(n, generator=rng), vs))}


@mistake("04-ex4", "Every row is the sum of all the products: .grad accumulates over the "
                   "backward calls and every row is the same .grad tensor. Set "
                   "leaf.grad = None before each backward.", replaces="vjps_from_one_forward")
def never_resets_grad(f, x, vs):
    leaf = _fresh_leaf(x)
    output = f(leaf)
    rows = []
    for v in vs:
        output.backward(v, retain_graph=True)
        rows.append(leaf.grad)
    return torch.stack(rows)


@mistake("04-ex4", "Every row is the last product: keep each product as it is computed. If "
                   "the rows are leaf.grad, .grad.zero_() resets the one tensor they all point "
                   "to: store a copy (leaf.grad.clone()), or set leaf.grad = None before each "
                   "backward.", replaces="vjps_from_one_forward")
def zeroes_in_place_without_copy(f, x, vs):
    leaf = _fresh_leaf(x)
    output = f(leaf)
    rows = []
    for v in vs:
        if leaf.grad is not None:
            leaf.grad.zero_()
        output.backward(v, retain_graph=True)
        rows.append(leaf.grad)
    return torch.stack(rows)


@mistake("04-ex4", "Each row is the running sum of the products so far: .grad accumulates, "
                   "so reset it (leaf.grad = None) before each backward.",
         replaces="vjps_from_one_forward")
def running_sum(f, x, vs):
    leaf = _fresh_leaf(x)
    output = f(leaf)
    rows = []
    for v in vs:
        output.backward(v, retain_graph=True)
        rows.append(leaf.grad.clone())
    return torch.stack(rows)


@mistake("04-ex4", "The answer calls f once per row: build the graph once with f(...) and "
                   "call backward(v, retain_graph=True) on it for each row v.",
         replaces="vjps_from_one_forward")
def one_forward_per_row(f, x, vs):
    rows = []
    for v in vs:
        leaf = _fresh_leaf(x)
        f(leaf).backward(v)
        rows.append(leaf.grad)
    return torch.stack(rows)


@mistake("04-ex4", "The result is transposed: row k must be vₖᵀJ, so stack the products "
                   "along dimension 0.", replaces="vjps_from_one_forward")
def transposed(f, x, vs):
    leaf = _fresh_leaf(x)
    output = f(leaf)
    rows = [torch.autograd.grad(output, leaf, v, retain_graph=True)[0] for v in vs]
    return torch.stack(rows, dim=1)


@mistake("04-ex4", "backward raised a RuntimeError. If it says the graph was freed (\"backward "
                   "through the graph a second time\"), pass retain_graph=True to every "
                   "backward call on the graph.", replaces="vjps_from_one_forward")
def forgets_retain_graph(f, x, vs):
    leaf = _fresh_leaf(x)
    output = f(leaf)
    rows = []
    for v in vs:
        leaf.grad = None
        output.backward(v)
        rows.append(leaf.grad)
    return torch.stack(rows)


@mistake("04-ex4", "The answer builds J (one product per output of f, row by row or in one "
                   "batched pass) and then multiplies vs @ J: take the products vₖᵀJ "
                   "themselves, one per row of vs.", replaces="vjps_from_one_forward")
def jacobian_then_products(f, x, vs):
    leaf = _fresh_leaf(x)
    output = f(leaf)
    rows = [torch.autograd.grad(output, leaf, one_hot, retain_graph=True)[0]
            for one_hot in torch.eye(output.numel())]
    return vs @ torch.stack(rows)
