"""What every backend shares: the plan's sizes and scaled rate, each pipeline's training batches, the precision,
optimizer and loss, the reporting (line, sink, TensorBoard), the weights digest and the saved result."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tests.trainer.configs import trainer_config
from trainer import session
from trainer.callbacks import EpochReport, Throughput
from trainer.model_io import load_model, read_spec, read_train_summary
from trainer.models import build_model
from trainer.protocol import parse_epoch_line, weights_digests
from trainer.schedule import WarmupSchedule


def test_the_plan_counts_batches_shares_steps_and_the_scaled_warmed_up_rate(digits_data: Path, tmp_path: Path) -> None:
    config = trainer_config(digits_data, tmp_path, backend="horovod", batch_size=32, learning_rate=0.001,
                            warmup_epochs=2, inputs={"image_size": 16})
    run = session.plan(config, processes=2, gpus_per_host=0)
    assert (run.replicas, run.global_batch, run.input_shape) == (2, 64, (16, 16, 1))
    assert run.data.records == (628, 629) and run.data.batch_size == 32  # the 1257 training records, cut in two
    assert (run.steps_per_epoch, run.warmup_steps) == (628 // 32, 2 * (628 // 32))
    assert run.learning_rate == (0.001, 0.002)  # from the one-replica rate to twice it
    unscaled = trainer_config(digits_data, tmp_path, backend="horovod", scale_lr=False)
    assert session.plan(unscaled, processes=2, gpus_per_host=0).learning_rate == (0.0, 0.001)


def test_a_global_batch_larger_than_a_share_still_plans_one_step(digits_data: Path, tmp_path: Path) -> None:
    config = trainer_config(digits_data, tmp_path, backend="horovod", batch_size=1024)
    run = session.plan(config, processes=2, gpus_per_host=0)
    assert run.data.steps_per_epoch == 0 and run.steps_per_epoch == 1


def test_each_pipeline_trains_on_batches_of_the_models_input(digits_data: Path, tmp_path: Path) -> None:
    config = trainer_config(digits_data, tmp_path, inputs={"image_size": 12}, augment=True)
    run = session.plan(config, processes=2, gpus_per_host=0)
    images, labels = next(iter(session.training_dataset(config, run, rank=1, size=2, batch_size=16)))
    assert images.shape == (16, 12, 12, 1) and images.dtype == tf.float32 and labels.dtype == tf.int32
    assert 0 <= float(tf.reduce_min(images)) and float(tf.reduce_max(images)) <= 255


def test_training_distortions_are_the_configured_ones_only_when_the_job_augments(tmp_path: Path) -> None:
    inputs = {"augment_ops": ["crop", "contrast"]}
    assert session.augment_ops(trainer_config(tmp_path, tmp_path, inputs=inputs, augment=True)) == ("crop", "contrast")
    assert session.augment_ops(trainer_config(tmp_path, tmp_path, inputs=inputs, augment=False)) == ()


def test_the_precision_sets_the_global_policy(tmp_path: Path) -> None:
    try:
        session.set_precision(trainer_config(tmp_path, tmp_path, precision="mixed_bfloat16"))
        assert tf.keras.mixed_precision.global_policy().name == "mixed_bfloat16"
        session.set_precision(trainer_config(tmp_path, tmp_path, precision="fp32"))
        assert tf.keras.mixed_precision.global_policy().name == "float32"
    finally:
        tf.keras.mixed_precision.set_global_policy("float32")


def test_the_optimizer_follows_the_plans_schedule_and_the_loss_reduces_as_asked(digits_data: Path,
                                                                                 tmp_path: Path) -> None:
    config = trainer_config(digits_data, tmp_path, backend="horovod", warmup_epochs=1)
    run = session.plan(config, 4, 0)
    schedule = session.make_optimizer(run).learning_rate
    assert isinstance(schedule, WarmupSchedule)
    assert (schedule.initial, schedule.target, schedule.warmup_steps) == (*run.learning_rate, run.steps_per_epoch)
    labels, probabilities = tf.constant([0, 1]), tf.constant([[0.5, 0.5], [0.25, 0.75]])
    per_example = session.loss_function(config, "none")(labels, probabilities)
    assert per_example.shape == (2,)
    assert float(session.loss_function(config)(labels, probabilities)) == \
        pytest.approx(float(tf.reduce_mean(per_example)))
    huber = trainer_config(digits_data, tmp_path, backend="horovod", loss="huber")  # a Keras loss by name
    targets, predicted = tf.constant([[0.0], [1.0]]), tf.constant([[0.5], [3.0]])
    assert session.loss_function(huber, "none")(targets, predicted).shape == (2,)


def test_fit_reports_the_task_s_metric_and_train_metrics_on_class_ids(digits_data: Path, tmp_path: Path) -> None:
    """A classifier's labels are class ids: train.metrics named for one-hot labels are taken on class ids."""
    config = trainer_config(digits_data, tmp_path, backend="horovod",
                            metrics=["top_k_categorical_accuracy", "categorical_accuracy"])
    run = session.plan(config, 1, 0)
    model = build_model("small_cnn", (8, 8, 1), 10)
    model.compile(optimizer=session.make_optimizer(run), **session.compile_options(config, run))
    images, labels = np.ones((4, 8, 8, 1), "float32"), np.array([0, 1, 2, 3])
    result = model.train_on_batch(images, labels, return_dict=True)
    assert set(result) == {"loss", "accuracy", "sparse_top_k_categorical_accuracy", "sparse_categorical_accuracy"}
    assert 0.0 <= result["sparse_top_k_categorical_accuracy"] <= 1.0


