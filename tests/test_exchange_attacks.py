"""Students who attack the exchange, as real accounts made for the test.

Each attacker files a submission in the exchange's inbound as themselves, next to two honest
students: links to an instructor's solution, to the course's secret, to a classmate's
submission, a dangling link, a link to /dev/zero, a FIFO, a submission folder that is itself a
link, a folder name whose time does not parse, a submission without submission_secret.txt, a
time in the name set back by years. The instructor (root: every right there is) runs
`nbgrader collect` and `nbgrader release_feedback` with the course's configuration. Collect takes
the honest submissions and none of the rest, and names each student it refused; Release
Feedback serves every student it can. Needs root, `useradd` and `runuser`.
"""

from __future__ import annotations

import datetime
import os
import resource
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "fixtures" / "grading"))
import fixture_course

LESSON = fixture_course.LESSON_A
COURSE_ID = "autograd-hooks"
VENV_BIN = Path(sys.executable).parent
HONEST = ("alice", "bob")
ATTACKS = ("solution", "secret", "peer", "dangling", "zero", "fifo", "linkdir", "badtime",
           "nosecret")
BACKDATED = "backdated"
SECRET_MARKER = f"course-secret-{secrets.token_hex(8)}"


def _need(condition: bool, why: str) -> None:
    if condition:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{why} (CI=true: the exchange's attack tests must run)", pytrace=False)
    pytest.skip(why)


def _now_text() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def _run_as(name: str, script: str, **env: str) -> None:
    """Run the shell `script` as the account `name` (with `env`), which must succeed."""
    done = subprocess.run(["runuser", "-u", name, "--", "env", "-i", "PATH=/usr/bin:/bin",
                           *(f"{k}={v}" for k, v in env.items()), "sh", "-ec", script],
                          cwd="/", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{name}: {done.stdout}{done.stderr}"


def _instructor(root: Path, *arguments: str) -> subprocess.CompletedProcess:
    """nbgrader as the instructor (root), from the course root; it may write 64 MiB per file
    at most, so that a copy without end stops rather than filling the disk."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))

    env = dict(os.environ, PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    try:
        return subprocess.run([str(VENV_BIN / "nbgrader"), *arguments], cwd=root, env=env,
                              capture_output=True, text=True, timeout=90, preexec_fn=limit)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"nbgrader {' '.join(arguments)} did not finish in 90 s (a FIFO read "
                    f"without end?):\n{err.stdout}\n{err.stderr}")


@pytest.fixture(scope="module")
def accounts():
    """One account per honest student and per attack; removed afterwards."""
    _need(hasattr(os, "geteuid") and os.geteuid() == 0, "creating student users needs root")
    _need(bool(shutil.which("useradd") and shutil.which("runuser")),
          "useradd and runuser are needed (Debian: the passwd and util-linux packages)")
    tag = secrets.token_hex(2)
    names = {role: f"agx{tag}{role}"[:32] for role in (*HONEST, *ATTACKS, BACKDATED)}
    created = []
    try:
        for name in names.values():
            subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", name],
                           check=True, capture_output=True)
            created.append(name)
        yield names
    finally:
        for name in created:
            subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture(scope="module")
def collected(accounts, tmp_path_factory):
    """The class after every student submitted and the instructor collected: (course root,
    exchange's course folder, collect's output, the students' secrets)."""
    root = fixture_course.build_course(tmp_path_factory.mktemp("course"), release=False)
    (root / ".autograder").mkdir(mode=0o700)
    (root / ".autograder" / "secret").write_text(SECRET_MARKER)
    exchange = Path(tempfile.mkdtemp(prefix="nbgrader-exchange-", dir="/tmp"))
    os.chmod(exchange, 0o755)
    course = exchange / COURSE_ID
    inbound = course / "inbound"
    inbound.mkdir(parents=True)
    os.chmod(course, 0o755)
    os.chmod(inbound, 0o2773)  # nbgrader's: students write into it but cannot list it
    with open(root / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.Exchange.root = {str(exchange)!r}\n")
    solution = root / "solutions" / LESSON / f"{LESSON}.ipynb"
    folders, secrets_of = {}, {}

    def submit(role: str, *, when: str | None = None, secret: bool = True,
               extra: str = "", notebook: str | None = None, target: str = "") -> None:
        name = accounts[role]
        stamp = when or _now_text()
        folder = inbound / f"{name}+{LESSON}+{stamp}+{secrets.token_hex(4)}"
        folders.setdefault(role, []).append(folder)
        secrets_of[role] = secrets.token_hex(16)
        text = notebook if notebook is not None else f"{role}'s own work"
        _run_as(name, 'mkdir "$F"; printf %s "$TEXT" > "$F/$L.ipynb"; '
                      'printf %s "$STAMP" > "$F/timestamp.txt"; '
                      + ('printf %s "$SECRET" > "$F/submission_secret.txt"; ' if secret else "")
                      + extra + '\nchmod 777 "$F"',
                F=str(folder), L=LESSON, TEXT=text, STAMP=stamp, SECRET=secrets_of[role],
                T=target)

    try:
        submit("alice")
        # bob's first submission claims a later time than his second: the second is newer.
        submit("bob", when="2031-01-01 00:00:00.000000 UTC", notebook="bob's first try")
        submit("bob", when="2026-01-01 00:00:00.000000 UTC", notebook="bob's second try")
        submit("solution", extra='rm "$F/$L.ipynb"; ln -s "$T" "$F/$L.ipynb"', target=str(solution))
        submit("secret", extra='ln -s "$T" "$F/secret.txt"',
               target=str(root / ".autograder" / "secret"))
        peer = folders["alice"][0] / f"{LESSON}.ipynb"
        submit("peer", extra='rm "$F/$L.ipynb"; ln -s "$T" "$F/$L.ipynb"', target=str(peer))
        submit("dangling", extra='ln -s /nonexistent/notes.txt "$F/notes.txt"')
        submit("zero", extra='ln -s /dev/zero "$F/data.bin"')
        submit("fifo", extra='mkfifo "$F/pipe"')
        submit("badtime", when="when-I-say-so")
        submit("nosecret", secret=False)
        submit(BACKDATED, when="2020-01-01 09:00:00.000000 UTC")
        # A submission whose folder is a link to the lesson's solutions.
        linkdir = accounts["linkdir"]
        _run_as(linkdir, 'ln -s "$T" "$F"', T=str(solution.parent),
                F=str(inbound / f"{linkdir}+{LESSON}+{_now_text()}+x"))
        started = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        done = _instructor(root, "collect", LESSON)
        yield root, course, done, secrets_of, started
    finally:
        shutil.rmtree(exchange, ignore_errors=True)


def _submitted(root: Path, accounts: dict, role: str) -> Path:
    return root / "submitted" / accounts[role] / LESSON


def test_collect_takes_the_honest_submissions(accounts, collected):
    root, _, done, _, _ = collected
    assert done.returncode == 0, done.stdout + done.stderr
    assert (_submitted(root, accounts, "alice") / f"{LESSON}.ipynb").read_text() == \
        "alice's own work"
    # bob's newest submission by the exchange's clock, not by the time its name claims.
    assert (_submitted(root, accounts, "bob") / f"{LESSON}.ipynb").read_text() == \
        "bob's second try"


def test_collect_copies_nothing_an_attack_points_at(accounts, collected):
    root, _, done, _, _ = collected
    assert done.returncode == 0, done.stdout + done.stderr
    for role in ATTACKS:
        assert not _submitted(root, accounts, role).exists(), role
    texts = []
    for path in (root / "submitted").rglob("*"):
        info = path.lstat()
        assert stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode), path
        assert info.st_mode & 0o007 == 0, f"{path} is open to other accounts"
        if stat.S_ISREG(info.st_mode):
            texts.append(path.read_text(errors="replace"))
    everything = "\n".join(texts)
    for marker in (SECRET_MARKER, *fixture_course.HIDDEN_MARKERS):
        assert marker not in everything
    assert everything.count("alice's own work") == 1  # alice's, and not in peer's folder


def test_collect_names_each_student_it_refused(accounts, collected):
    _, _, done, _, _ = collected
    log = done.stdout + done.stderr
    reasons = {"solution": "symbolic link", "secret": "symbolic link", "peer": "symbolic link",
               "dangling": "symbolic link", "zero": "symbolic link (to /dev/zero)",
               "fifo": "a FIFO", "linkdir": "not a folder", "badtime": "time in its name",
               "nosecret": "no submission_secret.txt"}
    lines = [line for line in log.splitlines() if "Not collected" in line]
    for role, reason in reasons.items():
        mine = [line for line in lines if f"{accounts[role]}'s submission" in line]
        assert mine and reason in mine[0] and "submit again" in mine[0], (role, lines)
    for role in HONEST:
        assert not [line for line in lines if f"{accounts[role]}'s submission" in line]


def test_the_submission_time_is_the_exchanges(accounts, collected):
    from nbgrader.utils import parse_utc

    root, _, done, _, started = collected
    folder = _submitted(root, accounts, BACKDATED)
    trusted = parse_utc((folder / "timestamp.txt").read_text())
    assert trusted >= started - datetime.timedelta(minutes=5)
    assert parse_utc((folder / "timestamp_claimed.txt").read_text()) == \
        datetime.datetime(2020, 1, 1, 9, 0)
    assert f"{accounts[BACKDATED]} {LESSON}: submitted at" in done.stdout + done.stderr


def test_release_feedback_serves_every_student_it_can(accounts, collected):
    from nbgrader.utils import notebook_hash

    root, course, _, secrets_of, _ = collected
    feedback = root / "feedback"
    for role in HONEST:
        folder = feedback / accounts[role] / LESSON
        folder.mkdir(parents=True)
        shutil.copy(_submitted(root, accounts, role) / "submission_secret.txt", folder)
        (folder / f"{LESSON}.html").write_text(f"feedback for {role}")
    # Graded from a folder or an LMS export: no timestamp.txt, no submission_secret.txt.
    lms = feedback / "aaa-from-the-lms" / LESSON
    lms.mkdir(parents=True)
    (lms / f"{LESSON}.html").write_text("feedback for a student of the LMS")
    (feedback / accounts["alice"] / LESSON / "timestamp.txt").write_text(_now_text())
    done = _instructor(root, "release_feedback", LESSON)
    assert done.returncode == 0, done.stdout + done.stderr
    for role in HONEST:
        page = course / "feedback" / (notebook_hash(secret=secrets_of[role],
                                                    notebook_id=LESSON) + ".html")
        assert page.read_text() == f"feedback for {role}"
        assert page.stat().st_mode & 0o004  # the student's own account reads it
    log = done.stdout + done.stderr
    assert "Feedback not released for aaa-from-the-lms" in log
    assert "no submission_secret.txt" in log


def test_collect_reads_no_more_than_its_bounds(tmp_path):
    """Too many files, too large a file, too much in all: refused, named; the rest collected
    (the per-student layout, so that no account is needed)."""
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    from autograder.nbgrader_glue.exchange import SafeCollect

    inbound = tmp_path / "exchange" / COURSE_ID / "inbound"
    files = {"honest": {f"{LESSON}.ipynb": 900},
             "many": {f"f{i}.txt": 1 for i in range(10)},
             "large": {f"{LESSON}.ipynb": 1001},
             "heavy": {f"{LESSON}.ipynb": 900, "data.bin": 900}}
    for student, content in files.items():
        folder = inbound / student / f"{student}+{LESSON}+{_now_text()}+x"
        folder.mkdir(parents=True)
        (folder / "submission_secret.txt").write_text("s")
        for name, size in content.items():
            (folder / name).write_text(student[0] * size)
    config = Config()
    config.CourseDirectory.root = str(tmp_path / "course")
    config.CourseDirectory.course_id = COURSE_ID
    config.CourseDirectory.assignment_id = LESSON
    config.CourseDirectory.db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    config.Exchange.root = str(tmp_path / "exchange")
    config.SafeCollect.inbound_layout = "per-student"
    config.SafeCollect.max_entries = 8
    config.SafeCollect.max_file_bytes = 1000
    config.SafeCollect.max_total_bytes = 1500
    collect = SafeCollect(coursedir=CourseDirectory(config=config),
                          authenticator=Authenticator(config=config), config=config)
    collect.start()
    submitted = tmp_path / "course" / "submitted"
    assert (submitted / "honest" / LESSON / f"{LESSON}.ipynb").read_text() == "h" * 900
    assert sorted(p.name for p in submitted.iterdir()) == ["honest"]
    why = {student: [m for m in collect.refused if f"{student}'s submission" in m]
           for student in ("many", "large", "heavy")}
    assert "more than 8 files and folders" in why["many"][0]
    assert "larger than 1000 bytes" in why["large"][0]
    assert "larger than 1500 bytes together" in why["heavy"][0]
