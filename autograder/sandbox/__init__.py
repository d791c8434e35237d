"""What confines student code, and what runs beside it in the sandbox.

`confine` builds the sandbox (namespaces, seccomp, limits); `shell` runs a submission's cells
and `observe` runs the course's scenarios against its answers, both inside the sandbox. Nothing
here decides a score: what they send is plain data that `autograder.trusted` reads as untrusted.
"""
