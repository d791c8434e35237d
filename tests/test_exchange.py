"""A class through nbgrader's exchange on one machine, as docs/CLASS.md walks it:
the instructor releases a lesson; two students, real users created for the test, fetch it,
work and submit as themselves; the instructor collects, grades with `python -m autograder grade
submitted/`, generates and releases feedback; each student fetches their own feedback.

Needs root (to create the users; CI runs as root), `useradd` and `runuser`. The students run
the course's Python wherever the clone lives: from a clone in a private folder (a 0700 home),
nbgrader and its packages are linked or copied into a folder under /tmp they can read.
"""

from __future__ import annotations

import csv
import functools
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

from autograder.demo import Lessons

pytestmark = pytest.mark.slow

LESSON = fixture_course.LESSON_A
COURSE_ID = "autograd-hooks"
VENV_BIN = Path(sys.executable).parent


def _need(condition: bool, why: str) -> None:
    if condition:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{why} (CI=true: the exchange test must run)", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="module")
def students():
    """Two users created for the test, with their home folders; removed afterwards."""
    _need(hasattr(os, "geteuid") and os.geteuid() == 0, "creating student users needs root")
    _need(bool(shutil.which("useradd") and shutil.which("runuser")),
          "useradd and runuser are needed (Debian: the passwd and util-linux packages)")
    names = [f"agstu{secrets.token_hex(3)}{suffix}" for suffix in ("a", "b")]
    created = []
    try:
        for name in names:
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], check=True,
                           capture_output=True)
            created.append(name)
        yield names
    finally:
        for name in created:
            subprocess.run(["userdel", "--remove", name], capture_output=True)
        while _REACHABLE:
            shutil.rmtree(_REACHABLE.pop(), ignore_errors=True)
        _reachable_packages.cache_clear()
        _student_python.cache_clear()


# Folders made for the students' side of the course's Python (removed with the students).
_REACHABLE: list[Path] = []


def _runs_as(name: str, *command: str) -> bool:
    home = Path(pwd.getpwnam(name).pw_dir)
    return subprocess.run(["runuser", "-u", name, "--", "env", "-i", f"HOME={home}", *command],
                          capture_output=True, cwd=home).returncode == 0


def _nbgrader_distributions() -> list:
    """nbgrader's distribution and every one it requires (extras such as bleach[css]
    included), as installed here."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found, done, waiting = {}, set(), [("nbgrader", "")]
    while waiting:
        name, extra = waiting.pop()
        name = canonicalize_name(name)
        if (name, extra) in done:
            continue
        done.add((name, extra))
        try:
            found[name] = found.get(name) or metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for line in found[name].requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                waiting += [(requirement.name, wanted)
                            for wanted in ("", *requirement.extras)]
    return list(found.values())


@functools.lru_cache(maxsize=None)
def _reachable_packages(site: Path) -> Path:
    """nbgrader and what it needs, from `site`, in a folder every user can read (under /tmp):
    hard links where the file system allows, else copies."""
    folder = Path(tempfile.mkdtemp(prefix="exchange-student-site-", dir="/tmp"))
    _REACHABLE.append(folder)
    os.chmod(folder, 0o755)
    for distribution in _nbgrader_distributions():
        for listed in distribution.files or []:
            source = Path(distribution.locate_file(listed)).resolve()
            if site not in source.parents or not source.is_file():
                continue  # scripts and data outside site-packages are not imported
            target = folder / source.relative_to(site)
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():
                continue
            mode = source.stat().st_mode
            try:
                if not mode & stat.S_IROTH:
                    raise PermissionError  # a link would keep it unreadable: copy it
                os.link(source, target)
            except OSError:
                shutil.copyfile(source, target)
                os.chmod(target, 0o755 if mode & stat.S_IXUSR else 0o644)
    for path in folder.rglob("*"):
        if path.is_dir():
            os.chmod(path, 0o755)
    return folder


@functools.lru_cache(maxsize=None)
def _student_python(name: str) -> tuple[str, ...]:
    """How a student runs the course's Python, wherever the clone lives: the environment's
    interpreter when the student can reach it; otherwise an interpreter of the same version
    the student can run (the environment's own, or the system's) with the environment's
    packages, or, when those lie in a private folder (a clone in a 0700 home), with nbgrader
    and what it needs made reachable under /tmp."""
    if _runs_as(name, sys.executable, "-c", "import nbgrader"):
        return (sys.executable,)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    same = f"import sys; assert sys.version_info[:2] == {tuple(sys.version_info[:2])}"
    candidates = [os.path.realpath(sys.executable),
                  shutil.which(version, path="/usr/bin:/bin:/usr/local/bin")]
    interpreter = next((c for c in candidates if c and _runs_as(name, c, "-c", same)), None)
    if interpreter is None:
        pytest.fail(f"the student user can run no Python {version[6:]} (the environment's, "
                    f"{os.path.realpath(sys.executable)}, lies in a private folder, and there "
                    f"is no /usr/bin/{version}): install {version} from the system's packages",
                    pytrace=False)
    site = Path(next(p for p in sys.path
                     if p.startswith(sys.prefix) and p.endswith("site-packages"))).resolve()
    if not _runs_as(name, f"PYTHONPATH={site}", interpreter, "-c", "import nbgrader"):
        site = _reachable_packages(site)
        assert _runs_as(name, f"PYTHONPATH={site}", interpreter, "-c", "import nbgrader")
    return ("env", f"PYTHONPATH={site}", interpreter)


def as_student(name: str, *command: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run `command` as the student `name`, in their home, with a clean environment;
    a command that starts with "python" runs the course's Python."""
    home = Path(pwd.getpwnam(name).pw_dir)
    env = ["env", "-i", f"HOME={home}", f"USER={name}", f"LOGNAME={name}", "LANG=C.UTF-8",
           "PATH=/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE=1"]
    if command and command[0] == "python":
        command = (*_student_python(name), *command[1:])
    return subprocess.run(["runuser", "-u", name, "--", *env, *command], cwd=cwd or home,
                          capture_output=True, text=True, timeout=300)


