"""What one training job is: augmentation resolved against the data, whom its checkpoints belong to, the checks of
checkpoints to resume, and the configuration file every process reads."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks.launch import job_config
from tasks.launch.errors import PreflightError
from tasks.launch.job_config import (
    augmentation_on,
    check_resumable,
    checkpoint_owner,
    config_key,
    job_spec,
    trained_already,
    write_trainer_config,
)
from tasks.params import Params, TrackingParams
from trainer.checkpoint_files import OWNER_FILE
from trainer.config import CONFIG_FILE_NAME, InputParams, TrainParams, read_config
from trainer.model_io import TRAIN_SUMMARY

MANIFEST = {"image_shape": [8, 8, 1], "fingerprint": "digits-v1"}


def params(**train: object) -> Params:
    return Params(train=TrainParams(**train))


def checkpoints(directory: Path, owner: str | None, epochs: int | None) -> Path:
    """A checkpoint directory as the trainer leaves it: its owner and the index of the latest checkpoint."""
    directory.mkdir(parents=True, exist_ok=True)
    if owner is not None:
        (directory / OWNER_FILE).write_text(json.dumps({"owner": owner}))
    if epochs is not None:
        (directory / "checkpoint").write_text(f'model_checkpoint_path: "ckpt-{epochs}"\n'
                                              f'all_model_checkpoint_paths: "ckpt-{epochs}"\n')
    return directory


@pytest.mark.parametrize(("augment", "shape", "on"), [
    ("on", [8, 8, 1], True), ("off", [224, 224, 3], False),
    ("auto", [64, 64, 3], True), ("auto", [63, 200, 3], False), ("auto", [200, 63, 3], False),
    ("auto", [8, 8, 1], False),
])
def test_augmentation_is_as_asked_and_auto_augments_images_of_64_px_or_more(augment: str, shape: list[int],
                                                                            on: bool) -> None:
    assert augmentation_on(InputParams(augment=augment), {"image_shape": shape}) is on


@pytest.mark.parametrize("change", [{"epochs": 50}, {"resume_from": "abc"}, {"keep_checkpoints": 9},
                                    {"scaling_np": [1, 4]}, {"tensorboard": False}, {"intra_op_threads": 2},
                                    {"stall_timeout_seconds": 5}, {"timeout_minutes": 3.0}, {"shared_fs": True},
                                    {"network_interface": "eth0"}])
def test_settings_that_do_not_change_the_model_keep_the_config(change: dict) -> None:
    assert config_key(params(**change), MANIFEST) == config_key(params(), MANIFEST)


@pytest.mark.parametrize("change", [{"batch_size": 16}, {"learning_rate": 0.01}, {"model": "small_cnn"}, {"seed": 1},
                                    {"backend": "mirrored"}, {"precision": "mixed_float16"}, {"np": 4}])
def test_settings_that_change_the_training_change_the_config(change: dict) -> None:
    assert config_key(params(**change), MANIFEST) != config_key(params(), MANIFEST)


def test_the_input_pipeline_and_the_data_are_part_of_the_config() -> None:
    base = config_key(Params(), MANIFEST)
    assert config_key(Params(input=InputParams(augment="on")), MANIFEST) != base
    assert config_key(Params(), MANIFEST | {"fingerprint": "digits-v2"}) != base


def test_sections_outside_training_are_not_part_of_the_config() -> None:
    assert config_key(Params(tracking=TrackingParams(experiment="other")), MANIFEST) == config_key(Params(), MANIFEST)


def test_without_np_the_config_is_the_same_at_every_scale() -> None:
    small, large = params(np=1), params(np=8, hosts="h1:4,h2:4")
    assert config_key(small, MANIFEST, with_np=False) == config_key(large, MANIFEST, with_np=False)
    assert config_key(small, MANIFEST) != config_key(large, MANIFEST)


def test_the_config_key_is_short_hex() -> None:
    key = config_key(Params(), MANIFEST)
    assert len(key) == 16 and int(key, 16) >= 0


def test_checkpoints_belong_to_the_config_and_the_code_version(monkeypatch: pytest.MonkeyPatch) -> None:
    owner = checkpoint_owner(Params(), MANIFEST)
    assert len(owner) == 16 and owner == checkpoint_owner(params(epochs=99), MANIFEST)
    assert owner != checkpoint_owner(params(batch_size=16), MANIFEST)
    monkeypatch.setattr(job_config, "code_digest", lambda: "another-code-version")
    assert checkpoint_owner(Params(), MANIFEST) != owner


def test_the_user_s_model_file_is_part_of_the_config_and_of_a_finished_job(tmp_path: Path) -> None:
    """A changed model file (same params) is another config: its checkpoints are not resumed and the finished job
    of the old file is trained again; the same file is the same config, the job recorded, not launched."""
    net = tmp_path / "net.py"
    net.write_text("def build(input_shape, outputs):\n    return None\n")
    own = params(model=f"{net}:build", epochs=2)
    key, owner = config_key(own, MANIFEST), checkpoint_owner(own, MANIFEST)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "manifest.json").write_text(json.dumps(MANIFEST))
    out_dir, checkpoint_dir = tmp_path / "model", checkpoints(tmp_path / "ckpt", owner, 2)
    job = job_spec(own, data_dir, out_dir, checkpoint_dir)
    write_trainer_config(own, job)
    (out_dir / TRAIN_SUMMARY).write_text("{}")
    assert (config_key(own, MANIFEST), checkpoint_owner(own, MANIFEST)) == (key, owner)
    assert trained_already(own, data_dir, out_dir, checkpoint_dir)
    net.write_text("def build(input_shape, outputs):\n    return 1\n")
    assert config_key(own, MANIFEST) != key and checkpoint_owner(own, MANIFEST) != owner
    assert not trained_already(own, data_dir, out_dir, checkpoint_dir)
    with pytest.raises(PreflightError, match="belong to another config or code"):
        check_resumable(own, checkpoint_dir, checkpoint_owner(own, MANIFEST))


def test_empty_or_missing_checkpoints_can_be_resumed(tmp_path: Path) -> None:
    check_resumable(Params(), tmp_path / "none", "owner")
    check_resumable(Params(), checkpoints(tmp_path / "empty", None, None), "owner")


@pytest.mark.parametrize("done", [4, 5])
def test_checkpoints_of_the_same_owner_with_epochs_left_or_all_can_be_resumed(tmp_path: Path, done: int) -> None:
    """All 5 epochs checkpointed: the job that trained them failed before it saved the model, and the ranks launched
    again save it without training."""
    check_resumable(params(epochs=5), checkpoints(tmp_path, "me", done), "me")


def test_checkpoints_of_another_owner_are_refused_as_bad_input(tmp_path: Path) -> None:
    directory = checkpoints(tmp_path, "someone-else", 2)
    with pytest.raises(PreflightError, match=f"^the checkpoints in {directory} belong to another config or code "
                                             r"version \(someone-else, this job is me\)") as raised:
        check_resumable(params(epochs=5), directory, "me")
    assert raised.value.bad_input and raised.value.__cause__ is None


@pytest.mark.parametrize("done", [6, 7])
def test_a_job_whose_checkpoints_hold_more_epochs_than_it_trains_is_refused(tmp_path: Path, done: int) -> None:
    with pytest.raises(PreflightError, match=f"^nothing to train: the run's checkpoints already hold {done} epochs "
                                             r"and train.epochs is 5 \(raise train.epochs to continue it\)$"):
        check_resumable(params(epochs=5), checkpoints(tmp_path, "me", done), "me")


def test_the_job_spec_says_where_things_are_whom_they_belong_to_and_augmentation(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "manifest.json").write_text(json.dumps({"image_shape": [96, 96, 3], "fingerprint": "f"}))
    spec = job_spec(Params(), data_dir, tmp_path / "out", tmp_path / "ckpt")
    assert (spec.data_dir, spec.out_dir, spec.checkpoint_dir) == (data_dir, tmp_path / "out", tmp_path / "ckpt")
    assert spec.augment is True  # auto on 96 px images
    assert spec.checkpoint_owner == checkpoint_owner(Params(), {"image_shape": [96, 96, 3], "fingerprint": "f"})


def test_a_job_without_prepared_data_names_the_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no prepared data: .*manifest.json is missing"):
        job_spec(Params(), tmp_path, tmp_path / "out", tmp_path / "ckpt")


def test_the_config_file_holds_the_resolved_params_and_the_job_as_the_processes_read_them(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "manifest.json").write_text(json.dumps(MANIFEST))
    run_params = Params(train=TrainParams(epochs=3, hosts="localhost:2"), input=InputParams(augment="off"),
                        tracking=TrackingParams(experiment="exp"))
    job = job_spec(run_params, data_dir, tmp_path / "model dir", tmp_path / "ckpt")
    path = write_trainer_config(run_params, job)
    assert path == tmp_path / "model dir" / CONFIG_FILE_NAME
    config = read_config(path)
    assert (config.train, config.input, config.job) == (run_params.train, run_params.input, job)
    assert json.loads(path.read_text())["tracking"] == {"experiment": "exp", "ui_url": "http://127.0.0.1:5000",
                                                      "uri": None, "retry_minutes": 5.0}


def trained_job(tmp_path: Path, run_params: Params, epochs_saved: int, summary: bool = True) -> tuple[Path, Path]:
    """A run's model directory and checkpoints as a job leaves them (summary written or not)."""
    data_dir, model_dir = tmp_path / "data", tmp_path / "model"
    data_dir.mkdir(exist_ok=True)
    (data_dir / "manifest.json").write_text(json.dumps(MANIFEST))
    write_trainer_config(run_params, job_spec(run_params, data_dir, model_dir, tmp_path / "ckpt"))
    if summary:
        (model_dir / TRAIN_SUMMARY).write_text("{}")
    checkpoints(tmp_path / "ckpt", checkpoint_owner(run_params, MANIFEST), epochs_saved)
    return data_dir, model_dir


def test_a_job_that_trained_every_epoch_into_its_model_is_recorded_not_launched_again(tmp_path: Path) -> None:
    data_dir, model_dir = trained_job(tmp_path, params(epochs=3), 3)
    assert trained_already(params(epochs=3), data_dir, model_dir, tmp_path / "ckpt")


@pytest.mark.parametrize(("asked", "saved", "summary"), [
    (params(epochs=4), 3, True),  # a resume that asks for more epochs trains them
    (params(epochs=3), 2, True),  # checkpoints behind the model: not this job's
    (params(epochs=3), 3, False),  # no summary: the job did not end
    (params(epochs=3, learning_rate=0.5), 3, True),  # another config
])
def test_a_job_with_epochs_left_another_config_or_no_summary_is_not_done(tmp_path: Path, asked: Params, saved: int,
                                                                          summary: bool) -> None:
    data_dir, model_dir = trained_job(tmp_path, params(epochs=3), saved, summary)
    assert not trained_already(asked, data_dir, model_dir, tmp_path / "ckpt")
