"""One sandbox policy: everything a notebook's confined process may see and use, as data.

A `SandboxPolicy` is built once per grading worker from the run's options (`SandboxPolicy.build`),
sent to the runner host as plain JSON (`to_dict`, read back by `from_dict`, which checks every
field's type) and applied by `autograder.sandbox.confine` to each notebook's process. It is the
one place that holds the sandbox's limits, what it may read, its tmpfs sizes, its environment
and its user; `autograder.sandbox.seccomp` holds the system calls its filter denies, read here
by name. Print it:

    python -m autograder.sandbox.policy [--memory-limit 4G] [--json | --markdown]

docs/GRADING.md's table of what a notebook can and cannot do is `--markdown`'s output
(tests/test_sandbox_policy.py fails when the two differ). Only the standard library and
`autograder.units`: the sandbox's side imports it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict, dataclass, fields

from autograder.sandbox.seccomp import DENIED_CALLS, SOCKET_FAMILIES, UNCOUNTED_CALLS
from autograder.units import GiB, MiB, format_memory, parse_memory

DEFAULT_MEMORY_LIMIT = 4 * GiB  # bytes each notebook may use (the command's --memory-limit 4G)
MAX_PROCESSES = 64  # processes and threads of a notebook's uid in its user namespace
# With a cgroup, the cgroup holds the notebook's memory, and each process's address space is a
# loose backstop at this many times the limit (torch reserves far more than it uses).
ADDRESS_SPACE_FACTOR = 4
INSIDE_UID = 1000
NOBODY = 65534
USER = "student"
HOME = "/home/student"
# Read-only from the machine, when present: the system's libraries and a few files of /etc.
SYSTEM_PATHS = ("/usr", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
                "/etc/fonts", "/etc/localtime", "/etc/nsswitch.conf", "/etc/mime.types",
                "/etc/ssl/certs", "/etc/alternatives")
DEVICES = ("null", "zero", "full", "random", "urandom")
# Every variable a notebook's process starts with (PATH: this Python's bin folder, then these).
ENVIRONMENT = (("HOME", HOME), ("TMPDIR", "/tmp"), ("LANG", "C.UTF-8"),
               ("MPLCONFIGDIR", "/tmp/matplotlib"), ("PYTHONDONTWRITEBYTECODE", "1"),
               ("MPLBACKEND", "module://matplotlib_inline.backend_inline"))
SYSTEM_BIN = ("/usr/bin", "/bin")


@dataclass(frozen=True)
class SandboxPolicy:
    """What every notebook of a grading run may see and use (see the module's doc)."""

    memory_limit: int = DEFAULT_MEMORY_LIMIT  # bytes for the notebook's processes; 0: none
    confined: bool = True  # False: --no-sandbox (the limits below that need it do not hold)
    threads: int = 1  # torch and OpenMP threads of a notebook
    cell_seconds: int = 60  # CPU time a cell may take (the run's --timeout or the course's)
    notebook_seconds: int = 600  # what all its cells may take (--notebook-timeout)
    max_processes: int = MAX_PROCESSES
    # Descriptors per process (the grader's 20,000 were inherited): each socket or pipe may hold
    # kernel buffers that no process maps. torch.distributed and IPython run with far fewer.
    max_open_files: int = 1024
    max_file_bytes: int = 256 * MiB  # the largest file it may write
    tmp_bytes: int = 256 * MiB  # size of each writable tmpfs folder
    address_space_factor: int = ADDRESS_SPACE_FACTOR
    uid: int = INSIDE_UID
    user: str = USER
    home: str = HOME  # a tmpfs
    workdir: str = HOME + "/work"  # its working folder, the cwd: a copy of the lesson's data
    hostname: str = "sandbox"
    tmpfs: tuple[str, ...] = ("/tmp", HOME, "/dev/shm")
    system: tuple[str, ...] = SYSTEM_PATHS
    readonly: tuple[str, ...] = ()  # this machine's Python environment and coursekit/
    devices: tuple[str, ...] = DEVICES
    bin_path: tuple[str, ...] = ()  # this Python's bin folder, first on PATH
    environment: tuple[tuple[str, str], ...] = ENVIRONMENT
    socket_families: tuple[str, ...] = SOCKET_FAMILIES
    denied_calls: tuple[str, ...] = DENIED_CALLS  # by the seccomp filter, with EPERM
    denied_without_cgroup: tuple[str, ...] = UNCOUNTED_CALLS  # memory nothing would count

    @classmethod
    def build(cls, *, memory_limit: int = DEFAULT_MEMORY_LIMIT, confined: bool = True,
              threads: int = 1, cell_seconds: int = 60,
              notebook_seconds: int = 600) -> "SandboxPolicy":
        """The policy of a run on this machine: its limits, and the folders of this Python
        and of the course's shared package that notebooks read."""
        return cls(memory_limit=max(0, int(memory_limit)), confined=bool(confined),
                   threads=max(1, int(threads)), cell_seconds=int(cell_seconds),
                   notebook_seconds=int(notebook_seconds), readonly=readable_paths(),
                   bin_path=(os.path.dirname(sys.executable),))

    def address_space(self, cgroup: bool) -> int:
        """RLIMIT_AS of each of the notebook's processes (0: none): a loose backstop where a
        cgroup holds the memory limit, the limit itself where none does."""
        return self.memory_limit * (self.address_space_factor if cgroup else 1)

    def env(self) -> dict[str, str]:
        """The notebook's whole environment."""
        return dict(self.environment, PATH=":".join(self.bin_path + SYSTEM_BIN))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SandboxPolicy":
        """A policy from plain data (the runner host's config): every field present, each of
        its type; anything else is refused."""
        if not isinstance(data, dict):
            raise ValueError("not a sandbox policy: a JSON object is expected")
        names = [f.name for f in fields(cls)]
        if set(data) != set(names):
            raise ValueError(f"not a sandbox policy: unknown fields {sorted(set(data) - set(names))}"
                             f", missing {sorted(set(names) - set(data))}")
        values = {}
        for name in names:
            default, value = getattr(cls, name), data[name]
            if isinstance(default, bool):
                ok = isinstance(value, bool)
            elif isinstance(default, int):
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
            elif isinstance(default, str):
                ok = isinstance(value, str)
            elif name == "environment":
                ok = isinstance(value, (list, tuple)) and all(
                    isinstance(p, (list, tuple)) and len(p) == 2
                    and all(isinstance(s, str) for s in p) for p in value)
                value = tuple(tuple(p) for p in value) if ok else value
            else:
                ok = isinstance(value, (list, tuple)) and all(isinstance(s, str) for s in value)
                value = tuple(value) if ok else value
            if not ok:
                raise ValueError(f"not a sandbox policy: {name} is {value!r}")
            values[name] = value
        return cls(**values)

    def describe(self) -> str:
        """The policy in words, one limit a line."""
        memory = format_memory(self.memory_limit)
        with_cgroup = (f"{memory} for all of a notebook's processes together (a memory cgroup, "
                       f"tmpfs files included); address space "
                       f"{format_memory(self.address_space(True))} per process")
        without = (f"{format_memory(self.address_space(False))} of address space per process, "
                   f"and {memory} for all of them, measured from /proc")
        lines = [
            "The sandbox's policy" + ("" if self.confined else
                                      " (--no-sandbox: nothing below is enforced but the "
                                      "address space and the time)"),
            f"  memory:        with a cgroup, {with_cgroup}; without one, {without}",
            f"  processes:     {self.max_processes} (processes and threads, in its user namespace)",
            f"  open files:    {self.max_open_files} descriptors per process",
            f"  file size:     {format_memory(self.max_file_bytes)} at most per file",
            f"  CPU time:      {self.cell_seconds} s per cell, {self.notebook_seconds} s per "
            "notebook",
            f"  threads:       {self.threads} for torch and OpenMP",
            f"  user:          uid {self.uid} ({self.user}), no capabilities, no new privileges",
            "  tmpfs:         " + ", ".join(f"{p} ({format_memory(self.tmp_bytes)})"
                                             for p in self.tmpfs)
            + f"; working folder {self.workdir}",
            "  read-only:     " + ", ".join(self.system + self.readonly),
            "  its own:       /etc/passwd and /etc/group (root, nobody, "
            f"{self.user}), /proc, /dev/" + ", /dev/".join(self.devices),
            "  environment:   " + " ".join(f"{k}={v}" for k, v in sorted(self.env().items())),
            "  sockets:       " + ", ".join(self.socket_families) + " (its own network "
            "namespace: a loopback only)",
            "  denied calls:  " + ", ".join(self.denied_calls),
            "  without a cgroup, also denied: " + ", ".join(self.denied_without_cgroup),
        ]
        return "\n".join(lines)


def readable_paths() -> tuple[str, ...]:
    """The folders of the machine a notebook reads, besides the system's: this Python's
    environment and the course's shared package, never the course root itself (on sys.path
    when the grader runs from it)."""
    import coursekit

    package = os.path.dirname(os.path.realpath(coursekit.__file__))
    course_parent = os.path.dirname(package)
    paths = python_paths() + [package]
    return tuple(p for p in paths if os.path.realpath(p) != os.path.realpath(course_parent))


def python_paths() -> list[str]:
    """The folders this Python needs: its prefixes, and the folders on sys.path that are part
    of the installation (inside a prefix, or a site-packages folder). Not the rest of sys.path:
    `python -m` puts the folder it was started from first, and PYTHONPATH may name any folder
    of the grader's (a class's submissions, a home folder); a notebook needs none of them."""
    import site

    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                               sys.base_exec_prefix)} - {"/"}
    sites = set()
    try:
        sites |= {os.path.realpath(p) for p in site.getsitepackages()}
        sites.add(os.path.realpath(site.getusersitepackages()))
    except AttributeError:  # pragma: no cover (a virtualenv's old site.py)
        pass

    def installed(path: str) -> bool:
        real = os.path.realpath(path)
        return real in sites or any(real == p or real.startswith(p + os.sep) for p in prefixes)

    paths = set(prefixes)
    paths |= {p for p in sys.path if p and os.path.isdir(p) and installed(p)}
    return sorted(paths)


