"""Feedback pages: nothing a student wrote runs as script when the page is opened, maths
renders with the network off, code has colours.

The hostile notebook tries every way in that nbconvert's templates leave open: `<script>` and
`onerror=` in markdown cells, in text/html, text/markdown and SVG outputs, a JavaScript output,
an image size that breaks out of its attribute, an "isolated" HTML output, widget state, cell
tags, printed text. Each attempt appends its name to `window.__pwned`.

The checks without a browser read the page's elements and attributes; the browser tests open
the pages in Chromium with the network off: the lesson page rendered directly, and the page
that `python -m autograder grade` wrote for a hostile submission (its outputs made by running it).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import os
import re
import subprocess
import sys
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbformat import from_dict
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

import browser_support as lab_page
from browser_support import REPO_ROOT, require_chromium, screenshot

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

MATHS_LESSON = "01_leaf_and_intermediate"
PWN = "window.__pwned=(window.__pwned||[]).concat"


def attempt(name: str) -> str:
    return f"{PWN}(['{name}'])"


def hostile_markdown() -> str:
    return "\n".join([
        "# A student's cell",
        f"<script>{attempt('md-script')}</script>",
        f'<img src="x" onerror="{attempt("md-img")}">',
        f'<a href="javascript:{attempt("md-link")}">a link</a>',
        f'<svg onload="{attempt("md-svg")}"></svg>',
        f'<iframe srcdoc="<script>{attempt("md-iframe")}</script>"></iframe>',
        f'<a href="data:text/html,<script>{attempt("md-data")}</script>">data link</a>',
        f'<div style="background:url(javascript:{attempt("md-css")})">styled</div>',
        f"Maths: $\\href{{javascript:{attempt('md-tex')}}}{{x}}$ and $a < b$.",
    ])


def hostile_outputs() -> list:
    png = base64.b64encode(b"not a png").decode()
    return [
        new_output("display_data", data={
            "text/html": f"<b>bold</b><script>{attempt('html-script')}</script>"
                         f'<img src="x" onerror="{attempt("html-img")}">',
            "text/plain": "<HTML object>"}),
        new_output("display_data", data={
            "image/svg+xml": f'<svg xmlns="http://www.w3.org/2000/svg" onload="'
                             f'{attempt("svg-onload")}"><script>{attempt("svg-script")}'
                             "</script></svg>"}),
        new_output("display_data", data={"application/javascript": attempt("javascript"),
                                         "text/plain": "<Javascript object>"}),
        new_output("display_data", data={
            "text/markdown": f'<img src="x" onerror="{attempt("markdown-output")}">'}),
        new_output("display_data", data={"image/png": png}, metadata={
            "image/png": {"width": f"1 onerror={attempt('png-width')}"}}),
        new_output("display_data", data={"text/html": f"<script>{attempt('isolated')}</script>"},
                   metadata={"text/html": {"isolated": True}}),
        new_output("stream", name="stdout", text=f"<script>{attempt('stdout')}</script>"),
        new_output("error", ename="ValueError",
                   evalue=f'<img src="x" onerror="{attempt("evalue")}">',
                   traceback=[f"<script>{attempt('traceback')}</script>"]),
    ]


def hostile(nb):
    """`nb` with a hostile markdown cell and a code cell with hostile outputs after its first."""
    nb = copy.deepcopy(nb)
    code = new_code_cell("show()", outputs=hostile_outputs())
    code.metadata["tags"] = [f'x" onmouseover="{attempt("tag")}']
    nb.cells[1:1] = [new_markdown_cell(hostile_markdown()), code]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {}, "note": f"</script><script>{attempt('widget')}</script>"}}
    return nb


def feedback_exporter():
    """The exporter nbgrader's GenerateFeedback gets from the course's nbgrader_config.py."""
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    from autograder.nbgrader_glue.inproc import course_config

    config = course_config(REPO_ROOT)
    converter = GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
    return converter.exporter_class(parent=converter, config=converter.config)


def render(nb) -> str:
    """The feedback page for `nb` (scores as GetGrades would set them)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade"):
            meta["score"] = 0
    page, _ = feedback_exporter().from_notebook_node(nb, resources={"nbgrader": {
        "notebook": "lesson", "score": 0, "max_score": 1, "late_penalty": 0}})
    return page


