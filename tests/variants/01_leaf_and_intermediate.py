"""Answers to lesson 01's exercises that the grader must fail (naming the mistake) or pass.

Each entry: the exercise, a short name, whether it must "pass" or "fail", for a failing one a
phrase that the feedback's named mistake must contain (None: any failure will do), and the
source that replaces the answer cell. tests/test_scenarios.py runs them in-process.
"""

VARIANTS = [
    # ------------------------------------------------------------ 01-ex1 leaf_gradients
    dict(exercise="01-ex1", name="swapped", expect="fail", mistake="swapped", source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float32, requires_grad=True)
    s = ((p * q) ** 2 + p).sum()
    s.backward()
    return q.grad, p.grad
'''),
    dict(exercise="01-ex1", name="forgets-plus-p", expect="fail", mistake="`+ p` term",
         source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float32, requires_grad=True)
    r = p * q
    (r ** 2).sum().backward()
    return p.grad, q.grad
'''),
    dict(exercise="01-ex1", name="mean-not-sum", cell="s is a mean, not a sum", expect="fail", mistake="not a mean", source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float32, requires_grad=True)
    ((p * q) ** 2 + p).mean().backward()
    return p.grad, q.grad
'''),
    dict(exercise="01-ex1", name="by-hand", expect="fail", mistake="worked out by hand",
         source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32)
    q = torch.tensor(q_values, dtype=torch.float32)
    return 2 * p * q ** 2 + 1, 2 * p ** 2 * q
'''),
    dict(exercise="01-ex1", name="float64-then-converted", expect="fail",
         mistake="copied or converted afterwards", source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float64, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float64, requires_grad=True)
    p_grad, q_grad = torch.autograd.grad(((p * q) ** 2 + p).sum(), (p, q))
    return p_grad.float(), q_grad.float()
'''),
    dict(exercise="01-ex1", name="hard-coded-visible", expect="fail", mistake=None,
         relation="the test cell example's value", source='''
def leaf_gradients(p_values, q_values):
    return torch.tensor([19.0, 0.0, 2.0]), torch.tensor([6.0, 4.0, -0.5])
'''),
    dict(exercise="01-ex1", name="returns-leaves", expect="fail", mistake="leaves p and q",
         source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float32, requires_grad=True)
    ((p * q) ** 2 + p).sum().backward()
    return p, q
'''),
    dict(exercise="01-ex1", name="autograd-grad-float64", expect="pass", mistake=None,
         source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float64, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float64, requires_grad=True)
    s = torch.sum((p * q).pow(2) + p)
    return torch.autograd.grad(s, (p, q))
'''),
    dict(exercise="01-ex1", name="autograd-backward", expect="pass", mistake=None, source='''
def leaf_gradients(p_values, q_values):
    p, q = (torch.tensor(v).float().requires_grad_() for v in (p_values, q_values))
    r = p * q
    torch.autograd.backward((r * r).sum() + p.sum())
    return (p.grad, q.grad)
'''),

    # -------------------------------- blind review (issue 32): state kept between calls
    # The test cell's own call is right; a later call on the same lists is not. The page must
    # not say the test cell named a mistake (it said the example passed).
    dict(exercise="01-ex1", name="cached-leaves-per-input", expect="fail", mistake=None,
         source='''
_LEAVES = {}
def leaf_gradients(p_values, q_values):
    key = (tuple(p_values), tuple(q_values))
    if key not in _LEAVES:
        _LEAVES[key] = (torch.tensor(p_values, requires_grad=True),
                        torch.tensor(q_values, requires_grad=True))
    p, q = _LEAVES[key]
    r = p * q
    (r**2 + p).sum().backward()
    return p.grad, q.grad
'''),
    # ------------------------------------------------------------ 01-ex2 leaves_receiving_grad
    dict(exercise="01-ex2", name="torch-equal", expect="fail", mistake="same values",
         source='''
def leaves_receiving_grad(output, named):
    leaves, todo = [], [output.grad_fn]
    while todo:
        node = todo.pop()
        if node is None:
            continue
        if hasattr(node, "variable"):
            leaves.append(node.variable)
        todo += [child for child, _ in node.next_functions]
    return sorted(name for name, t in named.items()
                  if any(torch.equal(t, leaf) for leaf in leaves))
