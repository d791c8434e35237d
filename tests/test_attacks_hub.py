"""A hostile student on the class hub attacks what the hub's instructors run (red team).

Each test is an attack that worked before its fix."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hub" / "lib"))


def test_export_in_a_submission_folder_takes_the_course_not_the_students_files(tmp_path):
    """A student submits a folder with its own nbgrader_config.py (Python, run by whoever
    loads it) and gradebook.db (grades of their choosing); collect and autograde copy it to
    the course's submitted/<student>/<lesson>/ and autograded/<student>/<lesson>/. An
    instructor who types export there (looking at that student's work) must get the course,
    not the student's folder."""
    from autograder.nbgrader_glue.export import find_course_root

    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    (course / "gradebook.db").write_bytes(b"")
    for part in ("submitted", "autograded", "feedback"):
        lesson = course / part / "mallory" / "ps1"
        lesson.mkdir(parents=True)
        (lesson / "nbgrader_config.py").write_text("import os; os.system('id')\n")
        (lesson / "gradebook.db").write_bytes(b"SQLite format 3\0")
        assert find_course_root(lesson) == course, part
        assert find_course_root(lesson / ".." ) == course, part
    # The exchange: a student's folder in inbound is no course either.
    inbound = tmp_path / "exchange" / "c" / "inbound" / "mallory+ps1+2030-01-01+ab12"
    inbound.mkdir(parents=True)
    (inbound / "gradebook.db").write_bytes(b"")
    with pytest.raises(FileNotFoundError):
        find_course_root(inbound)
    # An ordinary course is still found from below it.
    (course / "source" / "ps1").mkdir(parents=True)
    assert find_course_root(course / "source" / "ps1") == course


def _class(base: Path):
    from coursehub import settings as class_settings

    os.chmod(base, 0o755)
    path = base / "class.toml"
    path.write_text('[hub]\nstate_dir = "state"\n[accounts]\nadmins = ["a"]\n'
                    'instructors_group = "root"\n')
    settings = class_settings.load(path)
    for folder in (settings.home_root, settings.exchange_dir / settings.course_id / "inbound",
                   settings.queue_dir / "students", settings.course_dir / "submitted"):
        folder.mkdir(parents=True, exist_ok=True)
    return settings


def _drop(*names: str) -> None:
    import grp

    for name in names:
        subprocess.run(["userdel", name], capture_output=True)
        if name in {group.gr_name for group in grp.getgrall()}:
            subprocess.run(["groupdel", name], capture_output=True)


def _as(account, *command: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), capture_output=True, text=True, user=account.pw_uid,
                          group=account.pw_gid, extra_groups=[])


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd"),
                    reason="makes system accounts (root, useradd)")
def test_a_classmate_made_again_first_never_gets_a_removed_classmates_old_ids():
    """HUB.md's way of removing a class's accounts (userdel each, homes stay; `make hub`
    makes them again as their users log in): useradd hands out the highest free ids again, so
    the student who logs in first got the old ids of another, and with them that classmate's
    home (their notebooks to read or change, a startup file that runs as them once they log
    in) until that classmate came back."""
    from coursehub import state

    alice, bob = f"ra{secrets.token_hex(3)}", f"rb{secrets.token_hex(3)}"
    base = Path(tempfile.mkdtemp(prefix="hub-redids-"))
    try:
        settings = _class(base)
        first = state.ensure_account(settings, alice)
        state.ensure_account(settings, bob)
        work = settings.home(alice) / "work.ipynb"
        work.write_text("alice's answers")
        os.chown(work, first.pw_uid, first.pw_gid)
        os.chmod(work, 0o600)
        submission = (settings.exchange_dir / settings.course_id / "inbound"
                      / f"{alice}+ps1+2030-01-01+ab12")
        submission.mkdir()
        os.chown(submission, first.pw_uid, first.pw_gid)
        _drop(alice, bob)                      # HUB.md: userdel, homes stay
        again = state.ensure_account(settings, bob)  # bob logs in first
        assert (again.pw_uid, again.pw_gid) != (first.pw_uid, first.pw_gid)
        assert again.pw_uid != first.pw_uid and again.pw_gid != first.pw_gid
        read = _as(again, "cat", str(work))
        assert read.returncode != 0 and "alice" not in read.stdout
        planted = _as(again, "touch", str(settings.home(alice) / ".bashrc"))
        assert planted.returncode != 0
        back = state.ensure_account(settings, alice)
        assert work.stat().st_uid == back.pw_uid and submission.stat().st_uid == back.pw_uid
    finally:
        _drop(alice, bob)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd"),
                    reason="makes system accounts (root, useradd)")
def test_giving_back_files_never_changes_a_file_a_link_was_swapped_in_for(monkeypatch):
    """While root gives a returning account its files back (reown), the account that holds
    its old ids (another account took them, as in test_hub_units) owns those files and runs
    at the same time: between root's look at a file and its chmod, it puts a link to a file
    of root's in the file's place, and root's chmod followed the link (the file's mode, here
    0666, on a stand-in for /etc/shadow). The swap is made as that account, at the moment a
    real race would need."""
    from coursehub import state

    name, filler = f"rc{secrets.token_hex(3)}", f"rf{secrets.token_hex(3)}"
    base = Path(tempfile.mkdtemp(prefix="hub-redrace-"))
    try:
        settings = _class(base)
        shadow = base / "shadow"  # root's, 0600
        shadow.write_text("root:$6$hash")
        os.chmod(shadow, 0o600)
        first = state.ensure_account(settings, name)
        _drop(name)
        subprocess.run(["useradd", "--no-create-home", "--uid", str(first.pw_uid),
                        "--user-group", filler], check=True, capture_output=True)
        holder = pwd.getpwnam(filler)
        home = settings.home(name)
        # What the holder of the old ids makes in the home it owns, before the account is back.
        folder, bait, link = home / "sub", home / "sub" / "f", base / "drop" / "link"
        (base / "drop").mkdir(mode=0o777)
        os.chmod(base / "drop", 0o777)
        for command in (["chmod", "0777", str(home)], ["mkdir", "-m", "0777", str(folder)],
                        ["touch", str(bait)], ["chmod", "0666", str(bait)],
                        ["ln", "-s", str(shadow), str(link)]):
            done = _as(holder, *command)
            assert done.returncode == 0, done.stderr
        real_lchown, real_chmod = os.lchown, os.chmod

        def swap() -> None:
            done = _as(holder, "mv", "-T", str(link), str(bait))
            assert done.returncode == 0, done.stderr

        def lchown(path, *args, **kwargs):  # the look and chown by path, then chmod
            real_lchown(path, *args, **kwargs)
            if str(path) == str(bait):
                swap()

        def chmod(path, *args, **kwargs):  # chown and chmod through a descriptor
            if str(path).startswith("/proc/self/fd/") and os.path.realpath(path) == str(bait):
                swap()
            real_chmod(path, *args, **kwargs)

        monkeypatch.setattr(os, "lchown", lchown)
        monkeypatch.setattr(os, "chmod", chmod)
        back = state.ensure_account(settings, name)
        assert back.pw_uid != first.pw_uid
        assert bait.is_symlink()  # the swap was made
        assert stat.S_IMODE(shadow.stat().st_mode) == 0o600
        assert shadow.stat().st_uid == 0
    finally:
        _drop(name, filler)
        shutil.rmtree(base, ignore_errors=True)
