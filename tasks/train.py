"""train: build the horovodrun command line from params and run it; rank 0 logs to the given MLflow run."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tasks.atomic import atomic_dir
from tasks.launch import run_streaming
from tasks.params import InputParams, Params
from tasks.paths import ROOT
from tasks.tracking import tracking_uri


@dataclass(frozen=True)
class TrainResult:
    """Where the trained model is and what the training reported."""
    model_dir: Path
    summary: dict


def augmentation_on(inputs: InputParams, manifest: dict) -> bool:
    """`auto` augments image folders and images of 64 px or more (seed 002's regime), not small digits."""
    if inputs.augment != "auto":
        return inputs.augment == "on"
    height, width, _ = manifest["image_shape"]
    return manifest["source"].startswith("folder:") or min(height, width) >= 64


def horovod_command(params: Params, data_dir: Path, out_dir: Path, augmented: bool,
                    extra: list[str] | None = None) -> list[str]:
    """The horovodrun command line (data, not a shell string)."""
    train, inputs = params.train, params.input
    horovodrun = str(Path(sys.executable).with_name("horovodrun"))
    command = [horovodrun, "--gloo", "-np", str(train.np), "-H", f"localhost:{train.np}",
               sys.executable, "-m", "trainer",
               "--data-dir", str(data_dir), "--out-dir", str(out_dir), "--model", train.model,
               "--epochs", str(train.epochs), "--batch-size", str(train.batch_size),
               "--learning-rate", str(train.learning_rate), "--seed", str(train.seed),
               "--keep-checkpoints", str(train.keep_checkpoints)]
    flags = {"--no-scale-lr": not train.scale_lr, "--augment": augmented, "--no-cache": not inputs.cache}
    command += [flag for flag, wanted in flags.items() if wanted]
    if inputs.image_size:
        command += ["--image-size", str(inputs.image_size)]
    return command + list(extra or [])


def rank_environment(run_id: str | None) -> dict[str, str]:
    """The environment each rank inherits: tf-keras, this checkout on the path, the MLflow run."""
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               MLFLOW_TRACKING_URI=tracking_uri())
    if run_id:
        env["MLFLOW_RUN_ID"] = run_id
    else:
        env.pop("MLFLOW_RUN_ID", None)
    return env


def train(params: Params, data_dir: Path, out_dir: Path, run_id: str | None,
          on_line: Callable[[str], None] = print, extra_args: list[str] | None = None) -> TrainResult:
    """Launch the ranks; returns the model rank 0 saved. Raises RankFailed naming the failing rank."""
    from trainer.records import read_manifest
    manifest = read_manifest(data_dir)  # fail before launching when there is no prepared data
    with atomic_dir(out_dir) as work_dir:
        command = horovod_command(params, data_dir, work_dir, augmentation_on(params.input, manifest), extra_args)
        on_line("launching: " + " ".join(command))
        run_streaming(command, rank_environment(run_id), ROOT, on_line)
        summary = json.loads((work_dir / "train_summary.json").read_text())
    return TrainResult(out_dir, summary)