'''),
    dict(exercise="01-ex2", name="duplicates", expect="fail", mistake="more than once",
         source='''
def leaves_receiving_grad(output, named):
    names = []
    def walk(node):
        if node is None:
            return
        if hasattr(node, "variable"):
            names.extend(n for n, t in named.items() if t is node.variable)
        for child, _ in node.next_functions:
            walk(child)
    walk(output.grad_fn)
    return sorted(names)
'''),
    dict(exercise="01-ex2", name="requires-grad-filter", expect="fail",
         mistake="every tensor that requires grad", source='''
def leaves_receiving_grad(output, named):
    return sorted(name for name, t in named.items() if t.requires_grad)
'''),
    dict(exercise="01-ex2", name="one-level", expect="fail", mistake="first level", source='''
def leaves_receiving_grad(output, named):
    if output.grad_fn is None:
        return []
    found = [n.variable for n, _ in output.grad_fn.next_functions
             if n is not None and hasattr(n, "variable")]
    return sorted(name for name, t in named.items() if any(t is f for f in found))
'''),
    dict(exercise="01-ex2", name="calls-backward", expect="fail", mistake="backward() was called",
         cell="backward() ran inside leaves_receiving_grad", source='''
def leaves_receiving_grad(output, named):
    output.backward(retain_graph=True)
    names = sorted(n for n, t in named.items() if t.is_leaf and t.grad is not None)
    for t in named.values():
        if t.is_leaf:
            t.grad = None
    return names
'''),
    dict(exercise="01-ex2", name="hard-coded-visible", expect="fail", mistake=None,
         relation="right on the test cell's example", source='''
def leaves_receiving_grad(output, named):
    return ["u", "w"]
'''),
    # `t in leaves` compares tensors with ==: a raw "Boolean value of Tensor ... is ambiguous"
    dict(exercise="01-ex2", name="in-a-list", expect="fail", mistake=None,
         cell="`t in a_list` and `==` compare tensors entry by entry", source='''
def leaves_receiving_grad(output, named):
    leaves, seen, stack = [], set(), [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):
            leaves.append(node.variable)
        stack.extend(child for child, _ in node.next_functions)
    return sorted(name for name, t in named.items() if t in leaves)
'''),
    dict(exercise="01-ex2", name="iterative-with-set", expect="pass", mistake=None, source='''
def leaves_receiving_grad(output, named):
    seen, leaves, stack = set(), [], [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if type(node).__name__ == "AccumulateGrad":
            leaves.append(node.variable)
        stack.extend(child for child, _ in node.next_functions)
    return sorted(n for n, t in named.items() if any(t is leaf for leaf in leaves))
'''),

    # -------------------------------- blind review (issue 32): what no hidden graph drew
    dict(exercise="01-ex2", name="lists-an-output-that-is-a-leaf", expect="fail", mistake="output itself was listed",
         source='''
def leaves_receiving_grad(output, named):
    leaves, seen, stack = [], set(), [output.grad_fn]
    if output.grad_fn is None and output.requires_grad:
        leaves.append(output)
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):
            leaves.append(node.variable)
        stack.extend(c for c, _ in node.next_functions)
    return sorted(n for n, t in named.items() if any(t is l for l in leaves))
'''),
    dict(exercise="01-ex2", name="lists-retained-intermediates", expect="fail", mistake="called retain_grad() was listed",
         source='''
