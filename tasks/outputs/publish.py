"""Publishing a finished run: its model, evaluation, SavedModel, metrics and gate decision are copied from its
workspace to the fixed paths users and dvc.yaml look for (outputs/model, ...), under a lock, all or nothing;
outputs/published.json says which run each came from."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Iterator

from tasks.atomic import file_lock, write_bytes_atomic, write_text_atomic
from tasks.paths import (
    DVC_LOCK_FILE,
    EVALUATION_DIR,
    GATE_FILE,
    LOCKS_DIR,
    METRICS_FILE,
    MODEL_DIR,
    OUTPUTS_DIR,
    SAVEDMODEL_DIR,
)
from tasks.workspace import RunWorkspace

PUBLISHED_FILE = OUTPUTS_DIR / "published.json"
LOCK_FILE = LOCKS_DIR / "publish.lock"
TARGETS = {"model": MODEL_DIR, "evaluation": EVALUATION_DIR, "savedmodel": SAVEDMODEL_DIR,
           "metrics.json": METRICS_FILE, "gate.json": GATE_FILE}


def exclusive() -> contextlib.AbstractContextManager[None]:
    """One publisher at a time in this checkout."""
    return file_lock(LOCK_FILE)


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copy2(source, target)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _sibling(target: Path, role: str) -> Path:
    """A hidden sibling of `target` for one publish: a name no other publish, live or killed, has used."""
    return target.with_name(f".{target.name}.{role}-{uuid.uuid4().hex[:12]}")


def _swap_in(staged: Path, target: Path, swapped: list[tuple[Path, Path | None]]) -> None:
    """Put `staged` at `target`, keeping what was there as a hidden sibling to restore or delete later."""
    previous = _sibling(target, "previous") if target.exists() else None
    if previous is not None:
        os.rename(target, previous)
    os.rename(staged, target)
    swapped.append((target, previous))


def _record(workspace: RunWorkspace, names: list[str], published_file: Path) -> None:
    """outputs/published.json: for each published item, the run it came from and when."""
    record = json.loads(published_file.read_text()) if published_file.is_file() else {}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record |= {name: {"run_id": workspace.run_id, "published": stamp} for name in names}
    write_text_atomic(published_file, json.dumps(record, indent=2, sort_keys=True))


def _restore(files: dict[Path, bytes | None]) -> None:
    """Each file as it was: its old bytes back, or gone when there was none."""
    for path, before in files.items():
        if before is None:
            path.unlink(missing_ok=True)
        else:
            write_bytes_atomic(path, before)


def _put_back(swapped: list[tuple[Path, Path | None]]) -> None:
    """The items that were published before this publish, back at their paths."""
    for target, previous in reversed(swapped):
        _remove(target)
        if previous is not None:
            os.rename(previous, target)


@contextlib.contextmanager
def published(workspace: RunWorkspace, names: list[str], targets: dict[str, Path] = TARGETS,
              published_file: Path = PUBLISHED_FILE, records: tuple[Path, ...] = (DVC_LOCK_FILE,)) -> Iterator[None]:
    """Swap the run's items into their fixed paths for the block; if the block raises, everything comes back as it
    was: the previous items, published.json (gone if there was none) and the `records` the block writes (dvc.lock).

    Call it inside `exclusive()`: other runs then see the old set or the new one, never a mix.
    """
    staged = {name: _sibling(targets[name], "new") for name in names}
    swapped: list[tuple[Path, Path | None]] = []
    before = {path: path.read_bytes() if path.is_file() else None for path in (published_file, *records)}
    try:
        for name in names:
            targets[name].parent.mkdir(parents=True, exist_ok=True)
            _copy(workspace.root / name, staged[name])
        for name in names:
            _swap_in(staged[name], targets[name], swapped)
        _record(workspace, names, published_file)
        yield
    except BaseException:
        _put_back(swapped)
        _restore(before)
        raise
    else:
        for _, previous in swapped:
            if previous is not None:
                _remove(previous)
    finally:
        for path in staged.values():
            _remove(path)


def published_run(name: str, published_file: Path = PUBLISHED_FILE) -> str:
    """The run whose item `name` (e.g. `model`) is published now."""
    record = json.loads(published_file.read_text()) if published_file.is_file() else {}
    if name not in record:
        raise FileNotFoundError(f"no published {name}: run the pipeline (or the {name} stage) first")
    return record[name]["run_id"]
