"""The judging side: reads what a sandbox reports and decides. It never runs student code.

`executor` drives one notebook through the runner and reads its pipe, `verdicts` compares the
observations with the reference solution's, and `autograde` writes the scores nbgrader keeps.
"""
