"""The class report: OUT/report.html, self-contained, and OUT/items.csv, from
rows built here the way the engine records them (a result's `checks`), and from the
gradebook's test cells when no checks are recorded. The page in a browser:
tests/test_report_browser.py."""

from __future__ import annotations

import base64
import csv
import html
import re
from pathlib import Path

import pytest

from autograder.tasks import Result
from autograder.report.class_report import ITEMS_HEADER, analyse, write_report
from autograder.intake.roster import RosterEntry, RosterReport

pytestmark = pytest.mark.fast

L3, L6 = "03_tensor_hooks", "06_module_hooks"
NONE_MISTAKE = "hook returned None instead of the gradient"
SIGN_MISTAKE = "gradient has the wrong sign"


def check(exercise, scenario, visible, passed, mistake=None):
    return {"exercise": exercise, "cell": f"{exercise}-test", "scenario": scenario,
            "visible": visible, "passed": passed, "mistake": None if passed else mistake}


def result(student, lesson, score, status="graded", reason="", checks=None, max_score=4.0):
    row = Result(student_id=student, lesson=lesson, score=score, max_score=max_score,
                 status=status, reason=reason)
    row.checks = checks or []  # the field the trusted-verdict engine adds
    return row


def class_rows() -> list:
    """Five students on lesson 03 (two exercises with visible and hidden checks), one timeout,
    one error, one edited test cell, and a lesson 06 row given as a plain dict."""
    rows = []
    outcomes = {  # student: (ex1 visible, ex1 hidden, ex2 visible, ex2 hidden)
        "s1": (True, True, True, True), "s2": (True, False, True, True),
        "s3": (True, False, False, False), "s4": (False, False, True, False),
        "s5": (True, True, True, False)}
    for student, (v1, h1, v2, h2) in outcomes.items():
        checks = [check("03-ex1", "one hook", True, v1, NONE_MISTAKE),
                  check("03-ex1", "two hooks", False, h1, NONE_MISTAKE),
                  check("03-ex2", "scaled", True, v2, SIGN_MISTAKE),
                  check("03-ex2", "chained", False, h2, SIGN_MISTAKE if student != "s5"
                        else "hook registered twice")]
        score = 2.0 * (v1 and h1) + 2.0 * (v2 and h2)
        reason = "Graded: 1 of 2 tests passed."
        if student == "s5":
            reason += (" The test cell 03-ex1-test had been edited; the original was restored "
                       "before grading.")
        rows.append(result(student, L3, score, reason=reason, checks=checks))
    rows.append(result("s6", L3, 0, status="timeout",
                       reason="Code cell 12 (03-ex1-answer) ran for more than 60 s."))
    rows.append(result("s7", L3, 0, status="error", reason="The process running it ended."))
    rows.append(result("s8", L3, 0, status="missing", reason="No notebook."))
    rows.append({"student_id": "s1", "lesson": L6, "score": 3.0, "max_score": 3.0,
                 "status": "graded", "reason": "Graded.",
                 "checks": [check("06-ex1", "forward hook", True, True),
                            check("06-ex1", "removed hook", False, True)]})
    rows.append(result("", L3, 0, status="invalid",
                       reason="The folder 'hw1' holds the notebooks of 2 different students."))
    return rows


