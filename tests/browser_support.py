"""Helpers for the browser tests: Debian's Chromium, a JupyterLab server, and JupyterLab's page.

The tests in tests/test_browser.py use these; nothing here is a pytest fixture, so the module
needs no conftest.py.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
ARTIFACTS = REPO_ROOT / "test-artifacts" / "browser"

# Where Debian (apt-get install chromium) and Ubuntu put Chromium.
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-gpu",
]
VIEWPORT = {"width": 1280, "height": 800}

# axe-core, the accessibility checker, from npm (hub/package-lock.json; `make test` and
# `.ci/run` install it into hub/node_modules), and the rules it runs: WCAG 2.1, levels A and AA.
AXE_SCRIPT = REPO_ROOT / "hub" / "node_modules" / "axe-core" / "axe.min.js"
WCAG_21_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]

# JupyterLab settings for a quiet page: no news or update pop-ups over the notebook, and every
# cell attached to the page (no windowing) so that cells can be found by their position.
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none",
    },
}


def chromium_path() -> str | None:
    """The Chromium executable, or None when it is not installed."""
    for candidate in CHROMIUM_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser")


def require_chromium() -> str:
    """Chromium's path; without it, skip (fail under CI=true, where it must be there)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:  # pragma: no cover - playwright is in requirements.lock
        missing = "Playwright for Python is not installed (run `make setup`)"
    else:
        path = chromium_path()
        if path:
            return path
        missing = ("Chromium is not installed: install Debian's package with "
                   "`sudo apt-get install chromium` to run the browser tests")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{missing} (CI=true: the browser tests must run)", pytrace=False)
    pytest.skip(missing)


def require_axe() -> Path:
    """axe-core's script; without it, skip (fail under CI=true, where it must be there)."""
    if AXE_SCRIPT.is_file():
        return AXE_SCRIPT
    missing = (f"axe-core is not installed ({AXE_SCRIPT} is missing): run "
               "`cd hub && npm ci` (`make test` does when npm is installed)")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{missing} (CI=true: the accessibility checks must run)", pytrace=False)
    pytest.skip(missing)