def lesson(name: str = MATHS_LESSON):
    return nbformat.read(REPO_ROOT / "solutions" / name / f"{name}.ipynb", as_version=4)


# ------------------------------------------------------------------------------------------
# What the page holds

class Elements(HTMLParser):
    """Every start tag with its attributes, and the text of every <script>."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {name: value or "" for name, value in attrs}))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def ways_to_run(page: str) -> list[str]:
    """Where student text could run: inside a <script>, an on... attribute, a javascript: or
    data: URL in a link or source, an iframe, an embed or object."""
    found = Elements(page)
    places = [f"<script> {s[:60]!r}" for s in found.scripts if "__pwned" in s]
    for tag, attrs in found.tags:
        if tag in ("iframe", "embed", "object", "frame", "base", "meta") and "__pwned" in str(attrs):
            places.append(f"<{tag} {attrs}>")
        for name, value in attrs.items():
            if name.startswith("on"):
                places.append(f"<{tag} {name}={value[:60]!r}>")
            if name in ("href", "src", "action", "formaction", "srcdoc", "data") and \
                    re.match(r"\s*(javascript|data:text|vbscript)", value, re.I):
                places.append(f"<{tag} {name}={value[:60]!r}>")
    return places


def policy(page: str) -> str:
    for tag, attrs in Elements(page).tags:
        if tag == "meta" and attrs.get("http-equiv", "").lower() == "content-security-policy":
            return attrs["content"]
    return ""


def test_clean_html_keeps_text_and_drops_what_runs():
    from autograder.feedback.cleaning import clean_html

    kept = clean_html('<h2 id="Title">Title</h2><table border="1"><tr><th colspan="2">a</th>'
                      '</tr></table><div class="highlight"><pre><span class="k">def</span>'
                      '</pre></div><img src="data:image/png;base64,AAAA" alt="plot" width="40">'
                      '<a href="https://pytorch.org">docs</a>')
    for piece in ('<h2 id="Title">', '<th colspan="2">', '<span class="k">',
                  'src="data:image/png;base64,AAAA"', 'width="40"',
                  '<a href="https://pytorch.org">'):
        assert piece in kept
    dropped = clean_html(f'<script>{attempt("a")}</script><style>p{{}}</style>'
                         f'<img src="x" onerror="{attempt("b")}"><a href="javascript:x()">l</a>'
                         f'<img src="data:image/png;base64,AA" width="1 onerror=x">'
                         f'<svg onload="x()"></svg><iframe src="https://example.org"></iframe>')
    assert "__pwned" not in dropped and "<style" not in dropped
    assert "onerror" not in dropped.replace("&lt;", "")  # only as escaped text, if at all
    assert "<svg" not in dropped and "<iframe" not in dropped
    assert 'href="javascript' not in dropped and "width=" not in dropped


def test_no_student_text_can_run_in_the_feedback_page():
    page = render(hostile(lesson()))
    assert ways_to_run(page) == []
    # The student's text is still there for the reader, as text.
    assert "A student&#x27;s cell" in page or "A student's cell" in page
    assert "&lt;script&gt;" in page


def test_the_page_lets_only_its_own_scripts_run_and_loads_nothing():
    page = render(hostile(lesson()))
    csp = policy(page)
    assert "default-src 'none'" in csp and "'unsafe-inline'" not in csp.split("script-src")[-1]
    hashes = set(re.findall(r"'sha256-([^']+)'", csp))
    scripts = Elements(page).scripts
    assert scripts, "a page with maths carries MathJax"
    for script in scripts:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert digest in hashes, f"a script the policy does not name: {script[:80]!r}"
    for tag, attrs in Elements(page).tags:
        for name in ("src", "href"):
            if tag != "a" and name in attrs:
                assert not re.match(r"\s*(https?:)?//", attrs[name]), (tag, attrs)
    assert "cdnjs" not in page and "mathjax.org" not in page.lower().replace("www.mathjax.org", "")


def test_mathjax_only_on_pages_with_maths_and_code_in_colour():
    without = lesson("02_retain_grad")
    assert not any("$" in cell.source for cell in without.cells if cell.cell_type == "markdown")
    plain = render(without)
    assert Elements(plain).scripts == []
    assert "script-src" not in policy(plain)  # default-src 'none': no script at all
    with_maths = render(lesson())
    assert any("MathJax.Hub" in script for script in Elements(with_maths).scripts)
    for page in (plain, with_maths):
        # Pygments' colours for keywords, names and strings, not JupyterLab's CSS variables.
        assert re.search(r"\.highlight \.k \{[^}]*color: #[0-9A-Fa-f]{3,6}", page)
        assert re.search(r'class="[^"]*\bhighlight\b[^"]*"><pre><span', page)


def test_the_formgraders_exporter_cleans_student_html_too():
    """The formgrader renders submissions with nbconvert's HTMLExporter and the course's
    configuration: markdown cells and outputs are cleaned there as well."""
    from nbconvert.exporters import HTMLExporter

    from autograder.nbgrader_glue.inproc import course_config

    exporter = HTMLExporter(config=course_config(REPO_ROOT), template_name="classic")
    page, _ = exporter.from_notebook_node(hostile(lesson()))
    assert ways_to_run(page) == []


# ------------------------------------------------------------------------------------------
# In Chromium, network off

@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    executable = require_chromium()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, headless=True,
                                              args=lab_page.CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def open_offline(browser, path: Path, shot: str | None = None) -> dict:
    """Open `path` with the network off; what ran, what was asked for, what was drawn."""
    context = browser.new_context(offline=True, viewport=lab_page.VIEWPORT)
    requests: list[str] = []
    context.route(re.compile(r"^(https?|wss?|ftp):"), lambda route: (
        requests.append(route.request.url), route.abort()))
    page = context.new_page()
    try:
        page.goto(path.as_uri())
        page.wait_for_load_state("load")
        # MathJax typesets after load; wait until it says it is done (or there is none).
        page.wait_for_function(
            "() => !window.MathJax || (MathJax.Hub && MathJax.Hub.queue && "
            "MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0 && "
            "document.querySelectorAll('script[type^=\"math/tex\"]').length === "
            "document.querySelectorAll('.MathJax_MathML, .MathJax_Error').length)",
            timeout=20_000)
        page.mouse.move(200, 300)  # hover over the cells (the tag tried onmouseover)
        result = {
            "pwned": page.evaluate("window.__pwned || []"),
            "maths": page.locator("math").count(),
            "maths_errors": page.locator(".MathJax_Error, merror").count(),
            "keyword_colour": page.locator(".highlight .k").first.evaluate(
                "e => getComputedStyle(e).color"),
            "requests": requests,
        }
        if shot:
            screenshot(page, shot)
        return result
    finally:
        context.close()


@pytest.mark.browser
def test_in_chromium_offline_maths_renders_and_nothing_runs(browser, tmp_path):
    source = lesson()
    expected = sum(len(re.findall(r"\$\$.+?\$\$|\$[^$]+\$", cell.source, re.S))
                   for cell in source.cells if cell.cell_type == "markdown")
    path = tmp_path / "feedback.html"
    path.write_text(render(hostile(source)), encoding="utf-8")
    seen = open_offline(browser, path, "feedback-offline-maths")
    assert seen["pwned"] == []
    assert seen["requests"] == []
    # Every formula of the lesson's text (and the student's two) became MathML.
    assert seen["maths"] >= expected + 1 > 1
    assert seen["keyword_colour"] not in ("rgb(0, 0, 0)", "rgb(51, 51, 51)")


@pytest.mark.browser
def test_in_chromium_the_cleaning_alone_stops_the_attacks(browser, tmp_path):
    """Without the page's script policy: the cleaned HTML still runs nothing."""
    page = render(hostile(lesson()))
    without_policy = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
    assert policy(without_policy) == ""
    path = tmp_path / "no-policy.html"
    path.write_text(without_policy, encoding="utf-8")
    seen = open_offline(browser, path)
    assert seen["pwned"] == []
    assert seen["maths"] > 0