def leaves_receiving_grad(output, named):
    leaves, seen, stack = [], set(), [output.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if hasattr(node, "variable"):
            leaves.append(node.variable)
        stack.extend(c for c, _ in node.next_functions)
    return sorted(n for n, t in named.items()
                  if any(t is l for l in leaves) or (not t.is_leaf and t.retains_grad))
'''),
    dict(exercise="01-ex2", name="no-set-of-visited-nodes", expect="fail", mistake="once per path",
         source='''
def leaves_receiving_grad(output, named):
    found = set()
    def visit(node):
        if node is None:
            return
        if hasattr(node, "variable"):
            for n, t in named.items():
                if t is node.variable:
                    found.add(n)
        for c, _ in node.next_functions:
            visit(c)
    visit(output.grad_fn)
    return sorted(found)
'''),
    # ------------------------------------------------------------ 01-ex3 freeze
    dict(exercise="01-ex3", name="plain-attribute", expect="fail", mistake="plain attribute",
         source='''
def freeze(model, module_name):
    model.get_submodule(module_name).requires_grad = False
    return [n for n, p in model.named_parameters() if p.requires_grad]
'''),
    dict(exercise="01-ex3", name="whole-model", expect="fail", mistake="whole model", source='''
def freeze(model, module_name):
    model.requires_grad_(False)
    return [n for n, p in model.named_parameters() if p.requires_grad]
'''),
    dict(exercise="01-ex3", name="returns-frozen", expect="fail", mistake="frozen parameters",
         source='''
def freeze(model, module_name):
    model.get_submodule(module_name).requires_grad_(False)
    return [n for n, p in model.named_parameters() if not p.requires_grad]
'''),
    dict(exercise="01-ex3", name="prefix-without-dot", drawn="layer names", expect="fail",
         mistake="starts with the same letters", source='''
def freeze(model, module_name):
    for name, p in model.named_parameters():
        if name.startswith(module_name):
            p.requires_grad = False
    return [n for n, p in model.named_parameters() if p.requires_grad]
'''),
    dict(exercise="01-ex3", name="getattr", drawn="nested modules", expect="fail", mistake="get_submodule", source='''
def freeze(model, module_name):
    getattr(model, module_name).requires_grad_(False)
    return [n for n, p in model.named_parameters() if p.requires_grad]
'''),
    dict(exercise="01-ex3", name="hard-coded-visible", expect="fail", mistake=None,
         relation="right on the test cell's example", source='''
def freeze(model, module_name):
    model.get_submodule(module_name).requires_grad_(False)
    return ["decoder.weight", "decoder.bias"]
'''),
    dict(exercise="01-ex3", name="loop-with-dot", expect="pass", mistake=None, source='''
def freeze(model, module_name):
    for name, p in model.named_parameters():
        if name.startswith(module_name + "."):
            p.requires_grad = False
    return [n for n, p in model.named_parameters() if p.requires_grad]
'''),
    dict(exercise="01-ex3", name="parameters-loop", expect="pass", mistake=None, source='''
def freeze(model, module_name):
    for p in model.get_submodule(module_name).parameters():
        p.requires_grad_(False)
    trainable = []
    for name, p in model.named_parameters():
        if p.requires_grad:
            trainable.append(name)
    return trainable
'''),

    # ------------------------------------------------------------ 01-ex4 sgd_step_
    dict(exercise="01-ex4", name="rebinds-w", expect="fail", mistake="w did not change",
         source='''
def sgd_step_(w, lr):
    with torch.no_grad():
        w = w - lr * w.grad
    w.grad = None
'''),
    dict(exercise="01-ex4", name="uphill", expect="fail", mistake="uphill", source='''
def sgd_step_(w, lr):
    with torch.no_grad():
        w.add_(lr * w.grad)
    w.grad = None
'''),
    dict(exercise="01-ex4", name="keeps-grad", expect="fail", mistake="not cleared", source='''
def sgd_step_(w, lr):
    with torch.no_grad():
        w -= lr * w.grad
'''),
    dict(exercise="01-ex4", name="zero-grad", expect="fail", mistake="zeros", source='''
def sgd_step_(w, lr):
    with torch.no_grad():
        w -= lr * w.grad
        w.grad.zero_()
'''),
    dict(exercise="01-ex4", name="no-no-grad", expect="fail", mistake="torch.no_grad()",
         source='''
def sgd_step_(w, lr):
    w -= lr * w.grad
    w.grad = None
'''),
    dict(exercise="01-ex4", name="new-data", cell="w is still the same leaf, but its values now live in new memory", expect="fail", mistake="new storage", source='''
def sgd_step_(w, lr):
    w.data = w.data - lr * w.grad
    w.grad = None
'''),
    dict(exercise="01-ex4", name="hard-coded-visible", expect="fail", mistake=None,
         relation="right on the test cell's example", source='''
def sgd_step_(w, lr):
    with torch.no_grad():
        w.copy_(torch.tensor([0.25, -1.75, -1.0]))
    w.grad = None
'''),
    dict(exercise="01-ex4", name="detach-sub", expect="pass", mistake=None, source='''
def sgd_step_(w, lr):
    w.detach().sub_(lr * w.grad)
    w.grad = None
'''),
    dict(exercise="01-ex4", name="optimizer", expect="pass", mistake=None, source='''
def sgd_step_(w, lr):
    torch.optim.SGD([w], lr=lr).step()
    w.grad = None
'''),

    # ------------------------------------------------ more slips of each exercise (issue 22)
    dict(exercise="01-ex1", name="p-without-requires-grad", expect="fail", mistake=None,
         relation="None", source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32)
    q = torch.tensor(q_values, dtype=torch.float32, requires_grad=True)
    ((p * q) ** 2 + p).sum().backward()
    return p.grad, q.grad
'''),
    dict(exercise="01-ex1", name="backward-twice", expect="fail", mistake=None,
         relation="×2", source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float32, requires_grad=True)
    s = ((p * q) ** 2 + p).sum()
    s.backward(retain_graph=True)
    s.backward()
    return p.grad, q.grad
