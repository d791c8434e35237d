"""Exports of learning systems in, one student each: Canvas's flat download, Moodle's folders,
Blackboard's attempts, from real-looking zips built here; clean student ids; never two students
merged (a folder of several students' notebooks is refused, naming its files); a roster's ids,
names and emails. One class is graded end to end through the command."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.demo import Lessons
from autograder.intake.collect import collect, pick_newest
from autograder.intake.lms import clean_id
from autograder.intake.roster import apply_roster, read_roster, student_records

A, B = fixture_course.LESSONS
LESSONS = list(fixture_course.LESSONS)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = fixture_course.build_course(tmp_path_factory.mktemp("lms") / "course")
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"]
    return root, Lessons(root)


@pytest.fixture(scope="module")
def notebook_text(course):
    _, lessons = course
    return {("correct", A): nbformat.writes(lessons.correct(A)),
            ("blank", A): nbformat.writes(lessons.blank(A)),
            ("partial", A): nbformat.writes(lessons.partial(A, seed=1)),
            ("correct", B): nbformat.writes(lessons.correct(B))}


def make_zip(path: Path, members: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def found_in(source: Path, work: Path, layout: str = "auto") -> dict[str, list]:
    found, skipped = collect(source, LESSONS, work, layout=layout)
    table: dict[str, list] = {}
    for sub in found:
        table.setdefault(sub.student, []).append(sub)
    table["_skipped"] = skipped
    return table


# --------------------------------------------------------------------------------------------
# Clean ids

@pytest.mark.parametrize("text, expected", [
    ("smithjohn", "smithjohn"), ("John Smith", "john_smith"), ("José Núñez", "jose_nunez"),
    ("O'Brien, Mary-Kate", "o_brien_mary-kate"), ("J.Smith", "j.smith"),
    ("  --Ann__Lee..  ", "ann_lee"), ("李雷", ""), ("../../etc", "etc"),
])
def test_clean_id(text, expected):
    assert clean_id(text) == expected


# --------------------------------------------------------------------------------------------
# Canvas

def test_canvas_flat_export(tmp_path, notebook_text):
    members = {
        f"smithjohn_12345_900_{A}.ipynb": notebook_text[("correct", A)],
        f"smithjohn_12345_905_{B}.ipynb": notebook_text[("correct", B)],
        # Another student of the same name: told apart by the Canvas user id.
        f"smithjohn_12346_901_{A}.ipynb": notebook_text[("blank", A)],
        # A late re-upload (-1) and the file it replaced (a smaller Canvas file id).
        f"doejane_LATE_222_950_{A}-1.ipynb": notebook_text[("partial", A)],
        f"doejane_LATE_222_800_{A}.ipynb": notebook_text[("blank", A)],
        "smithjohn_12345_906_notes.txt": "not a notebook",
    }
    table = found_in(make_zip(tmp_path / "canvas.zip", members), tmp_path / "work")
    assert set(table) - {"_skipped"} == {"smithjohn_12345", "smithjohn_12346", "doejane_222"}
    assert {s.lesson for s in table["smithjohn_12345"]} == {A, B}
    assert all(s.layout == "canvas" and not s.problem for k, v in table.items()
               if k != "_skipped" for s in v)
    jane = table["doejane_222"]
    chosen, note = pick_newest(jane)
    assert chosen.path.name == f"doejane_LATE_222_950_{A}-1.ipynb"
    assert "newest" in note
    assert any("late" in n for n in chosen.notes)
    assert table["smithjohn_12346"][0].key == "12346"
    assert any("notes.txt" in item for item in table["_skipped"])


def test_canvas_export_unzipped_into_one_folder_is_not_one_student(tmp_path, notebook_text):
    """Today: one student named after the folder, the others dropped as duplicates."""
    members = {f"submissions/smithjohn_12345_900_{A}.ipynb": notebook_text[("correct", A)],
               f"submissions/doejane_222_901_{A}.ipynb": notebook_text[("blank", A)],
               f"submissions/roeric_333_902_{A}.ipynb": notebook_text[("partial", A)]}
    table = found_in(make_zip(tmp_path / "wrapped.zip", members), tmp_path / "work")
    assert set(table) - {"_skipped"} == {"smithjohn_12345", "doejane_222", "roeric_333"}
    assert "submissions" not in table


def test_a_folder_of_several_students_notebooks_is_refused(tmp_path, notebook_text):
    """Two groups of Canvas files beside a student's folder: the groups cannot be anyone's;
    the student's folder is graded as usual."""
    members = {f"hw1/smithjohn_12345_900_{A}.ipynb": notebook_text[("correct", A)],
               f"hw1/doejane_222_901_{A}.ipynb": notebook_text[("blank", A)],
               f"alice/{A}.ipynb": notebook_text[("correct", A)],
               f"bob/{A}.ipynb": notebook_text[("blank", A)]}
    table = found_in(make_zip(tmp_path / "mixed.zip", members), tmp_path / "work")
    refused = table[""]
    assert len(refused) == 2 and all(s.refused for s in refused)
    reason = refused[0].problem
    assert "hw1" in reason and "smithjohn_12345" in reason and "doejane_222" in reason
    assert f"doejane_222_901_{A}.ipynb" in reason and "--layout canvas" in reason
    assert [s.lesson for s in table["alice"]] == [A] and not table["alice"][0].problem
    assert "hw1" not in table
    # --layout canvas reads the groups as Canvas files, the student folders as not Canvas's.
    forced = found_in(tmp_path / "mixed.zip", tmp_path / "work2", layout="canvas")
    assert {"smithjohn_12345", "doejane_222"} <= set(forced)
    assert all("not named as a Canvas export" in s.problem for s in forced[""])