HOSTILE_ANSWER = f'''from IPython.display import HTML, SVG, Javascript, Markdown, display
display(HTML("<script>{attempt('run-html')}</script><img src=x onerror=\\"{attempt('run-img')}\\">"))
display(Javascript("{attempt('run-js')}"))
display(Markdown("<img src=x onerror=\\"{attempt('run-md')}\\">"))
print("<script>{attempt('run-print')}</script>")
import torch
def cube_grad(x):
    x = x.detach().clone().requires_grad_(True)
    (x ** 3).sum().backward()
    return x.grad
'''


@pytest.mark.browser
@pytest.mark.slow
def test_graded_hostile_submission_feedback_runs_nothing(browser, tmp_path):
    """A submission graded by `python -m autograder grade`, whose answer displays HTML,
    JavaScript and markdown with scripts and whose notebook has a hostile markdown cell:
    its feedback page, opened offline, runs none of it; the answer still earns its points."""
    from autograder.demo import Lessons, _write

    root = fixture_course.build_course(tmp_path / "course")
    lesson_id = fixture_course.LESSON_A
    nb = Lessons(root, [lesson_id]).with_answer(lesson_id, HOSTILE_ANSWER, base="correct")
    nb.cells.insert(1, new_markdown_cell(hostile_markdown()))
    _write(nb, tmp_path / "class" / "mallory" / f"{lesson_id}.ipynb")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(tmp_path / "class"), "--out", str(out),
         "--course-root", str(root), "--jobs", "1", "--timeout", "30", "--no-progress"],
        capture_output=True, text=True, env=dict(os.environ, CI="true"), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    page_path = out / "feedback" / "mallory" / f"{lesson_id}.html"
    page = page_path.read_text(encoding="utf-8")
    assert "run-html" in page and "run-print" in page  # the outputs are there, as text
    assert ways_to_run(page) == []
    seen = open_offline(browser, page_path, "feedback-graded-hostile")
    assert seen["pwned"] == [] and seen["requests"] == []
    grades = (out / "grades.csv").read_text()
    assert re.search(r"mallory,01_fixture_basics,3(\.0)?,3", grades), grades


