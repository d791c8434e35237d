"""The class's state folder, its system accounts and the repository's permissions (run as root).

Layout of the state folder (all of it survives a restart):

    <state>/                 root, 0711: others may only pass through to their own folders
      jupyterhub/            root, 0700: hub database, cookie secret, log, process ids
      exchange/              root, 1777: nbgrader's exchange (as nbgrader requires), sticky
        <course id>/         root:<instructors>, 2775; outbound 2775, inbound 2773, feedback 2771
      course/                root:<instructors>, 2770: nbgrader's course root for the class
                             (solutions/, scenarios/, .autograder/secret, gradebook, ...)
      home/                  root, 0711
        <user>/              <user>, 0700: that user's home folder
      python/                root, 0755: the Python users' servers run, if it had to be built
                             (coursehub.runtime)
"""

from __future__ import annotations

import ctypes
import filecmp
import grp
import os
import pwd
import shutil
import stat
import struct
import subprocess
from pathlib import Path
from typing import Callable

from coursehub.settings import REPO_ROOT, ClassSettings

# What the users' servers need from the repository: the environment, the course's packages,
# the hub's configuration, the course's nbgrader settings and students' Jupyter configuration
# (read by Validate), and the README (the start page's lessons). With
# `hide_repository`, every other top-level entry (solutions/ and its hidden tests, tests/,
# .git, gradebooks, grading output) is made unreadable to other accounts.
STUDENT_READABLE = (".venv", "coursekit", "autograder", "hub", "jupyter", "nbgrader_config.py",
                    "README.md")


class StateError(RuntimeError):
    """The state folder or an account cannot be set up; the message says why and what to do."""


def require_root() -> None:
    if os.geteuid() != 0:
        raise StateError("the class hub starts each user's server as that user's own system "
                         "account, which needs root: run `sudo make hub`")


def _traversable_by_others(path: Path) -> list[Path]:
    """The folders on the way to `path` that other accounts cannot pass through."""
    blocked = []
    for folder in [*reversed(path.parents), path]:
        if folder.exists() and not folder.stat().st_mode & stat.S_IXOTH:
            blocked.append(folder)
    return blocked


def _mkdir(path: Path, mode: int, uid: int = 0, gid: int = 0) -> None:
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, uid, gid)
    os.chmod(path, mode)


def ensure_group(name: str) -> int:
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        subprocess.run(["groupadd", name], check=True, capture_output=True, text=True)
        return grp.getgrnam(name).gr_gid


def prepare(settings: ClassSettings, repo: Path = REPO_ROOT) -> list[str]:
    """Create or repair the state folder; returns warnings to show to whoever starts the hub."""
    require_root()
    warnings: list[str] = []
    for what, path in (("the state folder", settings.state_dir),
                       ("the course environment", repo / ".venv")):
        blocked = _traversable_by_others(path.parent)
        if blocked:
            raise StateError(
                f"students' servers cannot reach {what} ({path}): other accounts may not "
                f"enter {blocked[0]}; give them passage with `chmod o+x {blocked[0]}` or "
                "choose a folder they can reach")
    gid = ensure_group(settings.instructors_group)
    _mkdir(settings.state_dir, 0o711)
    _mkdir(settings.hub_dir, 0o700)
    _mkdir(settings.home_root, 0o711)
    _prepare_exchange(settings, gid)
    warnings += _prepare_course(settings, gid, repo)
    return warnings


def _prepare_exchange(settings: ClassSettings, gid: int) -> None:
    # nbgrader checks that students can write to the exchange root; the sticky bit keeps
    # anyone from removing what others put there.
    _mkdir(settings.exchange_dir, 0o1777)
    course = settings.exchange_dir / settings.course_id
    _mkdir(course, 0o2775, gid=gid)
    _mkdir(course / "outbound", 0o2775, gid=gid)
    # Students write submissions here but cannot list it (nbgrader's modes, group-shared).
    _mkdir(course / "inbound", 0o2773, gid=gid)
    # Feedback files are found by a hash of the submission; nobody may list them.
    _mkdir(course / "feedback", 0o2771, gid=gid)


COURSE_CONFIG = '''\
"""nbgrader's configuration for the class on JupyterHub: the course's own settings from the
repository, with this folder as the course root. Written by `make hub` at every start from
{class_file}; edit that file (or the repository's nbgrader_config.py), not this one."""

import os

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

REPOSITORY_CONFIG = {repo_config!r}
if not os.path.isfile(REPOSITORY_CONFIG):
    raise FileNotFoundError(f"the course's nbgrader_config.py is missing: {{REPOSITORY_CONFIG}}")
load_subconfig(REPOSITORY_CONFIG)  # noqa: F821

COURSE_ROOT = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = {course_id!r}
c.CourseDirectory.root = COURSE_ROOT
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(COURSE_ROOT, "gradebook.db")
# Several instructors share this folder through the group {group!r}.
c.CourseDirectory.groupshared = True
c.Exchange.root = {exchange!r}
c.Exchange.assignment_dir = COURSE_ROOT
'''