def test_one_students_lms_named_files_stay_theirs(tmp_path, notebook_text):
    """A student's folder whose files carry one LMS name is that student's (the demo's)."""
    folder = tmp_path / "class"
    for student in ("partial", "other"):
        (folder / student).mkdir(parents=True)
        (folder / student / f"partial_1234_{A} (1).ipynb").write_text(
            notebook_text[("partial", A)])
    table = found_in(folder, tmp_path / "work")
    assert set(table) - {"_skipped"} == {"partial", "other"}


def test_two_origins_of_one_id_are_never_merged(tmp_path, notebook_text):
    members = {f"smithjohn_12345_900_{A}.ipynb": notebook_text[("correct", A)],
               f"smithjohn_12345/{B}.ipynb": notebook_text[("correct", B)],
               f"carol/{A}.ipynb": notebook_text[("blank", A)]}
    table = found_in(make_zip(tmp_path / "clash.zip", members), tmp_path / "work")
    assert "smithjohn_12345" not in table
    assert len(table[""]) == 2 and all(s.refused for s in table[""])
    assert all("would all get the id 'smithjohn_12345'" in s.problem for s in table[""])
    assert [s.lesson for s in table["carol"]] == [A]


# --------------------------------------------------------------------------------------------
# Moodle

def test_moodle_folders(tmp_path, notebook_text):
    members = {
        f"John Smith_501_assignsubmission_file_/{A}.ipynb": notebook_text[("correct", A)],
        "John Smith_501_onlinetext_/onlinetext.html": "<p>see the notebook</p>",
        f"José Núñez_502_assignsubmission_file_/{A}.ipynb": notebook_text[("blank", A)],
        f"Participant_503_assignsubmission_file_/{A}.ipynb": notebook_text[("blank", A)],
        # Two students of one name: apart by their participant numbers.
        f"Ann Lee_504_assignsubmission_file_/{A}.ipynb": notebook_text[("correct", A)],
        f"Ann Lee_505_assignsubmission_file_/{A}.ipynb": notebook_text[("blank", A)],
        f"Ben Ode_506_assignsubmission_file_/{B}/{B}.ipynb": notebook_text[("correct", B)],
    }
    table = found_in(make_zip(tmp_path / "moodle.zip", members), tmp_path / "work")
    assert set(table) - {"_skipped"} == {"john_smith", "jose_nunez", "participant_503",
                                         "ann_lee_504", "ann_lee_505", "ben_ode"}
    assert table["john_smith"][0].name == "John Smith" and table["john_smith"][0].lesson == A
    assert table["ben_ode"][0].lesson == B and not table["ben_ode"][0].problem
    assert any("participant number 504" in n for n in table["ann_lee_504"][0].notes)
    assert all(" " not in student for student in table)
    # Names become first and last names for the gradebook.
    records = student_records([s for k, v in table.items() if k != "_skipped" for s in v], None)
    assert records["john_smith"]["first_name"] == "John"
    assert records["john_smith"]["last_name"] == "Smith"


