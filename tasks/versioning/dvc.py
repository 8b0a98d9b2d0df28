"""version: record the prepared data in DVC (dvc.lock), push it to the remote, and name its version."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from tasks.atomic import atomic_dir, file_lock, write_text_atomic
from tasks.paths import PREPARED_DIR, ROOT, WORKSPACE, Workspace, code_repository
from tasks.versioning.dvc_commands import FIRST_FAILED


@dataclass(frozen=True)
class DataVersion:
    """What identifies the data and code of a run."""
    data_hash: str
    git_commit: str
    git_dirty: bool


DVC_TIMEOUT_SECONDS = 1800
SMALL_FILE = 1 << 16  # bytes: a prepared file read whole for the version step's record, rather than its mtime


def _dvc(*commands: list[str], root: Path = WORKSPACE.root) -> str:
    """Run DVC commands in the workspace, in one process, one such process at a time across the workspace's
    processes (DVC's own lock fails a second command instead of waiting); a failure raises with DVC's own message
    and names the command that failed."""
    with file_lock(Workspace(root).locks_dir / "dvc.lock"):
        done = subprocess.run([sys.executable, "-m", "tasks.versioning.dvc_commands", json.dumps(commands)],
                              cwd=root, capture_output=True, text=True, timeout=DVC_TIMEOUT_SECONDS,
                              env=os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                                              os.environ.get("PYTHONPATH")]))})
    if done.returncode != 0:
        index = done.returncode - FIRST_FAILED
        failed = commands[index] if 0 <= index < len(commands) else commands[-1]
        message = (done.stderr or done.stdout).strip().splitlines()
        raise RuntimeError(f"dvc {' '.join(failed)} failed: {message[-1] if message else done.returncode}")
    return done.stdout


def git_state(root: Path | None = None) -> tuple[str, bool]:
    """(HEAD commit of the code (code_repository's unless `root`), whether tracked files other than dvc.lock differ
    from it); ('unknown', True) outside git.

    dvc.lock is left out: recording a run rewrites it.
    """
    root = root or code_repository()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=60)
    if head.returncode != 0:
        return "unknown", True
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!dvc.lock"],
                            cwd=root, capture_output=True, text=True, timeout=60)
    return head.stdout.strip(), bool(status.stdout.strip())


def repository_url(root: Path | None = None) -> str:
    """Where the code's repository comes from: its `origin` remote (a deployment's clone names the repository it
    pulled), else its own path (code_repository's unless `root`)."""
    root = root or code_repository()
    origin = subprocess.run(["git", "remote", "get-url", "origin"], cwd=root, capture_output=True, text=True,
                            timeout=60)
    return origin.stdout.strip() if origin.returncode == 0 and origin.stdout.strip() else str(root)


def locked_data_hash(root: Path = WORKSPACE.root, data_dir: Path = PREPARED_DIR) -> str:
    """The DVC hash of the prepared data as recorded in dvc.lock by the prepare stage."""
    lock_file = Workspace(root).dvc_lock_file
    if not lock_file.is_file():
        raise FileNotFoundError("dvc.lock is missing: the prepare stage has not been recorded")
    lock = yaml.safe_load(lock_file.read_text())
    relative = str(data_dir.relative_to(root))
    for out in lock.get("stages", {}).get("prepare", {}).get("outs", []):
        if out.get("path") == relative:
            return out["md5"]
    raise KeyError(f"dvc.lock records no output {relative} for stage prepare")


def data_version(root: Path = WORKSPACE.root) -> DataVersion:
    """The data hash from the workspace's dvc.lock and the code's git state, without running DVC (safe inside
    `dvc repro`)."""
    commit, dirty = git_state()
    return DataVersion(locked_data_hash(root, Workspace(root).prepared_dir), commit, dirty)


def commit_stages(*stages: str, root: Path = WORKSPACE.root) -> None:
    """Record the current outputs of stages in dvc.lock and the DVC cache, and push them to the default remote:
    whatever dvc.lock records, another clone can pull."""
    _dvc(["commit", "--force", *stages], ["push", *stages], root=root)


def version_data(root: Path = WORKSPACE.root) -> DataVersion:
    """Track the freshly prepared data (prepare stage) and push it to the default remote, unless the last version
    step recorded and pushed these very files, as dvc.lock records them, to this remote (DVC's start, hashing and
    push take about a second: most runs train on the data the run before them recorded)."""
    workspace = Workspace(root)
    stamp = workspace.versioned_stamp
    if not stamp.is_file() or stamp.read_text() != recorded_state(workspace):
        commit_stages("prepare", root=root)
        stamp.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(stamp, recorded_state(workspace))
    return data_version(root)


def recorded_state(workspace: Workspace) -> str:
    """A digest of what the version step records and where it pushes it: the prepared data's files (each one's
    path and size; a small one's content (the manifest, the validation report prepare writes again each run), a
    shard's mtime), dvc.lock's record of the prepare stage, and DVC's configuration (the remote)."""
    digest = hashlib.sha256()
    data_dir = workspace.prepared_dir
    for parent, folders, names in os.walk(data_dir):
        folders.sort()
        for name in sorted(names):
            path = Path(parent) / name
            status = path.stat()
            digest.update(f"{path.relative_to(data_dir)}:{status.st_size}:".encode())
            digest.update(path.read_bytes() if status.st_size <= SMALL_FILE else f"{status.st_mtime_ns}".encode())
    lock = workspace.dvc_lock_file
    prepare = (yaml.safe_load(lock.read_text()) or {}).get("stages", {}).get("prepare") if lock.is_file() else None
    digest.update(json.dumps(prepare, sort_keys=True).encode())
    for config in (workspace.root / ".dvc" / "config", workspace.root / ".dvc" / "config.local"):
        digest.update(config.read_bytes() if config.is_file() else b"none")
    return json.dumps({"recorded": digest.hexdigest()})


def _pointer_file(data_hash: str, name: str) -> str:
    """A .dvc file naming one directory version by its hash."""
    return yaml.safe_dump({"outs": [{"md5": data_hash, "hash": "md5", "path": name}]})


def restore_data(data_hash: str, root: Path = WORKSPACE.root, target: Path = PREPARED_DIR) -> Path:
    """Bring back the prepared data with this DVC hash (as an MLflow run recorded it) from the DVC remote.

    dvc.lock may have moved on since that run, so the version is fetched through a temporary .dvc file
    naming the hash, then swapped into `target`; the files DVC touched for it are put back as they were.
    """
    name = f".restore-{data_hash.removesuffix('.dir')}"
    pointer, fetched = target.parent / f"{name}.dvc", target.parent / name
    gitignore = target.parent / ".gitignore"
    ignored = gitignore.read_text() if gitignore.exists() else None
    pointer.write_text(_pointer_file(data_hash, name))
    try:
        _dvc(["pull", str(pointer.relative_to(root))], root=root)
        with atomic_dir(target) as tmp:
            tmp.rmdir()
            shutil.copytree(fetched, tmp)  # DVC may link files from its cache: copy before they are swapped in
    finally:
        pointer.unlink(missing_ok=True)
        shutil.rmtree(fetched, ignore_errors=True)
        if ignored is not None:
            gitignore.write_text(ignored)
    return target
