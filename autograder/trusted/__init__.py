"""The judging side: reads what a sandbox reports and decides. It never runs student code.

`executor` drives one notebook through the runner and reads its pipe; `outcomes` reads what a
sandbox reported of each scenario and compares it with the reference solution's, `messages`
chooses what may be said of an exception, `relations` measures how wrong values relate to the
expected ones, and `verdicts` judges an exercise from all of them; `autograde` writes the scores
nbgrader keeps.
"""
