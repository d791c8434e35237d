"""What a notebook's text may cost the grader's feedback page.

Colour codes: nbconvert's ANSI converter copies the rest of an output at each escape sequence,
so four cells of escapes took minutes and a 74 MB page. Markdown: mistune searches the rest of
a cell for the end of each `\\begin{`, and the sanitiser's cost grows with the square of the
elements side by side or open, so one 200 KB cell took half a minute. Both are bounded by
counts, never by a clock: what reaches the renderer is measured here (escape sequences, the
page's size, which cells render as markdown). benchmarks/feedback_cost.py times them.
"""

from __future__ import annotations

import base64
import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.trusted.outputs import (ESCAPE_COST_BYTES, MAX_OUTPUT_ESCAPES,
                                        clean_output as _clean_output,
                                        output_bytes as _output_bytes)
from autograder.feedback.budget import (CODE_CELL_CHARS, CODE_NOTEBOOK_CHARS,
                                        MARKDOWN_CELL_WORK, MARKDOWN_NOTEBOOK_WORK, markdown_work)
from autograder.feedback.render import FeedbackHTMLExporter

A = fixture_course.LESSON_A
COLOURS = "\x1b[31mX\x1b[0m"
AS_TEXT = 'class="markdown-as-text"'
CODE_AS_TEXT = 'class="highlight code-as-text"'
# A line of blanks, which the `autoit` lexer colours in time cubic in its length.
BLANKS = "s = 1" + " \t" * 200


