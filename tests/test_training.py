"""The training engine for real: every backend, resume after a kill, LR scaling and warmup, checkpoints."""
from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tasks.evaluate import evaluate
from tasks.params import Params, TrainParams
from tasks.train import config_key, launch_plan, preflight, rank_environment, train, trainer_args
from tests.helpers import ROOT, quiet_env
from trainer.records import read_manifest

SAME_WEIGHTS = ("horovod", "horovod-tape", "multiworker")


def digests(lines: list[str]) -> list[str]:
    return re.findall(r"weights_sha256 \S+ ([0-9a-f]{64})", "\n".join(lines))


def train_for_test(params: Params, data_dir: Path, tmp_path: Path, lines: list[str]) -> Path:
    out = tmp_path / "model"
    train(params, data_dir, out, None, lines.append, ["--print-weights-digest", "--no-tensorboard"],
          checkpoint_root=tmp_path / "checkpoints")
    return out


@pytest.mark.parametrize("backend", ["horovod", "horovod-tape", "mirrored", "multiworker", "central-storage",
                                     "one-device", "parameter-server"])
def test_every_backend_trains_the_cnn(backend: str, digits_data: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    params = Params(train=TrainParams(backend=backend, np=2, epochs=6, warmup_epochs=1))
    out = train_for_test(params, digits_data, tmp_path, lines)
    assert evaluate(out, digits_data).metrics["test_accuracy"] >= 0.8, lines[-10:]
    epochs = [line for line in lines if re.search(r"epoch \d+: ", line)]
    assert len(epochs) == 6 and all("images_per_sec=" in line for line in epochs)
    if backend in SAME_WEIGHTS:
        found = digests(lines)
        assert len(found) == 2 and found[0] == found[1]


def test_scaled_learning_rate_and_warmup_values(digits_data: Path, tmp_path: Path) -> None:
    from trainer.schedule import WarmupSchedule, scaled_rates
    assert scaled_rates(0.001, 4, True) == (0.001, 0.004)
    assert scaled_rates(0.001, 4, False) == (0.0, 0.001)
    schedule = WarmupSchedule(0.001, 0.004, 100)
    assert [round(float(schedule(step)), 6) for step in (0, 50, 100, 500)] == [0.001, 0.0025, 0.004, 0.004]
    lines: list[str] = []
    out = train_for_test(Params(train=TrainParams(np=2, epochs=2, warmup_epochs=1)), digits_data, tmp_path, lines)
    summary = __import__("json").loads((out / "train_summary.json").read_text())
    assert (summary["learning_rate"], summary["warmup_start_learning_rate"]) == (0.002, 0.001)
    assert summary["warmup_steps"] == summary["steps_per_epoch"] == 1257 // 64
    rates = [float(re.search(r"learning_rate=([\d.e-]+)", line)[1]) for line in lines if "epoch " in line]
    assert rates[0] == pytest.approx(0.001 + 0.001 * 18 / 19, rel=1e-3) and rates[1] == pytest.approx(0.002)


def start_and_kill_after_epoch(params: Params, data_dir: Path, tmp_path: Path, epoch: int) -> None:
    """Launch the real job and SIGKILL it (all ranks) as soon as `epoch` has been reported."""
    manifest = read_manifest(data_dir)
    args = trainer_args(params, data_dir, tmp_path / "killed", tmp_path / "checkpoints" / config_key(params, manifest),
                        False)
    (process_spec,) = launch_plan(params, preflight(params, data_dir), args, rank_environment(None) | quiet_env())
    job = subprocess.Popen(process_spec.command, env=process_spec.env, cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    for line in job.stdout:
        if f"epoch {epoch}:" in line:
            os.killpg(job.pid, signal.SIGKILL)
            break
    job.wait()
    assert job.returncode != 0


def test_a_killed_run_resumes_from_its_last_epoch(digits_data: Path, tmp_path: Path) -> None:
    params = Params(train=TrainParams(np=2, epochs=4, warmup_epochs=1))
    start_and_kill_after_epoch(params, digits_data, tmp_path, epoch=2)
    lines: list[str] = []
    out = train_for_test(params, digits_data, tmp_path, lines)
    reported = [int(m[1]) for line in lines if (m := re.search(r"epoch (\d+): ", line))]
    assert any("resuming from checkpoint at epoch 2" in line for line in lines)
    assert reported == [3, 4]
    found = digests(lines)
    assert len(found) == 2 and found[0] == found[1]  # all ranks restored identically
    summary = __import__("json").loads((out / "train_summary.json").read_text())
    assert summary["resumed_from_epoch"] == 2


def test_checkpoint_restores_with_and_without_a_strategy(digits_data: Path, tmp_path: Path) -> None:
    import numpy as np
    import tensorflow as tf

    from trainer.checkpoints import restore_weights
    from trainer.model_io import load_model
    from trainer.models import build_model
    params = Params(train=TrainParams(np=2, epochs=2))
    out = train_for_test(params, digits_data, tmp_path, [])
    directory = tmp_path / "checkpoints" / config_key(params, read_manifest(digits_data))
    trained = load_model(out).get_weights()
    plain = build_model("cnn", (8, 8, 1), 10)
    assert restore_weights(plain, directory) == 2
    with tf.distribute.MirroredStrategy(["/cpu:0"]).scope():
        mirrored = build_model("cnn", (8, 8, 1), 10)
        assert restore_weights(mirrored, directory) == 2
    for model in (plain, mirrored):
        assert all(np.array_equal(a, b) for a, b in zip(model.get_weights(), trained))