def test_moodle_export_inside_a_wrapper(tmp_path, notebook_text):
    members = {f"Lesson 1-12/John Smith_501_assignsubmission_file_/{A}.ipynb":
               notebook_text[("correct", A)],
               f"Lesson 1-12/Mary Roe_507_assignsubmission_file_/{A}.ipynb":
               notebook_text[("blank", A)]}
    table = found_in(make_zip(tmp_path / "moodle.zip", members), tmp_path / "work")
    assert set(table) - {"_skipped"} == {"john_smith", "mary_roe"}


# --------------------------------------------------------------------------------------------
# Blackboard

def _receipt(name: str, username: str, original: str, stored: str) -> str:
    return (f"Name: {name} ({username})\nAssignment: Lesson 1\n"
            "Date Submitted: Friday, 1 March 2024 10:00:00 o'clock GMT\n"
            "Current Grade: Needs Grading\n\nSubmission Field:\nThere is no student "
            f"submission text data for this assignment.\n\nFiles:\n\tOriginal filename: "
            f"{original}\n\tFilename: {stored}\n")


def test_blackboard_attempts(tmp_path, notebook_text):
    early, late = "2024-03-01-10-00-00", "2024-03-02-09-30-00"
    j_doe = f"Lesson 1_j_doe_attempt_{late}_{A}.ipynb"
    members = {
        f"Lesson 1_jsmith_attempt_{early}_{A}.ipynb": notebook_text[("blank", A)],
        f"Lesson 1_jsmith_attempt_{late}_{A}.ipynb": notebook_text[("correct", A)],
        f"Lesson 1_jsmith_attempt_{early}.txt": _receipt("John Smith", "jsmith", A, "x"),
        # A username with an underscore: the receipt says where it starts.
        j_doe: notebook_text[("partial", A)],
        f"Lesson 1_j_doe_attempt_{late}.txt": _receipt("Jane Doe", "j_doe", A, j_doe),
        # No file name after the attempt: the lesson from the assignment's name.
        f"{B}_kroe_attempt_{early}.ipynb": notebook_text[("correct", B)],
    }
    table = found_in(make_zip(tmp_path / "blackboard.zip", members), tmp_path / "work")
    assert set(table) - {"_skipped"} == {"jsmith", "j_doe", "kroe"}
    chosen, note = pick_newest(table["jsmith"])
    assert late in chosen.path.name and early in note
    assert table["j_doe"][0].name == "Jane Doe"
    assert table["kroe"][0].lesson == B
    assert not [item for item in table["_skipped"] if item.endswith(".txt: not a notebook")]


# --------------------------------------------------------------------------------------------
# A file name that imitates another student's

def test_a_file_name_cannot_make_a_notebook_another_students(tmp_path, notebook_text):
    """An LMS writes its part of a name first; the student's own file name comes after it and
    may imitate another student's. Whose a notebook is comes from the LMS's part only (a red
    team's review found that Alice's file could replace Bob's, or get both refused)."""
    bob_at, alice_at, forged = "2024-01-01-10-00-00", "2024-01-02-10-00-00", "2099-12-31-23-59-59"
    blackboard = {
        f"L1_bob_attempt_{bob_at}_{A}.ipynb": notebook_text[("correct", A)],
        f"L1_bob_attempt_{bob_at}.txt": _receipt("Bob Jones", "bob", A, "x"),
        f"L1_alice_attempt_{alice_at}_x_bob_attempt_{forged}_{A}.ipynb":
            notebook_text[("blank", A)],
        f"L1_alice_attempt_{alice_at}.txt": _receipt("Alice A", "alice", A, "x"),
    }
    table = found_in(make_zip(tmp_path / "bb.zip", blackboard), tmp_path / "bb")
    assert [s.path.name for s in table["bob"]] == [f"L1_bob_attempt_{bob_at}_{A}.ipynb"]
    assert len(table["alice"]) == 1 and not table["alice"][0].problem
    # Moodle's folders: the folder is Moodle's, whatever the file inside is called.
    moodle = {
        f"Bob Jones_222_assignsubmission_file_/{A}.ipynb": notebook_text[("correct", A)],
        f"Alice Smith_111_assignsubmission_file_/Bob Jones_222_assignsubmission_file_{A}.ipynb":
            notebook_text[("blank", A)],
    }
    for layout in ("auto", "moodle"):
        table = found_in(make_zip(tmp_path / f"m-{layout}.zip", moodle), tmp_path / layout,
                         layout=layout)
        assert [s.path.parent.name for s in table["bob_jones"]] == \
            ["Bob Jones_222_assignsubmission_file_"], layout
        assert [s.student for s in table["alice_smith"]] == ["alice_smith"], layout
    # Moodle's flat form, with a file name that looks like a Blackboard attempt of Bob's.
    flat = {
        f"Bob Jones_222_assignsubmission_file_{A}.ipynb": notebook_text[("correct", A)],
        f"Alice Smith_111_assignsubmission_file_x_Bob Jones_attempt_{forged}_{A}.ipynb":
            notebook_text[("blank", A)],
    }
    table = found_in(make_zip(tmp_path / "flat.zip", flat), tmp_path / "flat")
    assert len(table["bob_jones"]) == 1 and not table["bob_jones"][0].problem
    assert len(table["alice_smith"]) == 1


