"""The class's one configuration file (hub/class.toml): read, checked, and the paths it names."""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HUB_DIR = Path(__file__).resolve().parent.parent.parent
REPO_ROOT = HUB_DIR.parent
DEFAULT_CONFIG = HUB_DIR / "class.toml"
VENV_BIN = REPO_ROOT / ".venv" / "bin"
# configurable-http-proxy, installed by npm from hub/package-lock.json
PROXY = HUB_DIR / "node_modules" / ".bin" / "configurable-http-proxy"
# Names a hub user may have: they become system account names (useradd's rule, 32 characters).
USERNAME_PATTERN = r"^[a-z][a-z0-9_-]{0,31}$"


class ConfigError(ValueError):
    """The class configuration is wrong; the message says where and what to write instead."""


@dataclass(frozen=True)
class OnSubmit:
    """[feedback] of the class file: grading each submission as it comes (coursehub.onsubmit)."""
    enabled: bool = False
    per_hour: int = 4  # submissions of one student graded in any 60 minutes
    per_lesson: int = 10  # submissions of one student graded per lesson
    hidden_before_deadline: bool = False
    deadlines: dict[str, datetime.datetime] = field(default_factory=dict)  # lesson -> UTC
    cluster: str = ""  # a Dask scheduler's tls:// address for `grade --cluster`; "": here
    cluster_tls: tuple[str, ...] = ()  # `grade --cluster-tls CA CERT KEY`; (): Dask's config

    def deadline(self, lesson: str) -> datetime.datetime | None:
        return self.deadlines.get(lesson)


@dataclass(frozen=True)
class ClassSettings:
    config_file: Path
    ip: str
    port: int
    state_dir: Path
    admins: tuple[str, ...]
    instructors: tuple[str, ...]
    instructors_group: str
    memory_limit: int  # bytes; 0 for none
    idle_timeout: int
    cull_every: int
    hide_repository: bool = True
    course_id: str = field(default="autograd-hooks")
    on_submit: OnSubmit = field(default_factory=OnSubmit)

    # The folders inside the state folder.
    @property
    def hub_dir(self) -> Path:
        """The hub's own files: database, cookie secret, log, process id."""
        return self.state_dir / "jupyterhub"

    @property
    def queue_dir(self) -> Path:
        """Feedback on submit: the queue's state, and what each student is told about theirs."""
        return self.state_dir / "on-submit"

    @property
    def exchange_dir(self) -> Path:
        return self.state_dir / "exchange"

    @property
    def course_dir(self) -> Path:
        """nbgrader's course root for the class: gradebook, submitted/, autograded/, feedback/."""
        return self.state_dir / "course"

    @property
    def home_root(self) -> Path:
        return self.state_dir / "home"

    def home(self, name: str) -> Path:
        return self.home_root / name

    @property
    def staff(self) -> tuple[str, ...]:
        """Accounts that are not students."""
        return tuple(sorted(set(self.admins) | set(self.instructors)))

    def role(self, name: str) -> str:
        return "instructor" if name in self.instructors else "student"

    @property
    def url(self) -> str:
        return f"http://{self.ip}:{self.port}/"


def memory_bytes(text: str | int, where: str) -> int:
    """'4G', '512M', '1.5GiB' or 0 in bytes, read as the grading command reads its
    --memory-limit (`autograder.units.parse_memory`)."""
    from autograder.units import parse_memory

    if isinstance(text, int) and not isinstance(text, bool):
        if text == 0:
            return 0
        raise ConfigError(f"{where}: write the memory limit with a unit, e.g. \"4G\" (got {text})")
    try:
        return parse_memory(text)
    except ValueError as err:
        raise ConfigError(f"{where}: {err}") from None


def _names(table: dict, key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: {key} must be a list of account names, e.g. {key} = [\"ada\"]")
    bad = [v for v in value if not re.match(USERNAME_PATTERN, v)]
    if bad:
        raise ConfigError(f"{where}: {key} holds names that cannot be account names: {bad}; use "
                          "lower-case letters, digits, '-' and '_', starting with a letter")
    return tuple(value)


def _positive_int(table: dict, key: str, default: int, where: str) -> int:
    value = table.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{where}: {key} must be a whole number of seconds above 0 "
                          f"(got {value!r})")
    return value