'''),
    dict(exercise="01-ex1", name="returns-lists", expect="fail", mistake=None,
         relation="a list (or tuple) of the right numbers", not_said="torch.stack", source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float32, requires_grad=True)
    ((p * q) ** 2 + p).sum().backward()
    return p.grad.tolist(), q.grad.tolist()
'''),
    dict(exercise="01-ex1", name="grad-of-intermediate", expect="fail", mistake=None,
         relation="None where a float32 tensor", source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float32, requires_grad=True)
    r = p * q
    s = (r ** 2 + p).sum()
    s.backward()
    return p.grad, r.grad
'''),
    dict(exercise="01-ex2", name="first-input-only", expect="fail", mistake="first input",
         source='''
def leaves_receiving_grad(output, named):
    node = output.grad_fn
    while node is not None and not hasattr(node, "variable"):
        node = node.next_functions[0][0] if node.next_functions else None
    if node is None:
        return []
    return sorted(n for n, t in named.items() if t is node.variable)
'''),
    dict(exercise="01-ex2", name="unsorted", expect="fail", mistake="not sorted", source='''
def leaves_receiving_grad(output, named):
    found, todo = [], [output.grad_fn]
    while todo:
        node = todo.pop()
        if node is None:
            continue
        if hasattr(node, "variable"):
            found.append(node.variable)
        todo.extend(child for child, _ in node.next_functions)
    return [n for n, t in named.items() if any(t is leaf for leaf in found)]
'''),
    dict(exercise="01-ex2", name="data-ptr", expect="fail", mistake="shares memory", source='''
def leaves_receiving_grad(output, named):
    found, todo = set(), [output.grad_fn]
    while todo:
        node = todo.pop()
        if node is None:
            continue
        if hasattr(node, "variable"):
            found.add(node.variable.data_ptr())
        todo.extend(child for child, _ in node.next_functions)
    return sorted(n for n, t in named.items() if t.data_ptr() in found)
'''),
    dict(exercise="01-ex2", name="leaves-requiring-grad", expect="fail",
         mistake="every leaf that requires grad", source='''
def leaves_receiving_grad(output, named):
    return sorted(n for n, t in named.items() if t.is_leaf and t.requires_grad)
'''),
    dict(exercise="01-ex2", name="ids-of-leaves", expect="pass", mistake=None, source='''
