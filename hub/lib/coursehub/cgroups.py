"""The class hub's cgroups: grading on the hub (feedback on submit's, and instructors' in their
terminals) runs in a cgroup its account may divide, so that the sandbox gives each notebook its
own memory and pids cgroup (autograder/sandbox/limits.py) and its memory limit holds.

`make hub` (as root) prepares, in the cgroup it runs in, a subtree for the class:

    <its cgroup>/coursehub-<course id>-<digest>/on-submit   nobody's, the instructors' group
    <its cgroup>/coursehub-<course id>-<digest>/instructors/<name>   that instructor's

with cgroup v1's memory and pids controllers (and cpuacct for CPU time) where they are
mounted, else with cgroup v2's memory and pids controllers enabled in each folder's
cgroup.subtree_control. Cgroup v2 lets a folder hand controllers to its children only when no
process runs in it, so there each account's processes run in a leaf (on-submit/service,
instructors/<name>/server) and the sandbox makes notebooks' cgroups beside it. Where the cgroup
`make hub` runs in has processes (a systemd unit with `Delegate=yes`, a container's root), they
move into its leaf `hub` first. What was prepared is written to <state>/cgroups.json.

Feedback on submit refuses to start without its cgroup (require_for_grading); an instructor's
server without one starts, and its grading prints the sandbox's warning.
"""

from __future__ import annotations

import errno
import grp
import hashlib
import json
import os
import pwd
import subprocess
from pathlib import Path

from coursehub.settings import ClassSettings

LAYOUT_FILE = "cgroups.json"
V1_ROOT = "/sys/fs/cgroup"
V2_ROOTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")
REQUIRED = ("memory", "pids")
OPTIONAL = ("cpuacct",)  # v1: the CPU time of a notebook's processes
DELEGATED_FILES = ("cgroup.procs", "cgroup.threads", "cgroup.subtree_control", "tasks")
# What grading sees, as the account that grades: whether it can make a notebook's cgroup.
PROBE = ("import os, sys\n"
         "from autograder.sandbox.limits import Cgroup\n"
         "group = Cgroup.create(f'coursehub-probe-{os.getpid()}', 64 << 20, 16)\n"
         "print(group.version if group else 'none')\n"
         "group and group.remove()\n"
         "sys.exit(group is None)\n")


class CgroupError(RuntimeError):
    """No cgroup for grading; the message says why and what to do."""


REFUSAL = (
    "feedback on submit needs a cgroup for grading, so that each notebook's memory limit holds "
    "(without one, memory a notebook holds in memfds, shared memory and socket buffers is "
    "counted nowhere): {why}. Run the hub as root on a machine whose cgroup v1 memory and pids "
    "controllers are mounted, or in a cgroup v2 with the memory and pids controllers delegated "
    "to it (systemd: the unit of docs/HUB.md, with Delegate=yes); or set feedback_on_submit = "
    "false in [feedback] of {config} and grade with `python -m autograder grade`.")


def _own() -> list[tuple[list[str], str]]:
    """The cgroups this process is in: (controllers, path) per hierarchy."""
    found = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        found.append((controllers.split(",") if controllers else [], path.rstrip("/")))
    return found


def _v1_bases() -> dict[str, str]:
    """Cgroup v1: the folder of this process's cgroup per controller, where mounted."""
    bases = {}
    for controllers, path in _own():
        for name in controllers:
            if name in REQUIRED + OPTIONAL and os.path.isdir(f"{V1_ROOT}/{name}{path}"):
                bases[name] = f"{V1_ROOT}/{name}{path}"
    return bases if set(REQUIRED) <= set(bases) else {}


def _v2_base() -> str | None:
    """Cgroup v2: this process's cgroup folder, where the memory and pids controllers are
    available to it."""
    for controllers, path in _own():
        if controllers:
            continue
        for root in V2_ROOTS:
            folder = root + path
            try:
                available = Path(f"{folder}/cgroup.controllers").read_text().split()
            except OSError:
                continue
            if set(REQUIRED) <= set(available):
                return folder
    return None


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _delegate(folder: str, uid: int, gid: int) -> None:
    """Hand `folder` to an account (the files cgroups' delegation names)."""
    os.chown(folder, uid, gid)
    for name in DELEGATED_FILES:
        if os.path.exists(f"{folder}/{name}"):
            os.chown(f"{folder}/{name}", uid, gid)


def _enable(folder: str) -> None:
    """Cgroup v2: give `folder`'s children the memory and pids controllers; its own processes
    move into its leaf `hub` first when the kernel refuses while they are there."""
    enabled = Path(f"{folder}/cgroup.subtree_control").read_text().split()
    if set(REQUIRED) <= set(enabled):
        return
    try:
        _write(f"{folder}/cgroup.subtree_control", " ".join(f"+{c}" for c in REQUIRED))
    except OSError as err:
        if err.errno != errno.EBUSY:
            raise
        os.makedirs(f"{folder}/hub", exist_ok=True)
        for pid in Path(f"{folder}/cgroup.procs").read_text().split():
            try:
                _write(f"{folder}/hub/cgroup.procs", pid)
            except ProcessLookupError:
                pass
        _write(f"{folder}/cgroup.subtree_control", " ".join(f"+{c}" for c in REQUIRED))


def _v2_folder(folder: str, uid: int = 0, gid: int = 0) -> str:
    os.makedirs(folder, exist_ok=True)
    if uid or gid:
        _delegate(folder, uid, gid)
    _enable(folder)
    return folder