# --------------------------------------------------------------------------------------------
# The roster

def _roster(path: Path, text: str):
    path.write_text(text, encoding="utf-8")
    return read_roster(path)


def test_roster_matches_ids_lms_keys_and_moodle_names(tmp_path, notebook_text):
    members = {f"smithjohn_12345_900_{A}.ipynb": notebook_text[("correct", A)],
               f"doejane_222_901_{A}.ipynb": notebook_text[("blank", A)],
               f"stranger_999_902_{A}.ipynb": notebook_text[("blank", A)]}
    found, _ = collect(make_zip(tmp_path / "c.zip", members), LESSONS, tmp_path / "w")
    roster = _roster(tmp_path / "roster.csv",
                     "id,name,email,lms_id,section\n"
                     "jsmith,\"Smith, John\",john@example.org,12345,A1\n"
                     "doejane_222,Jane Doe,jane@example.org,,A2\n"
                     "nobody,Nobody Here,nobody@example.org,,A1\n")
    report = apply_roster(found, roster)
    assert sorted(s.student for s in found) == ["doejane_222", "jsmith", "stranger_999"]
    assert report.unknown == {"stranger_999": [f"stranger_999_902_{A}.ipynb"]}
    assert [e.id for e in report.absent] == ["nobody"]
    records = student_records(found, roster)
    assert records["jsmith"] == {"overwrite": True, "lms_user_id": "12345",
                                 "first_name": "John", "last_name": "Smith",
                                 "email": "john@example.org"}
    assert roster.entries["jsmith"].extra == {"section": "A1"}

    moodle = {f"John Smith_501_assignsubmission_file_/{A}.ipynb": notebook_text[("correct", A)]}
    found, _ = collect(make_zip(tmp_path / "m.zip", moodle), LESSONS, tmp_path / "w2")
    apply_roster(found, roster)
    assert found[0].student == "jsmith"


def test_a_roster_cannot_merge_two_students(tmp_path, notebook_text):
    # Two Moodle students named alike: the roster's one "Ann Lee" is neither of them.
    members = {f"Ann Lee_504_assignsubmission_file_/{A}.ipynb": notebook_text[("correct", A)],
               f"Ann Lee_505_assignsubmission_file_/{A}.ipynb": notebook_text[("blank", A)]}
    found, _ = collect(make_zip(tmp_path / "m.zip", members), LESSONS, tmp_path / "w")
    report = apply_roster(found, _roster(tmp_path / "r.csv", "id,name\nalee,Ann Lee\n"))
    assert sorted(s.student for s in found) == ["ann_lee_504", "ann_lee_505"]
    assert set(report.unknown) == {"ann_lee_504", "ann_lee_505"}
    # A folder "jsmith" and a Canvas file the roster gives the id jsmith: refused, not merged.
    members = {f"smithjohn_12345_900_{A}.ipynb": notebook_text[("correct", A)],
               f"jsmith/{B}.ipynb": notebook_text[("correct", B)]}
    found, _ = collect(make_zip(tmp_path / "c.zip", members), LESSONS, tmp_path / "w2")
    apply_roster(found, _roster(tmp_path / "r2.csv", "id,lms_id\njsmith,12345\n"))
    assert all(s.refused and not s.student for s in found)
    assert all("'jsmith'" in s.problem for s in found)


