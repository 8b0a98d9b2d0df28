"""Horovod's set-up shared by the fit and tape backends: joining the ring, one answer for the resumed epoch, the
gradient compression (each rank of the session's Horovod trainings is a ring of one)."""
from __future__ import annotations

import socket
from pathlib import Path

from tests.trainer.backends.one_process import FAILED, Trained
from tests.trainer.configs import trainer_config
from trainer.backends.horovod_common import compression
from trainer.backends.horovod_keras import hvd
from trainer.model_io import read_train_summary
from trainer.protocol import parse_epoch_line, parse_placed, resumed_epochs, weights_digests


def test_every_rank_says_first_where_it_runs_in_its_ring(horovod_trainings: dict[str, Trained]) -> None:
    for trained in horovod_trainings.values():
        assert parse_placed(trained.lines[0]) == (0, 1, socket.gethostname()), trained.lines[:3]


def test_the_ranks_resume_from_the_runs_latest_checkpoint_and_rank_0_says_so(
        horovod_trainings: dict[str, Trained]) -> None:
    lines = horovod_trainings["fit"].lines
    assert resumed_epochs("\n".join(lines)) == [1]
    assert [found[0] for line in lines if (found := parse_epoch_line(line))] == [2]  # epoch 1 is not trained again


def test_a_job_whose_checkpoint_holds_every_epoch_saves_the_restored_model_without_training(
        horovod_trainings: dict[str, Trained]) -> None:
    """As the retry of a job whose rank failed after the last epoch's checkpoint, before the model was saved."""
    finished = horovod_trainings["finished"]
    assert not any(line.startswith(FAILED) for line in finished.lines), finished.lines[-3:]
    assert resumed_epochs("\n".join(finished.lines)) == [1]
    assert not any(parse_epoch_line(line) for line in finished.lines)
    assert [who for who, _ in weights_digests("\n".join(finished.lines))] == ["rank=0"]
    assert read_train_summary(finished.config.job.out_dir)["resumed_from_epoch"] == 1


def test_gradients_are_compressed_to_fp16_only_when_asked(tmp_path: Path) -> None:
    assert compression(trainer_config(tmp_path, tmp_path, fp16_allreduce=True)) is hvd.Compression.fp16
    assert compression(trainer_config(tmp_path, tmp_path)) is hvd.Compression.none


def test_a_rank_takes_its_local_ranks_gpu_or_the_one_slurm_gave_its_task() -> None:
    from trainer.backends.horovod_common import own_gpu
    assert [own_gpu(local_rank, 4) for local_rank in range(4)] == [0, 1, 2, 3]  # every task sees the node's 4
    assert [own_gpu(local_rank, 1) for local_rank in range(4)] == [0, 0, 0, 0]  # --gpus-per-task: one each
