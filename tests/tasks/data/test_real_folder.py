"""A real image folder end to end: 1,500 real handwritten MNIST digits in mixed formats, sizes and channels, plus the
broken files such a folder holds, prepared with data.bad_images: skip and trained with Horovod."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.folders import add_broken_files, digit_folder
from tasks.data.prepare import prepare
from tasks.launch.job import train
from tasks.outputs.evaluate import evaluate
from tasks.params import DataParams, InputParams, Params, TrainParams
from trainer.config import CONFIG_FILE_NAME
from trainer.prepared_data import read_manifest

pytestmark = pytest.mark.slow  # conversion and a real Horovod training


def test_real_digits_with_broken_files_train_well_without_flips(tmp_path: Path) -> None:
    folder = digit_folder(tmp_path / "digits", per_class=150)
    broken = add_broken_files(folder)
    prepared = tmp_path / "prepared"
    prepare(DataParams(dataset=f"folder:{folder}", bad_images="skip"), prepared, progress=False)
    manifest = read_manifest(prepared)
    skipped = {Path(entry["file"]).relative_to(folder).as_posix(): entry["reason"] for entry in manifest["skipped"]}
    assert set(skipped) == set(broken)
    assert sum(split["count"] for split in manifest["splits"].values()) == 1500
    assert manifest["image_shape"][2] == 3 and not manifest["uniform_size"]  # some are colour; 28, 32, 40 px

    params = Params(train=TrainParams(np=1, epochs=16, warmup_epochs=1, tensorboard=False),
                    input=InputParams(image_size=28))
    lines: list[str] = []
    result = train(params, prepared, tmp_path / "model", tmp_path / "checkpoints", None, lines.append)
    job = json.loads((result.model_dir / CONFIG_FILE_NAME).read_text())["job"]
    assert job["augment"] is False  # auto: no augmentation below 64 px, so no flipped digits
    # ~225 test images: one run's accuracy spreads by about 2 points around 0.92 (CI once measured 0.897)
    assert evaluate(result.model_dir, prepared).metrics["test_accuracy"] >= 0.85, lines[-5:]