def venv_env() -> dict[str, str]:
    """The environment with the project's venv first on PATH (nbgrader runs alembic by name)."""
    env = dict(os.environ)
    env["PATH"] = str(VENV_BIN) + os.pathsep + env.get("PATH", "")
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class JupyterLab:
    """A JupyterLab server from the project's environment, serving `root_dir` on 127.0.0.1.

    `cwd` is where nbgrader's server extensions look for nbgrader_config.py; `config_path`, a
    folder of extra Jupyter configuration (JUPYTER_CONFIG_PATH, as `make lab` sets it). State that
    JupyterLab would keep in the home folder (settings, workspaces, runtime files) goes to
    `state_dir`, so runs do not see each other's layouts.

    With `command`, a function of the server's address options (port, token, ...) that returns a
    command line (for example `make lab` with those options in LAB_ARGS), that command starts the
    server; it chooses the root, the settings and the layout folders itself (`root_dir` only
    tells the tests where the files are).
    """

    def __init__(self, root_dir: Path, state_dir: Path, cwd: Path | None = None,
                 config_path: Path | None = None, log_path: Path | None = None,
                 command=None):
        self.command = command
        self.root_dir = Path(root_dir)
        self.config_path = Path(config_path) if config_path else None
        self.state_dir = Path(state_dir)
        self.cwd = Path(cwd) if cwd else self.root_dir
        self.log_path = Path(log_path) if log_path else self.state_dir / "jupyter.log"
        self.port = free_port()
        self.token = secrets.token_hex(24)
        self.process: subprocess.Popen | None = None
        self._log = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        """A URL on the server that carries the token (for the browser's first visit)."""
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}/{path.lstrip('/')}{sep}token={self.token}"

    def start(self, timeout: float = 60.0) -> "JupyterLab":
        settings = self.state_dir / "lab-settings"
        for name, values in LAB_SETTINGS.items():
            target = settings / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(values))
        for sub in ("workspaces", "runtime", "config", "data", "ipython"):
            (self.state_dir / sub).mkdir(parents=True, exist_ok=True)
        env = venv_env()
        env.update({
            "JUPYTER_RUNTIME_DIR": str(self.state_dir / "runtime"),
            "JUPYTER_CONFIG_DIR": str(self.state_dir / "config"),
            "JUPYTERLAB_WORKSPACES_DIR": str(self.state_dir / "workspaces"),
            "JUPYTER_DATA_DIR": str(self.state_dir / "data"),
            "IPYTHONDIR": str(self.state_dir / "ipython"),
            "PYTHONUNBUFFERED": "1",
        })
        if self.config_path:
            env["JUPYTER_CONFIG_PATH"] = str(self.config_path)
        address = [
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            "--ServerApp.terminals_enabled=False",
        ]
        if self.command:
            command = self.command(address)
        else:
            command = [
                str(VENV_BIN / "jupyter"), "lab", *address,
                f"--ServerApp.root_dir={self.root_dir}",
                f"--LabApp.user_settings_dir={settings}",
                f"--LabApp.workspaces_dir={self.state_dir / 'workspaces'}",
                "--LabApp.news_url=None",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            ]
            if hasattr(os, "geteuid") and os.geteuid() == 0:
                command.append("--allow-root")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "wb")
        # A session of its own, so that stop() ends the whole command (make, python, jupyter).
        self.process = subprocess.Popen(command, cwd=self.cwd, env=env, stdout=self._log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        deadline = time.monotonic() + timeout
        status = f"{self.base_url}/api/status?token={self.token}"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.process.returncode}:\n"
                                   + self.log_text())
            try:
                with urllib.request.urlopen(status, timeout=2) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer within {timeout:.0f} s:\n"
                           + self.log_text())

    def api(self, method: str, path: str) -> object:
        """Call the server's REST API (for example GET api/sessions); the parsed JSON reply."""
        request = urllib.request.Request(self.url(path), method=method)
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shut_down_kernels(self) -> None:
        """End every kernel the server runs (each lesson's kernel holds torch in memory)."""
        for session in self.api("GET", "api/sessions") or []:
            self.api("DELETE", f"api/sessions/{session['id']}")

    def log_text(self) -> str:
        if self._log:
            self._log.flush()
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server by its process id: terminate, then kill after `timeout` seconds."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            # The process group this server was started in (its id is the process's own).
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=timeout)
        if self._log:
            self._log.close()
            self._log = None


# --- JupyterLab's page ---------------------------------------------------------------------

def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


# The kernel of the notebook in view is idle: in the notebook's toolbar and in the status bar.
_KERNEL_IDLE = """() => {
    const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
    const indicator = panel && panel.querySelector('.jp-Notebook-ExecutionIndicator');
    const status = [...document.querySelectorAll('#jp-main-statusbar .jp-StatusBar-TextItem')]
        .some(item => /\\|\\s*Idle$/.test(item.textContent.trim()));
    return !!indicator && indicator.dataset.status === 'idle' && status;
}"""


def wait_for_kernel_idle(page, timeout: float = 60_000) -> None:
    """Wait until the notebook's kernel is started, connected and idle."""
    page.wait_for_function(_KERNEL_IDLE, timeout=timeout)


# True when no cell of the notebook in view waits for or is in execution (prompt [*]).
_NO_CELL_RUNNING = """() => {
    const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
    if (!panel) return false;
    const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
    return prompts.length > 0 && prompts.every(p => !p.textContent.includes('*'));
}"""


def wait_for_run(page, cell, before: str, what: str, timeout: float = 180.0) -> None:
    """Wait until `cell` has run again (an execution count other than `before`), then for the
    kernel to be idle. Fails at once, naming the failing cells, when execution stops first
    (Run All stops at an exception)."""
    start = time.monotonic()
    stopped_since = None
    while True:
        if execution_count(cell) not in ("", "*", before):
            wait_for_kernel_idle(page)
            return
        now = time.monotonic()
        if page.evaluate(_NO_CELL_RUNNING) and page.evaluate(_KERNEL_IDLE):
            stopped_since = stopped_since or now
            if now - stopped_since > 3.0:
                all_cells = cells(page)
                failing = [i for i in range(all_cells.count()) if has_error(all_cells.nth(i))]
                raise AssertionError(f"{what} did not run: execution stopped; cells showing "
                                     f"an exception: {failing}")
        else:
            stopped_since = None
        if now - start > timeout:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} to run")
        page.wait_for_timeout(100)


