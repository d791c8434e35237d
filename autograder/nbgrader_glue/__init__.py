"""Every touch of nbgrader: its apps run in process, the gradebook, locked cells, grade exports,
the exchange's Collect and Release Feedback."""
