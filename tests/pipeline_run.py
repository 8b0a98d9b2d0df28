"""The whole pipeline, run once per test session in a private copy of the checkout (`pipeline_run`, registered in
tests/conftest.py): tests/flows/test_pipeline.py checks the run, tests/tasks/versioning/test_dvc.py clones its
checkout. What a test needs to know of the run itself is taken when the run ends (its flow run, its dvc.lock, the
files of the outputs that dvc.lock records): later tests restore data and train again in that checkout."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from tests.helpers import PYTHON, api_call, copy_checkout, quiet_env, run


@dataclass(frozen=True)
class PipelineRun:
    repo: Path
    output: str
    run_id: str
    test_accuracy: float
    savedmodel: Path
    flow_run_id: str  # its flow run on the session's Prefect server
    dvc_lock: str  # dvc.lock as the run left it
    outputs: dict[str, dict[str, str]]  # each folder dvc.lock records (data/prepared, outputs/model, ...): dir_hashes
    logged: str = ""  # what its flow logged (Prefect's lines, on stderr)


def dir_hashes(folder: Path) -> dict[str, str]:
    """Every file below folder (relative path -> sha256)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def recorded_folders(dvc_lock: str) -> list[str]:
    """The outputs a dvc.lock records as folders (an md5 ending in .dir)."""
    stages = yaml.safe_load(dvc_lock)["stages"].values()
    return [out["path"] for stage in stages for out in stage.get("outs", [])
            if "md5" in out and out["md5"].endswith(".dir")]


def flow_runs_started_since(api: str, flow: str, since: datetime) -> list[dict]:
    """The runs of a flow that started after `since`."""
    return api_call(api, "/flow_runs/filter", {"flows": {"name": {"any_": [flow]}},
                                               "flow_runs": {"start_time": {"after_": since.isoformat()}}})


@pytest.fixture(scope="session")
def pipeline_run(tmp_path_factory: pytest.TempPathFactory, prefect_api: str) -> PipelineRun:
    """`python -m flows.pipeline` with the checkout's params.yaml, against the session's Prefect server: a first
    run, which prepares and validates the data."""
    repo = copy_checkout(tmp_path_factory.mktemp("checkout"), prepared=False)
    started = datetime.now(timezone.utc)
    done = run([PYTHON, "-m", "flows.pipeline"], repo, quiet_env(PREFECT_API_URL=prefect_api))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = dict(re.findall(r"^(mlflow run id|test accuracy|SavedModel):\s+(\S+)$", done.stdout, re.M))
    (flow_run,) = flow_runs_started_since(prefect_api, "training-pipeline", started)
    dvc_lock = (repo / "dvc.lock").read_text()
    return PipelineRun(repo, done.stdout, found["mlflow run id"], float(found["test accuracy"]),
                       Path(found["SavedModel"]), flow_run["id"], dvc_lock,
                       {folder: dir_hashes(repo / folder) for folder in recorded_folders(dvc_lock)}, done.stderr)
