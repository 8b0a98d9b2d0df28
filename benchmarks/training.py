"""Training benchmark, measured side by side in one run; prints ratios.

P1: `horovod` np=1 with ringflow's TFRecord input vs a plain tf.keras fit on in-memory arrays, same model, data,
    batch and optimizer. Goal ratio >= 1.00.
P2: np=2 vs np=1, one intra-op thread per rank: scaling efficiency = ips(2) / (2 x ips(1)). Goal >= 0.90.
    Also printed: the machine's own ceiling, the same ratio for independent single-thread trainings with no
    communication at all (two plain processes at once vs one alone, timed over the same window).
Images/sec are the steady epochs' (all but the first).

Usage: .venv/bin/python -m benchmarks.training [--images 20000] [--epochs 3]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from benchmarks.data_pipeline import generated_images  # noqa: E402


def ringflow_rate(data_dir: Path, work: Path, epochs: int, np_: int, extra: list[str], **train: object) -> float:
    """Steady images/sec of a real ringflow training (horovodrun, TFRecords, callbacks)."""
    from tasks.params import Params, TrainParams
    from tasks.record import steady_images_per_sec
    from tasks.train import train as run_training
    params = Params(train=TrainParams(np=np_, epochs=epochs, warmup_epochs=0, resume=False, **train))
    out = work / f"np{np_}-{len(extra)}"
    result = run_training(params, data_dir, out, None, lambda line: None, ["--no-tensorboard", *extra],
                          checkpoint_root=work / "checkpoints")
    return steady_images_per_sec(result.summary)


def plain_keras_rate(images: np.ndarray, labels: np.ndarray, epochs: int, batch_size: int) -> float:
    """Steady images/sec of model.fit on in-memory arrays (the seed's plain way)."""
    import tensorflow as tf

    from trainer.models import build_model
    model = build_model("cnn", images.shape[1:], 10)
    model.compile(optimizer=tf.keras.optimizers.legacy.Adam(0.001), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    times: list[float] = []
    marks = tf.keras.callbacks.LambdaCallback(on_epoch_begin=lambda e, l: times.append(time.perf_counter()),
                                              on_epoch_end=lambda e, l: times.append(time.perf_counter()))
    model.fit(images.astype(np.float32), labels, batch_size=batch_size, epochs=epochs, verbose=0, callbacks=[marks])
    steady = [times[i + 1] - times[i] for i in range(2, len(times), 2)]
    return len(images) // batch_size * batch_size / (sum(steady) / len(steady))


def solo_rate(data_path: Path, batch_size: int, start_at: float, seconds: float) -> float:
    """Images/sec of one single-thread plain Keras training, timed from `start_at` for `seconds`."""
    import tensorflow as tf

    from trainer.models import build_model
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    arrays = np.load(data_path)
    batches = tf.data.Dataset.from_tensor_slices((arrays["x"].astype(np.float32), arrays["y"]))
    batches = batches.batch(batch_size, drop_remainder=True).cache().repeat()
    model = build_model("cnn", arrays["x"].shape[1:], 10)
    model.compile(optimizer=tf.keras.optimizers.legacy.Adam(0.001), loss="sparse_categorical_crossentropy")
    model.fit(batches, steps_per_epoch=20, epochs=1, verbose=0)
    time.sleep(max(0.0, start_at - time.time()))
    steps, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        model.fit(batches, steps_per_epoch=50, epochs=1, verbose=0)
        steps += 50
    return steps * batch_size / (time.perf_counter() - began)


def machine_ceiling(data_path: Path, batch_size: int, seconds: float = 15.0) -> tuple[float, float]:
    """(one process alone, mean of two at once) img/s of independent single-thread trainings."""
    def together(count: int) -> list[float]:
        start_at = time.time() + 30.0
        command = [sys.executable, "-m", "benchmarks.training", "--solo", str(data_path), str(batch_size),
                   str(start_at), str(seconds)]
        procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(count)]
        return [float(proc.communicate()[0].split()[-1]) for proc in procs]
    one = together(1)[0]
    two = together(2)
    return one, sum(two) / len(two)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=20_000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--solo", nargs=4, metavar=("NPZ", "BATCH", "START_AT", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.solo:
        path, batch, start_at, seconds = args.solo
        print(solo_rate(Path(path), int(batch), float(start_at), float(seconds)))
        return
    from tasks.params import DataParams
    from tasks.prepare import prepare
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        images, labels = generated_images(args.images)
        np.savez(work / "data.npz", x=images, y=labels)
        prepare(DataParams(dataset=f"npz:{work / 'data.npz'}", val_fraction=0.01, test_fraction=0.01),
                work / "prepared", progress=False)
        train_images = int(args.images * 0.98)
        ours = ringflow_rate(work / "prepared", work, args.epochs, 1, [], batch_size=args.batch_size)
        plain = plain_keras_rate(images[:train_images], labels[:train_images], args.epochs, args.batch_size)
        one = ringflow_rate(work / "prepared", work, args.epochs, 1, ["--intra-threads", "1"],
                            batch_size=args.batch_size)
        two = ringflow_rate(work / "prepared", work, args.epochs, 2, ["--intra-threads", "1"],
                            batch_size=args.batch_size)
        alone, beside = machine_ceiling(work / "data.npz", args.batch_size)
    print(f"P1 cnn, {train_images:,} 28x28 images, batch {args.batch_size}, {args.epochs} epochs (steady epochs)")
    print(f"   ringflow horovod np=1 (TFRecords): {ours:8,.0f} img/s   plain keras fit (arrays): {plain:8,.0f} img/s")
    print(f"   ratio: {ours / plain:.2f}  (goal >= 1.00)")
    print(f"P2 one intra-op thread per rank: np=1 {one:8,.0f} img/s   np=2 {two:8,.0f} img/s")
    print(f"   scaling efficiency: {two / (2 * one):.2f}  (goal >= 0.90)")
    print(f"   machine ceiling, no communication: one alone {alone:8,.0f} img/s, each of two at once "
          f"{beside:8,.0f} img/s -> {beside / alone:.2f}")


if __name__ == "__main__":
    main()
