"""Data-layer benchmark, measured side by side in one run; prints ratios.

(a) converting a generated 60,000 x 28 x 28 dataset: ringflow's `prepare` (parallel, TF-free workers) vs a
    single-process tf.io.TFRecordWriter loop over the same arrays (same PNG encoder, same shard count).
    Goal >= 1.6x on 2 cores.
(b) the input pipeline's images/sec (read, decode, batch; no cache) vs the images/sec the cnn model trains at
    on this machine (tf.keras fit on in-memory arrays). Goal >= 3x, so input never binds.

Usage: .venv/bin/python -m benchmarks.data_pipeline [--images 60000] [--repeats 2]
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import trainer  # noqa: E402, F401  (first: the tf-keras switch, before any TensorFlow import)


def generated_images(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Image-like 28x28 grey images (smooth blobs plus noise) and labels 0..9."""
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 256, (count, 7, 7), dtype=np.uint16)
    images = np.kron(coarse, np.ones((4, 4), dtype=np.uint16)) + rng.integers(0, 24, (count, 28, 28))
    return np.clip(images, 0, 255).astype(np.uint8)[..., np.newaxis], rng.integers(0, 10, count)


def baseline_convert(images: np.ndarray, labels: np.ndarray, out_dir: Path, shards: int) -> None:
    """The plain way: one process, tf.train.Example and tf.io.TFRecordWriter per record."""
    import tensorflow as tf

    from tasks.data.convert import encode_png
    out_dir.mkdir(parents=True)
    for shard, chunk in enumerate(np.array_split(np.arange(len(images)), shards)):
        with tf.io.TFRecordWriter(str(out_dir / f"baseline-{shard:05d}.tfrecord")) as writer:
            for i in chunk:
                image = images[i]
                feature = {
                    "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[encode_png(image)])),
                    "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"png"])),
                    "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(labels[i])])),
                    "image/height": tf.train.Feature(int64_list=tf.train.Int64List(value=[image.shape[0]])),
                    "image/width": tf.train.Feature(int64_list=tf.train.Int64List(value=[image.shape[1]])),
                    "image/channels": tf.train.Feature(int64_list=tf.train.Int64List(value=[image.shape[2]])),
                }
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def timed(function, *args) -> float:
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start


def conversion_ratio(work: Path, images: np.ndarray, labels: np.ndarray, repeats: int) -> Path:
    """(a): best of `repeats` for each side, alternating; returns the prepared directory for (b)."""
    from tasks.data.prepare import prepare
    from tasks.params import DataParams
    np.savez(work / "generated.npz", x=images, y=labels)
    params = DataParams(dataset=f"npz:{work / 'generated.npz'}")
    shards = 3 * params.min_shards  # what prepare writes for this size: min_shards per split
    ours, theirs = [], []
    for _ in range(repeats):
        shutil.rmtree(work / "prepared", ignore_errors=True)
        shutil.rmtree(work / "baseline", ignore_errors=True)
        theirs.append(timed(baseline_convert, images, labels, work / "baseline", shards))
        ours.append(timed(lambda: prepare(params, work / "prepared", progress=False)))
    print(f"(a) conversion of {len(images):,} images, {shards} shards, best of {repeats}")
    print(f"    single-process tf.io.TFRecordWriter loop: {min(theirs):7.2f} s  "
          f"({len(images) / min(theirs):,.0f} img/s)")
    print(f"    ringflow prepare ({os.cpu_count()} workers):        {min(ours):7.2f} s  "
          f"({len(images) / min(ours):,.0f} img/s)")
    print(f"    ratio: {min(theirs) / min(ours):.2f}x  (goal >= 1.6x)")
    return work / "prepared"


def pipeline_images_per_sec(data_dir: Path, batch_size: int, batches: int) -> float:
    """Read, decode and batch the train split (no cache), after a warm-up."""
    from trainer.data import rank_dataset
    from trainer.prepared_data import read_manifest
    dataset = rank_dataset(data_dir, read_manifest(data_dir), "train", batch_size=batch_size, training=True,
                           cache=False)
    return dataset_images_per_sec(dataset, batch_size, batches)


def dataset_images_per_sec(dataset, batch_size: int, batches: int, warmup: int = 20) -> float:
    """Images/sec a dataset yields once warm (its shuffle buffer filled)."""
    iterator = iter(dataset)
    for _ in range(warmup):
        next(iterator)
    start = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches * batch_size / (time.perf_counter() - start)


def training_images_per_sec(batch_size: int, steps: int) -> float:
    """The cnn model's training speed on in-memory 28x28 images (fit, after a warm-up epoch)."""
    import tensorflow as tf

    from trainer.models import build_model
    images = np.random.default_rng(1).integers(0, 256, (batch_size * steps, 28, 28, 1)).astype(np.float32)
    labels = np.random.default_rng(2).integers(0, 10, batch_size * steps)
    model = build_model("cnn", (28, 28, 1), 10)
    model.compile(optimizer=tf.keras.optimizers.Adam(), loss="sparse_categorical_crossentropy")
    data = tf.data.Dataset.from_tensor_slices((images, labels)).batch(batch_size).cache().repeat()
    model.fit(data, steps_per_epoch=steps // 4, epochs=1, verbose=0)
    start = time.perf_counter()
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)
    return steps * batch_size / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=60_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        images, labels = generated_images(args.images)
        prepared = conversion_ratio(Path(tmp), images, labels, args.repeats)
        feed = pipeline_images_per_sec(prepared, args.batch_size, batches=600)
        train = training_images_per_sec(args.batch_size, steps=300)
    print(f"(b) batch {args.batch_size}: input pipeline {feed:,.0f} img/s, seed CNN training {train:,.0f} img/s")
    print(f"    ratio: {feed / train:.2f}x  (goal >= 3x)")


if __name__ == "__main__":
    main()