def leaves_receiving_grad(output, named):
    ids, seen, todo = set(), set(), [output.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            if hasattr(node, "variable"):
                ids.add(id(node.variable))
            todo += [child for child, _ in node.next_functions]
    return sorted(n for n, t in named.items() if id(t) in ids)
'''),
    dict(exercise="01-ex3", name="recurse-false", drawn="nested modules", expect="fail", mistake="recurse=False",
         source='''
def freeze(model, module_name):
    for p in model.get_submodule(module_name).parameters(recurse=False):
        p.requires_grad = False
    return [n for n, p in model.named_parameters() if p.requires_grad]
'''),
    dict(exercise="01-ex3", name="children-only", drawn="nested modules", expect="fail", mistake=None,
         relation="is True, not False", source='''
def freeze(model, module_name):
    for child in model.get_submodule(module_name).children():
        child.requires_grad_(False)
    return [n for n, p in model.named_parameters() if p.requires_grad]
'''),
    dict(exercise="01-ex3", name="weights-only", expect="fail", mistake="only the weights",
         source='''
def freeze(model, module_name):
    module = model.get_submodule(module_name)
    for name, p in module.named_parameters():
        if "weight" in name:
            p.requires_grad_(False)
    return [n for n, p in model.named_parameters() if p.requires_grad]
'''),
    dict(exercise="01-ex3", name="named-modules-dict", expect="pass", mistake=None, source='''
def freeze(model, module_name):
    dict(model.named_modules())[module_name].requires_grad_(False)
    return [n for n, p in model.named_parameters() if p.requires_grad]
'''),
    dict(exercise="01-ex4", name="assumes-2w", expect="fail", mistake="2w", source='''
def sgd_step_(w, lr):
    with torch.no_grad():
        w -= lr * 2 * w
    w.grad = None
'''),
    dict(exercise="01-ex4", name="clears-grad-first", expect="fail", mistake=None,
         relation="None was used where a value was needed", source='''
def sgd_step_(w, lr):
    w.grad = None
    with torch.no_grad():
        w -= lr * w.grad
'''),
    dict(exercise="01-ex4", name="data-in-place", expect="pass", mistake=None, source='''
def sgd_step_(w, lr):
    w.data.sub_(lr * w.grad)
    w.grad = None
'''),
    # ---------------------------------------------- more valid alternatives (issue 32: 3 or more)
    dict(exercise="01-ex1", name="requires-grad-in-place", expect="pass", mistake=None, source='''
def leaf_gradients(p_values, q_values):
    p = torch.as_tensor(p_values, dtype=torch.float32).requires_grad_()
    q = torch.as_tensor(q_values, dtype=torch.float32).requires_grad_()
    torch.sum((p * q) ** 2 + p).backward()
    return p.grad, q.grad
'''),
    dict(exercise="01-ex2", name="stack-and-visited-set", expect="pass", mistake=None, source='''
def leaves_receiving_grad(output, named):
    found, seen, todo = [], set(), [output.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        leaf = getattr(node, "variable", None)
        if leaf is not None:
            found.append(leaf)
        todo.extend(child for child, _ in node.next_functions)
    return sorted(name for name, t in named.items() if any(t is leaf for leaf in found))
'''),
    # ---------------------------------------------- more wrong answers (issue 32: 10 or more)
    dict(exercise="01-ex3", name="toggles-requires-grad", drawn="freezing twice", expect="fail", mistake=None,
         relation="is True, not False", source='''
def freeze(model, module_name):
    for p in model.get_submodule(module_name).parameters():
        p.requires_grad_(not p.requires_grad)
    return [name for name, p in model.named_parameters() if p.requires_grad]
'''),
    dict(exercise="01-ex3", name="frozen-names-kept-between-models", drawn="second instance", expect="fail", mistake=None,
         relation="is False, not True", source='''
FROZEN = set()

def freeze(model, module_name):
    FROZEN.add(module_name)
    for name in FROZEN:
        try:
            model.get_submodule(name).requires_grad_(False)
        except AttributeError:
            pass
    return [name for name, p in model.named_parameters() if p.requires_grad]
'''),
    dict(exercise="01-ex4", name="step-by-the-size-of-the-gradient", expect="fail", mistake=None,
         relation="right on the test cell's example, wrong on these inputs", source='''
def sgd_step_(w, lr):
    with torch.no_grad():
        w -= lr * w.grad.abs()
    w.grad = None
'''),
    # ------------------------------------- issue 32, item 3: inputs from the whole domain
    # "Float tensors from the given lists": a caller may pass whole numbers as Python ints, and
    # torch.tensor([2, 0, -1]) is an integer tensor, which cannot require grad.
    dict(exercise="01-ex1", name="integer-tensors-from-integer-lists", expect="fail",
         mistake=None, relation="right on the test cell's example", drawn="integer lists",
         source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, requires_grad=True)
    q = torch.tensor(q_values, requires_grad=True)
    ((p * q) ** 2 + p).sum().backward()
    return p.grad, q.grad
'''),
    dict(exercise="01-ex1", name="squeezed-results", expect="fail", mistake=None,
         relation="a dimension of size 1 added or missing", drawn="batch of one", source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float32, requires_grad=True)
    ((p * q) ** 2 + p).sum().backward()
    return p.grad.squeeze(), q.grad.squeeze()
'''),
    dict(exercise="01-ex1", name="floats-made-from-each-entry", expect="pass", mistake=None,
         drawn="integer lists", source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor([float(v) for v in p_values], requires_grad=True)
    q = torch.tensor([float(v) for v in q_values], requires_grad=True)
    ((p * q) ** 2 + p).sum().backward()
    return p.grad, q.grad
'''),
    # A module named like the frozen one, deeper in the model: full names end the same.
    dict(exercise="01-ex3", name="every-module-whose-name-ends-the-same", expect="fail",
         mistake=None, relation="is False, not True", drawn="layer names", source='''
def freeze(model, module_name):
    for name, module in model.named_modules():
        if name == module_name or name.endswith("." + module_name):
            module.requires_grad_(False)
    return [name for name, p in model.named_parameters() if p.requires_grad]
'''),
    # A w of any shape, a single number too: slicing and len() need a dimension.
    dict(exercise="01-ex4", name="slice-assignment", expect="fail", mistake=None,
         relation="right on the test cell's example", drawn="other shapes", source='''
def sgd_step_(w, lr):
    with torch.no_grad():
        w[:] = w - lr * w.grad
    w.grad = None
'''),
    dict(exercise="01-ex4", name="entry-by-entry", expect="fail", mistake=None,
         relation="right on the test cell's example", drawn="other shapes", source='''
def sgd_step_(w, lr):
    with torch.no_grad():
        for i in range(len(w)):
            w[i] -= lr * w.grad[i]
    w.grad = None
'''),
    dict(exercise="01-ex4", name="ellipsis-assignment", expect="pass", mistake=None,
         drawn="other shapes", source='''
def sgd_step_(w, lr):
    with torch.no_grad():
        w[...] = w - lr * w.grad
    w.grad = None
'''),
    # blind round: returns the gradients as Python lists (p.grad.tolist()) instead of tensors
    dict(exercise='01-ex1', name='blind-returns-lists', expect='fail', mistake=None, relation='right numbers', not_said='torch.stack', source='''
def leaf_gradients(p_values, q_values):
    p = torch.tensor(p_values, dtype=torch.float32, requires_grad=True)
    q = torch.tensor(q_values, dtype=torch.float32, requires_grad=True)
    r = p * q
    s = (r ** 2 + p).sum()
    s.backward()
    return p.grad.tolist(), q.grad.tolist()
'''),
    # blind round: walks the graph recursively (with a visited set): a deep chain exceeds
    # Python's recursion limit and raises RecursionError
    dict(exercise='01-ex2', name='blind-recursive-walk', expect='pass', source='''
def leaves_receiving_grad(output, named):
    if output.grad_fn is None:
        return []
    seen, leaves = set(), []
    def visit(node):
        if node is None or node in seen:
            return
        seen.add(node)
        if hasattr(node, "variable"):
            leaves.append(node.variable)
        for child, _ in node.next_functions:
            visit(child)
    visit(output.grad_fn)
    return sorted(n for n, t in named.items() if any(t is l for l in leaves))
'''),
    # blind round: writes p.requires_grad_ without the call parentheses, so nothing is frozen
    # (no attribute assignment either)
    dict(exercise='01-ex3', name='blind-missing-call-parens', expect='fail', mistake=None, not_named='plain attribute', cell="with the call's parentheses", cell_not='module.requires_grad = False', source='''
def freeze(model, module_name):
    for p in model.get_submodule(module_name).parameters():
        p.requires_grad_
    return [n for n, p in model.named_parameters() if p.requires_grad]
'''),
    # blind round: clamps each step into [-10, 10] 'for stability', so large gradients move w
    # less than lr * grad
    dict(exercise='01-ex4', name='blind-clamped-step', expect='fail', mistake=None, source='''
def sgd_step_(w, lr):
    with torch.no_grad():
        w -= (lr * w.grad).clamp(-10.0, 10.0)
    w.grad = None
'''),
    # blind round: applies the in-place update to w.clone() under no_grad (thinking a copy is
    # safer), so the caller's w never changes
    dict(exercise='01-ex4', name='blind-updates-clone', expect='fail', mistake=None, cell='an update of a copy (w.clone()) leaves w alone', source='''
def sgd_step_(w, lr):
    with torch.no_grad():
        w.clone().sub_(lr * w.grad)
    w.grad = None
'''),
]
