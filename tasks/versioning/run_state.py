"""What a training depends on: the data (DVC hash), the code that affects training (a digest of the packages and
the pinned dependencies, untracked files included) and all parameters. A scheduled retraining skips when all three
are those of the last successful run; checkpoints belong to one config and code version."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from tasks.params import Params
from tasks.paths import ROOT
from tasks.user_code import code_digests
from tasks.versioning.dvc import DataVersion

CODE_PACKAGES = ("flows", "servers", "tasks", "trainer")  # what runs: their Python files, tracked by git or not
DEPENDENCY_FILES = ("requirements.txt", "constraints.txt", "pyproject.toml", "scripts/setup.sh")


@dataclass(frozen=True)
class RunState:
    """The inputs of a training run."""
    data_hash: str
    code_digest: str
    params_hash: str

    @property
    def key(self) -> str:
        return hashlib.sha256(f"{self.data_hash}|{self.code_digest}|{self.params_hash}".encode()).hexdigest()[:20]

    def changes_from(self, previous: dict[str, str]) -> list[str]:
        """Which of data, code and params differ from a previous run's recorded state."""
        names = {"data": "data_hash", "code": "code_digest", "params": "params_hash"}
        return [name for name, field in names.items() if previous.get(field) != getattr(self, field)]


def code_files(root: Path = ROOT) -> list[Path]:
    """The files whose content makes the code version, in a stable order."""
    files = [path for package in CODE_PACKAGES for path in (root / package).rglob("*.py")
             if "__pycache__" not in path.parts]
    return sorted(files + [root / name for name in DEPENDENCY_FILES if (root / name).is_file()])


def code_digest(root: Path = ROOT) -> str:
    """Digest of the code that affects training: every file's path and bytes."""
    digest = hashlib.sha256()
    for path in code_files(root):
        digest.update(f"{path.relative_to(root)}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def params_hash(params: Params) -> str:
    """Digest of all parameters of the run but the sweep's search (a trial's own values are in train.*), how the
    champion is served and the project's format."""
    document = params.model_dump(mode="json", exclude={"project", "sweep", "serving"})
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:16]


def run_state(params: Params, version: DataVersion, root: Path = ROOT) -> RunState:
    """The state of a training from these params on the data of `version` and the code as it is on disk (the
    user's model and loss files too)."""
    user = code_digests(params)
    code = code_digest(root) if not user else \
        hashlib.sha256(json.dumps([code_digest(root), user], sort_keys=True).encode()).hexdigest()[:16]
    return RunState(version.data_hash, code, params_hash(params))
