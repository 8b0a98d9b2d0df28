"""train: preflight, write the job's configuration, launch its processes and wait; rank 0 logs to MLflow."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tasks.atomic import atomic_dir
from tasks.launch.plan import launch_plan, rank_environment
from tasks.launch.preflight import preflight
from tasks.launch.processes import run_processes
from tasks.params import Params
from tasks.paths import OUTPUTS_DIR, ROOT
from trainer.config import CONFIG_FILE_NAME, InputParams, JobSpec, write_config
from trainer.model_io import read_train_summary
from trainer.prepared_data import read_manifest


@dataclass(frozen=True)
class TrainResult:
    """Where the trained model is and what the training reported."""
    model_dir: Path
    summary: dict


def augmentation_on(inputs: InputParams, manifest: dict) -> bool:
    """`auto` augments image folders and images of 64 px or more (the ImageNet regime of NVIDIA's nvcnn_hvd),
    not small digits."""
    if inputs.augment != "auto":
        return inputs.augment == "on"
    height, width, _ = manifest["image_shape"]
    return manifest["source"].startswith("folder:") or min(height, width) >= 64


def config_key(params: Params, manifest: dict, with_np: bool = True) -> str:
    """What makes two trainings the same config (not epochs: a longer relaunch continues the same run)."""
    not_the_model = {"epochs", "resume", "keep_checkpoints", "scaling_np", "tensorboard", "intra_op_threads"}
    train = params.train.model_dump(exclude=not_the_model
                                    | (set() if with_np else {"np", "hosts", "hostfile"}))
    blob = json.dumps({"train": train, "input": params.input.model_dump(), "data": manifest.get("fingerprint")},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def job_spec(params: Params, data_dir: Path, out_dir: Path, checkpoint_root: Path) -> JobSpec:
    """What this launch decides: where the data, model and checkpoints are, and whether to augment."""
    manifest = read_manifest(data_dir)
    return JobSpec(data_dir=data_dir, out_dir=out_dir, checkpoint_dir=checkpoint_root / config_key(params, manifest),
                   augment=augmentation_on(params.input, manifest))


def write_trainer_config(params: Params, job: JobSpec) -> Path:
    """The resolved params plus the job, as one file in the job's output directory."""
    return write_config(params.model_dump(mode="json"), job, job.out_dir / CONFIG_FILE_NAME)


def train(params: Params, data_dir: Path, out_dir: Path, run_id: str | None,
          on_line: Callable[[str], None] = print, checkpoint_root: Path = OUTPUTS_DIR / "checkpoints") -> TrainResult:
    """Preflight, launch, wait; returns the model the lead process saved. Raises RankFailed naming a failure.

    Checkpoints go to checkpoint_root/<config key>, so a relaunch of the same config resumes from them.
    """
    controller = preflight(params, data_dir)
    with atomic_dir(out_dir) as work_dir:
        config_file = write_trainer_config(params, job_spec(params, data_dir, work_dir, checkpoint_root))
        processes = launch_plan(params, controller, config_file, rank_environment(run_id))
        for process in processes:
            on_line("launching: " + " ".join(process.command))
        run_processes(processes, ROOT, on_line)
        summary = read_train_summary(work_dir)
    return TrainResult(out_dir, summary)