def test_the_reporting_process_reports_throughput_and_epochs_and_tensorboard_when_asked(
        digits_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    quiet = trainer_config(digits_data, tmp_path)
    run = session.plan(quiet, 1, 0)
    assert [type(callback) for callback in session.reporting_callbacks(quiet, run)] == [Throughput, EpochReport]
    board = trainer_config(digits_data, tmp_path, tensorboard=True)
    *_, tensorboard = session.reporting_callbacks(board, run)
    assert isinstance(tensorboard, tf.keras.callbacks.TensorBoard)
    assert Path(tensorboard.log_dir) == session.tensorboard_dir(board) == board.job.out_dir / "tensorboard"


def test_a_custom_loops_epoch_goes_to_the_line_the_sink_and_tensorboard(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sunk: list[tuple[int, dict]] = []
    writer = tf.summary.create_file_writer(str(tmp_path))
    session.report_epoch(4, {"loss": 0.5, "val_accuracy": 0.75}, lambda epoch, logs: sunk.append((epoch, logs)),
                         writer)
    writer.close()
    assert parse_epoch_line(capsys.readouterr().out.strip()) == (5, {"loss": 0.5, "val_accuracy": 0.75})
    assert sunk == [(4, {"loss": 0.5, "val_accuracy": 0.75})]
    events = [tf.compat.v1.Event.FromString(record.numpy())
              for record in tf.data.TFRecordDataset([str(path) for path in tmp_path.glob("events.out.tfevents.*")])]
    scalars = {(value.tag, event.step): float(tf.make_ndarray(value.tensor))
               for event in events for value in event.summary.value}
    assert scalars == {("loss", 4): 0.5, ("val_accuracy", 4): 0.75}
    session.report_epoch(5, {"loss": 0.25}, None, None)  # a process that only prints
    assert parse_epoch_line(capsys.readouterr().out.strip()) == (6, {"loss": 0.25})


def test_the_weights_digest_tells_equal_weights_from_different_ones(capsys: pytest.CaptureFixture[str]) -> None:
    model, copy = build_model("small_cnn", (8, 8, 1), 3), build_model("small_cnn", (8, 8, 1), 3)
    copy.set_weights(model.get_weights())
    assert session.weights_digest(model) == session.weights_digest(copy)
    changed = [weight.copy() for weight in model.get_weights()]
    changed[-1][0] += 1e-6
    copy.set_weights(changed)
    assert session.weights_digest(model) != session.weights_digest(copy)
    session.print_weights_digest(model, "rank=3")
    assert weights_digests(capsys.readouterr().out) == [("rank=3", session.weights_digest(model))]


def test_the_result_is_the_model_its_spec_and_a_summary_of_the_run(digits_data: Path, tmp_path: Path) -> None:
    config = trainer_config(digits_data, tmp_path, backend="horovod", model="small_cnn")
    run = session.plan(config, processes=2, gpus_per_host=0)
    model = build_model("small_cnn", run.input_shape, 10)
    session.save_results(config, model, run, {"loss": [np.float32(0.5), 0.25]}, tmp_path / "out", started_epoch=3)
    assert read_spec(tmp_path / "out") == {"model": "small_cnn", "model_args": {}, "input_shape": [8, 8, 1],
                                           "num_classes": 10, "classes": run.manifest["classes"],
                                           "task": "classification", "outputs": 10, "model_source": None}
    assert session.weights_digest(load_model(tmp_path / "out")) == session.weights_digest(model)
    summary = read_train_summary(tmp_path / "out")
    assert summary == {"backend": "horovod", "world_size": 2, "global_batch_size": 256, "steps_per_epoch": 4,
                       "learning_rate": 0.002, "warmup_start_learning_rate": 0.001, "warmup_steps": 8,
                       "resumed_from_epoch": 3, "precision": "fp32", "records_per_rank": [628, 629],
                       "dropped_per_rank": [628 - 4 * 128, 629 - 4 * 128], "history": {"loss": [0.5, 0.25]},
                       "tuning": {"gradient_bytes": 4 * model.count_params()}}  # the small cnn's weights all train


def test_fit_s_training_iterator_is_held_until_the_process_ends() -> None:
    """Deleting it at the end of fit would wait for tf.data's autotuning round: it is kept, and fit trains as before
    (the process ends by os._exit, which deletes nothing)."""
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    endless = tf.data.Dataset.from_tensor_slices((np.ones((8, 4), np.float32), np.zeros(8, np.int64))).batch(4)
    held_before = len(session._HELD_INPUTS)
    session.hold_training_input(model)
    history = model.fit(endless.repeat().prefetch(tf.data.AUTOTUNE), epochs=2, steps_per_epoch=3, verbose=0)
    assert len(history.history["loss"]) == 2
    assert len(session._HELD_INPUTS) == held_before + 1  # one iterator for every epoch of the endless dataset
    assert isinstance(session._HELD_INPUTS[-1], tf.data.Iterator)
