"""What one training job is: its spec (data, model and checkpoint places, whom the checkpoints belong to,
augmentation) and its configuration file, which every process reads; checks of a run's checkpoints to resume."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tasks.launch.errors import PreflightError
from tasks.params import Params
from tasks.user_code import code_digests, copy_sources
from tasks.versioning.run_state import code_digest
from trainer.checkpoint_files import CheckpointMismatch, check_owner, saved_epochs
from trainer.config import CONFIG_FILE_NAME, InputParams, JobSpec, read_config, write_config
from trainer.model_io import TRAIN_SUMMARY
from trainer.prepared_data import data_kind, read_manifest
from trainer.tuning import HorovodCycle


def augmentation_on(inputs: InputParams, manifest: dict) -> bool:
    """`auto` augments images of 64 px or more (the ImageNet regime of NVIDIA's nvcnn_hvd), not small digits, of
    whatever source."""
    if data_kind(manifest) != "image":
        return False  # feature tensors: no image distortions
    if inputs.augment != "auto":
        return inputs.augment == "on"
    height, width, _ = manifest["image_shape"]
    return min(height, width) >= 64


def config_key(params: Params, manifest: dict, with_np: bool = True) -> str:
    """What makes two trainings the same config (not epochs: a resumed run may train longer)."""
    not_the_model = {"epochs", "resume_from", "keep_checkpoints", "scaling_np", "tensorboard", "intra_op_threads",
                     "inter_op_threads", "data_threads", "cycle_time_ms", "fusion_threshold_mb",
                     "stall_timeout_seconds", "timeout_minutes", "shared_fs", "network_interface"}
    train = params.train.model_dump(exclude=not_the_model
                                    | (set() if with_np else {"np", "hosts", "hostfile"}))
    blob = json.dumps({"train": train, "input": params.input.model_dump(), "data": manifest.get("fingerprint"),
                       "code": code_digests(params)}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def checkpoint_owner(params: Params, manifest: dict) -> str:
    """Whom a job's checkpoints belong to: its config and the code version."""
    return hashlib.sha256(f"{config_key(params, manifest)}|{code_digest()}".encode()).hexdigest()[:16]


def check_resumable(params: Params, checkpoint_dir: Path, owner: str) -> None:
    """Refuse, before any launch, checkpoints of another config or code version and of more epochs than the job
    trains; checkpoints of all its epochs (a job that ended before it saved the model) are launched, and the ranks
    restore them and save the model without training."""
    try:
        check_owner(checkpoint_dir, owner)
    except CheckpointMismatch as error:
        raise PreflightError(str(error)) from None
    done = saved_epochs(checkpoint_dir)
    if done > params.train.epochs:
        raise PreflightError(f"nothing to train: the run's checkpoints already hold {done} epochs and train.epochs "
                             f"is {params.train.epochs} (raise train.epochs to continue it)")


def trained_already(params: Params, data_dir: Path, out_dir: Path, checkpoint_dir: Path) -> bool:
    """Whether a job of this config and code already trained every epoch into out_dir (its model and summary
    saved) and only the steps after it failed (a tracking server away): a resume records it, launching nothing."""
    config_file = out_dir / CONFIG_FILE_NAME
    if not (out_dir / TRAIN_SUMMARY).is_file() or not config_file.is_file():
        return False
    done = read_config(config_file)
    return saved_epochs(checkpoint_dir) == done.train.epochs == params.train.epochs and \
        done.job.checkpoint_owner == checkpoint_owner(params, read_manifest(data_dir))


def job_spec(params: Params, data_dir: Path, out_dir: Path, checkpoint_dir: Path,
             model_outputs: bool = True, cycle: HorovodCycle | None = None) -> JobSpec:
    """What this launch decides: where the data, model and checkpoints are, whom they belong to, augmentation,
    whether the lead writes what evaluate, export and register read (trials and scaling runs skip those steps),
    Horovod's cycle and fusion buffer (tasks/launch/tuning.py), and the job's copies of the user's code files
    (written into out_dir)."""
    manifest = read_manifest(data_dir)
    cycle = cycle or HorovodCycle(None, None)
    job = JobSpec(data_dir=data_dir, out_dir=out_dir, checkpoint_dir=checkpoint_dir,
                  checkpoint_owner=checkpoint_owner(params, manifest), augment=augmentation_on(params.input, manifest),
                  data_fingerprint=manifest["fingerprint"],
                  metrics_retry_seconds=params.tracking.retry_minutes * 60, model_outputs=model_outputs,
                  cycle_time_ms=cycle.cycle_time_ms, fusion_threshold_mb=cycle.fusion_threshold_mb)
    return copy_sources(params, job)


def write_trainer_config(params: Params, job: JobSpec) -> Path:
    """The resolved params plus the job, as one file in the job's output directory."""
    return write_config(params.model_dump(mode="json"), job, job.out_dir / CONFIG_FILE_NAME)
