"""The prepared data as the processes read it: a missing manifest says which step to run, shard paths are the
manifest's in its order, and every record the preparation wrote parses with the readers' feature spec."""
from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf

from trainer.prepared_data import SPLITS, feature_spec, read_manifest, shard_paths


def test_a_directory_without_a_manifest_says_to_run_the_prepare_step(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no prepared data: .*manifest\.json is missing \(run the prepare "
                                                r"step\)"):
        read_manifest(tmp_path)


def test_shard_paths_are_the_manifests_files_in_its_order(tmp_path: Path) -> None:
    manifest = {"splits": {"test": {"shards": [{"file": "b.tfrecord"}, {"file": "a.tfrecord"}]}}}
    assert shard_paths(tmp_path, manifest, "test") == [str(tmp_path / "b.tfrecord"), str(tmp_path / "a.tfrecord")]


def test_every_prepared_record_parses_with_the_feature_spec(digits_data: Path) -> None:
    manifest = read_manifest(digits_data)
    assert set(manifest["splits"]) == set(SPLITS)
    for split in SPLITS:
        records = tf.data.TFRecordDataset(shard_paths(digits_data, manifest, split)).batch(100_000)
        parsed = {key: value.numpy() for key, value in tf.io.parse_example(next(iter(records)), feature_spec()).items()}
        assert len(parsed["image/class/label"]) == manifest["splits"][split]["count"]
        assert set(parsed["image/class/label"]) <= set(range(manifest["num_classes"]))
        for key, size in zip(("height", "width", "channels"), manifest["image_shape"]):
            assert set(parsed[f"image/{key}"]) == {size}
        assert set(parsed["image/format"]) == {b"png"}
        assert tf.io.decode_png(parsed["image/encoded"][0]).shape == tuple(manifest["image_shape"])


def test_the_tensor_spec_reads_the_shapes_of_the_manifest() -> None:
    from trainer.prepared_data import tensor_feature_spec
    spec = tensor_feature_spec({"kind": "tensor", "feature_shape": [16, 3], "target_shape": [2]})
    assert (spec["x"].shape, spec["x"].dtype, spec["y"].shape, spec["y"].dtype) == ([48], tf.float32, [2], tf.float32)
