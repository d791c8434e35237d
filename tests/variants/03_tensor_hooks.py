"""Answers to lesson 03's exercises that the grader must fail (naming the mistake) or pass.

Each entry: the exercise, a short name, whether it must "pass" or "fail", for a failing one a
phrase that the feedback's named mistake must contain (None: any failure will do), and the
source that replaces the answer cell. tests/test_misconceptions.py runs them in-process and
through the grading command.
"""

VARIANTS = [
    dict(exercise="03-ex2", name="abs-ignores-low", expect="fail", mistake="lower bound",
         source='''
def clip_and_count(tensor, low, high):
    calls = []
    def clip(grad):
        calls.append(int((grad.abs() > high).sum()))
        return grad.clamp(low, high)
    return tensor.register_hook(clip), calls
'''),
    dict(exercise="03-ex2", name="torch-where", expect="pass", mistake=None,
         source='''
def clip_and_count(tensor, low, high):
    counts = []
    def hook(grad):
        outside = (grad < low) | (grad > high)
        counts.append(int(outside.sum().item()))
        return torch.where(grad < low, torch.full_like(grad, low),
                           torch.where(grad > high, torch.full_like(grad, high), grad))
    handle = tensor.register_hook(hook)
    return handle, counts
'''),
]
