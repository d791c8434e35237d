"""JupyterHub's configuration for the class, from hub/class.toml (hub/jupyterhub_config.py)."""

from __future__ import annotations

import asyncio
import os
import pwd
import resource
import signal
import sys
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner
from traitlets import Integer

from coursehub import cgroups, state
from coursehub.auth import ClassAuthenticator
from coursehub.startpage import START_PAGE
from coursehub.settings import (HUB_DIR, PROXY, REPO_ROOT, USERNAME_PATTERN, VENV_BIN,
                                ClassSettings)

# Files each role's servers create: instructors share the course folder through their group.
UMASK = {"instructor": 0o007, "student": 0o077}


class ClassSpawner(LocalProcessSpawner):
    """LocalProcessSpawner with the class's limits: each process of the server (kernels
    included) gets `memory_limit` bytes of address space (an instructor's with a cgroup for
    grading: as its soft limit only), files it creates get the role's
    permissions (umask), and it starts in its notebook folder (where terminals open). When the
    server stops, so does every process of its account (kernels, anything left running)."""

    memory_limit = Integer(0, config=True, help="RLIMIT_AS of each process, in bytes (0: none)")
    umask = Integer(0o077, config=True, help="umask of the server and what it starts")
    cgroup_folders: list[str] = []  # an instructor's: where their grading makes its cgroups

    def make_preexec_fn(self, name):
        become_user = super().make_preexec_fn(name)
        limit, umask = self.memory_limit, self.umask
        folder, places = self.notebook_dir, list(self.cgroup_folders)

        def preexec():
            if places:  # as root still: the server and what it starts run there
                cgroups.enter(places)
            os.umask(umask)
            if limit:  # an instructor's grading in their cgroup: the sandbox gives each
                # notebook more address space than memory (it counts memory in the cgroup),
                # so the hard limit is left for it to set
                hard = resource.RLIM_INFINITY if places else limit
                resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
            become_user()
            if folder:
                os.chdir(folder)

        return preexec

    async def stop(self, now=False):
        await super().stop(now=now)
        await end_processes_of(self.user.name, self.log)


def _pids_of(uid: int) -> list[int]:
    """Processes (not zombies) whose real uid is `uid`."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"{entry.path}/status") as status:
                    fields = dict(line.split(":", 1) for line in status if ":" in line)
            except OSError:
                continue
            if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith("Z"):
                pids.append(int(entry.name))
    return pids


async def end_processes_of(name: str, log, grace: float = 5.0) -> None:
    """Terminate, then kill, every process of the class account `name` (its accounts run
    nothing but their server and what it started)."""
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    if uid < 1000:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _pids_of(uid)
        if not pids:
            return
        log.info("Ending %d process(es) left by %s (%s)", len(pids), name, sig.name)
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        for _ in range(int(grace * 10)):
            if not _pids_of(uid):
                return
            await asyncio.sleep(0.1)


def users_python() -> Path:
    """The Python of users' servers (coursehub.runtime; `make hub` passes it on)."""
    return Path(os.environ.get("COURSEHUB_USERS_PYTHON", str(VENV_BIN / "python")))


def make_pre_spawn_hook(settings: ClassSettings):
    """Before a server starts: its system account and home, and the role's environment."""
    users_bin = users_python().parent
    background: set[asyncio.Future] = set()

    async def pre_spawn_hook(spawner) -> None:
        name = spawner.user.name
        if settings.hide_repository:  # again: what was made since, on a file system without ACLs
            changed, _ = state.hide_repository(REPO_ROOT, keep=(settings.state_dir,))
            if changed:
                spawner.log.warning("Made unreadable to other accounts: %s",
                                    ", ".join(p.name for p in changed))
        try:
            account = state.ensure_account(settings, name)
        except state.StateError as err:
            raise RuntimeError(str(err)) from None
        role = settings.role(name)
        spawner.umask = UMASK[role]
        spawner.environment = {**spawner.environment, **{
            "COURSE_ROLE": role,
            "COURSE_ID": settings.course_id,
            "COURSE_REPOSITORY": str(REPO_ROOT),
            "COURSE_EXCHANGE": str(settings.exchange_dir),
            "PATH": os.pathsep.join([str(users_bin), "/usr/local/bin", "/usr/bin", "/bin"]),
            "SHELL": account.pw_shell or "/bin/bash",
        }}
        if role == "instructor":
            spawner.environment["COURSE_ROOT"] = str(settings.course_dir)
            # Python puts the working folder first on sys.path (`python -m autograder` run
            # from the course folder), and the grader lets sandboxed notebooks read every
            # folder on its sys.path: keep the course folder (solutions, scenarios, the
            # course's secret, the gradebook) off it.
            spawner.environment["PYTHONSAFEPATH"] = "1"
            spawner.notebook_dir = str(settings.course_dir)
            layout = cgroups.load(settings)
            if layout is not None:  # their grading's notebooks get the sandbox's cgroups
                try:
                    spawner.cgroup_folders = cgroups.account_place(
                        layout, name, account.pw_uid, account.pw_gid)
                except OSError as err:
                    spawner.log.warning("No cgroup for %s's grading: %s", name, err)
        else:
            spawner.notebook_dir = account.pw_dir
            spawner.default_url = f"/lab/tree/{START_PAGE}"
            if settings.on_submit.enabled:  # what feedback on submit says of their submissions
                spawner.environment["COURSE_SUBMIT_STATUS"] = str(
                    settings.queue_dir / "students" / f"{name}.json")
            if name not in settings.staff:  # in the background: the server need not wait
                task = asyncio.ensure_future(_add_student(spawner.log, name))
                background.add(task)
                task.add_done_callback(background.discard)

    async def _add_student(log, name: str) -> None:
        command = state.students_command(settings, users_python(), [name])
        process = await asyncio.create_subprocess_exec(
            *command.pop("args"), stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, **command)
        output, _ = await process.communicate()
        if process.returncode:
            log.error("Could not add %s to the gradebook: %s", name,
                      output.decode(errors="replace"))

    return pre_spawn_hook


