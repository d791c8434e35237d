"""How well the grader tells wrong answers apart and says why, over the variants suite.

    .venv/bin/python benchmarks/variants.py [--lessons 03_tensor_hooks ...] [--grade]

Every entry of tests/variants/<lesson>.py is a wrong answer (expect "fail") or a valid
alternative (expect "pass"). By default each is judged in this process, by the trusted verdicts
(`autograder.trusted.verdicts.judge_exercise`) on the scenarios' outcomes, as tests/test_scenarios.py
does; `--grade` grades them through `python -m autograder grade` with the sandbox on, as
tests/test_misconceptions_grading.py does (minutes). It prints, per lesson and in all:

    wrong caught     the wrong answers that lose the exercise's points
    valid kept       the valid alternatives that keep them
    named            of the caught answers, those whose feedback names a known mistake or
                     states a measured relation (twice the expected value, transposed, ...)
    misnamed         caught answers whose feedback names a known mistake other than the one
                     the variant is listed with (a wrong diagnosis)

    cell claims  (in this process only) answers the grader fails whose test cell ran to its
                 end and said more than "the example passes" (it must say that grading runs
                 hidden checks, never that the exercise passed), and variants listed with
                 `cell=` whose test cell did not fail with those words

then each answer not caught, valid answer not kept, misnamed answer, and caught answer whose
feedback lacks the words its variant lists (`mistake=` or `relation=`), each exercise with
fewer than 10 wrong or 3 valid answers listed; then, for the variants tagged `drawn=` with
one of the hidden-input CATEGORIES of issue 32 (what a hidden check must draw to tell them
apart: extreme magnitudes, a batch of one, ...), wrong caught and valid kept per category;
and last one line,
`caught=<n>/<n> kept=<n>/<n> named=<percent> misnamed=<n> cell-claims=<n> thin=<n>`.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

# The hidden inputs a variant tagged `drawn=<category>` needs to be told apart (issue 32).
CATEGORIES = ("extreme magnitudes", "zeros", "batch of one", "other shapes", "integer lists",
              "layer names", "nested modules", "second instance", "caller's tensors unchanged",
              "upstream gradient after a hook", "freezing twice", "ctx attributes")


@dataclass
class Result:
    """What the grader gave one variant."""

    lesson: str
    exercise: str
    name: str
    expect: str
    failed: bool
    mistakes: list[str]
    relations: list[str]
    cell_claims: bool = False  # the test cell says more than the grader decides
    drawn: str | None = None   # the hidden-input category the variant is tagged with

    @property
    def named(self) -> bool:
        return bool(self.mistakes or self.relations)


def unsaid(result: Result, variant: dict) -> bool:
    """A caught answer whose feedback lacks the words its variant lists (`mistake=` among the
    named mistakes, `relation=` among the relations)."""
    for key, said in (("mistake", result.mistakes), ("relation", result.relations)):
        phrase = (variant.get(key) or "").lower()
        if phrase and not any(phrase in line.lower() for line in said):
            return True
    return False


def misnamed(result: Result, variant: dict) -> bool:
    """A caught answer whose named mistake is not the one its variant lists."""
    phrase = (variant.get("mistake") or "").lower()
    if not result.mistakes:
        return False
    return not phrase or not any(phrase in m.lower() for m in result.mistakes)


def judge_here(lesson: str, listed: list[dict]) -> list[Result]:
    """Judge each variant in this process, as tests/test_scenarios.py does."""
    import scenario_support as support

    results = []
    for variant in listed:
        namespace = support.variant_namespace(lesson, variant["exercise"], variant["source"])
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            checks = support.verdict(lesson, variant["exercise"], namespace)
        failed = [c for c in checks if not c.passed]
        fresh = support.variant_namespace(lesson, variant["exercise"], variant["source"])
        ran, text = support.run_test_cell(lesson, variant["exercise"], fresh)
        claims = bool(failed) and ran and ("the example passes" not in text or
                                           "hidden checks" not in text)
        if variant.get("cell"):
            claims = claims or ran or variant["cell"].lower() not in text.lower()
        results.append(Result(lesson, variant["exercise"], variant["name"], variant["expect"],
                              bool(failed), [c.mistake for c in failed if c.mistake],
                              [r for c in failed for r in c.relations], claims,
                              variant.get("drawn")))
    return results


def thin_exercises(listed: list[dict]) -> list[str]:
    """The exercises with fewer than 10 wrong or 3 valid answers listed."""
    counts: dict[str, list[int]] = {}
    for variant in listed:
        pair = counts.setdefault(variant["exercise"], [0, 0])
        pair[variant["expect"] == "pass"] += 1
    return [f"{exercise} ({wrong} wrong, {valid} valid)"
            for exercise, (wrong, valid) in sorted(counts.items()) if wrong < 10 or valid < 3]


def by_category(results: list[Result]) -> list[str]:
    """One line per hidden-input category: its wrong answers caught and valid answers kept;
    a tag that is not one of CATEGORIES is said, and counts as a thin exercise."""
    lines = []
    for category in CATEGORIES:
        mine = [r for r in results if r.drawn == category]
        wrong = [r for r in mine if r.expect == "fail"]
        valid = [r for r in mine if r.expect == "pass"]
        lines.append(f"  {category:<32} caught {sum(r.failed for r in wrong):>3}/{len(wrong):<3} "
                     f"kept {sum(not r.failed for r in valid):>3}/{len(valid):<3}")
    for r in results:
        if r.drawn is not None and r.drawn not in CATEGORIES:
            lines.append(f"    {r.exercise} {r.name}: unknown category {r.drawn!r} "
                         f"(one of benchmarks/variants.py's CATEGORIES)")
    return lines


def judge_by_grading(lessons: list[str], jobs: int) -> dict[tuple[str, str, str], Result]:
    """Grade every variant through the grading command, as the misconception suite does."""
    import test_misconceptions_grading as suite

    with tempfile.TemporaryDirectory(prefix="variants-figure-") as tmp:
        graded = suite.grade_rounds(Path(tmp), lessons, jobs=jobs)
    results = {}
    for lesson in lessons:
        for r, each in enumerate(suite.lesson_rounds(lesson)):
            for exercise, answer in each.answers.items():
                if not answer.variant or exercise in each.unjudged:
                    continue
                got = graded[(suite._student(r), lesson, exercise)]
                v = answer.variant
                results[(lesson, exercise, v["name"])] = Result(
                    lesson, exercise, v["name"], v["expect"], got.score != got.max_score,
                    got.mistakes, got.relations, drawn=v.get("drawn"))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lessons", nargs="*", help="lessons to judge (default: all)")
    parser.add_argument("--grade", action="store_true",
                        help="grade through `python -m autograder grade` (slow)")
    parser.add_argument("--jobs", type=int, default=1, help="grading workers with --grade")
    args = parser.parse_args(argv)

    from autograder.release import lessons as all_lessons
    import test_misconceptions_grading as suite

    names = args.lessons or all_lessons(ROOT)
    unknown = sorted(set(names) - set(all_lessons(ROOT)))
    if unknown:
        parser.error(f"no such lesson: {', '.join(unknown)} (see solutions/)")
    listed = {lesson: list(suite.variants(lesson)) for lesson in names}
    graded = judge_by_grading(names, args.jobs) if args.grade else None
    totals = [0, 0, 0, 0, 0, 0, 0, 0]  # wrong, caught, valid, kept, named, misnamed, claims, thin
    every: list[Result] = []
    print(f"{'lesson':<28} {'wrong caught':>13} {'valid kept':>11} {'named':>11} "
          f"{'misnamed':>9}")
    for lesson in names:
        if graded is None:
            results = judge_here(lesson, listed[lesson])
        else:
            results = [graded[(lesson, v["exercise"], v["name"])] for v in listed[lesson]
                       if (lesson, v["exercise"], v["name"]) in graded]
        every += results
        by_name = {(v["exercise"], v["name"]): v for v in listed[lesson]}
        wrong = [r for r in results if r.expect == "fail"]
        caught = [r for r in wrong if r.failed]
        valid = [r for r in results if r.expect == "pass"]
        kept = [r for r in valid if not r.failed]
        named = [r for r in caught if r.named]
        bad = [r for r in caught if misnamed(r, by_name[(r.exercise, r.name)])]
        claims = [r for r in results if r.cell_claims]
        thin = thin_exercises(listed[lesson])
        counts = [len(wrong), len(caught), len(valid), len(kept), len(named), len(bad),
                  len(claims), len(thin)]
        totals = [t + c for t, c in zip(totals, counts)]
        print(f"{lesson:<28} {len(caught):>6}/{len(wrong):<6} {len(kept):>5}/{len(valid):<5} "
              f"{len(named):>5}/{len(caught):<5} {len(bad):>9}")
        for r in [r for r in wrong if not r.failed] + [r for r in valid if r.failed]:
            print(f"    {r.exercise} {r.name}: expected to {r.expect}, did not")
        for r in bad:
            print(f"    {r.exercise} {r.name}: misnamed as {r.mistakes[0][:70]!r}")
        for r in claims:
            print(f"    {r.exercise} {r.name}: its test cell says more than grading decides")
        for exercise in thin:
            print(f"    {exercise}: fewer than 10 wrong or 3 valid answers")
        for r in caught:
            if unsaid(r, by_name[(r.exercise, r.name)]) and not misnamed(
                    r, by_name[(r.exercise, r.name)]):
                print(f"    {r.exercise} {r.name}: its feedback lacks the words listed for it")
    print("hidden inputs (variants tagged drawn=...)")
    categories = by_category(every)
    print("\n".join(categories))
    totals[7] += sum("unknown category" in line for line in categories)
    wrong, caught, valid, kept, named, bad, claims, thin = totals
    share = 100.0 * named / caught if caught else 0.0
    print(f"caught={caught}/{wrong} kept={kept}/{valid} named={share:.0f}% misnamed={bad} "
          f"cell-claims={claims} thin={thin}")
    return 0 if caught == wrong and kept == valid and not bad and not claims and not thin \
        else 1


if __name__ == "__main__":
    sys.exit(main())