@pytest.mark.parametrize("text, words", [
    ("", "empty"),
    ("name,email\nJohn,j@x\n", "no `id` column"),
    ("id,name\nann,Ann\nann,Ann Again\n", "twice"),
    ("id,name\n.hidden,X\n", "cannot be a student id"),
])
def test_bad_rosters_say_what_is_wrong(tmp_path, text, words):
    with pytest.raises(ValueError, match=words):
        _roster(tmp_path / "r.csv", text)


# --------------------------------------------------------------------------------------------
# End to end: a Canvas zip with a refused folder, and a roster

@pytest.mark.slow
def test_grading_a_canvas_zip_with_a_roster(course, tmp_path, notebook_text):
    from nbgrader.api import Gradebook

    root, lessons = course
    # A student who makes the mistake the fixture's scenarios name (the factor 3 forgotten):
    # the named mistake reaches items.csv and the report from a real grading run.
    mistaken = nbformat.writes(lessons.with_answer(
        A, "def cube_grad(x):\n    return x.detach() ** 2", base="correct"))
    members = {f"smithjohn_12345_900_{A}.ipynb": notebook_text[("correct", A)],
               f"smithjohn_12346_901_{A}.ipynb": notebook_text[("blank", A)],
               f"roeric_555_904_{A}.ipynb": mistaken,
               f"doejane_LATE_222_950_{A}-1.ipynb": notebook_text[("partial", A)],
               f"hw1/kroe_333_902_{A}.ipynb": notebook_text[("correct", A)],
               f"hw1/mlee_444_903_{A}.ipynb": notebook_text[("correct", A)]}
    archive = make_zip(tmp_path / "canvas.zip", members)
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email,lms_id\njsmith,\"Smith, John\",john@example.org,12345\n"
                      "absent1,Al Sent,al@example.org,\n", encoding="utf-8")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(archive), "--out", str(out),
         "--course-root", str(root), "--jobs", "1", "--timeout", "20", "--no-progress",
         "--roster", str(roster), "--lessons", A],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, CI="true"))
    # Refused notebooks: the run says so and exits 4; everyone else is graded.
    assert done.returncode == 4, done.stdout + done.stderr
    assert "whose they are cannot be told" in done.stderr
    assert "Read as: Canvas export" in done.stdout
    with open(out / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    table = {(r["student_id"], r["lesson"]): r for r in rows if r["student_id"]}
    assert table[("jsmith", A)]["status"] == "graded" and table[("jsmith", A)]["score"] == "3"
    assert table[("smithjohn_12346", A)]["score"] == "0"
    assert table[("doejane_222", A)]["status"] == "graded"
    assert "late" in table[("doejane_222", A)]["reason"]
    assert table[("absent1", A)]["status"] == "missing"
    refused = [r for r in rows if not r["student_id"]]
    assert len(refused) == 2 and all("hw1" in r["reason"] for r in refused)
    assert not any(s.startswith(("hw1", "kroe", "mlee")) for s, _ in table)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "autograd-hooks") as gb:
        john = gb.find_student("jsmith")
        assert (john.first_name, john.last_name, john.email, john.lms_user_id) == \
            ("John", "Smith", "john@example.org", "12345")
        assert gb.find_student("smithjohn_12346").lms_user_id == "12346"
        assert gb.find_student("absent1").email == "al@example.org"
        assert {s.id for s in gb.students} >= {"jsmith", "smithjohn_12346", "doejane_222"}
        assert not {"hw1", "submissions"} & {s.id for s in gb.students}
    assert table[("roeric_555", A)]["score"] == "1"  # exercise 2 only
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "stranger" not in page and "absent1" in page and "Al Sent" in page
    mistake = "The derivative of x**3 is 3 * x**2: the factor 3 is missing."
    with open(out / "items.csv", newline="", encoding="utf-8") as handle:
        items = {(r["exercise"], r["check"]): r for r in csv.DictReader(handle)}
    # Both checks of 01-ex1 (named after their scenarios) saw it once, roeric's; the others
    # passed or failed without a name.
    assert items[("01-ex1", "example")]["mistakes"] == f"{mistake}: 1"
    assert items[("01-ex1", "random_points")]["mistakes"] == f"{mistake}: 1"
    assert items[("01-ex1", "random_points")]["visibility"] == "hidden"
    assert items[("01-ex2", "intermediate")]["mistakes"] == ""
    section = page.split('id="mistakes"')[1].split("<h2")[0]
    assert mistake in section and "01-ex1" in section
