"""What runs inside the sandbox: the notebook's process and what it reports.

Nothing in this package decides a score. It runs a submission's cells (and, after them, the
course's scenarios against the submission's answers) in a process confined by
`autograder.runner.sandbox`, and reports outputs and observations as plain JSON on a pipe. The
grader's side (`autograder.executor`, `autograder.verdicts`) reads those reports as untrusted
data.
"""