def test_rendered_markdown_is_cached_only_while_small():
    """A worker keeps the lesson's rendered markdown for every notebook; a student's own long
    markdown is not kept (the cache lived as long as the worker, with no limit on its bytes)."""
    from nbformat.v4 import new_notebook

    from autograder.feedback.budget import MARKDOWN_CACHE_ITEM
    from autograder.feedback.render import FeedbackHTMLExporter
    small, large = "Some *text* here.", "word " * (MARKDOWN_CACHE_ITEM // 4)
    nb = new_notebook(cells=[new_markdown_cell(small), new_markdown_cell(large)])
    page, _ = FeedbackHTMLExporter().from_notebook_node(nb)
    assert "<em>text</em>" in page and page.count("word") >= MARKDOWN_CACHE_ITEM // 8
    cached = {key[0] for key in FeedbackHTMLExporter._markdown}
    assert small in cached and large not in cached
    assert FeedbackHTMLExporter._markdown_bytes <= 64 << 20


def test_highlighted_code_is_cached_only_while_small():
    """As for markdown: a worker's cache of highlighted code keeps small pieces only (it had a
    count limit, and a student's long code cells stayed in it for the worker's life)."""
    from autograder.feedback.budget import MARKDOWN_CACHE_ITEM, _CachedHighlighter
    cached = _CachedHighlighter(lambda source, language=None, metadata=None: f"<pre>{source}</pre>")
    small, large = "x = 1", "a+a\n" * (MARKDOWN_CACHE_ITEM // 2)
    assert cached(small) == "<pre>x = 1</pre>" and cached(large).startswith("<pre>a+a")
    assert [key[0] for key in cached.cache] == [small]
    assert cached.cached_bytes == len(small) + len("<pre>x = 1</pre>")


def test_a_lesson_figure_keeps_its_alt_text_and_a_student_image_loads_nothing():
    """The figures' HTML (an embedded PNG with alt text, coursekit.figures) reaches the feedback
    page as it is; a student's own <img> of a web address, or a script beside it, does not."""
    nb = lesson("03_tensor_hooks")
    figure = next(output for cell in nb.cells for output in cell.get("outputs", [])
                  if "<img" in output.get("data", {}).get("text/html", ""))
    expected_alt = re.search(r'alt="([^"]*)"', figure["data"]["text/html"])[1]
    nb.cells.append(new_code_cell("show()", outputs=[new_output(
        "display_data", data={"text/html": '<img src="https://example.org/a.png" alt="tracker">'
                                           f'<script>{attempt("figure-script")}</script>',
                              "text/plain": "<figure>"})]))
    page = render(nb)
    images = [attrs for tag, attrs in Elements(page).tags if tag == "img"]
    shown = [attrs for attrs in images if attrs.get("src", "").startswith("data:image/png;base64,")]
    assert [attrs["alt"] for attrs in shown] == [unescape(expected_alt)]
    assert base64.b64decode(shown[0]["src"].split(",", 1)[1]).startswith(b"\x89PNG")
    student = [attrs for attrs in images if attrs.get("alt") == "tracker"]
    assert student and all("src" not in attrs for attrs in student)
    assert ways_to_run(page) == []


def test_the_grader_keeps_a_figures_alt_text_as_plain_text_and_no_other_html():
    """A graded notebook's HTML is dropped (its process is the student's); the alt text of a
    figure's HTML, exactly as coursekit.figures writes it, is kept as the PNG's metadata, and
    the feedback page writes it escaped into the <img>."""
    from autograder.trusted.outputs import clean_output as _clean_output

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()

    def shown(page_html: str) -> dict:
        return _clean_output({"output_type": "display_data", "metadata": {}, "data": {
            "image/png": png, "text/plain": "<Figure>", "text/html": page_html}})

    figure = shown(f'<img src="data:image/png;base64,{png}" '
                   'alt="loss &quot;falls&quot; &lt;fast&gt;\x1b[31m">')
    assert "text/html" not in figure["data"]
    assert figure["metadata"] == {"image/png": {"alt": 'loss "falls" <fast> [31m'}}
    for other in (f'<img src="data:image/png;base64,{png}" alt="x" onerror="y">',
                  '<img src="https://example.org/a.png" alt="x">',
                  f'<img src="data:image/png;base64,{png}" alt="x"><script>y()</script>'):
        assert shown(other)["metadata"] == {}
    hostile_alt = f'a &quot; onerror=&quot;{attempt("alt")}'
    cell = new_code_cell("plot()", outputs=[from_dict(
        shown(f'<img src="data:image/png;base64,{png}" alt="{hostile_alt}">'))])
    page = render(new_notebook(cells=[cell]))
    images = [attrs for tag, attrs in Elements(page).tags if tag == "img"]
    assert [attrs["alt"] for attrs in images] == [f'a " onerror="{attempt("alt")}']
    assert ways_to_run(page) == []
