"""The student's own copies of the lessons, the start page, and how `make lab` opens them.

`make lab` runs `python -m coursekit.lab open`: the first time, each lesson of the release
(`notebooks/<lesson>/<lesson>.ipynb`, tracked by git) is copied to `work/<lesson>/<lesson>.ipynb`
(ignored by git), and JupyterLab opens `work/` on the start page `work/START-HERE.md`. Students
only ever edit their copies, so a `git pull` that brings corrected lessons never conflicts; the
start page says when the release of a lesson is newer than the one a copy was made from (a
SHA-256 of the released notebook is recorded at copy time in `work/.coursekit/state.json`).

`make reset LESSON=<lesson>` runs `python -m coursekit.lab reset <lesson>`: the copy goes to
`work/backups/<lesson>-<date>-<time>.ipynb`, then the release is copied again. JupyterLab's file
browser does not list `backups/`; the start page links to each backup.

The start page is rewritten whenever JupyterLab saves a lesson (a post-save hook set in
jupyter/student/jupyter_server_config.py), with each lesson's progress read from the saved
test-cell outputs of the student's copy; a small JupyterLab extension
(jupyter/student/labextensions/coursekit-start-page) reloads the open start page when it is
shown and after each save, so the student never sees old numbers.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from coursekit.course import COURSE_ROOT, START_PAGE, heading_title
from coursekit.progress import exercise_results, progress_line

STATE = Path(".coursekit") / "state.json"
LAB_STATE = Path(".coursekit") / "lab"
BACKUPS = "backups"
_LESSON_NAME = re.compile(r"^\d{2}_[a-z0-9_]+$")
_TABLE_ROW = re.compile(r"^\|\s*`(\d{2}_[a-z0-9_]+)`\s*\|\s*(.+?)\s*\|\s*$", re.M)

# JupyterLab settings a student starts with (kept in work/.coursekit/lab/settings; a setting the
# student has set is never changed): no news or update pop-ups; Markdown files (the start page)
# open rendered; the file browser gives the lesson names its whole width; a notebook starts its
# kernel without asking which one (Run All clicked while the kernel was still starting would
# otherwise open a "Select Kernel" dialog).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {
        "defaultViewers": {"markdown": "Markdown Preview"}},
    "@jupyterlab/filebrowser-extension/browser.jupyterlab-settings": {
        "showLastModifiedColumn": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "autoStartDefaultKernel": True},
}


class LabError(Exception):
    """A student's request that cannot be done; the message says why and what to do."""


@dataclass
class Lesson:
    name: str
    number: str
    title: str
    teaches: str


def release_path(lesson: str, root: Path = COURSE_ROOT) -> Path:
    return root / "notebooks" / lesson / f"{lesson}.ipynb"


def copy_path(lesson: str, work: Path) -> Path:
    return work / lesson / f"{lesson}.ipynb"


def lesson_names(root: Path = COURSE_ROOT) -> list[str]:
    """The released lessons, in order: folders of notebooks/ holding a notebook of their name."""
    release = root / "notebooks"
    if not release.is_dir():
        return []
    return sorted(p.name for p in release.iterdir() if release_path(p.name, root).is_file())


def lesson_title(notebook: dict, fallback: str) -> tuple[str, str]:
    """(number, title) from a lesson's "# Lesson 01 — Title" heading."""
    found = heading_title(notebook)
    if found is not None:
        return found
    number = fallback[:2]
    return number, fallback[3:].replace("_", " ").capitalize()


def _read_json(path: Path) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def course_intro(root: Path = COURSE_ROOT) -> tuple[str, dict[str, str]]:
    """The README's opening paragraphs and its table of what each lesson teaches."""
    try:
        text = (root / "README.md").read_text(encoding="utf-8")
    except OSError:
        return "", {}
    body = text.split("\n## ", 1)[0]
    paragraphs = [p.strip() for p in body.split("\n\n")[1:] if p.strip()]
    teaches = {name: what for name, what in _TABLE_ROW.findall(text)}
    return "\n\n".join(paragraphs), teaches


def lessons(root: Path = COURSE_ROOT) -> list[Lesson]:
    _, teaches = course_intro(root)
    found = []
    for name in lesson_names(root):
        number, title = lesson_title(_read_json(release_path(name, root)), name)
        found.append(Lesson(name, number, title, teaches.get(name, "")))
    return found


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_state(work: Path) -> dict:
    try:
        state = _read_json(work / STATE)
    except (OSError, ValueError):
        return {"lessons": {}}
    return state if isinstance(state.get("lessons"), dict) else {"lessons": {}}