def cells(page):
    """Locator for the cells of the notebook in view, in the notebook's order."""
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell")


def execution_count(cell) -> str:
    """The prompt's number, '' for a cell not run (or aborted), '*' while it runs."""
    text = cell.locator(".jp-InputPrompt").inner_text()
    match = re.search(r"\[(.*?)\]", text)
    return match.group(1).strip() if match else ""


def output_text(cell) -> str:
    area = cell.locator(".jp-OutputArea")
    return area.inner_text() if area.count() else ""


# An exception as IPython shows it; torch's warnings, also on stderr, are not errors.
_EXCEPTION = re.compile(r"Traceback \(most recent call last\)|^\s*Cell In\[\d+\], line \d+", re.M)


def has_error(cell) -> bool:
    """Whether the cell shows an exception (a traceback among its stderr outputs)."""
    stderr = cell.locator(".jp-OutputArea-output[data-mime-type="
                          "'application/vnd.jupyter.stderr']")
    return any(_EXCEPTION.search(stderr.nth(i).inner_text()) for i in range(stderr.count()))


def scroll_to_top(cell) -> None:
    """Scroll the notebook so that `cell` is at the top of the view (for screenshots)."""
    cell.evaluate("el => el.scrollIntoView({block: 'start'})")


def menu(page, top: str, item: str) -> None:
    """Click a command in JupyterLab's menu bar, as a person would."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(rf"^{re.escape(top)}$")).click()
    page.locator(".lm-Menu-itemLabel",
                 has_text=re.compile(rf"^{re.escape(item)}$")).first.click()


def replace_cell_source(page, cell, text: str) -> None:
    """Click into a code cell's editor and replace all of its text with `text`."""
    editor = cell.locator(".cm-content")
    editor.click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.press("Delete")
    # insert_text types the answer as one input: CodeMirror does not re-indent it.
    page.keyboard.insert_text(text)


# --- Accessibility -------------------------------------------------------------------------

def axe_violations(page, include: list[str] | None = None,
                   exclude: list[str] | None = None) -> list[dict]:
    """The serious and critical WCAG 2.1 A/AA violations axe-core finds in the page, within
    the `include` selectors (the whole page when None) and outside the `exclude` ones. A page
    whose Content-Security-Policy forbids scripts needs a context made with bypass_csp=True."""
    page.add_script_tag(path=str(require_axe()))
    context = {"include": [[s] for s in include] if include else [["html"]],
               "exclude": [[s] for s in exclude or []]}
    options = {"runOnly": {"type": "tag", "values": WCAG_21_AA}, "resultTypes": ["violations"]}
    results = page.evaluate("([context, options]) => axe.run(context, options)",
                            [context, options])
    return [v for v in results["violations"] if v["impact"] in ("serious", "critical")]


def describe_violations(violations: list[dict], nodes: int = 5) -> str:
    """axe-core's violations as lines a person can act on: the rule, and where it failed."""
    lines = []
    for violation in violations:
        lines.append(f"{violation['id']} ({violation['impact']}, {len(violation['nodes'])} "
                     f"nodes): {violation['help']}")
        for node in violation["nodes"][:nodes]:
            summary = " ".join(node.get("failureSummary", "").split())
            lines.append(f"  {' '.join(map(str, node['target']))}: {node['html'][:160]} "
                         f"-- {summary[:240]}")
    return "\n".join(lines)


def assert_accessible(page, what: str, include: list[str] | None = None,
                      exclude: list[str] | None = None) -> None:
    """Fail, naming each rule and node, when axe-core finds a serious or critical WCAG 2.1
    A/AA violation in `what` (the part of the page `include` and `exclude` select)."""
    violations = axe_violations(page, include, exclude)
    assert not violations, (f"axe-core finds serious or critical WCAG 2.1 A/AA violations in "
                            f"{what}:\n{describe_violations(violations)}")
