"""tf.distribute backends through Keras fit: the strategy made for each one-process backend has the replicas the
plan counts (a strategy that disagrees stops the job), the lead process, the epoch the workers agree on, and the
training and validation input."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from tests.helpers import ROOT, quiet_env
from tests.trainer.configs import trainer_config, write_job_config
from trainer.backends.distribute import (
    agreed_start,
    compiled_model,
    is_lead,
    strategy_plan,
    task_of_this_process,
    train_input,
    validation_args,
)
from trainer.schedule import WarmupSchedule

# make_strategy sets up logical CPU devices, which only a process whose runtime has not started yet can do
MAKE_STRATEGIES = """
import json, sys
from trainer.backends.distribute import make_strategy, strategy_plan
from trainer.config import read_config
made = {}
for path in sys.argv[1:]:
    config = read_config(path)
    strategy = make_strategy(config)
    made[config.train.backend] = [type(strategy).__name__, strategy_plan(config, strategy).global_batch]
print(json.dumps(made))
"""


def test_each_one_process_backend_makes_the_strategy_whose_replicas_the_plan_counts(digits_data: Path,
                                                                                    tmp_path: Path) -> None:
    """np 2 on a host without GPUs: two logical CPU devices, one replica each (one for one-device)."""
    files = [write_job_config(trainer_config(digits_data, tmp_path, backend=backend, np=2, batch_size=8),
                              tmp_path / f"{backend}.json")
             for backend in ("mirrored", "central-storage", "one-device")]
    done = subprocess.run([sys.executable, "-c", MAKE_STRATEGIES, *map(str, files)], cwd=ROOT, env=quiet_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"mirrored": ["MirroredStrategy", 16],
                                                         "central-storage": ["CentralStorageStrategy", 16],
                                                         "one-device": ["OneDeviceStrategy", 8]}


def test_a_strategy_with_other_replicas_than_the_plan_stops_the_job(digits_data: Path, tmp_path: Path) -> None:
    config = trainer_config(digits_data, tmp_path, backend="mirrored", np=2)
    with pytest.raises(RuntimeError, match=r"^backend mirrored: the strategy has 1 replicas in sync, the plan 2 "
                                           r"\(GPUs per host: 0\)$"):
        strategy_plan(config, tf.distribute.MirroredStrategy(["/cpu:0"]))


def test_the_task_of_this_process_comes_from_tf_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert task_of_this_process() == ("chief", 0)
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {}, "task": {"type": "worker", "index": 3}}))
    assert task_of_this_process() == ("worker", 3)


def test_the_chief_or_else_worker_0_leads_a_multiworker_job_and_a_one_process_job_leads_itself(
        monkeypatch: pytest.MonkeyPatch) -> None:
    multiworker = tf.distribute.MultiWorkerMirroredStrategy()  # made without TF_CONFIG: this process alone
    one_device = tf.distribute.OneDeviceStrategy("/cpu:0")
    cluster = {"chief": ["localhost:1"], "worker": ["localhost:2", "localhost:3"]}
    for task, leads in ((("chief", 0), True), (("worker", 0), True), (("worker", 1), False)):
        monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": task[0], "index": task[1]}}))
        assert is_lead(multiworker) is leads and is_lead(one_device)
    assert agreed_start(multiworker, 3) == 3 and agreed_start(one_device, 2) == 2  # one worker agrees with itself


def test_training_input_is_per_replica_batches_of_the_models_input(digits_data: Path, tmp_path: Path) -> None:
    config = trainer_config(digits_data, tmp_path, backend="mirrored", inputs={"image_size": 12})
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    run = strategy_plan(config, strategy)
    images, labels = next(iter(strategy.distribute_datasets_from_function(train_input(config, run))))
    assert images.shape == (128, 12, 12, 1) and images.dtype == tf.float32 and labels.shape == (128,)


def test_validation_reads_the_whole_split_once_in_global_batches_except_for_parameter_servers(
        digits_data: Path, tmp_path: Path) -> None:
    config = trainer_config(digits_data, tmp_path, backend="mirrored")
    run = strategy_plan(config, tf.distribute.MirroredStrategy(["/cpu:0"]))
    records = run.manifest["splits"]["validation"]["count"]
    arguments = validation_args(config, run)
    sizes = [len(labels) for _, labels in arguments["validation_data"]]
    assert sum(sizes) == records and max(sizes) == run.global_batch
    assert arguments["validation_steps"] == len(sizes) == math.ceil(records / run.global_batch)
    servers = trainer_config(digits_data, tmp_path, backend="parameter-server")
    assert validation_args(servers, run) == {}


def test_the_model_is_compiled_under_the_strategy_with_the_plans_schedule(digits_data: Path, tmp_path: Path) -> None:
    config = trainer_config(digits_data, tmp_path, backend="one-device", learning_rate=0.01, warmup_epochs=1)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    run = strategy_plan(config, strategy)
    model = compiled_model(config, run, strategy)
    assert model.distribute_strategy is strategy
    schedule = model.optimizer.learning_rate
    assert isinstance(schedule, WarmupSchedule)
    assert schedule.get_config() == {"initial": 0.0, "target": 0.01, "warmup_steps": run.steps_per_epoch}
