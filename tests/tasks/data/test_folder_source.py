"""Image folders: class folders (or split folders of them), encoded bytes kept as they are."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

from tasks.data.prepare import prepare
from tasks.params import DataParams, InputParams
from trainer.prepared_data import SPLITS, read_manifest, shard_paths


def raw_examples(data_dir: Path) -> list[dict]:
    """Every record of every split, parsed by TensorFlow itself."""
    import tensorflow as tf
    manifest = read_manifest(data_dir)
    found = []
    for split in SPLITS:
        for record in tf.data.TFRecordDataset(shard_paths(data_dir, manifest, split)):
            feature = tf.train.Example.FromString(record.numpy()).features.feature
            found.append({key: (feature[key].bytes_list.value or feature[key].int64_list.value)[0]
                          for key in feature})
    return found


def make_image_folder(root: Path) -> dict[bytes, int]:
    """Class folders `ant` and `bee` with JPEG and PNG images of several sizes; returns file bytes -> label."""
    rng = np.random.default_rng(2)
    written = {}
    for label, name in enumerate(["ant", "bee"]):
        (root / name).mkdir(parents=True)
        for i in range(12):
            pixels = rng.integers(0, 256, (20 + i, 24 + 2 * i, 3), dtype=np.uint8)
            image_format = "JPEG" if i % 2 else "PNG"
            buffer = io.BytesIO()
            Image.fromarray(pixels).save(buffer, format=image_format)
            (root / name / f"{i}.{'jpg' if i % 2 else 'png'}").write_bytes(buffer.getvalue())
            written[buffer.getvalue()] = label
    return written


def test_image_folder_keeps_jpeg_and_png_bytes_as_they_are(tmp_path: Path) -> None:
    written = make_image_folder(tmp_path / "images")
    manifest = prepare(DataParams(dataset=f"folder:{tmp_path / 'images'}", min_shards=2),
                       tmp_path / "prepared", progress=False).manifest
    assert manifest["classes"] == ["ant", "bee"] and manifest["formats"] == {"jpeg": 12, "png": 12}
    assert manifest["uniform_size"] is False and manifest["shape_stats"]["height"] == {"min": 20, "max": 31,
                                                                                        "mean": 25.5}
    stored = {e["image/encoded"]: e["image/class/label"] for e in raw_examples(tmp_path / "prepared")}
    assert stored == written


def test_image_folder_feeds_resized_augmented_batches(tmp_path: Path) -> None:
    from tasks.launch.job_config import augmentation_on
    from trainer.data import model_input_shape, rank_dataset
    make_image_folder(tmp_path / "images")
    data_dir = tmp_path / "prepared"
    prepare(DataParams(dataset=f"folder:{tmp_path / 'images'}", min_shards=2), data_dir, progress=False)
    manifest = read_manifest(data_dir)
    assert not augmentation_on(InputParams(), manifest)  # auto: these are 20 to 31 px, below 64
    assert augmentation_on(InputParams(augment="on"), manifest)
    shape = model_input_shape(manifest, 16)
    batch, labels = next(iter(rank_dataset(data_dir, manifest, "train", batch_size=4, training=True,
                                           input_shape=shape, augment_ops=("crop", "flip", "brightness"))))
    assert batch.shape == (4, 16, 16, 3) and float(batch.numpy().max()) <= 255.0
    assert set(labels.numpy().tolist()) <= {0, 1}
