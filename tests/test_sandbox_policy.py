"""The sandbox's one policy (`autograder.sandbox.policy`) and the one way memory sizes are read
(`autograder.units`): the table of docs/GRADING.md is the printed policy, the policy travels to
the runner host as checked data, a sandbox gets the limits its policy names, and the command
line and the class hub read a memory size alike."""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from autograder.sandbox.policy import SandboxPolicy, main, markdown
from autograder.units import GiB, MiB, format_memory, parse_memory

REPO = Path(__file__).resolve().parent.parent
BEGIN = "<!-- policy-table:"
END = "<!-- policy-table end -->"


def _documented_table() -> str:
    text = (REPO / "docs" / "GRADING.md").read_text(encoding="utf-8")
    start = text.index(BEGIN)
    start = text.index("\n", start) + 1
    return text[start:text.index(END, start)]


def test_the_documented_table_is_the_printed_policy(capsys):
    assert main(["--markdown"]) == 0
    printed = capsys.readouterr().out
    assert printed == markdown(SandboxPolicy())
    assert _documented_table() == printed, (
        "docs/GRADING.md's table differs from the sandbox's policy: paste the output of "
        "`python -m autograder.sandbox.policy --markdown` between its markers")


def test_the_table_changes_with_the_policy():
    table = markdown(SandboxPolicy())
    assert "(64 in all)" in table and "1024 descriptors per process" in table
    assert "`keyctl`" in table and "`memfd_create`" in table and "`AF_VSOCK`" in table
    other = markdown(SandboxPolicy(max_processes=32, max_open_files=512, tmp_bytes=128 * MiB))
    assert "(32 in all)" in other and "512 descriptors per process" in other
    assert "128 MiB each" in other and "256 MiB each" not in other


def test_the_policy_travels_as_data_and_comes_back_the_same():
    policy = SandboxPolicy.build(memory_limit=2 * GiB, threads=3, cell_seconds=20)
    assert SandboxPolicy.from_dict(json.loads(json.dumps(policy.to_dict()))) == policy
    assert policy.readonly and all(os.path.isabs(p) for p in policy.readonly)
    assert not any(p == str(REPO) for p in policy.readonly), "never the course root itself"
    assert str(REPO / "coursekit") in policy.readonly
    assert policy.env()["PATH"].startswith(os.path.dirname(sys.executable) + ":")


@pytest.mark.parametrize("change", [
    {"memory_limit": "4G"}, {"memory_limit": -1}, {"max_processes": True},
    {"confined": 1}, {"readonly": ["/usr", 3]}, {"environment": [["HOME"]]},
    {"uid": 1.5}, {"extra": 1},
])
def test_a_malformed_policy_is_refused(change):
    data = dict(SandboxPolicy().to_dict(), **change)
    with pytest.raises(ValueError, match="not a sandbox policy"):
        SandboxPolicy.from_dict(data)
    missing = SandboxPolicy().to_dict()
    missing.pop("uid")
    with pytest.raises(ValueError, match="missing"):
        SandboxPolicy.from_dict(missing)


def test_the_address_space_is_a_backstop_with_a_cgroup_and_the_limit_without():
    policy = SandboxPolicy(memory_limit=2 * GiB)
    assert policy.address_space(cgroup=True) == 8 * GiB
    assert policy.address_space(cgroup=False) == 2 * GiB
    assert SandboxPolicy(memory_limit=0).address_space(cgroup=True) == 0


