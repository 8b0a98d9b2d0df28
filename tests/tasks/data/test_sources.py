"""Data sources to TFRecords: the TF-free codec, npz, image folders, tfds (mock data), caching."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tasks.data.prepare import prepare
from tasks.data.source_data import SourceError
from tasks.data.tfrecord_writer import TFRecordFile, encode_example
from tasks.data.validate import validate
from tasks.params import DataParams, InputParams, ParamsError, load_params
from tests.helpers import read_split
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


def test_hand_written_example_and_framing_read_back_in_tensorflow(tmp_path: Path) -> None:
    import tensorflow as tf
    path = tmp_path / "x.tfrecord"
    with TFRecordFile(path) as writer:
        writer.write(encode_example(b"\x89PNG-bytes", "png", 300, (28, 29, 3)))
    assert not (tmp_path / "x.tfrecord.tmp").exists()
    (record,) = list(tf.data.TFRecordDataset(str(path)))
    feature = tf.train.Example.FromString(record.numpy()).features.feature
    assert feature["image/encoded"].bytes_list.value == [b"\x89PNG-bytes"]
    assert feature["image/format"].bytes_list.value == [b"png"]
    assert [feature[k].int64_list.value[0] for k in ("image/class/label", "image/height", "image/width",
                                                      "image/channels")] == [300, 28, 29, 3]


def test_npz_source_converts_in_parallel_pixel_exact(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 256, (5000, 12, 10, 3), dtype=np.uint8), rng.integers(0, 7, 5000)
    np.savez(tmp_path / "arrays.npz", x=x, y=y)
    params = DataParams(dataset=f"npz:{tmp_path / 'arrays.npz'}", workers=2, min_shards=4)
    manifest = prepare(params, tmp_path / "prepared", progress=False).manifest
    assert manifest["image_shape"] == [12, 10, 3] and manifest["num_classes"] == 7
    images, labels = zip(*(read_split(tmp_path / "prepared", split) for split in SPLITS))
    read_back = sorted(zip(np.concatenate(labels).tolist(), map(bytes, np.concatenate(images).astype(np.uint8))))
    assert read_back == sorted(zip(y.tolist(), map(bytes, x)))


def test_npz_with_its_own_splits_keeps_them(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    arrays = {f"{k}_{s}": v for s, n in (("train", 60), ("test", 25)) for k, v in
              (("x", rng.integers(0, 256, (n, 6, 6), dtype=np.uint8)), ("y", rng.integers(0, 3, n)))}
    np.savez(tmp_path / "split.npz", classes=np.array(["cat", "dog", "eel"]), **arrays)
    manifest = prepare(DataParams(dataset=f"npz:{tmp_path / 'split.npz'}"), tmp_path / "p", progress=False).manifest
    counts = {split: manifest["splits"][split]["count"] for split in SPLITS}
    assert counts["test"] == 25 and counts["train"] + counts["validation"] == 60
    assert manifest["classes"] == ["cat", "dog", "eel"] and manifest["channels"] == 1


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


def test_tfds_source_through_mock_data(tmp_path: Path) -> None:
    import tensorflow_datasets as tfds
    params = DataParams(dataset="tfds:mnist", data_dir=str(tmp_path / "tfds"), val_fraction=0.25)
    with tfds.testing.mock_data(num_examples=40):
        manifest = prepare(params, tmp_path / "prepared", progress=False).manifest
    counts = {split: manifest["splits"][split]["count"] for split in SPLITS}
    assert counts == {"train": 30, "validation": 10, "test": 40}  # validation carved from train by seed
    assert manifest["classes"] == [str(i) for i in range(10)] and manifest["image_shape"] == [28, 28, 1]
    assert manifest["formats"] == {"png": 80}
    assert validate(tmp_path / "prepared")["splits"]["test"]["records"] == 40


def test_tfds_without_data_and_downloads_off_says_what_to_do(tmp_path: Path) -> None:
    params = DataParams(dataset="tfds:mnist", data_dir=str(tmp_path / "empty"), download=False)
    with pytest.raises(SourceError, match=r"not in .*empty and downloads are off: set data.download: true"):
        prepare(params, tmp_path / "prepared", progress=False)


def test_prepare_again_with_same_source_and_params_is_skipped(tmp_path: Path) -> None:
    out = tmp_path / "prepared"
    assert prepare(DataParams(), out, progress=False).skipped is False
    stamps = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert prepare(DataParams(workers=1), out, progress=False).skipped is True  # workers do not change data
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == stamps
    assert prepare(DataParams(min_shards=4), out, progress=False).skipped is False


@pytest.mark.parametrize(("dataset", "message"), [
    ("folder:/no/such/dir", "image folder /no/such/dir does not exist"),
    ("npz:/no/such.npz", "npz file /no/such.npz does not exist"),
    ("tfds:", "unknown dataset 'tfds:'"),
    ("csv:x", "unknown dataset 'csv:x'"),
])
def test_bad_dataset_spec_is_one_clear_line(dataset: str, message: str) -> None:
    with pytest.raises(ParamsError, match=f"bad parameter data.dataset: {message}"):
        load_params({"dataset": dataset})