def read_items(out: Path) -> list[dict]:
    with open(out / "items.csv", newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == ITEMS_HEADER
        return list(reader)


def test_items_csv_per_check(tmp_path):
    write_report(tmp_path, class_rows(), lessons=[L3, L6])
    items = read_items(tmp_path)
    by_check = {(i["lesson"], i["check"]): i for i in items}
    assert [i["check"] for i in items] == ["one hook", "two hooks", "scaled", "chained",
                                            "forward hook", "removed hook"]
    one = by_check[(L3, "one hook")]
    assert (one["exercise"], one["cell"], one["visibility"]) == ("03-ex1", "03-ex1-test", "visible")
    assert (one["attempts"], one["passed"], one["pass_rate"]) == ("5", "4", "0.800")
    assert one["mistakes"] == f"{NONE_MISTAKE}: 1"
    two = by_check[(L3, "two hooks")]
    assert (two["visibility"], two["passed"], two["mistakes"]) == \
        ("hidden", "2", f"{NONE_MISTAKE}: 3")
    chained = by_check[(L3, "chained")]
    assert chained["mistakes"] == f"{SIGN_MISTAKE}: 2; hook registered twice: 1"
    assert by_check[(L6, "removed hook")]["pass_rate"] == "1.000"


def test_exercise_pass_rates_visible_and_hidden():
    _, exercises = analyse(class_rows())
    ex = {(e.lesson, e.exercise): e for e in exercises}
    first = ex[(L3, "03-ex1")]
    assert first.rate("visible") == 4 / 5 and first.rate("hidden") == 2 / 5
    assert first.rate("cell") is None
    assert first.failing == {"s2", "s3", "s4"} and len(first.students) == 5
    second = ex[(L3, "03-ex2")]
    assert second.failing == {"s3", "s4", "s5"}
    assert second.mistakes == {SIGN_MISTAKE: 2, "hook registered twice": 1}
    assert ex[(L6, "06-ex1")].failing == set()


def test_the_page(tmp_path):
    roster = RosterReport(unknown={"stranger_99": ["stranger_99_1_03_tensor_hooks.ipynb"]},
                          absent=[RosterEntry(id="nobody", first_name="No", last_name="Body",
                                              email="nobody@example.org")])
    page = write_report(tmp_path, class_rows(), lessons=[L3, L6], roster=roster).read_text()
    # Self-contained: nothing loaded from anywhere, no script, figures inlined.
    assert "<script" not in page.lower()
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert "default-src 'none'" in page
    figures = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(figures) == 2
    assert all(base64.b64decode(f)[:8] == b"\x89PNG\r\n\x1a\n" for f in figures)
    sections = re.findall(r"<h2 id=\"(\w+)\">", page)
    assert sections == ["scores", "exercises", "hardest", "mistakes", "review", "students",
                        "unattributed", "roster"]
    # Pass rates: 03-ex1 80 % visible, 40 % hidden.
    assert re.search(r"<td>03-ex1</td><td class=\"num\">5</td><td class=\"num\">3</td>"
                     r"<td class=\"num\">80 %</td><td class=\"num\">40 %</td>", page)
    # The hardest: both lesson-03 exercises, 3 of 5 failing each; 06-ex1 is not listed.
    hardest = page.split('id="hardest"')[1].split("<h2")[0]
    assert hardest.count("3 of 5") == 2 and "06-ex1" not in hardest
    mistakes = page.split('id="mistakes"')[1].split("<h2")[0]
    assert f"<td>{NONE_MISTAKE}</td><td class=\"num\">3</td>" in mistakes
    assert f"<td>{SIGN_MISTAKE}</td><td class=\"num\">2</td>" in mistakes
    # Manual review: the timeout, the error and the edited test cell, each with its page.
    review = page.split('id="review"')[1].split("<h2")[0]
    assert re.findall(r"<tr><td>(s\d)</td>", review) == ["s5", "s6", "s7"]
    assert "edited cells" in review and 'href="feedback/s6/03_tensor_hooks.html"' in review
    assert "s8" not in review and "s1" not in review
    assert "hw1" in page.split('id="unattributed"')[1]
    roster_part = page.split('id="roster"')[1]
    assert "stranger_99" in roster_part and "No Body" in roster_part
    # Scores per lesson: lesson 03 has 5 graded notebooks, 2 not graded, 1 missing.
    assert re.search(r"<td>03_tensor_hooks</td><td class=\"num\">4</td><td class=\"num\">5</td>"
                     r".*?<td class=\"num\">2</td><td class=\"num\">1</td></tr>", page)


def _student_rows(page: str) -> dict[str, list[str]]:
    """The per-student table: student -> its cells as text (links kept as `text -> href`)."""
    section = page.split('id="students"')[1].split("<h2")[0]
    table = {}
    for row in re.findall(r"<tr>(.*?)</tr>", section.split("<tbody>")[1]):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        table[html.unescape(cells[0])] = [
            re.sub(r'<a href="([^"]*)">(.*?)</a>', r"\2 -> \1", html.unescape(c))
            for c in cells[1:]]
    return table


def test_the_students_table(tmp_path):
    page = write_report(tmp_path, class_rows(), lessons=[L3, L6]).read_text()
    table = _student_rows(page)
    # Who needs a look comes first (timeout, error, edited cells), then the others by id.
    assert list(table) == ["s5", "s6", "s7", "s1", "s2", "s3", "s4", "s8"]
    assert table["s6"] == [f"{L3}: timeout", f"timeout -> feedback/s6/{L3}.html", "", "0/4"]
    assert table["s5"][0] == f"{L3}: edited cells"
    assert table["s1"] == ["", f"4/4 -> feedback/s1/{L3}.html",
                           f"3/3 -> feedback/s1/{L6}.html", "7/7"]
    assert table["s8"] == ["", f"missing -> feedback/s8/{L3}.html", "", "0/4"]
    assert "8 students; 3 need a look" in page
    assert 'title="Code cell 12 (03-ex1-answer) ran for more than 60 s."' in page
    assert "hw1" not in page.split('id="students"')[1].split("<h2")[0]


def student_rows(count: int) -> tuple[list, list[str]]:
    """`count` students, 7 lessons of the course's names; student250 timed out in lesson 04."""
    lessons = ["01_leaf_and_intermediate", "02_grad_accumulation", "03_tensor_hooks",
               "04_retain_grad_and_nonleaf", "05_custom_autograd_function",
               "06_module_hooks", "07_jacobians_and_vjp"]
    rows = [result(f"student{i:03d}", lesson, i % 5, status="timeout" if i == 250 and
                   lesson == lessons[3] else "graded", reason="Graded.")
            for i in range(count) for lesson in lessons]
    return rows, lessons


def test_the_students_table_of_a_class_of_500(tmp_path):
    """500 students and 7 lessons: one row each, a header that stays in view, and a page that
    stays small enough to open at once."""
    rows, lessons = student_rows(500)
    page = write_report(tmp_path, rows, lessons=lessons).read_text()
    table = _student_rows(page)
    assert len(table) == 500 and list(table)[0] == "student250"
    assert table["student250"][0] == f"{lessons[3]}: timeout"
    assert table["student003"][1:] == [f"3/4 -> feedback/student003/{lesson}.html"
                                       for lesson in lessons] + ["21/28"]
    assert "position:sticky" in page and "500 students; 1 needs a look" in page
    assert len(page.encode()) < 2_000_000


def test_what_a_student_wrote_is_text(tmp_path):
    evil = '<img src=x onerror="alert(1)">'
    rows = [result(evil, L3, 0, status="timeout",
                   reason="line one\nforged,row\r\n<script>alert(2)</script>",
                   checks=[check("03-ex1", "<b>bold</b>", True, False, "<i>mistake</i>")])]
    page = write_report(tmp_path, rows).read_text()
    assert "<img src=x" not in page and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert "<script>" not in page and "<i>mistake" not in page
    assert "line one forged,row &lt;script&gt;" in page  # one line, escaped
    assert 'href="feedback/%3Cimg%20src%3Dx' in page  # the link is quoted too


def test_without_checks_the_gradebook_cells_stand_in(tmp_path):
    rows = [Result(student_id=s, lesson=L3, score=score, max_score=4.0, status="graded")
            for s, score in (("a", 4.0), ("b", 1.0))]
    cells = [{"student": "a", "lesson": L3, "cell": "03-ex1-test", "score": 2.0, "max_score": 2.0},
             {"student": "a", "lesson": L3, "cell": "03-ex2-test", "score": 2.0, "max_score": 2.0},
             {"student": "b", "lesson": L3, "cell": "03-ex1-test", "score": 0.0, "max_score": 2.0},
             {"student": "b", "lesson": L3, "cell": "03-ex2-test", "score": 1.0, "max_score": 2.0}]
    page = write_report(tmp_path, rows, cell_grades=cells).read_text()
    items = read_items(tmp_path)
    assert [(i["exercise"], i["visibility"], i["attempts"], i["passed"]) for i in items] == \
        [("03-ex1", "cell", "2", "1"), ("03-ex2", "cell", "2", "1")]
    assert "test cell (no per-check results)" not in page  # that is in the figure's legend
    assert "Lessons without per-check results" in page
    # A lesson that has checks ignores the gradebook's cells.
    rows[0].checks = [check("03-ex1", "one hook", True, True)]
    write_report(tmp_path, rows, cell_grades=cells)
    assert [i["visibility"] for i in read_items(tmp_path)] == ["visible"]


def test_an_empty_run(tmp_path):
    page = write_report(tmp_path, []).read_text()
    assert "No graded notebook in this run" in page and "data:image/png" not in page
    assert read_items(tmp_path) == []


def test_the_page_says_its_language_and_its_colours_read(tmp_path):
    """WCAG AA for the report: `lang` on <html>, and every text colour of
    its styles at 4.5:1 or more on the page's white and on the table headers' grey."""
    from test_feedback_page import contrast, last_value, rules

    page = write_report(tmp_path, class_rows(), lessons=[L3, L6]).read_text()
    assert re.match(r"<!DOCTYPE html>\s*<html lang=\"en\">", page)
    css = re.search(r"<style>(.*?)</style>", page, re.DOTALL).group(1)
    page_background = last_value(css, "body", "background")
    header_background = last_value(css, "th", "background")
    colours = [colour for _, body in rules(css)
               for colour in re.findall(r"(?<![-\w])color\s*:\s*(#[0-9A-Fa-f]{3,6})\b", body)]
    assert len(colours) >= 8
    for colour in colours:
        assert contrast(colour, page_background) >= 4.5, colour
    assert contrast(last_value(css, "body", "color"), header_background) >= 4.5
