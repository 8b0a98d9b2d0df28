"""Horovod for real: 2 ranks over Gloo end with identical weights."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks.launch.environment import rank_environment
from tasks.launch.job_config import write_trainer_config
from tasks.launch.launchers.horovodrun import horovod_command
from tasks.launch.supervise.processes import run_streaming
from tasks.params import Params, TrainParams
from tests.helpers import ROOT, quiet_env
from trainer.config import JobSpec
from trainer.model_io import read_train_summary
from trainer.models import build_model
from trainer.protocol import weights_digests
from trainer.tuning import HOROVOD_FUSION_MB, usable_cores

pytestmark = pytest.mark.slow  # real horovodrun


def test_two_ranks_end_with_identical_weights(digits_data: Path, tmp_path: Path) -> None:
    """... with the job's tuning applied: params.yaml's threads, the job's Horovod cycle, each rank's share of the
    cores for the rest."""
    lines: list[str] = []
    params = Params(train=TrainParams(np=2, epochs=2, inter_op_threads=3, data_threads=2))
    job = JobSpec(data_dir=digits_data, out_dir=tmp_path, checkpoint_dir=tmp_path / "checkpoints", checkpoint_owner="t",
                  augment=False, data_fingerprint="f", metrics_retry_seconds=60, cycle_time_ms=3.5)
    command = horovod_command(params, "gloo", write_trainer_config(params, job))
    run_streaming(command, rank_environment() | quiet_env(), ROOT, lines.append)
    digests = {who.removeprefix("rank="): digest for who, digest in weights_digests("\n".join(lines))}
    assert set(digests) == {"0", "1"}, lines[-20:]
    assert digests["0"] == digests["1"]
    assert (tmp_path / "model.weights.h5").is_file()  # rank 0 saved the model
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("ckpt-*.index")) == ["ckpt-1.index", "ckpt-2.index"]
    assert any("epoch 2:" in line and "images_per_sec=" in line for line in lines)
    measured = read_train_summary(tmp_path)["communication"]  # the averaging timed by both ranks after the epochs
    trainable = build_model("cnn", (8, 8, 1), 10).count_params()  # the digits' CNN: all its weights train
    assert measured["gradient_bytes"] == 4 * trainable and measured["allreduce_ms"] > 0
    assert measured["step_ms"] > 0 and 0 < measured["allreduce_share"] <= 1
    assert read_train_summary(tmp_path)["tuning"] == {
        "intra_op_threads": max(1, usable_cores() // 2), "inter_op_threads": 3, "data_threads": 2,
        "cycle_time_ms": 3.5, "fusion_threshold_mb": HOROVOD_FUSION_MB, "gradient_bytes": 4 * trainable}

