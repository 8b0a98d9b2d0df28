"""The user's own code a run imports: the files train.model and train.loss name ("models/net.py:build", relative to
the workspace), or the module a package path names ("my_package.nets:build", wherever it is installed here).

Their content is part of the run's identity (the checkpoints' owner, the skip-unchanged state, MLflow's
`model.source`); a file is copied into the job's directory beside the model, so it travels with the job's files to
every host the ranks run on and stays with the trained model."""
from __future__ import annotations

import hashlib
import importlib.util
import shutil
from pathlib import Path

from tasks.params import Params, ParamsError
from tasks.paths import resolve_path
from trainer.config import IMPORT_PATH, JobSpec

SOURCE_DIR = "model_source"  # in the job's (and the model's) directory


def named_code(params: Params) -> dict[str, str]:
    """The import paths of the user's code the run uses: {"model": ..., "loss": ...} (only those that are code)."""
    named = {"model": params.train.model, "loss": params.train.loss or ""}
    return {role: name for role, name in named.items() if IMPORT_PATH.fullmatch(name)}


def code_file(name: str) -> Path:
    """The file an import path's code lies in: a workspace file as named, or the module's file as found here;
    ParamsError in one line when there is none."""
    module = name.rpartition(":")[0]
    if module.endswith(".py"):
        path = resolve_path(module)
        if not path.is_file():
            raise ParamsError(f"model file {module} does not exist ({path})")
        return path
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as error:
        raise ParamsError(f"no module {module} here ({type(error).__name__}: {error})") from None
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        raise ParamsError(f"no module {module} here (is its package installed?)")
    return Path(spec.origin)


def code_digests(params: Params) -> dict[str, str]:
    """sha256 of each of the user's code files the run uses, by role (model, loss)."""
    return {role: hashlib.sha256(code_file(name).read_bytes()).hexdigest() for role, name in named_code(params).items()}


def source_line(params: Params) -> str | None:
    """MLflow's `model.source`: the model's import path and its file's digest (None: a catalog model)."""
    digests = code_digests(params)
    return f"{params.train.model}@{digests['model'][:12]}" if "model" in digests else None


def copy_sources(params: Params, job: JobSpec) -> JobSpec:
    """The job with its own copies of the user's code files (from the workspace), in its directory."""
    copies: dict[str, Path] = {}
    for role, name in named_code(params).items():
        if not name.rpartition(":")[0].endswith(".py"):
            continue  # a package: imported where the ranks run
        target = job.out_dir / SOURCE_DIR / f"{role}_{code_file(name).name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(code_file(name), target)
        copies[role] = target
    return job.model_copy(update={"model_source": copies.get("model"), "loss_source": copies.get("loss")})