def course_config_text(settings: ClassSettings, repo: Path = REPO_ROOT) -> str:
    return COURSE_CONFIG.format(
        class_file=str(settings.config_file), repo_config=str(repo / "nbgrader_config.py"),
        course_id=settings.course_id, group=settings.instructors_group,
        exchange=str(settings.exchange_dir))


def _prepare_course(settings: ClassSettings, gid: int, repo: Path) -> list[str]:
    """The course root: its nbgrader_config.py; each lesson's instructor notebook and grading
    scenarios, copied from the repository (a lesson already there is kept: instructors may
    have edited it); the course's secret, readable by the instructors' group only."""
    warnings = []
    course = settings.course_dir
    _mkdir(course, 0o2770, gid=gid)
    config = course / "nbgrader_config.py"
    config.write_text(course_config_text(settings, repo))
    os.chown(config, 0, gid)
    os.chmod(config, 0o640)
    for folder in ("solutions", "scenarios"):
        _mkdir(course / folder, 0o2770, gid=gid)
    for lesson in sorted(p.name for p in (repo / "solutions").iterdir()
                         if (p / f"{p.name}.ipynb").is_file()):
        for mine, theirs in ((repo / "solutions" / lesson, course / "solutions" / lesson),
                             (repo / "scenarios" / f"{lesson}.py",
                              course / "scenarios" / f"{lesson}.py")):
            if not mine.exists():
                continue
            if theirs.exists():
                if _differs(mine, theirs):
                    warnings.append(f"{theirs} differs from the repository's {mine}; the class "
                                    "keeps its copy (remove it to take the repository's)")
                continue
            if mine.is_dir():
                shutil.copytree(mine, theirs, ignore=shutil.ignore_patterns(
                    ".ipynb_checkpoints", "__pycache__"))
            else:
                shutil.copy2(mine, theirs)
            _own_tree(theirs, gid)
    _share_secret(course, gid)
    return warnings


def _differs(mine: Path, theirs: Path) -> bool:
    if mine.is_dir():
        mine, theirs = mine / f"{mine.name}.ipynb", theirs / f"{mine.name}.ipynb"
    return theirs.is_file() and not filecmp.cmp(mine, theirs, shallow=False)


def _share_secret(course: Path, gid: int) -> None:
    """The course's secret (autograder.trusted.seeds.course_secret draws each student's hidden
    inputs from it), made here so that every instructor may read it, and nobody else."""
    from autograder.trusted.seeds import course_secret

    course_secret(course)
    folder = course / ".autograder"
    _own_tree(folder, gid, dir_mode=0o2750, file_mode=0o640)


def _own_tree(root: Path, gid: int, dir_mode: int = 0o2770, file_mode: int = 0o660) -> None:
    """root:`gid` with these modes for `root` (a folder or a file) and all it holds."""
    if root.is_file():
        os.chown(root, 0, gid)
        os.chmod(root, file_mode)
        return
    for folder, dirs, files in os.walk(root):
        os.chown(folder, 0, gid)
        os.chmod(folder, dir_mode)
        for name in files:
            os.chown(os.path.join(folder, name), 0, gid)
            os.chmod(os.path.join(folder, name), file_mode)


# --------------------------------------------------------------------------------------------
# Accounts

def ensure_account(settings: ClassSettings, name: str) -> pwd.struct_passwd:
    """The system account of hub user `name`, created on first use with its home in the state
    folder. An existing account is used only if it is one the class created (its home is the
    class's), so a hub name can never take over an account of the machine."""
    home = settings.home(name)
    try:
        account = pwd.getpwnam(name)
    except KeyError:
        # Ids above any the class's files have: an account made again (HUB.md removes a
        # class's accounts and keeps their homes) never gets a classmate's old ids, which
        # would give it that classmate's home and submissions until they came back.
        above = _highest_class_id(settings) + 1
        subprocess.run(["useradd", "--home-dir", str(home), "--create-home", "--shell",
                        "/bin/bash", "--user-group", "--comment", f"{settings.course_id} class",
                        "-K", f"UID_MIN={max(above, 1000)}", "-K", f"GID_MIN={max(above, 1000)}",
                        name], check=True, capture_output=True, text=True)
        account = pwd.getpwnam(name)
    else:
        if Path(account.pw_dir) != home or account.pw_uid < 1000:
            raise StateError(
                f"the name {name!r} belongs to an account of this machine that the class did "
                f"not create (home {account.pw_dir}); ask the administrator to remove the hub "
                "user and sign up under another name")
    home.mkdir(exist_ok=True)
    before = os.lstat(home)
    if (before.st_uid, before.st_gid) != (account.pw_uid, account.pw_gid) and before.st_uid:
        # The account was made again (a restore on another machine, a removed account back)
        # with other ids: what the class keeps for it still has the old ones.
        reown(settings, name, (before.st_uid, before.st_gid), (account.pw_uid, account.pw_gid))
    os.chown(home, account.pw_uid, account.pw_gid)
    os.chmod(home, 0o700)
    group = grp.getgrnam(settings.instructors_group)
    member = name in group.gr_mem
    if settings.role(name) == "instructor" and not member:
        subprocess.run(["usermod", "--append", "--groups", group.gr_name, name], check=True,
                       capture_output=True, text=True)
    elif settings.role(name) != "instructor" and member:
        subprocess.run(["gpasswd", "--delete", name, group.gr_name], check=True,
                       capture_output=True, text=True)
    return account


