"""The class report an instructor reads after a grading run."""
