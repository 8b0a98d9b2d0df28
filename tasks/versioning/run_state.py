"""What a training depends on (data hash, code version, params) and the last successful run that had the same:
a scheduled retraining skips when nothing changed."""
from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tasks.params import Params
from tasks.paths import ROOT
from tasks.versioning.dvc import DataVersion

NOT_CODE = (":!dvc.lock", ":!params.yaml", ":!data", ":!outputs", ":!mlruns")  # outputs and data, not code


@dataclass(frozen=True)
class RunState:
    """The inputs of a training run."""
    data_hash: str
    code_version: str  # git commit, "+<diff digest>" when tracked code differs from it
    params_hash: str

    @property
    def key(self) -> str:
        return hashlib.sha256(f"{self.data_hash}|{self.code_version}|{self.params_hash}".encode()).hexdigest()[:20]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def code_version(git_commit: str, root: Path = ROOT) -> str:
    """The commit, with a digest of uncommitted changes to tracked code appended when there are any."""
    diff = subprocess.run(["git", "diff", "HEAD", "--", ".", *NOT_CODE], cwd=root, capture_output=True, text=True)
    return git_commit + (f"+{_digest(diff.stdout)}" if diff.stdout.strip() else "")


def params_hash(params: Params) -> str:
    """Digest of the params that change what training produces (data, input, train)."""
    chosen = {section: getattr(params, section).model_dump() for section in ("data", "input", "train")}
    return _digest(json.dumps(chosen, sort_keys=True, default=str))


def run_state(params: Params, version: DataVersion, root: Path = ROOT) -> RunState:
    """The state of a training from these params on the data and git state of `version`."""
    return RunState(version.data_hash, code_version(version.git_commit, root), params_hash(params))
