"""The course on Kubernetes, checked as far as one machine can: hub/values.yaml for the
zero-to-jupyterhub chart, and hub/Dockerfile's steps run as a shell script."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml
from traitlets.config import Config

from conftest import COURSE_ROOT
from test_environment import pins

HUB = COURSE_ROOT / "hub"
VALUES = HUB / "values.yaml"
DOCKERFILE = HUB / "Dockerfile"

# Keys of the chart's values that hub/values.yaml relies on, with the types the chart allows,
# from zero-to-jupyterhub-k8s's jupyterhub/values.schema.yaml at commit 48ea50e3 (July 2026,
# chart 4.4.0, JupyterHub 5.5.0). FREE_FORM keys take any content the chart passes on as it is.
DOCUMENTED = {
    "hub.config": "object",
    "hub.db.type": "string",  # sqlite-pvc, sqlite-memory, mysql, postgres, other
    "hub.db.pvc.storage": "string",
    "hub.concurrentSpawnLimit": "integer",
    "hub.extraConfig": "object",
    "singleuser.image.name": "string",
    "singleuser.image.tag": "string",
    "singleuser.image.pullPolicy": "string",
    "singleuser.cmd": "array|string",
    "singleuser.defaultUrl": "string",
    "singleuser.uid": "integer",
    "singleuser.fsGid": "integer",
    "singleuser.cpu.guarantee": "number",
    "singleuser.cpu.limit": "number",
    "singleuser.memory.guarantee": "number|string",
    "singleuser.memory.limit": "number|string",
    "singleuser.storage.type": "string",  # dynamic, static, none
    "singleuser.storage.capacity": "string",
    "singleuser.storage.homeMountPath": "string",
    "singleuser.extraEnv": "object|array",
    "singleuser.startTimeout": "integer",
    "singleuser.networkPolicy.egress": "array",
    "cull.enabled": "boolean",
    "cull.timeout": "integer",
    "cull.every": "integer",
    "cull.maxAge": "integer",
    "cull.users": "boolean",
    "scheduling.userScheduler.enabled": "boolean",
    "scheduling.podPriority.enabled": "boolean",
    "scheduling.userPlaceholder.enabled": "boolean",
    "scheduling.userPlaceholder.replicas": "integer",
    "scheduling.userPods.nodeAffinity.matchNodePurpose": "string",  # ignore, prefer, require
    "prePuller.hook.enabled": "boolean",
    "prePuller.continuous.enabled": "boolean",
    "proxy.service.type": "string",
    "proxy.https.enabled": "boolean",
    "proxy.https.hosts": "array",
    "proxy.https.letsencrypt.contactEmail": "string",
}
FREE_FORM = {"hub.config", "hub.extraConfig", "singleuser.extraEnv"}
ENUMS = {
    "hub.db.type": {"sqlite-pvc", "sqlite-memory", "mysql", "postgres", "other"},
    "singleuser.storage.type": {"dynamic", "static", "none"},
    "singleuser.image.pullPolicy": {"Always", "IfNotPresent", "Never"},
    "scheduling.userPods.nodeAffinity.matchNodePurpose": {"ignore", "prefer", "require"},
    "proxy.service.type": {"ClusterIP", "NodePort", "LoadBalancer", "ExternalName"},
}
JSON_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "integer": int,
              "number": (int, float)}


def values() -> dict:
    return yaml.safe_load(VALUES.read_text())


def leaf_keys(tree: dict, prefix: str = "") -> dict[str, object]:
    """Dotted paths of `tree`'s values, stopping at the free-form keys."""
    found = {}
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and path not in FREE_FORM:
            found.update(leaf_keys(value, path))
        else:
            found[path] = value
    return found


def _of_type(value, types_: str) -> bool:
    for name in types_.split("|"):
        expected = JSON_TYPES[name]
        if isinstance(value, expected) and not (name in ("integer", "number")
                                                and isinstance(value, bool)):
            return True
    return False


def test_values_use_only_documented_keys_of_the_chart():
    used = leaf_keys(values())
    undocumented = sorted(set(used) - set(DOCUMENTED))
    assert not undocumented, f"keys the chart does not document: {undocumented}"
    for path, value in used.items():
        assert _of_type(value, DOCUMENTED[path]), f"{path}: {value!r} is not {DOCUMENTED[path]}"
        if path in ENUMS:
            assert value in ENUMS[path], f"{path}: {value!r} not one of {sorted(ENUMS[path])}"


