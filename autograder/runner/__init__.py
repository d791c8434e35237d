"""The unconfined host: a warm process, started as its own program, that forks each sandbox.

It holds nothing of the grader's (no scenario source, no reference answer, no secret, no seed):
the trusted side (`autograder.trusted`) starts it, hands it a notebook's cells and the sandbox's
copy of the scenarios for one submission, and reads what comes back on the notebook's pipe.
"""
