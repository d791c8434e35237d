"""The class hub's parts, without a hub: its configuration file, the course folder's
and each role's nbgrader configuration, the repository's permissions, the gradebook's students
and the collect that refuses submissions filed under someone else's name."""

from __future__ import annotations

import os
import pwd
import stat
import sys
from pathlib import Path

import pytest
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from autograder.nbgrader_glue.exchange import SafeCollect
from conftest import COURSE_ROOT, LESSONS, read_notebook, student_path
from coursekit.lab import course_intro, lesson_title

sys.path.insert(0, str(COURSE_ROOT / "hub" / "lib"))
from coursehub import settings as class_settings
from coursehub import singleuser, state, students
from coursehub.settings import ConfigError

LESSON = "01_leaf_and_intermediate"


def write_class(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "class.toml"
    path.write_text(text)
    return path


def test_the_shipped_class_file_reads():
    settings = class_settings.load(COURSE_ROOT / "hub" / "class.toml")
    assert settings.ip == "127.0.0.1"
    assert settings.course_id == "autograd-hooks"
    assert settings.state_dir == COURSE_ROOT / "hub" / "state"
    assert settings.admins and settings.instructors
    assert settings.memory_limit == 4 << 30 and settings.idle_timeout > 0
    assert settings.role(settings.instructors[0]) == "instructor"
    assert settings.role("ada") == "student"
    assert settings.hide_repository


@pytest.mark.parametrize("text, complaint", [
    ('[hub]\nport = 80000\n[accounts]\nadmins = ["a"]\n', "port must be a number"),
    ('[hub]\nip = "localhost"\n[accounts]\nadmins = ["a"]\n', "not an IP address"),
    ('[accounts]\nadmins = []\n', "admins is empty"),
    ('[accounts]\nadmins = ["Ada Lovelace"]\n', "cannot be account names"),
    ('[accounts]\nadmins = ["a"]\n[limits]\nmemory = "lots"\n', "not a memory size"),
    ('[accounts]\nadmins = ["a"]\n[limits]\nidle_timeout = 0\n', "above 0"),
    ('[accounts]\nadmins = ["a"]\nteachers = ["b"]\n', "unknown keys ['teachers']"),
    ('[server]\nport = 1\n', "unknown section [server]"),
    ('[accounts\n', "not valid TOML"),
])
def test_a_wrong_class_file_says_what_is_wrong(tmp_path, text, complaint):
    with pytest.raises(ConfigError) as caught:
        class_settings.load(write_class(tmp_path, text))
    assert complaint in str(caught.value)


def test_a_missing_class_file_says_how_to_name_one(tmp_path):
    with pytest.raises(ConfigError, match="HUB_CONFIG"):
        class_settings.load(tmp_path / "nowhere.toml")


def test_state_folder_is_relative_to_the_class_file(tmp_path):
    settings = class_settings.load(write_class(
        tmp_path, '[hub]\nstate_dir = "class-state"\n[accounts]\nadmins = ["a"]\n'))
    assert settings.state_dir == tmp_path / "class-state"
    assert settings.course_dir == tmp_path / "class-state" / "course"
    assert settings.home("ada") == tmp_path / "class-state" / "home" / "ada"


def test_the_hub_needs_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(state.StateError, match="sudo make hub"):
        state.require_root()


# --- nbgrader's configuration in each place ---------------------------------------------------

def _load(path: Path) -> Config:
    return PyFileConfigLoader(path.name, path=str(path.parent)).load_config()


def test_course_folder_config_is_the_course_settings_with_the_class_paths(tmp_path):
    settings = class_settings.load(write_class(
        tmp_path, '[hub]\nstate_dir = "s"\n[accounts]\nadmins = ["a"]\n'))
    course = settings.course_dir
    course.mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(state.course_config_text(settings))
    config = _load(course / "nbgrader_config.py")
    repository = _load(COURSE_ROOT / "nbgrader_config.py")
    assert config.CourseDirectory.root == str(course)
    assert config.CourseDirectory.db_url == f"sqlite:///{course / 'gradebook.db'}"
    assert config.CourseDirectory.course_id == "autograd-hooks"
    assert config.CourseDirectory.groupshared is True
    assert config.Exchange.root == str(settings.exchange_dir)
    # Everything else is the repository's: grading limits, feedback, what students see.
    for section, key in (("Execute", "timeout"), ("IgnorePattern", "pattern"),
                         ("ClearSolutions", "code_stub"), ("GenerateFeedback", "preprocessors"),
                         ("CourseDirectory", "source_directory")):
        assert config[section][key] == repository[section][key], (section, key)


def test_course_folder_config_is_what_the_grading_command_loads(tmp_path):
    from autograder.nbgrader_glue.inproc import course_config

    settings = class_settings.load(write_class(
        tmp_path, '[hub]\nstate_dir = "s"\n[accounts]\nadmins = ["a"]\n'))
    settings.course_dir.mkdir(parents=True)
    (settings.course_dir / "nbgrader_config.py").write_text(state.course_config_text(settings))
    config = course_config(settings.course_dir)
    assert config.CourseDirectory.root == str(settings.course_dir)
    assert config.CourseDirectory.db_url.endswith(str(settings.course_dir / "gradebook.db"))


def test_student_and_instructor_configs(tmp_path, monkeypatch):
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text(
        'c = get_config()\nc.CourseDirectory.root = "/the/course"\n')
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COURSE_REPOSITORY", str(COURSE_ROOT))
    monkeypatch.setenv("COURSE_ID", "autograd-hooks")
    monkeypatch.setenv("COURSE_EXCHANGE", str(tmp_path / "exchange"))
    monkeypatch.setenv("COURSE_ROOT", str(course))
    student = _load(COURSE_ROOT / "hub" / "jupyter" / "student" / "nbgrader_config.py")
    assert student.Exchange.root == str(tmp_path / "exchange")
    assert student.Exchange.assignment_dir == student.CourseDirectory.root == \
        str(tmp_path / "home")
    # Validate runs a notebook as grading does (the repository's IgnorePattern, time limit).
    assert student.IgnorePattern.pattern == _load(COURSE_ROOT / "nbgrader_config.py") \
        .IgnorePattern.pattern
    assert student.Execute.timeout == 60
    # Validate sums up the exercises and points, as with `make lab`.
    from coursekit.progress import validation_cell_started, validation_started
    assert student.Execute.on_notebook_start is validation_started
    assert student.Execute.on_cell_start is validation_cell_started
    instructor = _load(COURSE_ROOT / "hub" / "jupyter" / "instructor" / "nbgrader_config.py")
    assert instructor.CourseDirectory.root == "/the/course"
    assert instructor.ExchangeFactory.collect == "autograder.nbgrader_glue.exchange.SafeCollect"
    assert instructor.ExchangeFactory.release_feedback == \
        "autograder.nbgrader_glue.exchange.SafeReleaseFeedback"


@pytest.mark.parametrize("lesson", [LESSON, LESSONS[-1]])
def test_the_formgraders_generate_makes_what_make_release_makes(tmp_path, lesson):
    """Generate in an instructor's formgrader (nbgrader's generate_assignment with the hub's
    instructor configuration) in a class's course folder writes, byte for byte, the lesson that
    `make release` committed to notebooks/: navigation, points, Run All past an exercise."""
    import shutil
    import subprocess

    settings = class_settings.load(write_class(
        tmp_path, '[hub]\nstate_dir = "s"\n[accounts]\nadmins = ["a"]\n'))
    course = settings.course_dir
    course.mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(state.course_config_text(settings))
    shutil.copytree(COURSE_ROOT / "solutions", course / "solutions",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    env = {**os.environ, "COURSE_ROOT": str(course),
           "JUPYTER_CONFIG_PATH": str(COURSE_ROOT / "hub" / "jupyter" / "instructor"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", lesson,
                           "--log-level=WARN"], cwd=course, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    generated = course / "notebooks" / lesson / f"{lesson}.ipynb"
    committed = COURSE_ROOT / "notebooks" / lesson / f"{lesson}.ipynb"
    assert generated.read_bytes() == committed.read_bytes()


def test_students_get_no_instructor_panels(monkeypatch):
    import json

    monkeypatch.setenv("COURSE_REPOSITORY", str(COURSE_ROOT))
    page = json.loads((COURSE_ROOT / "hub/jupyter/student/labconfig/page_config.json").read_text())
    disabled = {k for k, v in page["disabledExtensions"].items() if v}
    assert disabled == {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                        "@jupyter/nbgrader:course-list"}
    server = _load(COURSE_ROOT / "hub/jupyter/student/jupyter_server_config.py").ServerApp
    # nbgrader's instructor endpoints are off; the course's own start-page endpoint (where a
    # student reads how far their submission has got) is on.
    assert server.jpserver_extensions == {"nbgrader.server_extensions.formgrader": False,
                                          "nbgrader.server_extensions.course_list": False,
                                          "coursehub.startpage": True}


def test_singleuser_picks_the_roles_configuration():
    env = singleuser.environment({"COURSE_ROLE": "instructor", "JUPYTER_CONFIG_PATH": "/x"})
    paths = env["JUPYTER_CONFIG_PATH"].split(os.pathsep)
    assert paths == [str(singleuser.JUPYTER_CONFIG / "instructor"),
                     str(singleuser.JUPYTER_CONFIG / "common"), "/x"]
    assert singleuser.environment({})["JUPYTER_CONFIG_PATH"].startswith(
        str(singleuser.JUPYTER_CONFIG / "student"))
    with pytest.raises(SystemExit, match="student or instructor"):
        singleuser.environment({"COURSE_ROLE": "admin"})


# --- what students and administrators land on ---------------------------------------------------

def _released(outbound: Path, lesson: str) -> None:
    (outbound / lesson).mkdir(parents=True)
    (outbound / lesson / f"{lesson}.ipynb").write_bytes(
        (COURSE_ROOT / "notebooks" / lesson / f"{lesson}.ipynb").read_bytes())


def test_the_start_page_lists_the_lessons_what_to_fetch_and_progress(tmp_path):
    import json

    from coursehub.startpage import StartPageContents, start_page, write_start_page

    home, outbound = tmp_path / "home", tmp_path / "outbound"
    home.mkdir()
    for lesson in (LESSON, "02_retain_grad"):
        _released(outbound, lesson)
    # The student fetched lesson 01 and passed its first exercise.
    notebook = json.loads((outbound / LESSON / f"{LESSON}.ipynb").read_text())
    tests = [c for c in notebook["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    tests[0]["execution_count"] = 1
    (home / LESSON).mkdir()
    (home / LESSON / f"{LESSON}.ipynb").write_text(json.dumps(notebook))
    page = start_page(home, outbound, COURSE_ROOT)
    rows = {line.split("|")[1].strip(): line for line in page.splitlines()
            if line.startswith("| 0")}
    assert list(rows) == [name[:2] for name in LESSONS]  # the README's lessons
    assert f"({LESSON}/{LESSON}.ipynb)" in rows["01"] and "1 of 4 exercises pass" in rows["01"]
    assert "released: **Fetch** it" in rows["02"] and "](" not in rows["02"]
    assert "not released yet" in rows["07"]
    # Nothing from the course's repository names a lesson before its release: not its title,
    # not its folder's name, not what it teaches.
    # (The README's opening paragraphs, above the table, describe the whole course.)
    _, teaches = course_intro(COURSE_ROOT)
    table = "\n".join(rows.values())
    for lesson in LESSONS[2:]:
        _, title = lesson_title(read_notebook(student_path(lesson)), lesson)
        named = [text for text in (title, lesson, lesson[3:].replace("_", " "), teaches[lesson])
                 if text.lower() in table.lower()] + [text for text in (title, lesson)
                                                       if text in page]
        assert not named, f"{lesson}, not released, is named on the start page: {named}"
    assert "Lesson 01" not in rows["01"] and "Leaf" in rows["01"]  # the title from its heading
    assert "**Nbgrader ▸ Assignment List**" in page and "`<lesson>/<lesson>.ipynb`" in page
    assert "make " not in page and "work/" not in page  # nothing of `make lab`'s
    # Written again only when it changed; the contents manager writes it before it is read.
    path = write_start_page(home, outbound, COURSE_ROOT)
    assert path.read_text() == page
    assert issubclass(StartPageContents, __import__(
        "jupyter_server.services.contents.largefilemanager",
        fromlist=["AsyncLargeFileManager"]).AsyncLargeFileManager)


def test_the_start_page_is_written_afresh_when_it_is_opened(tmp_path, monkeypatch):
    import asyncio

    from coursehub.startpage import START_PAGE, StartPageContents

    home, exchange = tmp_path / "home", tmp_path / "exchange"
    home.mkdir()
    monkeypatch.setenv("COURSE_EXCHANGE", str(exchange))
    monkeypatch.setenv("COURSE_ID", "autograd-hooks")
    monkeypatch.setenv("COURSE_REPOSITORY", str(COURSE_ROOT))
    contents = StartPageContents(root_dir=str(home))
    first = asyncio.run(contents.get(START_PAGE))["content"]
    assert "not released yet" in first and "released: **Fetch** it" not in first
    _released(exchange / "autograd-hooks" / "outbound", LESSON)  # the instructor releases 01
    again = asyncio.run(contents.get(START_PAGE))["content"]
    assert "released: **Fetch** it" in again


def test_administrators_land_on_the_sign_ups_and_students_on_their_server():
    from types import SimpleNamespace

    from coursehub.hubconfig import landing_url

    def handler(admin):
        return SimpleNamespace(current_user=SimpleNamespace(admin=admin),
                               hub=SimpleNamespace(base_url="/hub/"))

    assert landing_url(handler(True)) == "/hub/authorize"
    assert landing_url(handler(False)) == ""


# --- the repository, the gradebook --------------------------------------------------------------

def test_hide_repository_leaves_only_what_servers_need(tmp_path):
    repo = tmp_path / "repo"
    for folder in (".venv/bin", "coursekit", "autograder", "hub", "jupyter", "solutions/01",
                   "notebooks", "tests", ".git", "demo"):
        (repo / folder).mkdir(parents=True)
    for name in ("nbgrader_config.py", "README.md", "gradebook.db"):
        (repo / name).write_text("x")
    for path in repo.iterdir():
        path.chmod(0o755 if path.is_dir() else 0o644)
    changed, warnings = state.hide_repository(repo)
    assert {p.name for p in changed} == {"solutions", "notebooks", "tests", ".git", "demo",
                                         "gradebook.db"}
    for path in repo.iterdir():
        others = stat.S_IMODE(path.stat().st_mode) & 0o007
        assert others == (0 if path.name not in state.STUDENT_READABLE else
                          (0o005 if path.is_dir() else 0o004)), path.name
    assert not warnings
    # Its own folder and the owner's rights are untouched.
    assert stat.S_IMODE((repo / "solutions").stat().st_mode) == 0o750


@pytest.mark.skipif(os.geteuid() != 0, reason="creates an account (root only)")
def test_what_is_made_in_the_repository_later_stays_hidden():
    """`python -m autograder demo --build-only` after the hub started, under umask 022: its
    solutions stay unreadable to a student's account; what servers need stays readable."""
    import shutil
    import subprocess
    import tempfile

    repo = Path(tempfile.mkdtemp(prefix="hidden-repo-", dir="/tmp"))
    student = f"aghide{os.getpid() % 100000}"
    try:
        repo.chmod(0o755)
        (repo / "autograder").mkdir(mode=0o755)
        (repo / "autograder" / "__init__.py").write_text("public")
        (repo / "autograder" / "__init__.py").chmod(0o644)
        _, warnings = state.hide_repository(repo)
        if any("keeps no default ACL" in w for w in warnings):
            pytest.skip(f"this file system keeps no default ACL: {warnings}")
        assert not warnings
        old = os.umask(0o022)
        try:
            (repo / "demo" / "solutions" / LESSON).mkdir(parents=True)
            (repo / "demo" / "solutions" / LESSON / f"{LESSON}.ipynb").write_text("answers")
            (repo / "gradebook.db").write_text("grades")
        finally:
            os.umask(old)
        subprocess.run(["useradd", "--no-create-home", student], check=True, capture_output=True)

        def read(path: Path) -> bool:
            return subprocess.run(["runuser", "-u", student, "--", "cat", str(path)], cwd="/",
                                  capture_output=True).returncode == 0

        assert not read(repo / "demo" / "solutions" / LESSON / f"{LESSON}.ipynb")
        assert not read(repo / "gradebook.db")
        assert read(repo / "autograder" / "__init__.py")
        assert state.hide_repository(repo) == ([], [])
    finally:
        subprocess.run(["userdel", student], capture_output=True)
        shutil.rmtree(repo, ignore_errors=True)


def test_hide_repository_keeps_a_state_folder_inside_it_reachable(tmp_path):
    repo = tmp_path / "repo"
    (repo / "class" / "state").mkdir(parents=True)
    (repo / "tests").mkdir()
    for path in repo.iterdir():
        path.chmod(0o755)
    changed, _ = state.hide_repository(repo, keep=(repo / "class" / "state", tmp_path / "x"))
    assert [p.name for p in changed] == ["tests"]
    assert (repo / "class").stat().st_mode & 0o001


def test_hide_repository_warns_about_a_worktrees_history(tmp_path):
    main_git = tmp_path / "main" / ".git"
    (main_git / "worktrees" / "wt").mkdir(parents=True)
    main_git.chmod(0o755)
    repo = tmp_path / "wt"
    repo.mkdir()
    (repo / ".git").write_text(f"gitdir: {main_git / 'worktrees' / 'wt'}\n")
    _, warnings = state.hide_repository(repo)
    assert len(warnings) == 1 and str(main_git) in warnings[0]


def test_students_enter_the_gradebook_once(tmp_path):
    from nbgrader.api import Gradebook

    assert students.add_students(tmp_path, "autograd-hooks", ["ada", "bob"]) == ["ada", "bob"]
    assert students.add_students(tmp_path, "autograd-hooks", ["bob", "cy"]) == ["cy"]
    database = tmp_path / "gradebook.db"
    assert stat.S_IMODE(database.stat().st_mode) == 0o660  # every instructor writes it
    with Gradebook(f"sqlite:///{database}", "autograd-hooks") as gradebook:
        assert {s.id for s in gradebook.students} == {"ada", "bob", "cy"}


# --- grading in an instructor's terminal -----------------------------------------------------

def test_the_grading_summary_names_the_formgrader_where_it_is(tmp_path, monkeypatch):
    """On the hub (a terminal of an instructor's server) the formgrader is a page of the hub,
    not `make formgrader`; on a machine, the make target, with the course folder if not this."""
    from autograder.outputs import Report

    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    assert "`make formgrader` opens" in Report([], 1.0, tmp_path).summary()
    assert f"`make formgrader COURSE={tmp_path}` opens" in \
        Report([], 1.0, tmp_path, course_root=tmp_path).summary()
    monkeypatch.setenv("JUPYTERHUB_USER", "teach")
    monkeypatch.setenv("JUPYTERHUB_BASE_URL", "/")
    summary = Report([], 1.0, tmp_path, course_root=tmp_path).summary()
    assert "make formgrader" not in summary
    assert "Gradebook: the formgrader shows it at /hub/user-redirect/formgrader." in summary


# --- collect: a submission filed under another name -----------------------------------------

def _exchange(tmp_path: Path) -> tuple[Path, Path]:
    course = tmp_path / "course"
    course.mkdir()
    inbound = tmp_path / "exchange" / "autograd-hooks" / "inbound"
    inbound.mkdir(parents=True)
    return course, inbound


def _submission(folder: Path, student: str, stamp: str, text: str) -> Path:
    path = folder / f"{student}+{LESSON}+2026-11-0{stamp} 10:00:00.000000 UTC+x{stamp}"
    path.mkdir(parents=True)
    (path / f"{LESSON}.ipynb").write_text(text)
    (path / "timestamp.txt").write_text(f"2026-11-0{stamp} 10:00:00.000000 UTC")
    (path / "submission_secret.txt").write_text(f"secret {student} {stamp}")
    return path


def _collect(course: Path, tmp_path: Path, collect_class, **traits) -> None:
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory

    config = Config()
    config.CourseDirectory.root = str(course)
    config.CourseDirectory.course_id = "autograd-hooks"
    config.CourseDirectory.assignment_id = LESSON
    config.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    config.Exchange.root = str(tmp_path / "exchange")
    for name, value in traits.items():
        setattr(config[collect_class.__name__], name, value)
    coursedir = CourseDirectory(config=config)
    collect_class(coursedir=coursedir, authenticator=Authenticator(config=config),
                  config=config).start()


def _collected(course: Path, student: str) -> str | None:
    path = course / "submitted" / student / LESSON / f"{LESSON}.ipynb"
    return path.read_text() if path.exists() else None


def test_per_student_inbound_refuses_a_submission_filed_under_another_name(tmp_path):
    course, inbound = _exchange(tmp_path)
    _submission(inbound / "ada", "ada", "1", "ada's own work")
    # bob files a newer submission under ada's name, in the folder the hub gave him.
    _submission(inbound / "bob", "ada", "2", "bob pretending to be ada")
    _submission(inbound / "bob", "bob", "1", "bob's own work")
    _collect(course, tmp_path, SafeCollect, inbound_layout="per-student")
    assert _collected(course, "ada") == "ada's own work"
    assert _collected(course, "bob") == "bob's own work"


@pytest.mark.skipif(os.geteuid() != 0, reason="gives folders to other accounts (root only)")
def test_flat_inbound_refuses_a_folder_owned_by_someone_else(tmp_path):
    from nbgrader.exchange.default.collect import ExchangeCollect

    nobody = pwd.getpwnam("nobody")
    course, inbound = _exchange(tmp_path)
    real = _submission(inbound, "nobody", "1", "nobody's own work")
    spoof = _submission(inbound, "root", "2", "nobody pretending to be root")
    for path in (real, spoof):
        for item in [path, *path.iterdir()]:
            os.chown(item, nobody.pw_uid, nobody.pw_gid)
    # nbgrader's own collect takes the folder filed under root's name (it only warns)...
    stock = tmp_path / "stock"
    stock.mkdir()
    _collect(stock, tmp_path, ExchangeCollect)
    assert _collected(stock, "root") == "nobody pretending to be root"
    # ...the class hub's does not.
    _collect(course, tmp_path, SafeCollect)
    assert _collected(course, "root") is None
    assert _collected(course, "nobody") == "nobody's own work"


@pytest.mark.skipif(os.geteuid() != 0, reason="creates and removes accounts (root only)")
def test_an_account_made_again_with_other_ids_gets_back_what_the_class_keeps_for_it():
    """A student's account removed and made again (a restore on another machine, a removed
    account coming back) gets other ids; its home's files, its submissions in the exchange,
    its folders in the course and its status file are given the new ones by name, so that its
    server can write its runtime files again. A classmate's folder filed under its name keeps
    its owner."""
    import grp
    import secrets
    import shutil
    import subprocess
    import tempfile

    name, filler = f"re{secrets.token_hex(3)}", f"fi{secrets.token_hex(3)}"
    base = Path(tempfile.mkdtemp(prefix="hub-reown-"))
    os.chmod(base, 0o755)
    settings = class_settings.load(write_class(
        base, '[hub]\nstate_dir = "state"\n[accounts]\nadmins = ["a"]\n'
        'instructors_group = "root"\n'))
    inbound = settings.exchange_dir / settings.course_id / "inbound"
    try:
        for folder in (settings.home_root, inbound, settings.queue_dir / "students",
                       settings.course_dir / "submitted"):
            folder.mkdir(parents=True, exist_ok=True)
        first = state.ensure_account(settings, name)
        home = settings.home(name)
        runtime = home / ".local" / "share" / "jupyter" / "runtime"
        mine = [runtime, inbound / f"{name}+{LESSON}+2030-01-01+ab12",
                settings.course_dir / "submitted" / name / LESSON]
        for folder in mine:
            folder.mkdir(parents=True)
            (folder / "kept.txt").write_text("theirs")
        classmate = inbound / f"{name}+{LESSON}+2030-01-02+cd34"  # nobody's, in its name
        classmate.mkdir()
        status = settings.queue_dir / "students" / f"{name}.json"
        status.write_text("[]")
        nobody = pwd.getpwnam("nobody")
        os.chown(classmate, nobody.pw_uid, nobody.pw_gid)
        os.chown(status, 0, first.pw_gid)
        for top in (home, mine[1], settings.course_dir / "submitted" / name):
            for path in [top, *top.rglob("*")]:
                os.chown(path, first.pw_uid, first.pw_gid)
        # The account goes; another takes its ids; it comes back with new ones.
        subprocess.run(["userdel", name], check=True, capture_output=True)
        subprocess.run(["useradd", "--no-create-home", "--uid", str(first.pw_uid),
                        "--user-group", filler], check=True, capture_output=True)
        again = state.ensure_account(settings, name)
        assert again.pw_uid != first.pw_uid
        for folder in mine:
            for path in (folder, folder / "kept.txt"):
                info = path.stat()
                assert (info.st_uid, info.st_gid) == (again.pw_uid, again.pw_gid), path
        assert status.stat().st_uid == 0 and status.stat().st_gid == again.pw_gid
        assert classmate.stat().st_uid == nobody.pw_uid
        # Its server's first write (Jupyter's runtime folder) works as the new account.
        done = subprocess.run(["touch", str(runtime / "kernel-1.json")], capture_output=True,
                              text=True, user=again.pw_uid, group=again.pw_gid,
                              extra_groups=[])
        assert done.returncode == 0, done.stderr
    finally:
        for account in (name, filler):
            subprocess.run(["userdel", account], capture_output=True)
            if account in {group.gr_name for group in grp.getgrall()}:
                subprocess.run(["groupdel", account], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