def subtree_name(settings: ClassSettings) -> str:
    """The class's subtree: its course id and its state folder's (two classes on one machine,
    or one class's hub and its tests, never share one)."""
    digest = hashlib.sha256(str(settings.state_dir.resolve()).encode()).hexdigest()[:8]
    return f"coursehub-{settings.course_id}-{digest}"


def prepare(settings: ClassSettings) -> tuple[dict | None, str]:
    """As root, at the hub's start: the class's cgroups, written to <state>/cgroups.json.
    Returns (the layout, "") or (None, why there is none)."""
    path = settings.state_dir / LAYOUT_FILE
    path.unlink(missing_ok=True)
    nobody = pwd.getpwnam("nobody").pw_uid
    gid = grp.getgrnam(settings.instructors_group).gr_gid
    name = subtree_name(settings)
    layout: dict | None = None
    why = ""
    try:
        bases = _v1_bases()
        base = None if bases else _v2_base()
        if bases:
            layout = {"version": 1, "on-submit": {}, "instructors": {}}
            for controller, folder in bases.items():
                top = f"{folder}/{name}"
                os.makedirs(f"{top}/instructors", exist_ok=True)
                os.makedirs(f"{top}/on-submit", exist_ok=True)
                _delegate(f"{top}/on-submit", nobody, gid)
                layout["on-submit"][controller] = f"{top}/on-submit"
                layout["instructors"][controller] = f"{top}/instructors"
        elif base is not None:
            _enable(base)
            top = _v2_folder(f"{base}/{name}")
            layout = {"version": 2, "on-submit": _v2_folder(f"{top}/on-submit", nobody, gid),
                      "instructors": _v2_folder(f"{top}/instructors")}
        else:
            why = ("this machine offers no cgroup with the memory and pids controllers to the "
                   "hub (neither cgroup v1's mounted under /sys/fs/cgroup nor cgroup v2's "
                   "available in the hub's own cgroup)")
    except OSError as err:
        layout, why = None, f"the hub could not set up its cgroups ({err})"
    if layout is not None:
        path.write_text(json.dumps(layout, indent=1))
        os.chmod(path, 0o644)
    return layout, why


def remove(settings: ClassSettings) -> None:
    """As root, once the hub has stopped: remove the class's cgroups where nothing runs in them
    any more (a folder something still runs in stays, and is used again at the next start)."""
    layout = load(settings)
    if layout is None:
        return
    places = [layout["on-submit"], layout["instructors"]]
    folders = [folder for place in places
               for folder in (place.values() if isinstance(place, dict) else [place])]
    for folder in folders + sorted({os.path.dirname(folder) for folder in folders}):
        for inner, _, _ in sorted(os.walk(folder), key=lambda step: -len(step[0])):
            try:
                os.rmdir(inner)
            except OSError:
                pass
    (settings.state_dir / LAYOUT_FILE).unlink(missing_ok=True)


def load(settings: ClassSettings) -> dict | None:
    try:
        return json.loads((settings.state_dir / LAYOUT_FILE).read_text())
    except (OSError, ValueError):
        return None


def enter(folders: list[str]) -> None:
    """Move this process into `folders` (as root; an instructor's server does it in its
    preexec_fn, before it becomes the instructor)."""
    for folder in folders:
        _write(f"{folder}/cgroup.procs", str(os.getpid()))


def account_place(layout: dict, name: str, uid: int, gid: int) -> list[str]:
    """As root: the cgroup folders an instructor's server runs in (made and handed to them)."""
    if layout["version"] == 1:
        places = []
        for folder in layout["instructors"].values():
            os.makedirs(f"{folder}/{name}", exist_ok=True)
            _delegate(f"{folder}/{name}", uid, gid)
            places.append(f"{folder}/{name}")
        return places
    mine = _v2_folder(f"{layout['instructors']}/{name}", uid, gid)
    os.makedirs(f"{mine}/server", exist_ok=True)
    _delegate(f"{mine}/server", uid, gid)
    return [f"{mine}/server"]


def require_for_grading(settings: ClassSettings, python: Path) -> str:
    """Feedback on submit, at its start (as root): move this service into its cgroup and check
    that its grading, as nobody, can make a notebook's cgroup there; its steps inherit it.
    Returns the cgroup's folder; ends the service with the reason and what to do otherwise."""
    from coursehub.state import as_nobody

    def refuse(why: str) -> SystemExit:
        return SystemExit("coursehub.onsubmit: " +
                          REFUSAL.format(why=why, config=settings.config_file))

    layout = load(settings)
    if layout is None:
        raise refuse("the hub set up none at its start (`make hub` says why)")
    try:
        if layout["version"] == 1:
            folders = list(layout["on-submit"].values())
        else:
            folders = [f"{layout['on-submit']}/service"]
            os.makedirs(folders[0], exist_ok=True)
        enter(folders)
    except OSError as err:
        raise refuse(f"the service could not join its cgroup ({err})") from None
    done = subprocess.run([str(python), "-c", PROBE], preexec_fn=as_nobody(settings),
                          cwd=settings.course_dir, capture_output=True, text=True, timeout=120,
                          env={"PATH": f"{python.parent}:/usr/bin:/bin", "HOME": "/nonexistent",
                               "PYTHONSAFEPATH": "1", "LANG": "C.UTF-8"})
    if done.returncode:
        raise refuse(f"in {folders[0]}, grading (as nobody) cannot make a notebook's cgroup: "
                     + (done.stdout + done.stderr).strip()[-300:])
    print(f"coursehub.onsubmit: grading runs in the cgroup {folders[0]} (cgroup "
          f"v{layout['version']}): each notebook's memory and processes are limited by the "
          "kernel", flush=True)
    return folders[0]