def test_leaf_keys_finds_a_key_the_chart_does_not_have():
    """The check above would see a misspelt or invented key."""
    broken = values()
    broken["singleuser"]["memory"]["guarantees"] = "1G"
    broken["cull"]["idleTimeout"] = 60
    assert {"singleuser.memory.guarantees", "cull.idleTimeout"} <= \
        set(leaf_keys(broken)) - set(DOCUMENTED)


def test_hub_config_names_real_traits():
    """hub.config sets traitlets of JupyterHub and NativeAuthenticator (the chart passes them
    to the hub as they are): each must be a configurable trait of the installed class."""
    from jupyterhub.app import JupyterHub
    from jupyterhub.auth import Authenticator
    from nativeauthenticator import NativeAuthenticator

    classes = {"JupyterHub": JupyterHub, "Authenticator": Authenticator,
               "NativeAuthenticator": NativeAuthenticator}
    for name, settings in values()["hub"]["config"].items():
        assert name in classes, f"hub.config.{name}: not a class this file should configure"
        traits = classes[name].class_traits(config=True)
        for trait in settings:
            assert trait in traits, f"hub.config.{name}.{trait} is not a configurable trait"


def test_student_limits_and_culling():
    single = values()["singleuser"]
    assert single["memory"]["guarantee"] and single["memory"]["limit"] == "4G"
    assert 0 < single["cpu"]["guarantee"] <= single["cpu"]["limit"]
    cull = values()["cull"]
    assert cull["enabled"] and cull["timeout"] > 0 and cull["every"] > 0
    # The image's entry point, and the course's environment inside the image.
    assert single["cmd"] == ["python", "-m", "coursehub.singleuser"]
    assert single["extraEnv"]["COURSE_REPOSITORY"] == "/opt/course"


class _Group:
    def __init__(self, name):
        self.name = name


def _spawner(name: str, groups: list[str]):
    return types.SimpleNamespace(
        user=types.SimpleNamespace(name=name, groups=[_Group(g) for g in groups]),
        environment={}, volumes=[], volume_mounts=[], notebook_dir=None, extra_labels={},
        cpu_guarantee=None, cpu_limit=None, mem_guarantee=None, mem_limit=None)


def _extra_config() -> Config:
    config = Config()
    code = values()["hub"]["extraConfig"]["course"]
    # The chart's own extraConfig, run as the hub runs it (the chart is the repository's).
    exec(compile(code, "hub.extraConfig.course", "exec"), {"c": config})  # noqa: S102
    return config


def _pre_spawn_hook():
    return _extra_config().KubeSpawner.pre_spawn_hook


def test_extra_config_sends_administrators_to_the_sign_ups():
    landing = _extra_config().JupyterHub.default_url

    def handler(admin):
        return types.SimpleNamespace(current_user=types.SimpleNamespace(admin=admin),
                                     hub=types.SimpleNamespace(base_url="/hub/"))

    assert landing(handler(True)) == "/hub/authorize" and landing(handler(False)) == ""


def test_extra_config_gives_each_role_its_volumes():
    hook = _pre_spawn_hook()
    student = _spawner("ada", [])
    hook(student)
    assert student.environment["COURSE_ROLE"] == "student"
    assert student.default_url == "/lab/tree/START-HERE.md"  # the start page
    mounts = {m["mountPath"]: m for m in student.volume_mounts}
    base = "/srv/exchange/autograd-hooks"
    assert set(mounts) == {f"{base}/outbound", f"{base}/feedback", f"{base}/inbound"}
    assert mounts[f"{base}/outbound"]["readOnly"] and mounts[f"{base}/feedback"]["readOnly"]
    # KubeSpawner fills in the hub's own user name; username_pattern keeps it a plain name.
    assert mounts[f"{base}/inbound"]["subPath"] == "inbound/{unescaped_username}"
    pattern = values()["hub"]["config"]["Authenticator"]["username_pattern"]
    assert re.fullmatch(pattern, "ada_l-2") and not re.fullmatch(pattern, "..")
    assert not mounts[f"{base}/inbound"].get("readOnly")
    assert [v["persistentVolumeClaim"]["claimName"] for v in student.volumes] == \
        ["autograd-hooks-exchange"]

    teacher = _spawner("grace", ["instructors"])
    hook(teacher)
    assert teacher.environment["COURSE_ROLE"] == "instructor"
    assert teacher.environment["COURSE_ROOT"] == teacher.notebook_dir == "/srv/course"
    assert {m["mountPath"] for m in teacher.volume_mounts} == {
        base, "/srv/course", "/srv/course/.autograder/secret", "/etc/grading-tls"}
    assert [m["subPath"] for m in teacher.volume_mounts if "subPath" in m] == ["secret"]
    assert student.extra_labels == {"autograd-hooks/role": "student"}
    assert teacher.extra_labels == {"autograd-hooks/role": "instructor"}
    assert teacher.cpu_limit > values()["singleuser"]["cpu"]["limit"]


