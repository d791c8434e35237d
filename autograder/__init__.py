"""The instructors' side of the course: releasing student notebooks and grading submissions."""
