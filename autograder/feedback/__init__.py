"""The feedback page a student reads, rendered from a graded notebook."""
