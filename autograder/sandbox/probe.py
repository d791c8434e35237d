"""Whether the grader's sandbox can run on this machine, asked on the trusted side.

`check_available()` really forks a process and confines it (`confine.confine`), then says in
words what is missing when that fails (a sysctl, a capability, AppArmor), and what to do.
The grader asks it before it forks any notebook (`autograder.grading`), a cluster's worker
before it says it can grade (`autograder.dispatch.cluster_worker`), and `make setup` through
`python -m autograder.sandbox.probe --setup-note`, which prints one line that all is ready or
a note for instructors (`setup_note`). Nothing that runs beside student code imports this
module (tests/test_layout.py gives it a stage above the sandbox's own).
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile

from autograder.sandbox.confine import confine
from autograder.sandbox.policy import INSIDE_UID, SandboxPolicy
from autograder.sandbox.syscalls import SYSCALLS

CAP_SYS_ADMIN = 21
PROBE_ENV = "AUTOGRADER_SANDBOX_PROBE"  # "fail": check_available() fails (tests)


def check_available() -> str | None:
    """None when this machine can confine notebooks; otherwise what is missing and what to do."""
    if not sys.platform.startswith("linux"):
        return "The sandbox needs Linux (user, PID, mount and network namespaces)."
    if platform.machine() not in SYSCALLS:
        return f"The sandbox does not know this processor ({platform.machine()})."
    # For tests of the set-up note: the probe then fails as if the kernel refused.
    simulated = os.environ.get(PROBE_ENV, "").strip().lower() == "fail"
    root = tempfile.mkdtemp(prefix="autograder-probe-")
    os.chmod(root, 0o755)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (measured by the exit status)
        code = 1
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            if simulated:
                os._exit(1)
            confine(SandboxPolicy(memory_limit=0), root)
            code = 0 if os.getuid() == INSIDE_UID and os.path.isdir("/proc/self") else 1
        except BaseException:  # noqa: BLE001 (whatever fails, this machine cannot confine)
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    try:
        os.rmdir(root)
    except OSError:
        pass
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return None
    hints = []
    try:
        if int(open("/proc/sys/user/max_user_namespaces").read()) == 0:
            hints.append("user namespaces are disabled: "
                         "`sudo sysctl -w user.max_user_namespaces=15000`")
    except (OSError, ValueError):
        pass
    try:
        if open("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").read().strip() == "1":
            hints.append("AppArmor restricts unprivileged user namespaces (as Ubuntu 24.04 "
                         "does): `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`"
                         ", or give this Python an AppArmor profile that allows `userns,`")
    except OSError:
        pass
    try:
        if open("/proc/sys/kernel/unprivileged_userns_clone").read().strip() == "0":
            hints.append("`sudo sysctl -w kernel.unprivileged_userns_clone=1`")
    except OSError:
        pass
    if os.geteuid() == 0 and not _has_capability(CAP_SYS_ADMIN):
        hints.append("the grader runs as root without CAP_SYS_ADMIN (a container's default): "
                     "run it as an ordinary user, which needs only user namespaces, or give "
                     "the container CAP_SYS_ADMIN (Docker: `--cap-add SYS_ADMIN`)")
    hint = "; ".join(hints) or ("allow user namespaces for this user (in a container, run it "
                                "with user namespaces allowed, e.g. Docker's "
                                "`--security-opt seccomp=unconfined`)")
    return ("This machine does not let the grader create the namespaces its sandbox needs "
            f"(user, mount, PID, network): {hint}. Or grade with --no-sandbox, which is as "
            "unsafe as plain nbgrader."
            + (f" (Simulated: {PROBE_ENV}=fail is set.)" if simulated else ""))


def _has_capability(number: int) -> bool:
    try:
        for line in open("/proc/self/status"):
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> number & 1)
    except (OSError, ValueError, IndexError):
        pass
    return True


def setup_note() -> str | None:
    """What `make setup` tells an instructor when this machine cannot confine notebooks
    (None when it can). Never an error: students set up the same way and need no sandbox."""
    try:
        problem = check_available()
    except Exception as err:  # noqa: BLE001 (a note, whatever happens)
        problem = f"The sandbox's probe failed: {err}."
    if problem is None:
        return None
    return ("Note for instructors (students can ignore it: `make lab` does not need it): "
            "`make grade` runs each notebook in a sandbox, and it cannot run on this machine, "
            "so grading would stop before it starts. " + problem + " README.md (For "
            "instructors) says what the sandbox needs.")


if __name__ == "__main__":  # `make setup`: one line that all is ready, or a note
    if sys.argv[1:] == ["--setup-note"]:
        print(setup_note() or "Ready: the course's environment (.venv) is set up, and the "
              "grader's sandbox runs on this machine.")
