"""The feedback page stands alone and reads well: no lesson
navigation whose links lead nowhere, no font to fetch, `lang` on <html>, headings without "¶"
links, and every code colour at a contrast of at least 4.5:1 on the code's grey.

Contrast is computed here from the page's own CSS with WCAG 2.1's formula (written again in
this file, not taken from the code under test)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from browser_support import REPO_ROOT, require_chromium
import browser_support as lab_page
from test_feedback_html import Elements, render

# As tests/test_feedback_html.py waits for it: MathJax done, or no MathJax.
MATHS_TYPESET = ("() => !window.MathJax || (MathJax.Hub && MathJax.Hub.queue && "
                 "MathJax.Hub.queue.pending === 0 && MathJax.Hub.queue.running === 0 && "
                 "document.querySelectorAll('script[type^=\"math/tex\"]').length === "
                 "document.querySelectorAll('.MathJax_MathML, .MathJax_Error').length)")
RELEASED = "03_tensor_hooks"  # a lesson with a previous and a next one
NEIGHBOURS = ("02_retain_grad", "04_vector_jacobian_products")


def released(name: str = RELEASED):
    """The lesson as students get it (notebooks/), navigation cells included."""
    return nbformat.read(REPO_ROOT / "notebooks" / name / f"{name}.ipynb", as_version=4)


@pytest.fixture(scope="module")
def page() -> str:
    return render(released())


def styles(page: str) -> str:
    return "\n".join(re.findall(r"<style[^>]*>(.*?)</style>", page, re.DOTALL))


def luminance(colour: str) -> float:
    digits = colour.lstrip("#")
    if len(digits) == 3:
        digits = "".join(c * 2 for c in digits)
    channels = [int(digits[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(one: str, two: str) -> float:
    high, low = sorted((luminance(one), luminance(two)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def rules(css: str) -> list[tuple[str, str]]:
    """(selector, declarations) of every plain rule, in order (at-rules' contents included)."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.DOTALL)
    return [(selector.strip().split("{")[-1].strip(), body)
            for selector, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css)]


def last_value(css: str, selector: str, prop: str) -> str:
    """The value the last rule naming exactly `selector` (in a selector list) gives `prop`."""
    found = ""
    for selectors, body in rules(css):
        if selector in [s.strip() for s in selectors.split(",")]:
            match = re.search(rf"(?<![-\w]){re.escape(prop)}\s*:\s*(#[0-9A-Fa-f]{{3,6}})", body)
            if match:
                found = match.group(1)
    assert found, f"no {prop} for {selector}"
    return found


def test_the_page_says_its_language():
    page = render(released())
    assert re.match(r"<!DOCTYPE html>\s*<html lang=\"en\">", page)


def test_headings_carry_no_pilcrow_links_and_keep_their_ids(page):
    assert "anchor-link" not in page
    for level, inner in re.findall(r"<h([1-6])\b[^>]*>(.*?)</h\1>", page, re.DOTALL):
        assert "<a" not in inner and "¶" not in inner and "&#182;" not in inner, inner
    assert '<h2 id="1.-A-hook-is-a-function-that-autograd-calls-with-a-gradient">' in page


def test_the_lessons_navigation_is_left_out(page):
    nb = released()
    assert sum("course-navigation" in c.metadata.get("tags", []) for c in nb.cells) == 2
    links = [attrs.get("href", "") for tag, attrs in Elements(page).tags if tag == "a"]
    assert not [link for link in links if "START-HERE" in link
                or any(name in link for name in NEIGHBOURS)], links
    assert "Start page" not in page and "START-HERE" not in page
    # The lesson itself is all there.
    assert "Exercise 1" in page and 'id="03-ex1-test"' in page or 'name="03-ex1-test"' in page


def test_the_page_needs_no_font_and_no_other_file(page):
    css = styles(page)
    assert "@font-face" not in css
    assert [url for url in re.findall(r"url\(\s*['\"]?([^'\")]*)", css)
            if not url.startswith("data:")] == []


def test_every_code_colour_reads_on_the_code_background(page):
    css = styles(page)
    background = last_value(css, ".highlight pre", "background-color")
    assert contrast(background, "#ffffff") < 1.2  # a light grey, as the page shows code
    assert last_value(css, ".output_area pre", "background-color") == background
    coloured = [(selectors, colour) for selectors, body in rules(css)
                if re.search(r"\.highlight\b|\.ansi-\w+-(intense-)?fg\b", selectors)
                for colour in re.findall(r"(?<![-\w])color\s*:\s*(#[0-9A-Fa-f]{3,6})\b", body)]
    assert len(coloured) > 60  # Pygments' default style and the ANSI colours
    low = [(selectors, colour, round(contrast(colour, background), 2))
           for selectors, colour in coloured if contrast(colour, background) < 4.5]
    assert low == []


def test_nbgrader_template_links_read_and_stand_out(page):
    """nbgrader's grey "(Top)" links on the blue cell headings, and its table of contents'
    links, blue on grey and only coloured, inside text."""
    css = styles(page)
    top = last_value(css, "div.nbgrader_cell .panel-heading a", "color")
    heading = last_value(css, ".panel-primary>.panel-heading", "background-color")
    assert contrast(top, heading) >= 4.5
    toc = last_value(css, "#toc a[href]", "color")
    panel = last_value(css, ".panel-default>.panel-heading", "background-color")
    assert contrast(toc, panel) >= 4.5
    assert re.search(r"a\[href\]\s*\{[^}]*text-decoration:\s*underline", css)
    assert 'href="#top"' in page and 'href="#03-ex1-test"' in page


@pytest.mark.browser
def test_in_chromium_the_page_logs_no_error(tmp_path, page):
    """Opened offline, the page asks for nothing and the console shows no error (a blocked
    font was one)."""
    from playwright.sync_api import sync_playwright

    path = tmp_path / "feedback.html"
    path.write_text(render(released("01_leaf_and_intermediate")), encoding="utf-8")
    other = tmp_path / "no-maths.html"
    other.write_text(page, encoding="utf-8")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=require_chromium(), headless=True,
                                             args=lab_page.CHROMIUM_ARGS)
        try:
            for shown in (path, other):
                context = browser.new_context(offline=True, viewport=lab_page.VIEWPORT)
                errors: list[str] = []
                requests: list[str] = []
                context.route(re.compile(r"^(https?|wss?|ftp):"), lambda route: (
                    requests.append(route.request.url), route.abort()))
                tab = context.new_page()
                tab.on("console", lambda message: errors.append(message.text)
                       if message.type == "error" else None)
                tab.on("pageerror", lambda error: errors.append(str(error)))
                tab.on("requestfailed", lambda request: errors.append(request.url))
                tab.goto(Path(shown).as_uri())
                tab.wait_for_load_state("load")
                # MathJax typesets after load, declaring fonts; each is loaded here (a browser
                # loads one only when text uses it) before the console is read.
                tab.wait_for_function(MATHS_TYPESET, timeout=20_000)
                tab.evaluate("Promise.allSettled([...document.fonts].map(f => f.load()))")
                assert tab.evaluate("document.documentElement.lang") == "en"
                assert errors == [] and requests == [], (shown.name, errors, requests)
                context.close()
        finally:
            browser.close()
