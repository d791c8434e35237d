"""The dependency files agree: requirements.txt, the lock and environment.yml name the same versions."""

import re

import pytest

from conftest import COURSE_ROOT

pytestmark = pytest.mark.fast

PIN = re.compile(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s;#]+)")


def pins(lines) -> dict[str, str]:
    found = {}
    for line in lines:
        match = PIN.match(line.strip())
        if match:
            found[match.group(1).lower().replace("_", "-")] = match.group(2)
    return found


def requirement_lines() -> list[str]:
    return [line for line in (COURSE_ROOT / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def test_every_direct_requirement_is_pinned_exactly():
    lines = requirement_lines()
    assert len(pins(lines)) == len(lines), f"unpinned requirement in {lines}"
    assert pins(lines)["torch"] == "2.13.0"


def test_lock_holds_every_direct_requirement_at_its_version():
    locked = pins((COURSE_ROOT / "requirements.lock").read_text().splitlines())
    for name, version in pins(requirement_lines()).items():
        assert locked.get(name) == version, f"{name}: requirements.txt {version}, lock {locked.get(name)}"
    assert all(PIN.match(line) for line in (COURSE_ROOT / "requirements.lock").read_text().splitlines()
               if line.strip() and not line.startswith("#")), "the lock must pin every package"


def test_environment_yml_names_the_same_versions():
    text = (COURSE_ROOT / "environment.yml").read_text()
    conda_pins = pins(re.sub(r"^\s*-\s*", "", line) for line in text.splitlines())
    assert conda_pins == pins(requirement_lines())
    assert re.search(r"^\s*-\s*python=3\.11\s*$", text, re.M)


def test_no_installed_package_asks_for_another_torch():
    """Any other torch requirement would pull a CUDA build of several GB."""
    from importlib.metadata import distributions

    from packaging.requirements import Requirement

    conflicts = []
    for dist in distributions():
        for spec in dist.requires or []:
            requirement = Requirement(spec)
            if requirement.name == "torch" and not requirement.specifier.contains("2.13.0"):
                conflicts.append(f"{dist.metadata['Name']} requires {spec}")
    assert not conflicts, conflicts
    locked = pins((COURSE_ROOT / "requirements.lock").read_text().splitlines())
    assert "torchvision" not in locked and "torchaudio" not in locked
