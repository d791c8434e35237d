"""Start and stop the class's JupyterHub: `make hub`, `make hub-stop` (hub/hubctl.py)."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from coursehub import settings as class_settings
from coursehub import cgroups, runtime, state
from coursehub.settings import HUB_DIR, PROXY, VENV_BIN, ClassSettings, ConfigError

PIDFILE = "hub.pid"
LOG = "jupyterhub.log"


class HubError(RuntimeError):
    pass


def ensure_proxy() -> Path:
    """configurable-http-proxy, installed by npm from hub/package-lock.json (hub/node_modules)."""
    if PROXY.exists():
        return PROXY
    npm = shutil.which("npm")
    if not npm:
        raise HubError("JupyterHub's proxy needs Node.js and npm (Node 20 or newer): install them "
                       "(Debian: `apt-get install nodejs npm`), then run `make hub` again")
    print("Installing configurable-http-proxy into hub/node_modules (npm ci)...")
    done = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                          cwd=HUB_DIR, capture_output=True, text=True)
    if done.returncode != 0 or not PROXY.exists():
        raise HubError(f"`npm ci` in {HUB_DIR} failed:\n{done.stdout}{done.stderr}")
    return PROXY


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _running_pid(settings: ClassSettings) -> int | None:
    """The process id of this class's hub if it runs (checked against its command line)."""
    pidfile = settings.hub_dir / PIDFILE
    try:
        pid = int(pidfile.read_text().strip())
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    if any(part.endswith(b"jupyterhub") for part in command) and \
            str(HUB_DIR / "jupyterhub_config.py").encode() in command:
        return pid
    return None


def _answers(settings: ClassSettings) -> bool:
    try:
        with urllib.request.urlopen(f"http://{settings.ip}:{settings.port}/hub/api/",
                                    timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def start(settings: ClassSettings, timeout: float = 180.0, echo=print) -> int:
    """Prepare the state folder and start the hub in the background; returns its process id."""
    state.require_root()
    pid = _running_pid(settings)
    if pid:
        echo(f"The class hub already runs (process {pid}) at {settings.url}")
        return pid
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the proxy binds it
        try:
            sock.bind((settings.ip, settings.port))
        except OSError:
            raise HubError(f"port {settings.port} on {settings.ip} is in use: stop what uses it "
                           f"or choose another [hub] port in {settings.config_file}") from None
    ensure_proxy()
    for warning in state.prepare(settings):
        echo(f"warning: {warning}")
    layout, why = cgroups.prepare(settings)
    if layout is not None:
        echo(f"Grading on the hub runs in cgroups (v{layout['version']}): each notebook's "
             "memory and processes are limited by the kernel (docs/HUB.md, Limits)")
    else:
        echo(f"warning: no cgroup for grading: {why}. Feedback on submit will not start, and "
             "instructors' grading has the weaker limits its warning lists (docs/HUB.md, "
             "Limits)")
    if settings.hide_repository:
        changed, warnings = state.hide_repository(keep=(settings.state_dir,))
        if changed:
            echo("Made unreadable to other accounts: "
                 + ", ".join(p.name for p in changed))
        for warning in warnings:
            echo(f"warning: {warning}")
    python = runtime.users_python(settings.state_dir / "python")
    if python.parent != VENV_BIN:
        echo(f"Users' servers run {python} (the course's packages from .venv, with a Python "
             "every account can run)")
    env = dict(os.environ)
    env.update({
        "COURSEHUB_USERS_PYTHON": str(python),
        "HUB_CONFIG": str(settings.config_file),
        "COURSEHUB_INTERNAL_PORT": str(free_port()),
        "COURSEHUB_PROXY_API_PORT": str(free_port()),
        "PATH": os.pathsep.join([str(VENV_BIN), env.get("PATH", "/usr/bin:/bin")]),
    })
    known_users = state.hub_users(settings)  # before JupyterHub opens its database
    log_path = settings.hub_dir / LOG
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [str(VENV_BIN / "jupyterhub"), "-f", str(HUB_DIR / "jupyterhub_config.py")],
            cwd=settings.hub_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
    (settings.hub_dir / PIDFILE).write_text(f"{process.pid}\n")
    # While JupyterHub starts: the gradebook, with every student the hub already knows.
    try:
        added = state.add_students(settings, python, known_users)
        if added:
            echo(added)
    except state.StateError:
        process.terminate()
        raise
    deadline = time.monotonic() + timeout
    while not _answers(settings):
        if process.poll() is not None:
            raise HubError(f"JupyterHub stopped at start (exit {process.returncode}); the end of "
                           f"{log_path}:\n{_tail(log_path)}")
        if time.monotonic() > deadline:
            process.terminate()
            raise HubError(f"JupyterHub did not answer within {timeout:.0f} s; see {log_path}:\n"
                           f"{_tail(log_path)}")
        time.sleep(0.3)
    echo(f"The class hub runs at {settings.url} (process {process.pid}, log {log_path}).")
    echo(f"Administrators ({', '.join(settings.admins)}): sign up now at {settings.url}hub/signup "
         f"(the first to sign up under an administrator's name becomes it), then approve the "
         f"others at {settings.url}hub/authorize. Instructors' formgrader: "
         f"{settings.url}hub/user-redirect/formgrader. Stop it with `make hub-stop`.")
    return process.pid


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def stop(settings: ClassSettings, timeout: float = 60.0, echo=print) -> bool:
    """Stop the hub: JupyterHub stops every user's server and its proxy, then exits."""
    pid = _running_pid(settings)
    if not pid:
        echo(f"The class hub of {settings.config_file} is not running.")
        (settings.hub_dir / PIDFILE).unlink(missing_ok=True)
        return False
    proxy = _pid_in(settings.hub_dir / "proxy.pid")
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            echo(f"JupyterHub (process {pid}) did not stop within {timeout:.0f} s; killing it")
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.2)
    # JupyterHub stops its proxy as it exits; wait for it to let go of the port.
    while proxy and _alive(proxy) and time.monotonic() < deadline:
        time.sleep(0.2)
    (settings.hub_dir / PIDFILE).unlink(missing_ok=True)
    cgroups.remove(settings)
    echo(f"The class hub stopped; its state stays in {settings.state_dir}.")
    return True


def _pid_in(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat_line.rsplit(")", 1)[1].split()[0] != "Z"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hub/hubctl.py", description=__doc__)
    parser.add_argument("command", choices=("start", "stop", "status"))
    parser.add_argument("--config", type=Path, default=None,
                        help="the class configuration (default: $HUB_CONFIG or hub/class.toml)")
    args = parser.parse_args(argv)
    try:
        settings = class_settings.load(args.config)
        if args.command == "start":
            start(settings)
        elif args.command == "stop":
            stop(settings)
        else:
            pid = _running_pid(settings)
            print(f"running (process {pid}) at {settings.url}" if pid else "not running")
    except (ConfigError, HubError, state.StateError, runtime.PythonError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0