def landing_url(handler) -> str:
    """Where the hub sends a user after login or from its root: an administrator to the
    sign-ups to approve; others to their server (the hub's default, for '')."""
    user = handler.current_user
    return f"{handler.hub.base_url}authorize" if user is not None and user.admin else ""


def configure(c, settings: ClassSettings) -> None:
    """Fill JupyterHub's config object `c`."""
    hub_dir = settings.hub_dir
    internal_port = int(os.environ.get("COURSEHUB_INTERNAL_PORT", settings.port + 1))
    api_port = int(os.environ.get("COURSEHUB_PROXY_API_PORT", settings.port + 2))

    # Where it listens, and where it keeps its state.
    c.JupyterHub.bind_url = f"http://{settings.ip}:{settings.port}"
    c.JupyterHub.hub_ip = "127.0.0.1"
    c.JupyterHub.hub_port = internal_port
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{api_port}"
    c.ConfigurableHTTPProxy.command = [str(PROXY)]
    c.ConfigurableHTTPProxy.pid_file = str(hub_dir / "proxy.pid")
    c.JupyterHub.db_url = "sqlite:///" + str(hub_dir / "jupyterhub.sqlite")
    c.JupyterHub.cookie_secret_file = str(hub_dir / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(hub_dir / "jupyterhub.pid")

    # Accounts: sign up at /hub/signup; an administrator approves each at /hub/authorize.
    c.JupyterHub.authenticator_class = ClassAuthenticator
    c.NativeAuthenticator.open_signup = False
    c.NativeAuthenticator.minimum_password_length = 8
    c.NativeAuthenticator.check_common_password = True
    c.NativeAuthenticator.allowed_failed_logins = 5
    c.NativeAuthenticator.seconds_before_next_try = 60
    c.Authenticator.admin_users = set(settings.admins)
    # Approval by an administrator is the gate; every approved account may log in.
    c.Authenticator.allow_all = True
    c.Authenticator.username_pattern = USERNAME_PATTERN
    # Administrators land where they approve sign-ups; everyone else on their own server.
    c.JupyterHub.default_url = landing_url

    # Servers: JupyterLab as each user's own system account, in the course's environment.
    c.JupyterHub.spawner_class = ClassSpawner
    c.Spawner.cmd = [str(users_python()), "-m", "coursehub.singleuser"]
    # hub/lib holds only this package: it is on the servers' path, the state folder is not.
    c.Spawner.environment = {"PYTHONPATH": str(HUB_DIR / "lib")}
    c.Spawner.default_url = "/lab"
    c.Spawner.http_timeout = 120
    c.Spawner.start_timeout = 120
    c.ClassSpawner.memory_limit = settings.memory_limit
    c.Spawner.mem_limit = settings.memory_limit or None
    c.Spawner.pre_spawn_hook = make_pre_spawn_hook(settings)

    # Idle servers stop (their files stay).
    c.JupyterHub.services = [{
        "name": "idle-culler",
        "command": [sys.executable, "-m", "jupyterhub_idle_culler",
                    f"--timeout={settings.idle_timeout}", f"--cull-every={settings.cull_every}"],
    }]
    if settings.on_submit.enabled:  # each submission graded and its feedback released
        c.JupyterHub.services.append({
            "name": "feedback-on-submit",
            "command": [sys.executable, "-m", "coursehub.onsubmit", "serve",
                        "--config", str(settings.config_file), "--python", str(users_python())],
            "environment": {"PYTHONPATH": str(HUB_DIR / "lib")},
        })
    c.JupyterHub.load_roles = [{
        "name": "idle-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    }]
    c.JupyterHub.cleanup_servers = True
    c.JupyterHub.log_level = os.environ.get("COURSEHUB_LOG_LEVEL", "INFO")
