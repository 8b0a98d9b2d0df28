"""What makes runs comparable in MLflow's UI (the experiment's kind is mlflow_store's): a run name that says what
was trained, the Source column (what started the run, at which commit), every parameter under its section's name,
the prepared data as the run's dataset input, and the system metrics of the training."""
from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any, Iterator

from tasks.params import Params

PARAM_SECTIONS = ("train", "data", "input")  # what shapes the model; tracking, registry, ... do not


@dataclass(frozen=True)
class RunSource:
    """What started a run, as MLflow's Source column shows it: a name and one of MLflow's source types."""
    name: str
    kind: str = "LOCAL"  # MLflow's SourceType: LOCAL for a command, JOB for a deployment's scheduled or asked run


COMMAND = RunSource("python -m tasks")


def flow_source(flow: str, deployment: str | None) -> RunSource:
    """A flow run directly (`python -m flows.pipeline`, make run) or through one of its deployments."""
    return RunSource(f"{flow}/{deployment}", "JOB") if deployment else RunSource(f"flow {flow}")


def source_tags(source: RunSource, git_commit: str) -> dict[str, str]:
    """MLflow's own tags for the Source column: the name, its type, the project's repository and commit; and the
    ringflow that ran it."""
    from tasks.project import ringflow_version
    from tasks.versioning.dvc import repository_url
    return {"mlflow.source.name": source.name, "mlflow.source.type": source.kind,
            "mlflow.source.git.commit": git_commit, "mlflow.source.git.repoURL": repository_url(),
            "ringflow.version": ringflow_version()}


def section_params(params: Params) -> dict[str, Any]:
    """The params that shape the model, each by its dotted name (`train.np`, `data.val_fraction`, `input.augment`)."""
    return {name: value for name, value in params.flat().items() if name.split(".", 1)[0] in PARAM_SECTIONS}


def run_name(params: Params, run_id: str, gpus_per_host: int = 0) -> str:
    """Model, np, global batch (as the backend makes it of train.batch_size per replica, on hosts with
    `gpus_per_host` GPUs), learning rate, the run id's first 6 characters: small_cnn-np2-b64-lr0.001-3f9a2c."""
    from trainer.backend_specs import backend_spec
    train = params.train
    global_batch = backend_spec(train.backend).global_batch(train.batch_size, train.np, gpus_per_host)
    return f"{train.model}-np{train.np}-b{global_batch}-lr{train.learning_rate:g}-{run_id[:6]}"


def dataset_input(params: Params, data_hash: str, prepared: str, manifest: dict[str, Any]) -> Any:
    """The prepared data as MLflow's dataset input of a training run: the dataset's name, the DVC hash of the
    prepared TFRecords as the digest, where they came from, and the split sizes as the profile (the UI's Dataset
    column and the run's Datasets)."""
    from mlflow.entities import Dataset, DatasetInput, InputTag
    splits = {split: info["count"] for split, info in manifest.get("splits", {}).items()}
    profile = {"splits": splits, "image_shape": manifest.get("image_shape"), "classes": manifest.get("num_classes")}
    source = {"dataset": params.data.dataset, "prepared": prepared, "dvc_hash": data_hash}
    dataset = Dataset(name=manifest.get("source", params.data.dataset), digest=data_hash[:36], source_type="dvc",
                      source=json.dumps(source), profile=json.dumps(profile))
    return DatasetInput(dataset=dataset, tags=[InputTag(key="mlflow.data.context", value="training")])


SYSTEM_METRICS_SECONDS = 5  # between samples of CPU, memory (and GPU) use; MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL wins


@contextlib.contextmanager
def system_metrics(run_id: str) -> Iterator[None]:
    """MLflow's system metrics (`system/cpu_utilization_percentage`, memory, disk, network; GPU where there is one)
    of this machine, sampled into the run while the block (a training job) runs."""
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    from tasks.tracking.mlflow_store import tracking_uri
    monitor = SystemMetricsMonitor(run_id, sampling_interval=SYSTEM_METRICS_SECONDS, resume_logging=True,
                                   tracking_uri=tracking_uri())  # not MLflow's process-wide one
    monitor.start()
    try:
        yield
    finally:
        monitor.finish()
