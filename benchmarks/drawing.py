"""What a hidden scenario's Hypothesis draw costs (coursekit.drawing.draw).

    .venv/bin/python benchmarks/drawing.py [--draws 200]

Prints the milliseconds of the first draw of each strategy after `coursekit.drawing.warm_up`
(Hypothesis's own set-up, about 0.4 s, which the grader's runner host pays once before it
forks notebooks) and the mean and the largest milliseconds of later draws, for strategies the
scenarios use. Other work on the machine slows every figure.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200)
    args = parser.parse_args()

    import torch  # noqa: F401 (imported before the clock starts, as in the grader)
    from hypothesis import strategies as st

    from coursekit.drawing import draw, float_lists, names, warm_up
    from coursekit.scenarios import generator

    warm_up()  # as the grader's runner host does before it forks notebooks

    cases = {
        "lists of 1 to 12 floats (02-ex1)": float_lists(1, 12, 1e3),
        "four distinct names (02-ex2)": st.lists(names(1, 16), min_size=4, max_size=4,
                                                 unique=True),
        "two (lr, weight_decay) pairs (07-ex3)": st.lists(
            st.tuples(st.floats(0.01, 0.31), st.floats(0.0, 0.1)), min_size=2, max_size=2),
    }
    for label, strategy in cases.items():
        start = time.perf_counter()
        draw(strategy, generator(0))
        first = time.perf_counter() - start
        times = []
        for seed in range(1, args.draws + 1):
            start = time.perf_counter()
            draw(strategy, generator(seed))
            times.append(time.perf_counter() - start)
        mean = sum(times) / len(times)
        print(f"{label:40s} first {first * 1e3:8.1f} ms   mean {mean * 1e3:6.2f} ms"
              f"   max {max(times) * 1e3:6.2f} ms   ({args.draws} draws)")


if __name__ == "__main__":
    main()
