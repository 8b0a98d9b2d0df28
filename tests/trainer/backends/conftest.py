"""Horovod for the fast tier: the Horovod backends' own train(), each as the one rank of a ring of one (hvd size
1, no horovodrun), all in one process started once per session, on the digits."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainer.backends.one_process import Trained, train_in_one_process
from tests.trainer.configs import OWNER, trainer_config
from trainer.config import TrainerConfig


def save_epoch_one(config: TrainerConfig) -> None:
    """A checkpoint of one epoch in the job's checkpoint directory, as an earlier run of the job leaves it."""
    import tensorflow as tf

    from trainer.checkpoints import Checkpoints
    from trainer.models import build_model
    model = build_model(config.train.model, (8, 8, 1), 10)
    Checkpoints(config.job.checkpoint_dir, model, tf.keras.optimizers.legacy.Adam(), 3, OWNER).save(1)


@pytest.fixture(scope="session")
def horovod_trainings(digits_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Trained]:
    """fit: `horovod` resuming from a checkpoint of epoch 1 to epoch 2; tape: `horovod-tape` with fp16 allreduce,
    one epoch; elastic: `horovod` with train.elastic, two epochs; finished: `horovod` whose checkpoint already holds
    its only epoch (it saves the model restored from it)."""
    work = tmp_path_factory.mktemp("horovod")
    configs = {
        "fit": trainer_config(digits_data, work / "fit", epochs=2),
        "tape": trainer_config(digits_data, work / "tape", backend="horovod-tape", fp16_allreduce=True),
        "elastic": trainer_config(digits_data, work / "elastic", epochs=2, elastic={"min_np": 1, "max_np": 2}),
        "finished": trainer_config(digits_data, work / "finished", epochs=1),
    }
    save_epoch_one(configs["fit"])
    save_epoch_one(configs["finished"])
    return train_in_one_process(configs, work)