def student_nbgrader(name: str, *arguments: str) -> subprocess.CompletedProcess:
    return as_student(name, "python", "-m", "nbgrader", *arguments)


def as_instructor(root: Path, *command: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}", CI="true")
    done = subprocess.run(list(command), cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    return done


def test_a_lesson_through_the_exchange(students, tmp_path):
    alice, bob = students
    # The exchange: one folder every user can write to (docs/CLASS.md, step 1).
    exchange = Path(tempfile.mkdtemp(prefix="nbgrader-exchange-", dir="/tmp"))
    try:
        os.chmod(exchange, 0o777)
        _cycle(alice, bob, exchange, tmp_path)
    finally:
        shutil.rmtree(exchange, ignore_errors=True)


def _cycle(alice: str, bob: str, exchange: Path, tmp_path: Path) -> None:
    # The instructor's course root names the exchange in its nbgrader_config.py (step 2).
    root = fixture_course.build_course(tmp_path / "course")
    with open(root / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.Exchange.root = {str(exchange)!r}\n")
    nbgrader = str(VENV_BIN / "nbgrader")

    # Each student's own configuration: the course and the exchange (step 3).
    for name in (alice, bob):
        home = Path(pwd.getpwnam(name).pw_dir)
        config_dir = home / ".jupyter"
        config_dir.mkdir(exist_ok=True)
        (config_dir / "nbgrader_config.py").write_text(
            "c = get_config()\n"
            f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
            f"c.Exchange.root = {str(exchange)!r}\n")
        user = pwd.getpwnam(name)
        for path in (config_dir, config_dir / "nbgrader_config.py"):
            os.chown(path, user.pw_uid, user.pw_gid)

    # Release (step 4): the student version from notebooks/ goes to the exchange.
    as_instructor(root, nbgrader, "release_assignment", LESSON)
    course_dir = exchange / COURSE_ID
    assert (course_dir / "outbound" / LESSON / f"{LESSON}.ipynb").is_file()

    # The students fetch it, work, and submit, each as themselves (step 5).
    solved = Lessons(root, [LESSON]).correct(LESSON)
    for name in (alice, bob):
        fetched = student_nbgrader(name, "fetch_assignment", LESSON, "--course", COURSE_ID)
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
        notebook = Path(pwd.getpwnam(name).pw_dir) / LESSON / f"{LESSON}.ipynb"
        assert notebook.stat().st_uid == pwd.getpwnam(name).pw_uid
        if name == alice:  # alice answers every exercise (writing as herself); bob does not
            done = subprocess.run(["runuser", "-u", name, "--", "tee", str(notebook)],
                                  input=nbformat.writes(solved), capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
        submitted = student_nbgrader(name, "submit", LESSON, "--course", COURSE_ID)
        assert submitted.returncode == 0, submitted.stdout + submitted.stderr

    # The exchange keeps students apart: nobody lists the inbound folder or writes outbound.
    inbound_mode = stat.S_IMODE((course_dir / "inbound").stat().st_mode)
    assert inbound_mode & stat.S_IROTH == 0 and inbound_mode & stat.S_IWOTH
    peek = as_student(bob, "ls", str(course_dir / "inbound"))
    assert peek.returncode != 0 and alice not in peek.stdout
    tamper = as_student(bob, "sh", "-c", f"echo x > {course_dir / 'outbound' / LESSON / 'x.txt'}")
    assert tamper.returncode != 0

    # Collect and grade with this course's command (steps 6 and 7).
    as_instructor(root, nbgrader, "collect", LESSON)
    for name in (alice, bob):
        assert (root / "submitted" / name / LESSON / f"{LESSON}.ipynb").is_file()
    # (--course-root: this course is a copy; in the repository it is the default.)
    as_instructor(root, sys.executable, "-m", "autograder", "grade", "submitted/", "--out",
                  "grading", "--course-root", str(root), "--jobs", "2", "--timeout", "30",
                  "--no-progress")
    rows = {row["student_id"]: row for row in csv.DictReader(open(root / "grading" / "grades.csv"))}
    assert rows[alice]["status"] == rows[bob]["status"] == "graded"
    assert float(rows[alice]["score"]) == float(rows[alice]["max_score"]) > 0
    assert float(rows[bob]["score"]) == 0

    # Feedback: generated with nbgrader's command (the course's safe, offline page), released,
    # and fetched by each student, who gets their own (step 8).
    as_instructor(root, nbgrader, "generate_feedback", LESSON, "--force")
    as_instructor(root, nbgrader, "release_feedback", LESSON)
    for name, score in ((alice, rows[alice]["score"]), (bob, "0")):
        fetched = student_nbgrader(name, "fetch_feedback", LESSON, "--course", COURSE_ID)
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
        home = Path(pwd.getpwnam(name).pw_dir)
        pages = list((home / LESSON / "feedback").glob(f"*/{LESSON}.html"))
        assert len(pages) == 1, pages
        page = pages[0].read_text(encoding="utf-8")
        assert pages[0].stat().st_uid == pwd.getpwnam(name).pw_uid
        assert f"(Score: {float(score):.1f} / {float(rows[alice]['max_score']):.1f})" in page
        assert 'http-equiv="Content-Security-Policy"' in page
        for marker in fixture_course.HIDDEN_MARKERS:
            assert marker not in page