def load(path: Path | str | None = None) -> ClassSettings:
    """Read the class configuration: `path`, else $HUB_CONFIG, else hub/class.toml."""
    path = Path(path or os.environ.get("HUB_CONFIG") or DEFAULT_CONFIG).resolve()
    if not path.is_file():
        raise ConfigError(f"no class configuration at {path}: copy hub/class.toml there or "
                          "name yours with HUB_CONFIG=/path/to/class.toml")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path} is not valid TOML: {err}") from None
    known = {"hub": {"ip", "port", "state_dir", "hide_repository"},
             "accounts": {"admins", "instructors", "instructors_group"},
             "limits": {"memory", "idle_timeout", "cull_every"},
             "feedback": {"feedback_on_submit", "per_hour", "per_lesson",
                          "hidden_before_deadline", "deadlines", "cluster",
                          "cluster_tls"}}
    for section, value in data.items():
        if section not in known or not isinstance(value, dict):
            raise ConfigError(f"{path}: unknown section [{section}]; the sections are "
                              + ", ".join(f"[{s}]" for s in known))
        unknown = set(value) - known[section]
        if unknown:
            raise ConfigError(f"{path}: [{section}] has unknown keys {sorted(unknown)}; it takes "
                              f"{sorted(known[section])}")
    hub, accounts, limits, feedback = (data.get(s, {}) for s in ("hub", "accounts", "limits",
                                                                  "feedback"))

    ip = str(hub.get("ip", "127.0.0.1"))
    try:
        ipaddress.ip_address(ip)
    except ValueError:
        raise ConfigError(f"{path}: [hub] ip = {ip!r} is not an IP address (e.g. \"127.0.0.1\")") \
            from None
    port = hub.get("port", 8000)
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise ConfigError(f"{path}: [hub] port must be a number from 1 to 65535 (got {port!r})")
    state = hub.get("state_dir", "state")
    if not isinstance(state, str) or not state.strip():
        raise ConfigError(f"{path}: [hub] state_dir must name a folder")
    state_dir = (path.parent / state).resolve()
    hide = hub.get("hide_repository", True)
    if not isinstance(hide, bool):
        raise ConfigError(f"{path}: [hub] hide_repository must be true or false (got {hide!r})")

    admins = _names(accounts, "admins", f"{path}: [accounts]")
    instructors = _names(accounts, "instructors", f"{path}: [accounts]")
    if not admins:
        raise ConfigError(f"{path}: [accounts] admins is empty; name at least one administrator, "
                          "who approves the students' sign-ups")
    group = accounts.get("instructors_group", "autograd-hooks-instructors")
    if not isinstance(group, str) or not re.match(USERNAME_PATTERN, group):
        raise ConfigError(f"{path}: [accounts] instructors_group {group!r} cannot be a group name")

    return ClassSettings(
        config_file=path, ip=ip, port=port, state_dir=state_dir, admins=admins,
        instructors=instructors, instructors_group=group,
        memory_limit=memory_bytes(limits.get("memory", "4G"), f"{path}: [limits] memory"),
        idle_timeout=_positive_int(limits, "idle_timeout", 3600, f"{path}: [limits]"),
        cull_every=_positive_int(limits, "cull_every", 300, f"{path}: [limits]"),
        hide_repository=hide, course_id=course_id(),
        on_submit=_on_submit(feedback, f"{path}: [feedback]"),
    )