def write_state(work: Path, state: dict) -> None:
    path = work / STATE
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    temporary.replace(path)


def _worked_in(path: Path) -> bool:
    """Whether a notebook was run and saved: some code cell has outputs or an execution count
    (a release has neither)."""
    try:
        cells = _read_json(path).get("cells", [])
    except (OSError, ValueError):
        return False
    return any(c.get("cell_type") == "code" and (c.get("outputs") or c.get("execution_count"))
               for c in cells)


def _git_edited_release(lesson: str, root: Path) -> bytes | None:
    """The committed release of `lesson` when the student worked in notebooks/ itself (as the
    course once had them do), else None."""
    relative = release_path(lesson, root).relative_to(root).as_posix()
    if not _worked_in(release_path(lesson, root)):
        return None
    try:
        diff = subprocess.run(["git", "-C", str(root), "diff", "--quiet", "HEAD", "--", relative],
                              capture_output=True, timeout=30)
        if diff.returncode != 1:
            return None
        shown = subprocess.run(["git", "-C", str(root), "show", f"HEAD:{relative}"],
                               capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return shown.stdout if shown.returncode == 0 else None


def prepare(work: Path, root: Path = COURSE_ROOT) -> list[str]:
    """Copy each lesson that has no copy in `work` yet, seed JupyterLab's settings, and write
    the start page. Returns what it did, one line each."""
    names = lesson_names(root)
    if not names:
        raise LabError(f"No lessons in {root / 'notebooks'}: run `make release` first.")
    work.mkdir(parents=True, exist_ok=True)
    state = read_state(work)
    said = []
    for name in names:
        target = copy_path(name, work)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        source = release_path(name, root)
        committed = _git_edited_release(name, root)
        shutil.copyfile(source, target)
        if committed is not None:
            recorded = hashlib.sha256(committed).hexdigest()
            said.append(f"{name}: your work in {source.relative_to(root)} is now your copy, "
                        f"{target}; restore the release with `git checkout -- "
                        f"{source.relative_to(root)}` so that `git pull` works again.")
        else:
            recorded = sha256(source)
            said.append(f"{name}: your copy is {target}")
        state["lessons"][name] = {"release_sha256": recorded,
                                  "copied": _dt.datetime.now().isoformat(timespec="seconds")}
    write_state(work, state)
    seed_lab_settings(work)
    write_start_page(work, root)
    return said


def seed_lab_settings(work: Path) -> Path:
    """Write the course's JupyterLab settings into work/.coursekit/lab/settings: a missing file
    is created, a file the student has holds the settings it lacks added (one JupyterLab could
    not read as plain JSON, say with comments, is left as it is)."""
    settings = work / LAB_STATE / "settings"
    for name, values in LAB_SETTINGS.items():
        target = settings / name
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            current = json.loads(target.read_text(encoding="utf-8"))
        except FileNotFoundError:
            current = {}
        except (OSError, ValueError):
            continue
        if not isinstance(current, dict):
            continue
        merged = {**values, **current}
        if merged != current or not target.exists():
            target.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    (work / LAB_STATE / "workspaces").mkdir(parents=True, exist_ok=True)
    return settings


def reset(lesson: str, work: Path, root: Path = COURSE_ROOT,
          now: _dt.datetime | None = None) -> Path | None:
    """Restore `lesson` in `work` from the release, after moving the student's copy to
    work/backups/<lesson>-<date>-<time>.ipynb. Returns the backup (None when there was no
    copy)."""
    names = lesson_names(root)
    if lesson not in names:
        close = [n for n in names if lesson and (lesson in n or n.startswith(lesson[:2]))]
        hint = f" Did you mean {close[0]}?" if len(close) == 1 else ""
        raise LabError(f"There is no lesson {lesson!r}.{hint} The lessons are: "
                       + ", ".join(names) + ". Example: make reset LESSON=" + names[0])
    target = copy_path(lesson, work)
    backup = None
    if target.exists():
        stamp = (now or _dt.datetime.now()).strftime("%Y-%m-%d-%H%M%S")
        backup = work / BACKUPS / f"{lesson}-{stamp}.ipynb"
        backup.parent.mkdir(parents=True, exist_ok=True)
        counter = 1
        while backup.exists():
            counter += 1
            backup = work / BACKUPS / f"{lesson}-{stamp}-{counter}.ipynb"
        shutil.copy2(target, backup)
    target.parent.mkdir(parents=True, exist_ok=True)
    source = release_path(lesson, root)
    temporary = target.with_suffix(".ipynb.tmp")
    shutil.copyfile(source, temporary)
    temporary.replace(target)
    state = read_state(work)
    state["lessons"][lesson] = {"release_sha256": sha256(source),
                                "copied": (now or _dt.datetime.now()).isoformat(timespec="seconds")}
    write_state(work, state)
    write_start_page(work, root)
    return backup


# --- the start page ---------------------------------------------------------------------------

def _progress(lesson: str, work: Path) -> str:
    path = copy_path(lesson, work)
    try:
        results = exercise_results(_read_json(path))
    except (OSError, ValueError):
        return "no copy yet: run `make lab`"
    return progress_line(results) if results else ""


def start_page(work: Path, root: Path = COURSE_ROOT) -> str:
    """The start page in Markdown: the course, its lessons with the student's progress, how to
    work, and which lessons have a newer release than the student's copy."""
    intro, _ = course_intro(root)
    state = read_state(work)
    rows, updates = [], []
    for lesson in lessons(root):
        link = f"[{lesson.title}]({lesson.name}/{lesson.name}.ipynb)"
        progress = _progress(lesson.name, work)
        recorded = state["lessons"].get(lesson.name, {}).get("release_sha256")
        if recorded and copy_path(lesson.name, work).exists() \
                and recorded != sha256(release_path(lesson.name, root)):
            updates.append(lesson)
            progress += " — **newer version available**"
        rows.append(f"| {lesson.number} | {link} | {lesson.teaches} | {progress} |")
    first = lessons(root)[0].name if rows else "01_..."
    parts = ["# PyTorch autograd and hooks: start here", ""]
    if intro:
        parts += [intro, ""]
    if updates:
        parts += ["## New versions of lessons", "",
                  "The course has a newer version of "
                  + ", ".join(f"lesson {u.number} ({u.title})" for u in updates)
                  + " than your copy. To switch to it, run in a terminal, in the course folder:",
                  ""]
        parts += [f"    make reset LESSON={u.name}" for u in updates]
        parts += ["", "Your current copy is kept in `work/backups/` first, so you can copy your "
                  "answers over.", ""]
    backups = sorted((work / BACKUPS).glob("*.ipynb"), reverse=True)
    if backups:
        parts += ["## Your backups", "",
                  "Copies `make reset` kept before it restored a lesson (the file browser does "
                  "not list them), newest first:", "",
                  *[f"- [{b.name}]({BACKUPS}/{b.name})" for b in backups], ""]
    parts += ["## Lessons", "",
              "Take them in order; each builds on the ones before.", "",
              "| | Lesson | You will be able to | Your progress |", "|---|---|---|---|", *rows, "",
              "Progress counts the exercises whose test cell passed in your saved notebook, and "
              "is updated each time you save a lesson (**Ctrl+S**).", "",
              "## How to work", "",
              "1. Open a lesson and run its cells in order from the top: **Shift+Enter** runs "
              "one cell, **Run ▸ Run All Cells** runs them all.",
              "2. Each exercise has an answer cell that says `# YOUR CODE HERE`. Put your code "
              "there, run the cell, then run the test cell under it: it says what passed, or "
              "what was expected, what your code gave and the likely mistake.",
              "3. Stuck? Click **Hint 1** above the answer cell (then Hint 2...). Each hint says "
              "a little more.",
              "4. If results stop making sense (a cell run out of order, an old definition), "
              "start afresh with **Kernel ▸ Restart Kernel and Run All Cells**.",
              "5. **Validate** in the notebook's toolbar runs the whole lesson in a fresh kernel "
              "and lists the exercises that do not pass yet. Graded lessons also run hidden "
              "tests on other inputs.", "",
              "## Your copies", "",
              "The lessons you open here are your own copies, in the folder `work/` of the "
              "course, made from the course's release (`notebooks/`) the first time you ran "
              "`make lab`. Git ignores `work/`, so `git pull` brings corrected lessons without "
              "touching your answers. To start a lesson over from the release, run in a "
              "terminal, in the course folder:", "",
              f"    make reset LESSON={first}", "",
              "Your copy is saved in `work/backups/` (with the date and time in its name) "
              "before it is replaced. If the lesson is open here, close it first without "
              "saving.", ""]
    return "\n".join(parts)


def write_start_page(work: Path, root: Path = COURSE_ROOT) -> Path:
    page = work / START_PAGE
    text = start_page(work, root)
    try:
        if page.read_text(encoding="utf-8") == text:
            return page
    except OSError:
        pass
    temporary = page.with_suffix(".md.tmp")
    temporary.write_text(text, encoding="utf-8")
    temporary.replace(page)
    return page


def after_save(model=None, os_path: str | None = None, contents_manager=None, **_) -> None:
    """JupyterLab's post-save hook: after a lesson of the student's copies is saved, rewrite the
    start page. Never raises (a failing hook would turn the save into an error)."""
    try:
        if not os_path or not os_path.endswith(".ipynb"):
            return
        path = Path(os_path).resolve()
        work = Path(getattr(contents_manager, "root_dir", "") or path.parent.parent).resolve()
        if path.parent.parent != work or path.stem != path.parent.name:
            return
        if (work / STATE).is_file():
            write_start_page(work, COURSE_ROOT)
    except Exception as err:  # noqa: BLE001
        log = getattr(contents_manager, "log", None)
        if log is not None:
            log.warning("coursekit: the start page was not updated: %s", err)


# --- starting JupyterLab ------------------------------------------------------------------------

def lab_command(work: Path, root: Path = COURSE_ROOT, extra: list[str] | None = None
                ) -> tuple[list[str], dict[str, str]]:
    """The command line and environment with which `make lab` starts JupyterLab on `work`."""
    from jupyter_server.services.contents.manager import ContentsManager

    bin_dir = Path(sys.executable).parent
    hidden = [*ContentsManager.class_traits()["hide_globs"].default(), BACKUPS]
    env = dict(os.environ)
    env["JUPYTER_CONFIG_PATH"] = str(root / "jupyter" / "student")
    env["PATH"] = str(bin_dir) + os.pathsep + env.get("PATH", "")
    command = [
        str(bin_dir / "jupyter"), "lab",
        f"--ServerApp.root_dir={work}",
        f"--LabApp.user_settings_dir={work / LAB_STATE / 'settings'}",
        f"--LabApp.workspaces_dir={work / LAB_STATE / 'workspaces'}",
        f"--LabApp.default_url=/lab/tree/{START_PAGE}",
        # coursekit-start-page: reloads the start page when it is shown and after a save;
        # coursekit-validate: gives Validate's summary a heading of its own
        f"--LabApp.extra_labextensions_path={root / 'jupyter' / 'student' / 'labextensions'}",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        # the file browser lists the lessons, not work/backups/ (`make reset`'s copies)
        *[f"--ContentsManager.hide_globs={pattern}" for pattern in hidden],
        *(extra or []),
    ]
    return command, env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.lab", description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=COURSE_ROOT / "work",
                        help="the folder of the student's copies (default: work/)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("prepare", help="make missing copies and write the start page")
    sub.add_parser("open", help="prepare, then start JupyterLab on the start page (other "
                   "arguments go to jupyter lab)")
    resetter = sub.add_parser("reset", help="back up a lesson's copy and restore it from the release")
    resetter.add_argument("lesson")
    args, jupyter_args = parser.parse_known_args(argv)
    if jupyter_args and args.command != "open":
        parser.error(f"unrecognized arguments: {' '.join(jupyter_args)}")
    work = args.work.resolve()
    try:
        if args.command == "reset":
            lesson = args.lesson.strip().strip("/")
            backup = reset(lesson, work)
            print(f"{lesson}: restored from the release into {copy_path(lesson, work)}.")
            if backup:
                print(f"Your previous copy is kept as {backup}.")
            print("If the lesson is open in JupyterLab, close it without saving and open it again.")
            return 0
        for line in prepare(work):
            print(line)
    except LabError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.command == "open":
        command, env = lab_command(work, extra=jupyter_args)
        print(f"Opening the course in JupyterLab: your copies are in {work}.")
        sys.stdout.flush()
        os.execvpe(command[0], command, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