def test_instructor_group_matches_the_hooks_role():
    groups = values()["hub"]["config"]["JupyterHub"]["load_groups"]
    assert "instructor" in groups["instructors"]["users"]


# --- hub/Dockerfile, step by step in CI's environment -----------------------------------------

def dockerfile_steps() -> list[tuple[str, str]]:
    """(instruction, arguments) of hub/Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    steps = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, arguments = line.partition(" ")
            steps.append((instruction.upper(), arguments.strip()))
    return steps


def _assignments(arguments: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in shlex.split(arguments) if "=" in item)


def test_dockerfile_copies_an_allow_list_without_solutions():
    copied = [shlex.split(args)[:-1] for instruction, args in dockerfile_steps()
              if instruction == "COPY"]
    sources = {source for step in copied for source in step}
    assert sources, "hub/Dockerfile copies nothing"
    assert not any(s in (".", "./") or s.startswith(("solutions", "scenarios", "tests", ".git",
                                                     "notebooks")) for s in sources), sources
    assert "requirements.lock" in sources and "coursekit" in sources
    runs = [args for instruction, args in dockerfile_steps() if instruction == "RUN"]
    assert len(runs) == 1 and "hub/image/install.sh" in runs[0]


@pytest.mark.hub
def test_dockerfile_steps_run_as_a_script(tmp_path):
    """The Dockerfile's COPY and RUN steps, under a temporary root: its absolute paths are
    moved into tmp_path, pip resolves the lock without installing it (--dry-run), no account
    is created. The rest of the script runs as it does in the image."""
    root = tmp_path / "image"
    env = dict(os.environ)
    env.update({"PYTHON": sys.executable, "TORCH_INDEX_URL": "", "NB_USER": "",
                "PIP_INSTALL_FLAGS": f"--dry-run --quiet --report {tmp_path / 'report.json'}"})
    for instruction, arguments in dockerfile_steps():
        if instruction in ("ARG", "ENV") and not arguments.startswith("PATH="):
            for name, value in (_assignments(arguments).items() if "=" in arguments else []):
                if name not in ("NB_USER", "TORCH_INDEX_URL"):
                    env[name] = str(root) + value if value.startswith("/") else value
        elif instruction == "COPY":
            *sources, destination = shlex.split(arguments)
            target = root / destination.lstrip("/")
            for source in sources:  # Docker's rules: a destination ending in / is a folder
                path = COURSE_ROOT / source
                if path.is_dir():
                    shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__"))
                elif destination.endswith("/"):
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, target / path.name)
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, target)
        elif instruction == "RUN":
            done = subprocess.run(["sh", "-c", arguments], env=env, capture_output=True,
                                  text=True, timeout=600, cwd=root)
            assert done.returncode == 0, done.stdout + done.stderr
    prefix = Path(env["COURSE_PREFIX"])
    assert prefix.is_relative_to(root)

    # pip would install exactly the lock: same packages, same versions, CPU-only torch.
    report = json.loads((tmp_path / "report.json").read_text())
    planned = {item["metadata"]["name"].lower().replace("_", "-"): item["metadata"]["version"]
               for item in report["install"]}
    locked = pins((COURSE_ROOT / "requirements.lock").read_text().splitlines())
    # `pip freeze` leaves pip and setuptools out of the lock; a package may ask for them.
    planned = {name: version.split("+")[0] for name, version in planned.items()
               if name not in ("pip", "setuptools")}
    assert planned == locked
    assert not [name for name in planned if name.startswith("nvidia") or "cuda" in name]

    # The course's packages, its nbgrader settings and the hub's configuration are in place;
    # the source copy is gone and no notebook came along.
    python = prefix / "venv" / "bin" / "python"
    found = subprocess.run([str(python), "-I", "-c", "import coursekit, autograder; "
                            "print(coursekit.__file__)"], capture_output=True, text=True,
                           cwd=tmp_path)
    assert found.returncode == 0 and str(prefix) in found.stdout, found.stderr
    for path in ("nbgrader_config.py", "README.md", "hub/lib/coursehub/singleuser.py",
                 "hub/jupyter/student/nbgrader_config.py", "jupyter/student/nbgrader_config.py",
                 "jupyter/student/labextensions/coursekit-start-page/static/remoteEntry.js",
                 "hub/jupyter/student/labconfig/page_config.json",
                 "hub/jupyter/instructor/nbgrader_config.py"):
        assert (prefix / path).is_file(), path
    assert not Path(env["COURSE_SRC"]).exists()
    assert not list(root.rglob("*.ipynb")) or all("venv" in p.parts for p in root.rglob("*.ipynb"))
    assert not [p for p in [*root.rglob("solutions"), *root.rglob("scenarios")]
                if "venv" not in p.parts]
    exchange = Path(env["COURSE_EXCHANGE"])
    assert exchange.is_dir() and oct(exchange.stat().st_mode & 0o7777) == oct(0o1777)


# --- hub/grading-cluster.yaml: the grading cluster of the class on Kubernetes ------------------

GRADING = HUB / "grading-cluster.yaml"


def _grading() -> dict[str, dict]:
    return {f"{doc['kind']}/{doc['metadata']['name']}": doc
            for doc in yaml.safe_load_all(GRADING.read_text())}


def test_the_grading_cluster_speaks_only_tls_and_reads_its_secrets_as_the_image_user():
    docs = _grading()
    cluster = docs["DaskCluster/grading"]["spec"]
    image_uid = int(re.search(r"ARG NB_UID=(\d+)", DOCKERFILE.read_text()).group(1))
    for role in ("worker", "scheduler"):
        pod = cluster[role]["spec"]
        args = pod["containers"][0]["args"]
        assert args[args.index("--protocol") + 1] == "tls"
        assert {"--tls-ca-file", "--tls-cert", "--tls-key"} <= set(args)
        assert not any(str(a).startswith("tcp://") for a in args)
        # Secret files are root's, with the pod's fsGroup: the image's user reads them by
        # group (0400 would refuse uid 1000, as the refusal used to say "secret differs").
        context = pod["securityContext"]
        assert context["runAsUser"] == image_uid and context["fsGroup"] == context["runAsGroup"]
        for volume in pod["volumes"]:
            assert volume["secret"]["defaultMode"] & 0o040, volume
            assert not volume["secret"]["defaultMode"] & 0o007, volume
    worker = cluster["worker"]["spec"]["containers"][0]
    assert worker["image"].endswith("autograd-hooks-singleuser:2026.11")  # the class's image
    secret_dir = next(m["mountPath"] for m in worker["volumeMounts"]
                      if m["name"] == "course-secret")
    assert {"name": "AUTOGRADER_SECRET_FILE", "value": f"{secret_dir}/secret"} in worker["env"]
    assert cluster["scheduler"]["service"]["type"] == "ClusterIP"


def test_only_the_instructors_pods_reach_the_grading_scheduler():
    docs = _grading()
    scheduler = docs["NetworkPolicy/grading-scheduler"]["spec"]
    sources = scheduler["ingress"][0]["from"]
    outside = [s for s in sources if "namespaceSelector" in s]
    assert outside == [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "autograd-hooks"}},
        "podSelector": {"matchLabels": {"autograd-hooks/role": "instructor"}}}]
    workers = docs["NetworkPolicy/grading-workers"]["spec"]
    assert all("namespaceSelector" not in s for s in workers["ingress"][0]["from"])
    # The hub's pods may leave for the scheduler (the chart's policy blocks it otherwise).
    egress = values()["singleuser"]["networkPolicy"]["egress"]
    assert egress[0]["ports"] == [{"protocol": "TCP", "port": 8786}]
    # The label the policy admits is the one the hub gives instructors' pods.
    hook = _pre_spawn_hook()
    teacher = _spawner("grace", ["instructors"])
    hook(teacher)
    assert teacher.extra_labels["autograd-hooks/role"] == "instructor"
    assert teacher.environment["DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"] == \
        "/etc/grading-tls/client.key"