def fill(unit: str, size: int = 200_000) -> str:
    return (unit * (size // len(unit) + 1))[:size]


# Constructs that benchmarks/feedback_cost.py found slow (seconds each, 200 KB, before).
PATHOLOGICAL = {
    "unclosed maths environments": fill("\\begin{align}x "),
    "raw HTML blocks left open": fill("<div>\n"),
    "nested raw HTML": fill("<div><p>"),
    "setext headings": fill("a\n=\n"),
    "headings": fill("# head\n"),
    "a long table": "|a|b|\n|-|-|\n" + fill("|x|y|\n"),
    "many link references": "\n".join(f"[l{i}]: http://e.com/{i}" for i in range(2000))
    + "\n\n" + fill("[l1] [l2][] <b>", 150_000),
}


def render(cells: list, lexer: str | None = None) -> str:
    info = {"name": "python", **({"pygments_lexer": lexer} if lexer else {})}
    nb = new_notebook(cells=cells, metadata={"language_info": info})
    page, _ = FeedbackHTMLExporter().from_notebook_node(nb)
    return page


# --------------------------------------------------------------------------------------------
# Colour codes

def test_an_output_of_colour_codes_reaches_the_page_without_them():
    printed = {"output_type": "stream", "name": "stdout", "text": COLOURS * 350_000}
    kept = _clean_output(printed)
    assert "\x1b" not in kept["text"]
    assert kept["text"].startswith("X" * 1000)
    assert "700000 terminal colour codes (ANSI escape sequences) removed" in kept["text"]
    error = _clean_output({"output_type": "error", "ename": "E", "evalue": COLOURS * 5000,
                           "traceback": [COLOURS * 5000] * 3})
    assert "\x1b" not in "".join([error["evalue"], *error["traceback"]])
    assert "removed" in error["traceback"][-1]
    shown = _clean_output({"output_type": "execute_result", "execution_count": 1, "metadata": {},
                           "data": {"text/plain": COLOURS * 5000}})
    assert "\x1b" not in shown["data"]["text/plain"]


def test_a_colourful_traceback_keeps_its_colours_and_they_count_toward_the_budget():
    lines = [f"\x1b[0;31mFile\x1b[0m \x1b[0;32mline {i}\x1b[0m" for i in range(40)]
    traceback = {"output_type": "error", "ename": "ValueError", "evalue": "bad",
                 "traceback": lines}
    kept = _clean_output(copy.deepcopy(traceback))
    assert kept["traceback"] == lines  # 160 escapes in 1.5 KB: kept as they are
    plain = {**kept, "traceback": [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in lines]}
    assert _output_bytes(kept) - _output_bytes(plain) == \
        160 * ESCAPE_COST_BYTES + sum(map(len, lines)) - sum(map(len, plain["traceback"]))
    many = _clean_output({"output_type": "stream", "name": "stdout",
                          "text": "\x1b[1m" * (MAX_OUTPUT_ESCAPES + 1)})
    assert "\x1b" not in many["text"]


# --------------------------------------------------------------------------------------------
# Markdown

@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_costly_markdown_is_shown_as_plain_text_with_a_note(name):
    source = PATHOLOGICAL[name]
    assert markdown_work(source) > MARKDOWN_CELL_WORK, name
    page = render([new_markdown_cell("## Before"), new_markdown_cell(source)])
    assert '<h2 id="Before">' in page  # the cheap cell still renders
    assert page.count(AS_TEXT) == 1
    assert "shown as plain text: rendering it would cost the grader too much" in page
    escaped = source.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert escaped[:2000] in page  # its text is all there, as text
    assert len(page) < 3 * len(source) + (1 << 20)


def test_a_notebooks_markdown_renders_within_its_budget_in_order():
    sources = [f"# Part {i}\n" + "Words and *emphasis*.\n" * 5000 for i in range(5)]
    works = [markdown_work(source) for source in sources]
    # Each is under the cap for a cell, but not by much: three fit in a notebook's budget.
    assert all(MARKDOWN_CELL_WORK // 2 < work <= MARKDOWN_CELL_WORK for work in works)
    fits = max(n for n in range(6) if sum(works[:n]) <= MARKDOWN_NOTEBOOK_WORK)
    assert fits == 3
    cells = [new_markdown_cell(source) for source in sources]
    page = render(cells)
    assert page.count(AS_TEXT) == len(cells) - fits
    assert page.count("<em>emphasis</em>") == 5000 * fits
    assert '<h1 id="Part-2">' in page and '<h1 id="Part-3">' not in page
    assert "the notebook's markdown before it used up the work" in page
    # Deterministic: the same notebook again (its cells now in the cache) renders the same.
    assert render(cells) == page


def test_a_real_lessons_feedback_page_renders_its_markdown():
    from test_feedback_html import lesson, render as render_feedback

    nb = lesson("03_tensor_hooks")
    page = render_feedback(nb)
    assert AS_TEXT not in page
    headings = [c.source.splitlines()[0] for c in nb.cells
                if c.cell_type == "markdown" and c.source.startswith("## ")]
    assert headings and page.count("<h2 id=") >= len(headings)
    assert "<strong>" in page or "<em>" in page
    total = sum(markdown_work(c.source) for c in nb.cells if c.cell_type == "markdown")
    assert total * 20 < MARKDOWN_NOTEBOOK_WORK  # lessons are far within the budget
    assert CODE_AS_TEXT not in page  # and all their code is in colour


def picture(size: int) -> dict:
    """A markdown cell's attachment: a PNG's bytes, base64 as a notebook holds them."""
    return {"image/png": base64.b64encode(b"\x89PNG" + bytes(size)).decode()}


def test_an_attachment_is_embedded_only_as_often_as_the_budget_allows():
    # One picture pasted into a cell renders, embedded in the page.
    cell = new_markdown_cell("A screenshot: ![shot](attachment:shot.png)")
    cell["attachments"] = {"shot.png": picture(200_000)}
    page = render([cell])
    assert page.count(cell["attachments"]["shot.png"]["image/png"]) == 1
    assert AS_TEXT not in page
    # A reference-style image names it once and uses it at every `![x][r]`: nbconvert wrote
    # the picture into the page at each (40 copies of 270 KB; thousands fit in a cell).
    cell = new_markdown_cell("![x][r] " * 40 + "\n\n[r]: attachment:shot.png")
    cell["attachments"] = {"shot.png": picture(200_000)}
    page = render([cell])
    assert cell["attachments"]["shot.png"]["image/png"] not in page
    assert page.count(AS_TEXT) == 1 and len(page) < 1 << 20
    assert "rendering it would cost the grader too much" in page


# --------------------------------------------------------------------------------------------
# Code

def test_code_is_coloured_by_the_courses_lexer_whatever_the_notebook_names():
    from nbconvert.exporters import HTMLExporter

    from autograder.nbgrader_glue.inproc import course_config

    cells = [new_code_cell(BLANKS),
             new_code_cell("%%x\nx = 1", metadata={"magics_language": "autoit"})]
    page = render(cells, lexer="autoit")
    assert set(re.findall(r"\bhl-[\w-]+", page)) == {"hl-ipython3"}
    assert page.count('class="highlight') == 2 and CODE_AS_TEXT not in page
    # The formgrader's view of a submission (nbconvert's HTMLExporter, the course's config).
    nb = new_notebook(cells=cells, metadata={"language_info": {"name": "python",
                                                               "pygments_lexer": "autoit"}})
    exporter = HTMLExporter(config=course_config(Path(__file__).resolve().parents[1]),
                            template_name="classic")
    page, _ = exporter.from_notebook_node(nb)
    assert set(re.findall(r"\bhl-[\w-]+", page)) == {"hl-ipython3"}


def test_a_notebooks_code_is_coloured_within_its_budget_in_order():
    long = "x = 1  # " + "y" * CODE_CELL_CHARS
    page = render([new_code_cell("print('short')"), new_code_cell(long)])
    assert page.count(CODE_AS_TEXT) == 1
    assert "longer than the 20,000 characters a cell is coloured for" in page
    assert "y" * CODE_CELL_CHARS in page  # all of it, as text
    sources = [f"part_{i} = 1\n" * (CODE_CELL_CHARS // 12) for i in range(8)]
    fits = max(n for n in range(9) if sum(map(len, sources[:n])) <= CODE_NOTEBOOK_CHARS)
    assert 0 < fits < len(sources)
    cells = [new_code_cell(source) for source in sources]
    page = render(cells)
    assert page.count(CODE_AS_TEXT) == len(sources) - fits
    assert f"part_{fits - 1}" in page.split(CODE_AS_TEXT)[0]
    assert "the notebook's code before it used up the 100,000 characters" in page
    assert render(cells) == page  # the next notebook starts with a budget of its own


# --------------------------------------------------------------------------------------------
# Graded end to end: `python -m autograder grade`

@pytest.mark.slow
def test_graded_colours_and_costly_markdown_give_a_small_page(tmp_path):
    from autograder.demo import Lessons, _write

    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    root = fixture_course.build_course(tmp_path / "course")
    course = Lessons(root)
    colours = course.correct(A)
    colours.cells[2:2] = [new_code_cell(f"print({COLOURS!r} * 300_000)") for _ in range(4)]
    _write(colours, tmp_path / "class" / "colours" / f"{A}.ipynb")
    markdown = course.correct(A)
    markdown.cells[1:1] = [new_markdown_cell(PATHOLOGICAL[name])
                           for name in ("unclosed maths environments",
                                        "raw HTML blocks left open", "setext headings")]
    _write(markdown, tmp_path / "class" / "markdown" / f"{A}.ipynb")
    pictures = course.correct(A)
    pasted = new_markdown_cell("![x][r] " * 100 + "\n\n[r]: attachment:shot.png")
    pasted["attachments"] = {"shot.png": picture(256_000)}
    pictures.cells[1:1] = [pasted]
    _write(pictures, tmp_path / "class" / "pictures" / f"{A}.ipynb")
    lexer = course.correct(A)
    lexer.metadata["language_info"]["pygments_lexer"] = "autoit"
    lexer.cells[2:2] = [new_code_cell(BLANKS)]
    _write(lexer, tmp_path / "class" / "lexer" / f"{A}.ipynb")
    command = [sys.executable, "-m", "autograder", "grade", str(tmp_path / "class"), "--out",
               str(tmp_path / "out"), "--course-root", str(root), "--jobs", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, CI="true"))
    assert done.returncode == 0, done.stdout + done.stderr
    grades = (tmp_path / "out" / "grades.csv").read_text(encoding="utf-8")
    assert "colours,01_fixture_basics,3,3,graded" in grades
    assert "markdown,01_fixture_basics,3,3,graded" in grades
    assert "lexer,01_fixture_basics,3,3,graded" in grades
    assert "pictures,01_fixture_basics,3,3,graded" in grades

    autograded = nbformat.read(root / "autograded" / "colours" / A / f"{A}.ipynb", as_version=4)
    texts = [o.get("text", "") for c in autograded.cells if c.cell_type == "code"
             for o in c.get("outputs", [])]
    assert sum(t.count("\x1b") for t in texts) == 0
    assert sum("600000 terminal colour codes" in t for t in texts) == 4
    page = tmp_path / "out" / "feedback" / "colours" / f"{A}.html"
    assert page.stat().st_size < 3 << 20  # 1.2 MB of X; it was 74 MB
    html = page.read_text(encoding="utf-8")
    assert 'class="ansi-red-fg"' not in html

    page = (tmp_path / "out" / "feedback" / "markdown" / f"{A}.html").read_text(encoding="utf-8")
    assert page.count(AS_TEXT) == 3
    assert '<h1 id="Fixture-lesson-A">' in page  # the lesson's own markdown still renders

    page = tmp_path / "out" / "feedback" / "pictures" / f"{A}.html"
    assert page.stat().st_size < 2 << 20  # it was 34 MB: the picture a hundred times
    assert page.read_text(encoding="utf-8").count(AS_TEXT) == 1

    page = (tmp_path / "out" / "feedback" / "lexer" / f"{A}.html").read_text(encoding="utf-8")
    assert set(re.findall(r"\bhl-[\w-]+", page)) == {"hl-ipython3"}


def test_a_files_link_never_becomes_a_script_link():
    """nbgrader's template strips `files/` from links after the markdown was cleaned: a link
    to `files/javascript:...` passed the cleaning as a relative one, then became `javascript:`."""
    from test_feedback_html import lesson, render as render_feedback

    nb = lesson("03_tensor_hooks")
    nb.cells.insert(1, new_markdown_cell(
        '[a](files/javascript:alert(1)) <a href="/files/javascript:alert(2)">b</a> '
        '![c](files/picture.png)'))
    page = render_feedback(nb)
    assert not re.search(r"""(href|src)=["']?javascript:""", page, re.IGNORECASE)
    assert "<a>a</a> <a>b</a>" in page and 'alt="c"' in page
