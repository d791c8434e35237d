"""What a cluster's worker grades with, from the command: the course as a digest-pinned bundle
(the files grading reads), and the digests of the grader's code the worker must run.

A worker keeps each bundle it is sent in its cache, under the bundle's digest, so it is sent
once per course commit and a worker needs no checkout of the course and no re-sync after
Generate. The course secret is never in a bundle: a worker holds its own (a Kubernetes secret,
a file) and proves it (`autograder.dispatch.cluster_proof`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

TREES = ("scenarios", "solutions", "notebooks", "nbgrader_config.py")
CACHE_ENV = "AUTOGRADER_CLUSTER_CACHE"  # a worker's cache of bundles (default ~/.cache/...)
MAX_BUNDLE_BYTES = 64 * 1024 * 1024
_SKIPPED = ("__pycache__", ".ipynb_checkpoints")
_COMPLETE = ".complete"


def _files(root: Path, name: str, suffixes: tuple[str, ...] = ()) -> list[Path]:
    path = root / name
    if path.is_file() and not path.is_symlink():
        return [path]
    if not path.is_dir():
        return []
    return sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()
                  and not any(part in _SKIPPED or part.startswith(".")
                              for part in p.relative_to(root).parts)
                  and (not suffixes or p.suffix in suffixes))


def bundle_digest(files: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return digest.hexdigest()


def course_bundle(root: Path) -> tuple[str, dict[str, bytes]]:
    """The files of the course at `root` that grading reads, and their digest."""
    root = Path(root)
    files = {str(p.relative_to(root)): p.read_bytes()
             for name in TREES for p in _files(root, name)}
    size = sum(len(data) for data in files.values())
    if size > MAX_BUNDLE_BYTES:
        raise ValueError(f"the course's {', '.join(TREES)} hold {size} bytes, over the "
                         f"{MAX_BUNDLE_BYTES} a cluster's worker is sent")
    return bundle_digest(files), files


def code_digests() -> dict[str, str]:
    """sha256 of each file of the grader's code (autograder/, coursekit/), by path."""
    import autograder
    import coursekit

    out = {}
    for package in (autograder, coursekit):
        folder = Path(package.__file__).resolve().parent
        for path in _files(folder.parent, folder.name, (".py",)):
            out[str(path.relative_to(folder.parent))] = hashlib.sha256(
                path.read_bytes()).hexdigest()
    return out


def code_difference(theirs: dict) -> str | None:
    """Which files of the grader's code differ between `theirs` and this process's; None when
    none does."""
    ours = code_digests()
    if not isinstance(theirs, dict):
        return "the command sent no digests of its code"
    names = sorted(name for name in set(ours) | set(theirs) if ours.get(name) != theirs.get(name))
    if not names:
        return None
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"its grader's code differs from the command's in {shown}"


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    home = Path.home() / ".cache" / "autograder" / "courses"
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        return home
    except OSError:
        return Path(tempfile.gettempdir()) / f"autograder-courses-{os.getuid()}"


def cached_course(digest: str) -> Path | None:
    """The course folder of the bundle `digest` in this worker's cache, if it is complete."""
    if not isinstance(digest, str) or len(digest) != 64 or not digest.isalnum():
        return None
    folder = cache_root() / digest
    return folder if (folder / _COMPLETE).is_file() else None


def install_bundle(digest: str, files: dict[str, bytes]) -> Path:
    """Write a bundle the command sent into this worker's cache, checked against its digest."""
    if bundle_digest(files) != digest:
        raise ValueError("the course bundle does not match its digest")
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder = root / digest
    staging = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=root))
    for name, data in files.items():
        parts = Path(name).parts
        if Path(name).is_absolute() or ".." in parts or not parts or \
                parts[0] not in TREES or any(part.startswith(".") for part in parts):
            raise ValueError(f"the course bundle holds a path outside the course: {name!r}")
        path = staging / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (staging / _COMPLETE).write_text(digest)
    try:
        staging.rename(folder)
    except OSError:  # another process of this worker installed it first
        remove_tree(staging)
    return folder


def remove_tree(path: Path) -> None:
    """Remove a folder nbgrader may have made read-only."""
    for dirpath, dirnames, _ in os.walk(path):
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
    shutil.rmtree(path, ignore_errors=True)
