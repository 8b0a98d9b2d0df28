"""What dvc.lock may record: only runs made with params.yaml's values (DVC records each stage from that file)."""
from __future__ import annotations

from tasks.params import Params, ParamsError, load_params
from tasks.versioning import dvc

STAGE_PARAMS = ("data", "input", "train", "slurm", "registry")  # the params dvc.yaml's stages record


def check_versionable(params: Params) -> None:
    """Data params must be those of params.yaml: DVC records the prepare stage from that file."""
    if params.data != load_params().data:
        raise ParamsError("data.* overrides cannot be versioned by DVC: change them in params.yaml")


def dvc_record_blockers(params: Params) -> list[str]:
    """The stage params that differ from params.yaml (dvc.lock can only record params.yaml's values)."""
    written = load_params()
    return [f"{section}.{key}" for section in STAGE_PARAMS
            for key, value in getattr(params, section).model_dump().items()
            if getattr(written, section).model_dump()[key] != value]


def record_outputs(params: Params, stages: tuple[str, ...]) -> str:
    """Record the published outputs of `stages` in dvc.lock when they were made from params.yaml as it stands;
    returns what was done, in words."""
    blockers = dvc_record_blockers(params)
    if blockers:
        return f"dvc.lock left alone: {', '.join(blockers)} differ from params.yaml"
    dvc.commit_stages(*stages)
    return "recorded in dvc.lock and pushed"
