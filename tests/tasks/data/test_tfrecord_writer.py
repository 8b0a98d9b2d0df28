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