def _code(names) -> str:
    return ", ".join(f"`{name}`" for name in names)


def markdown(policy: SandboxPolicy | None = None) -> str:
    """docs/GRADING.md's table of what a notebook can and cannot do, from `policy` (the
    command's defaults when None)."""
    p = policy or SandboxPolicy()
    tmp = format_memory(p.tmp_bytes)
    etc = [path for path in p.system if path.startswith("/etc/")]
    folders = [path for path in p.tmpfs if path != p.home]
    rows = [
        ("Files",
         "read the Python environment, the system libraries (`/usr`; of `/etc`, only "
         f"{_code(etc)}; its own `/etc/passwd` and `/etc/group`, whose accounts are `root`, "
         f"`nobody` and `{p.user}`), `coursekit/`; read and write its working folder "
         f"`{p.workdir}` (a copy of the lesson's data files), {_code(folders)} (tmpfs, "
         f"{tmp} each, gone when it ends); use " + _code(f"/dev/{d}" for d in p.devices)
         + f"; write files of up to {format_memory(p.max_file_bytes)}",
         "see the course root (`solutions/`, `scenarios/`, `gradebook.db`, `submitted/`, "
         "`autograded/`, `feedback/`, the course secret), the machine's accounts, the scenario "
         "helpers' docstrings, OUT, the grading code, other students' files, your home; write "
         "anywhere else; write bytecode; keep a file for a later notebook"),
        ("Processes",
         f"start threads and processes ({p.max_processes} in all), signal and wait for its own",
         "see, signal, trace or open `/proc/<pid>/fd` of any process outside its PID namespace "
         "(the grader, the runner host, other notebooks); outlive its notebook (the namespace "
         "ends with it); `ptrace` or read another process's memory even inside"),
        ("Privileges",
         f"run as uid {p.uid} (`{p.user}`; `nobody`, or your uid, outside)",
         "hold a capability; gain one (no new privileges: set-uid programs do nothing); make a "
         "user, mount or any other namespace; enter one (`setns`); mount anything"),
        ("Network",
         "use Unix sockets and pipes between its own processes, and its own loopback "
         "(`127.0.0.1`, `::1`, in a network namespace of its own: torch.distributed over gloo)",
         "reach any network: no interface but that loopback, which is no other notebook's and "
         "not the machine's; nor an abstract Unix socket of the machine"),
        ("Kernel",
         "use ordinary system calls (files, memory, threads, signals, time); sockets of "
         f"{_code(p.socket_families)}; {p.max_open_files} descriptors per process",
         f"make the system calls the seccomp filter denies ({_code(p.denied_calls)}: keyrings, "
         "your session keyring's keys included, `io_uring`, `userfaultfd`, `bpf`, "
         "`perf_event_open`, `kexec`, kernel modules, mounting, namespaces); a socket of any "
         "other family (`AF_VSOCK`, `AF_PACKET`, ...); without a cgroup, "
         f"{_code(p.denied_without_cgroup)}; a 32-bit or x32 system call"),
        ("Time",
         "compute for each cell's limit in CPU time (all its processes together; "
         f"{p.cell_seconds} s by default, the course's `Execute.timeout`); wait up to 10 × the "
         "limit per cell in wall time; the notebook as a whole, `--notebook-timeout` at most "
         f"({p.notebook_seconds} s by default)",
         "compute past a cell's limit by switching off its own timer, by computing in a child, "
         "or by forging a cell's end (the grader counts the CPU time from outside)"),
        ("Memory",
         "hold the memory limit in all its processes (resident memory, and its tmpfs files with "
         f"a cgroup; {format_memory(p.memory_limit)} by default, `--memory-limit`); with a "
         f"cgroup, each process may reserve {p.address_space_factor} × the limit in address "
         "space, without one, the limit itself",
         "hold more: the whole notebook is stopped (\"ran out of memory\"); without a cgroup, a "
         "peak under 0.1 s can pass, each process still under the limit, and its pipes' kernel "
         "buffers are not counted"),
        ("Environment",
         "read its own variables, and only them: " + _code(sorted(dict(p.environment)))
         + ", `PATH` (this Python's `bin`, " + _code(SYSTEM_BIN) + ")",
         "read the grader's variables (tokens, paths, the course secret's location)"),
        ("Output",
         "print and display into its own autograded notebook and feedback (plain text, PNG, "
         "JPEG; shown escaped; a character UTF-8 cannot write, a lone surrogate, as `?`), up to "
         "the grader's caps",
         "reach another student's feedback or grade; have HTML, SVG, JavaScript or Markdown "
         "rendered; send more than the caps (each line is counted before it is parsed; past "
         "them the notebook is stopped); set its score (trusted code compares its observations "
         "with the reference run's); set its status or its reason (they come from the grader's "
         "record of the run, `autograder.trusted.status`, never from the notebook's text; an "
         "exception it names as an error the grader writes, `CellTimeoutError`, "
         "`DeadKernelError`, `CellNotRunError`, `CheckFailed`, `ChecksStopped`, is shown as "
         "\"... (raised by the notebook)\", and a `MemoryError` it raises is an error of its "
         "cell)"),
    ]
    lines = ["| | A notebook can | A notebook cannot |", "|---|---|---|"]
    lines += [f"| {name} | {can} | {cannot} |" for name, can, cannot in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autograder.sandbox.policy",
        description="Print the sandbox's policy: what each notebook's process may see and use.")
    parser.add_argument("--memory-limit", default=None, metavar="SIZE",
                        help="as the grade command's --memory-limit (default: 4G)")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="the policy as JSON")
    form.add_argument("--markdown", action="store_true",
                      help="docs/GRADING.md's table of what a notebook can and cannot do")
    args = parser.parse_args(argv)
    memory = DEFAULT_MEMORY_LIMIT
    if args.memory_limit is not None:
        try:
            memory = parse_memory(args.memory_limit)
        except ValueError as err:
            parser.error(f"--memory-limit: {err}")
    if args.markdown:  # the doc's table: the command's defaults, nothing of this machine
        print(markdown(SandboxPolicy(memory_limit=memory)), end="")
        return 0
    policy = SandboxPolicy.build(memory_limit=memory)
    if args.json:
        print(json.dumps(policy.to_dict(), indent=1))
    else:
        print(policy.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