def _highest_class_id(settings: ClassSettings) -> int:
    """The highest account id (uid or gid, below 60000) that owns a home in the state folder
    or a submission in the exchange's inbound: the ids of every account the class made, live
    or removed."""
    highest = 0
    for folder in (settings.home_root, settings.exchange_dir / settings.course_id / "inbound"):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            highest = max([highest, *(i for i in (info.st_uid, info.st_gid) if i < 60000)])
    return highest


def student_places(settings: ClassSettings, name: str) -> list[Path]:
    """What the class keeps for account `name`, found by its name: its home, its submissions
    in the exchange (flat: inbound/<name>+<lesson>+..., per-student: inbound/<name>/), its
    folders in the course (submitted, autograded, feedback) and its status file of feedback on
    submit."""
    inbound = settings.exchange_dir / settings.course_id / "inbound"
    try:
        submissions = [inbound / entry for entry in os.listdir(inbound)
                       if entry == name or entry.startswith(f"{name}+")]
    except OSError:
        submissions = []
    course = settings.course_dir
    return [settings.home(name), *sorted(submissions),
            *(course / part / name for part in ("submitted", "autograded", "feedback")),
            settings.queue_dir / "students" / f"{name}.json"]


_AT_EMPTY_PATH = 0x1000
_REOWN_DEPTH = 100


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def reown(settings: ClassSettings, name: str, old: tuple[int, int],
          new: tuple[int, int]) -> int:
    """Give account `name`'s new ids to what the class keeps for it (student_places) where it
    has its old ones: an entry owned by the old uid gets the new uid, one of the old group the
    new group. Links are changed, never followed. Returns how many entries changed."""
    changed = 0

    def fix(entry: str, folder: int | None = None) -> None:
        # Each entry is opened once, without following a link, relative to its folder's
        # descriptor, and changed through that descriptor: the account that holds the old ids
        # may swap a link in for any entry or folder meanwhile, and root must then change
        # nothing else (a chmod by path would follow the link to a file of root's).
        nonlocal changed
        try:
            fd = os.open(entry, os.O_PATH | os.O_NOFOLLOW, dir_fd=folder)
        except FileNotFoundError:
            return
        try:
            info = os.fstat(fd)
            uid = new[0] if info.st_uid == old[0] else info.st_uid
            gid = new[1] if info.st_gid == old[1] else info.st_gid
            if (uid, gid) != (info.st_uid, info.st_gid):
                if _libc().fchownat(fd, b"", uid, gid, _AT_EMPTY_PATH) != 0:
                    errno = ctypes.get_errno()
                    raise OSError(errno, os.strerror(errno), entry)
                if not stat.S_ISLNK(info.st_mode):  # chown clears setgid bits
                    os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(info.st_mode))
                changed += 1
        finally:
            os.close(fd)

    def walk(entry: str, folder: int | None, depth: int) -> None:
        # A folder is opened only as a folder and never through a link (a FIFO or a link
        # swapped in is not opened); deeper than _REOWN_DEPTH keeps its ids.
        try:
            fd = os.open(entry, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK,
                         dir_fd=folder)
        except OSError:
            return
        try:
            names = [item.name for item in os.scandir(fd)]
            for name in names:
                fix(name, fd)
                if depth < _REOWN_DEPTH:
                    walk(name, fd, depth + 1)
        finally:
            os.close(fd)

    for place in student_places(settings, name):
        fix(str(place))
        walk(str(place), None, 0)
    return changed


# --------------------------------------------------------------------------------------------
# The repository

