"""What a notebook's text costs the grader's feedback page: before and after its bounds.

    .venv/bin/python benchmarks/feedback_cost.py [--size 200000] [--before] [--only NAME ...]
    .venv/bin/python benchmarks/feedback_cost.py --pages 5

For each costly construct (issue 21, items 11 and 12), the grader's CPU seconds to turn one
cell of it into the feedback page's HTML, and the size of that HTML:

- markdown (`--size` characters a cell): "after" is the feedback exporter's filter
  (FeedbackHTMLExporter.markdown2html: the work estimate, then mistune and the cleaning, or the
  cell as plain text); "before" (with --before: minutes) is nbconvert's mistune, the cleaning
  and nbconvert's strip_files_prefix, as the page was made before;
- colour codes (one printed output of that size): "after" is nbconvert's ansi2html on the
  output as the grader keeps it (autograder.trusted.outputs.clean_output), "before" on the raw one.

With --pages N, instead: the CPU seconds of one feedback page of each lesson (its solution
notebook, with the course's feedback exporter and steps), the first time a worker renders that
lesson ("cold": its markdown and code are rendered and coloured) and on average over N more
rounds ("warm": the lesson's text comes from the worker's caches, as for every later student).

The work estimate (autograder.feedback.budget.markdown_work) is printed beside each markdown
case: a cell over MARKDOWN_CELL_WORK is shown as plain text. Other work on the machine slows every
figure (CPU seconds, but caches and memory bandwidth are shared).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograder.feedback import budget
from autograder.feedback.cleaning import clean_html
from autograder.feedback.render import FeedbackHTMLExporter
from autograder.trusted.outputs import clean_output as _clean_output

REPO_ROOT = Path(__file__).resolve().parents[1]


def fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def markdown_cases(size: int) -> dict[str, str]:
    return {
        "prose (honest)": fill("Some words of a lesson, with *emphasis* and `code`. ", size),
        "unclosed maths environments": fill("\\begin{align}x ", size),
        "raw HTML blocks left open": fill("<div>\n", size),
        "nested raw HTML": fill("<div><p>", size),
        "setext headings": fill("a\n=\n", size),
        "headings": fill("# head\n", size),
        "a long table": "|a|b|\n|-|-|\n" + fill("|x|y|\n", size),
        "nested block quotes": fill("> ", size),
        "many link references": "\n".join(f"[l{i}]: http://e.com/{i}" for i in range(2000))
        + "\n\n" + fill("[l1] [l2][] <b>", size - 50_000),
        "a long line of brackets": fill("[a ", size),
        "many less-than signs": fill("<", size),
    }


def seconds(work) -> tuple[float, int]:
    started = time.process_time()
    result = work()
    return time.process_time() - started, len(result)


def before_markdown(source: str) -> str:
    from nbconvert.exporters.html import HTMLExporter
    from nbconvert.filters.strings import strip_files_prefix

    exporter = FeedbackHTMLExporter()
    rendered = HTMLExporter.markdown2html(exporter, {"cell": {}, "resources": {}}, source)
    return strip_files_prefix(clean_html(rendered))


def after_markdown(source: str) -> str:
    exporter = FeedbackHTMLExporter()
    exporter._work_left = budget.MARKDOWN_NOTEBOOK_WORK
    return exporter.markdown2html({"cell": {}, "resources": {}}, source)


def pages(rounds: int) -> None:
    """CPU seconds per feedback page of each lesson: the first (cold), then warm."""
    import copy

    import nbformat
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    from autograder.nbgrader_glue.inproc import course_config, feedback_preprocessors

    config = course_config(REPO_ROOT)
    converter = GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
    exporter = converter.exporter_class(parent=converter, config=converter.config)
    for step in feedback_preprocessors(config):
        if getattr(step, "__name__", step) != "GetGrades":  # it reads the gradebook
            exporter.register_preprocessor(step, enabled=True)
    lessons = sorted(path.parent.name for path in (REPO_ROOT / "solutions").glob("*/*.ipynb"))
    notebooks = []
    for lesson in lessons:
        nb = nbformat.read(REPO_ROOT / "solutions" / lesson / f"{lesson}.ipynb", as_version=4)
        for cell in nb.cells:  # as GetGrades leaves them
            if cell.metadata.get("nbgrader", {}).get("grade"):
                cell.metadata.nbgrader["score"] = 0
        notebooks.append(nb)
    grades = {"nbgrader": {"notebook": "lesson", "score": 0, "max_score": 1, "late_penalty": 0}}

    def render_all() -> str:
        return "".join(exporter.from_notebook_node(nb, resources=copy.deepcopy(grades))[0]
                       for nb in notebooks)

    cold, _ = seconds(render_all)
    warm, _ = seconds(lambda: "".join(render_all() for _ in range(rounds)))
    print(f"feedback page, cold: {cold / len(notebooks):.4f} s (the first of each of "
          f"{len(notebooks)} lessons)")
    print(f"feedback page, warm: {warm / (rounds * len(notebooks)):.4f} s "
          f"(over {rounds * len(notebooks)} pages)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=200_000)
    parser.add_argument("--before", action="store_true", help="also time the old rendering")
    parser.add_argument("--only", nargs="*", help="only these cases (names as printed)")
    parser.add_argument("--pages", type=int, default=0, metavar="N",
                        help="time whole feedback pages instead, warm over N rounds")
    args = parser.parse_args()
    if args.pages:
        pages(args.pages)
        return
    FeedbackHTMLExporter._markdown.clear()
    print(f"{'case':30s} {'work':>12s} {'after s':>8s} {'after KB':>9s}"
          + (f" {'before s':>9s} {'before KB':>10s}" if args.before else ""))
    for name, source in markdown_cases(args.size).items():
        if args.only and name not in args.only:
            continue
        line = f"{name:30s} {budget.markdown_work(source):12,d}"
        spent, size = seconds(lambda: after_markdown(source))
        line += f" {spent:8.2f} {size >> 10:9d}"
        if args.before:
            spent, size = seconds(lambda: before_markdown(source))
            line += f" {spent:9.2f} {size >> 10:10d}"
        print(line, flush=True)

    from nbconvert.filters.ansi import ansi2html

    printed = {"output_type": "stream", "name": "stdout",
               "text": fill("\x1b[31mX\x1b[0m", args.size * 20)}  # 4 MB: as the attack's cells
    name = f"colour codes ({len(printed['text']) >> 10} KB)"
    if not args.only or name.split(" (")[0] in args.only:
        kept = _clean_output(dict(printed))
        spent, size = seconds(lambda: ansi2html(kept["text"]))
        line = f"{name:30s} {'':12s} {spent:8.2f} {size >> 10:9d}"
        if args.before:
            spent, size = seconds(lambda: ansi2html(printed["text"]))
            line += f" {spent:9.2f} {size >> 10:10d}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
