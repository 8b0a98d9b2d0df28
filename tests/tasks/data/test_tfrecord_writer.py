"""The TF-free TFRecord writer: examples and framing written by hand, read back by TensorFlow itself."""
from __future__ import annotations

from pathlib import Path

from tasks.data.tfrecord_writer import TFRecordFile, encode_example


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


def test_hand_written_tensor_example_parses_in_tensorflow_to_the_same_floats(tmp_path: Path) -> None:
    import numpy as np
    import tensorflow as tf

    from tasks.data.tfrecord_writer import encode_tensor_example
    from trainer.prepared_data import tensor_feature_spec
    features = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    features[0, 0], features[0, 1] = np.float32(1e-40), np.float32(-3.4e38)  # a subnormal and the float32 edge
    targets = np.array([2.5, -1.0], np.float32)
    path = tmp_path / "t.tfrecord"
    with TFRecordFile(path) as writer:
        writer.write(encode_tensor_example(features, targets))
    (record,) = list(tf.data.TFRecordDataset(str(path)))
    feature = tf.train.Example.FromString(record.numpy()).features.feature
    assert np.array_equal(np.array(feature["x"].float_list.value, np.float32), features.reshape(-1))
    parsed = tf.io.parse_single_example(record, tensor_feature_spec({"feature_shape": [4, 3], "target_shape": [2]}))
    assert np.array_equal(parsed["x"].numpy(), features.reshape(-1)) and np.array_equal(parsed["y"].numpy(), targets)
