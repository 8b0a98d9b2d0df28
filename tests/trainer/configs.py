"""Trainer configurations for the trainer's own tests, made from the trainer's models alone (no launcher, no
Prefect or DVC): small, quiet jobs on prepared data."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer.config import InputParams, JobSpec, TrainerConfig, TrainParams, write_config

OWNER = "test"  # whom the test jobs' checkpoints belong to
QUICK = {"np": 1, "epochs": 1, "batch_size": 128, "tensorboard": False}  # a handful of steps on the digits


def trainer_config(data_dir: Path, work: Path, inputs: dict[str, Any] | None = None, augment: bool = False,
                   **train: Any) -> TrainerConfig:
    """A job on the prepared data in data_dir, its model in work/model and its checkpoints in work/checkpoints;
    `train` overrides the quick defaults."""
    job = JobSpec(data_dir=data_dir, out_dir=work / "model", checkpoint_dir=work / "checkpoints",
                  checkpoint_owner=OWNER, augment=augment, data_fingerprint="f", metrics_retry_seconds=60)
    return TrainerConfig(train=TrainParams(**(QUICK | train)), input=InputParams(**(inputs or {})), job=job)


def write_job_config(config: TrainerConfig, path: Path) -> Path:
    """The configuration file a launch would write for this job."""
    sections = {"train": config.train.model_dump(mode="json"), "input": config.input.model_dump(mode="json")}
    return write_config(sections, config.job, path)