# A default ACL (the kernel's xattr form): owner rwx, group r-x, others nothing. Whatever is
# made in a folder that has it gets these rights at most, whatever the umask of its maker, and
# a folder made there carries it on.
_ACL_DEFAULT = "system.posix_acl_default"
_ACL_VERSION, _UNDEFINED_ID = 2, 0xFFFFFFFF
_ACL_USER_OBJ, _ACL_GROUP_OBJ, _ACL_OTHER = 0x01, 0x04, 0x20
NOTHING_FOR_OTHERS = struct.pack("<I", _ACL_VERSION) + b"".join(
    struct.pack("<HHI", tag, perm, _UNDEFINED_ID)
    for tag, perm in ((_ACL_USER_OBJ, 7), (_ACL_GROUP_OBJ, 5), (_ACL_OTHER, 0)))


def keep_new_entries_hidden(folder: Path) -> str | None:
    """Give `folder` the default ACL NOTHING_FOR_OTHERS; a warning if its file system cannot."""
    try:
        if os.getxattr(folder, _ACL_DEFAULT) == NOTHING_FOR_OTHERS:
            return None
    except OSError:
        pass
    try:
        os.setxattr(folder, _ACL_DEFAULT, NOTHING_FOR_OTHERS)
    except OSError as err:
        return (f"the file system of {folder} keeps no default ACL ({err.strerror}): "
                "a folder made in it later (`python -m autograder demo`, grading output) is "
                "readable by students until the next server starts or `make hub` runs again")
    return None


def hide_repository(repo: Path = REPO_ROOT,
                    keep: tuple[Path, ...] = ()) -> tuple[list[Path], list[str]]:
    """Make every top-level entry of `repo` except STUDENT_READABLE (and those holding a path
    in `keep`, such as a state folder) unreadable to other accounts (mode o-rwx; git does not
    record it), and whatever is made in `repo` later too (keep_new_entries_hidden). Returns the
    entries changed and warnings."""
    changed, warnings = [], []
    warning = keep_new_entries_hidden(repo)
    if warning:
        warnings.append(warning)
    kept = {Path(path).resolve().relative_to(repo.resolve()).parts[0] for path in keep
            if Path(path).resolve().is_relative_to(repo.resolve())}
    for entry in sorted(repo.iterdir()):
        if entry.name in STUDENT_READABLE and not entry.is_symlink():
            if not entry.stat().st_mode & (0o005 if entry.is_dir() else 0o004):
                warnings.append(f"students' servers cannot read {entry} (made after the "
                                f"repository was hidden?): run `chmod -R o+rX {entry}`")
            continue
        if entry.name in kept or entry.is_symlink():
            continue
        mode = entry.stat().st_mode
        if mode & 0o007:
            os.chmod(entry, stat.S_IMODE(mode) & ~0o007)
            changed.append(entry)
    git = repo / ".git"
    if git.is_file():  # a worktree: the history lives elsewhere
        target = Path(git.read_text().split(":", 1)[1].strip())
        common = target.parent.parent if target.parent.name == "worktrees" else target
        if common.exists() and common.stat().st_mode & 0o005:
            warnings.append(f"the Git history in {common} is readable by every account and holds "
                            f"the solutions: run `chmod o-rwx {common}`")
    return changed, warnings


# --------------------------------------------------------------------------------------------
# Students in the gradebook

def as_nobody(settings: ClassSettings) -> Callable[[], None]:
    """What a child process runs before its program (`preexec_fn`): it becomes `nobody` with
    the instructors' group only, and makes files that group can read and write."""
    nobody = pwd.getpwnam("nobody").pw_uid
    gid = grp.getgrnam(settings.instructors_group).gr_gid

    def drop() -> None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(nobody)
        os.umask(0o007)

    return drop


def students_command(settings: ClassSettings, python: Path, names: list[str]) -> dict:
    """How to run coursehub.students for `names`: as `nobody` with the instructors' group
    (arguments for subprocess.Popen or asyncio.create_subprocess_exec)."""
    drop = as_nobody(settings)
    return {
        "args": [str(python), "-m", "coursehub.students", str(settings.course_dir),
                 settings.course_id, *names],
        "preexec_fn": drop, "cwd": "/",
        "env": {"PATH": f"{python.parent}:/usr/bin:/bin", "HOME": "/nonexistent",
                "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    }


def hub_users(settings: ClassSettings) -> list[str]:
    """Names of the hub's users, from its database (empty before the first start)."""
    import sqlite3

    database = settings.hub_dir / "jupyterhub.sqlite"
    if not database.exists():
        return []
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
        return [row[0] for row in connection.execute("SELECT name FROM users ORDER BY name")]


def add_students(settings: ClassSettings, python: Path, names: list[str]) -> str:
    """Put `names` (less the staff) in the gradebook, creating it; returns what it printed."""
    students = [name for name in names if name not in settings.staff]
    command = students_command(settings, python, students)
    done = subprocess.run(command.pop("args"), capture_output=True, text=True, timeout=300,
                          **command)
    if done.returncode != 0:
        raise StateError(f"could not write the class's gradebook in {settings.course_dir}:\n"
                         f"{done.stdout}{done.stderr}")
    return done.stdout.strip()