def test_the_printed_policy_says_its_limits(capsys):
    assert main(["--memory-limit", "512M"]) == 0
    said = capsys.readouterr().out
    assert "512 MiB for all of a notebook's processes" in said and "2 GiB per process" in said
    assert "64 (processes" in said and "1024 descriptors" in said and "uid 1000" in said
    assert main(["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert SandboxPolicy.from_dict(data).memory_limit == 4 * GiB
    with pytest.raises(SystemExit):
        main(["--memory-limit", "lots"])
    assert "not a memory size: 'lots'" in capsys.readouterr().err


@pytest.mark.parametrize("text, size", [
    ("4G", 4 * GiB), ("4g", 4 * GiB), ("4GB", 4 * GiB), ("4GiB", 4 * GiB), ("4 G", 4 * GiB),
    ("512M", 512 * MiB), ("512mib", 512 * MiB), ("2.5GiB", int(2.5 * GiB)), ("3", 3 * GiB),
    ("64k", 64 << 10), ("1T", 1 << 40), ("0", 0), ("none", 0), (" off ", 0),
])
def test_a_memory_size_is_read_one_way(text, size):
    from autograder.__main__ import memory_size

    sys.path.insert(0, str(REPO / "hub" / "lib"))
    try:
        from coursehub.settings import memory_bytes
    finally:
        sys.path.remove(str(REPO / "hub" / "lib"))
    assert parse_memory(text) == size
    assert memory_size(text) == size
    assert memory_bytes(text, "class.toml: [limits] memory") == size


@pytest.mark.parametrize("text", ["4B", "4 b", "4ib", "lots", "-1G", "4X", "", "4" * 50, "1e9",
                                  "100000000T", "1025T", "0.000001k"])
def test_what_is_not_a_memory_size_is_refused_alike(text):
    import argparse

    from autograder.__main__ import memory_size

    sys.path.insert(0, str(REPO / "hub" / "lib"))
    try:
        from coursehub.settings import ConfigError, memory_bytes
    finally:
        sys.path.remove(str(REPO / "hub" / "lib"))
    with pytest.raises(ValueError, match="not a memory size"):
        parse_memory(text)
    with pytest.raises(argparse.ArgumentTypeError, match="not a memory size"):
        memory_size(text)
    with pytest.raises(ConfigError, match=r"\[limits\] memory: not a memory size"):
        memory_bytes(text, "class.toml: [limits] memory")


def test_a_memory_size_too_large_to_set_or_under_a_byte_is_refused_saying_so():
    """Red team (the ways in): "100000000T" was read as 1.1e20 bytes, which setrlimit cannot
    take: the hub started, and then every student's server failed to start; "0.000001k" was
    read as 0 bytes, which is no limit at all. Both are refused when read, saying why."""
    with pytest.raises(ValueError, match="more than 1024 TiB, more than any machine has"):
        parse_memory("100000000T")
    with pytest.raises(ValueError, match="less than one byte"):
        parse_memory("0.000001k")
    assert parse_memory("1024T") == 1 << 50 and parse_memory("0.0") == 0


def test_a_memory_size_is_printed_as_a_person_reads_it():
    assert format_memory(4 * GiB) == "4 GiB"
    assert format_memory(512 * MiB) == "512 MiB"
    assert format_memory(int(1.5 * GiB)) == "1.5 GiB"
    assert format_memory(0) == "no limit"


_LIMITS = """
    seen.update({name: resource.getrlimit(getattr(resource, name))[0]
                 for name in ("RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_NOFILE", "RLIMIT_FSIZE")})
    seen["uid"], seen["cwd"], seen["host"] = os.getuid(), os.getcwd(), os.uname().nodename
    seen["tmp"] = {f: os.statvfs(f).f_blocks * os.statvfs(f).f_frsize
                   for f in ("/tmp", "/dev/shm", "/home/student")}"""


def test_a_sandbox_gets_the_limits_its_policy_names():
    from attack_support import confined_probe

    seen = confined_probe("SandboxPolicy(memory_limit=3 << 30, max_processes=37, "
                          "max_open_files=333, max_file_bytes=5 << 20, tmp_bytes=7 << 20, "
                          "hostname='probe')", _LIMITS, "autograder-policy-probe-")
    # No cgroup was given: the address space is the memory limit itself.
    assert seen["RLIMIT_AS"] == 3 << 30
    assert (seen["RLIMIT_NPROC"], seen["RLIMIT_NOFILE"], seen["RLIMIT_FSIZE"]) == (
        37, 333, 5 << 20)
    assert seen["uid"] == 1000 and seen["cwd"] == "/home/student/work"
    assert seen["host"] == "probe"
    assert seen["tmp"] == {"/tmp": 7 << 20, "/dev/shm": 7 << 20, "/home/student": 7 << 20}


def test_the_runner_host_confines_by_the_policy_it_is_sent():
    from autograder.runner.host import Host

    policy = replace(SandboxPolicy.build(memory_limit=GiB), max_processes=12)
    host = Host({"policy": policy.to_dict()})
    try:
        assert host.policy == policy and host.memory_limit == GiB
        assert host.address_space == policy.address_space(host.cgroups)
    finally:
        shutil.rmtree(host.scratch, ignore_errors=True)
    with pytest.raises(ValueError, match="not a sandbox policy"):
        Host({"policy": dict(policy.to_dict(), max_processes="12")})