def _on_submit(table: dict, where: str) -> OnSubmit:
    enabled = table.get("feedback_on_submit", False)
    hidden = table.get("hidden_before_deadline", False)
    for key, value in (("feedback_on_submit", enabled), ("hidden_before_deadline", hidden)):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {key} must be true or false (got {value!r})")
    counts = {}
    for key, default in (("per_hour", 4), ("per_lesson", 10)):
        value = table.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{where}: {key} must be a whole number above 0 (got {value!r})")
        counts[key] = value
    cluster, cluster_tls = _cluster(table, where)
    deadlines = {}
    given = table.get("deadlines", {})
    if not isinstance(given, dict):
        raise ConfigError(f"{where}: deadlines must be a table of lesson = time, e.g. "
                          "[feedback.deadlines] 01_leaf_and_intermediate = 2026-12-01T23:59:00Z")
    for lesson, moment in given.items():
        if isinstance(moment, str):
            try:
                moment = datetime.datetime.fromisoformat(moment)
            except ValueError:
                moment = None
        if not isinstance(moment, datetime.datetime):
            raise ConfigError(f"{where}: the deadline of {lesson} is not a date and time; write "
                              "e.g. 2026-12-01T23:59:00Z (UTC) or 2026-12-01T23:59:00+01:00")
        if moment.tzinfo is None:
            raise ConfigError(f"{where}: the deadline of {lesson} has no time zone; add Z for "
                              "UTC (2026-12-01T23:59:00Z) or an offset (+01:00)")
        deadlines[lesson] = moment.astimezone(datetime.timezone.utc)
    return OnSubmit(enabled=enabled, per_hour=counts["per_hour"],
                    per_lesson=counts["per_lesson"], hidden_before_deadline=hidden,
                    deadlines=deadlines, cluster=cluster, cluster_tls=cluster_tls)


def _cluster(table: dict, where: str) -> tuple[str, tuple[str, ...]]:
    """[feedback] cluster and cluster_tls: a TLS scheduler on another machine, or none."""
    cluster = table.get("cluster", "")
    if not isinstance(cluster, str):
        raise ConfigError(f"{where}: cluster must be a scheduler's address such as "
                          f"\"tls://10.0.0.5:8786\", or \"\" to grade on this machine")
    tls = table.get("cluster_tls", [])
    if not isinstance(tls, list) or len(tls) not in (0, 3) or \
            not all(isinstance(p, str) and p for p in tls):
        raise ConfigError(f"{where}: cluster_tls must be the paths of the cluster's CA, the "
                          "hub's certificate and its key: [\"ca.pem\", \"hub.pem\", "
                          "\"hub.key\"]")
    if not cluster:
        return "", ()
    scheme, _, rest = cluster.partition("://")
    host = rest.rsplit(":", 1)[0].strip("[]") if ":" in rest else ""
    if scheme != "tls" or not host:
        raise ConfigError(f"{where}: cluster = {cluster!r} must be tls://HOST:PORT: anyone who "
                          "reaches a tcp:// scheduler can attach a worker of their own, and "
                          "grading refuses it (docs/SCALE.md)")
    mine = _on_this_machine(host)
    if mine:
        raise ConfigError(f"{where}: cluster = {cluster!r} is on this machine ({mine}), where "
                          "every student's server can reach it and run code on its workers "
                          "as they grade; run the scheduler on another machine that only the "
                          "hub and the workers can reach (docs/HUB.md, docs/SCALE.md)")
    return cluster, tuple(tls)


def _on_this_machine(host: str) -> str | None:
    """Why `host` is this machine (loopback, any, or one of its addresses), or None."""
    import socket

    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return None  # not resolvable here: grading says it cannot reach it
    local = {"0.0.0.0", "::"}
    try:
        import psutil

        local |= {a.address.split("%")[0] for nic in psutil.net_if_addrs().values()
                  for a in nic if a.family in (socket.AF_INET, socket.AF_INET6)}
    except ImportError:  # pragma: no cover (psutil comes with Dask)
        pass
    for address in sorted(addresses):
        ip = ipaddress.ip_address(address.split("%")[0])
        if ip.is_loopback:
            return f"{address} is a loopback address"
        if ip.is_unspecified:
            return f"{address} is every address of this machine"
        if address in local:
            return f"{address} is an address of this machine"
    return None


def course_id(repo: Path = REPO_ROOT) -> str:
    """The course id that the repository's nbgrader_config.py sets."""
    match = re.search(r"^c\.CourseDirectory\.course_id\s*=\s*['\"]([^'\"]+)['\"]",
                      (repo / "nbgrader_config.py").read_text(), re.M)
    if not match:
        raise ConfigError(f"{repo / 'nbgrader_config.py'} sets no CourseDirectory.course_id")
    return match.group(1)
