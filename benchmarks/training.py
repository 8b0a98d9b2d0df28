"""Training benchmark, measured side by side in one run; prints ratios.

P1: `horovod` np=1 with ringflow's TFRecord input vs a plain tf.keras fit on in-memory arrays, same model, data,
    batch and optimizer. Goal ratio >= 1.00.
P2: np=2 vs np=1, one intra-op thread per rank: scaling efficiency = ips(2) / (2 x ips(1)), at ringflow's
    defaults (batch 32 per replica, the job's tuning: the tf.data and inter-op pools follow the one intra-op
    thread, Horovod's cycle as the job chooses it for CPU ranks), against the machine's own ceiling: independent
    single-thread trainings with no communication at all (two plain processes at once vs one alone, timed over the
    same window). Goal: efficiency >= 0.85 x the ceiling. Both are medians of --rounds rounds, each round's two
    measurements in alternating order (one round of each swung by 0.15 on a 2-core machine shared with others).
    Also printed, one round each: the per-replica batch of the scaling table in NVIDIA DLI's multi-GPU notebooks
    (512) at the job's tuning and at a cycle of 10 ms (`horovodrun --cycle-time-ms 10` through
    train.horovodrun_args, which the job leaves as set).
Images/sec are the steady epochs' (all but the first). ringflow's are real ringflow runs: the step driver's
preflight, open-run and train (tasks/steps.py's TRAINING_RUN) in a workspace of the benchmark's own, the data
prepared and versioned there by the driver's steps, each run's steady images/sec as its MLflow run records it
(benchmarks/driver_runs.py). This checkout's data, runs and outputs are left as they are.

Usage: .venv/bin/python -m benchmarks.training [--images 40000] [--epochs 3] [--rounds 3] [--scaling-batch-size 512]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import trainer  # noqa: E402, F401  (first: the tf-keras switch, before any TensorFlow import)
from benchmarks.data_pipeline import generated_images  # noqa: E402


def ringflow_rate(data_dir: Path, work: Path, epochs: int, np_: int, **train: object) -> float:
    """Steady images/sec of a real ringflow run (the driver's steps: horovodrun, TFRecords, callbacks, MLflow) on
    the prepared data `data_dir` (a workspace's, else copied into one under `work`), trained from scratch."""
    from benchmarks.driver_runs import training_run, workspace_for
    root, version = workspace_for(data_dir, work)
    overrides = {"train.np": np_, "train.epochs": epochs, "train.warmup_epochs": 0, "train.tensorboard": False,
                 **{f"train.{key}": value for key, value in train.items()}}
    return float(training_run(root, version, overrides)["images_per_sec"])


def plain_keras_rate(images: np.ndarray, labels: np.ndarray, epochs: int, batch_size: int) -> float:
    """Steady images/sec of model.fit on in-memory arrays (the plain Keras way)."""
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
    # Without this, tf.data's autotune thread can hold each fit's end until its next optimisation tick (10 ms,
    # doubling: a fit of 3.8 s of steps then ends at 5.11 s), which made this ceiling swing between 0.76 and 0.95.
    options = tf.data.Options()
    options.autotune.enabled = False
    batches = batches.with_options(options)
    model = build_model("cnn", arrays["x"].shape[1:], 10)
    model.compile(optimizer=tf.keras.optimizers.legacy.Adam(0.001), loss="sparse_categorical_crossentropy")
    model.fit(batches, steps_per_epoch=20, epochs=1, verbose=0)
    time.sleep(max(0.0, start_at - time.time()))
    steps, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        model.fit(batches, steps_per_epoch=50, epochs=1, verbose=0)
        steps += 50
    return steps * batch_size / (time.perf_counter() - began)


def machine_ceiling(data_path: Path, batch_size: int, seconds: float = 15.0, order: int = 0) -> float:
    """Each of two independent single-thread trainings at once against one alone (img/s over img/s); `order` odd:
    the two at once first."""
    def together(count: int) -> list[float]:
        start_at = time.time() + 30.0
        command = [sys.executable, "-m", "benchmarks.training", "--solo", str(data_path), str(batch_size),
                   str(start_at), str(seconds)]
        procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(count)]
        return [float(proc.communicate()[0].split()[-1]) for proc in procs]
    counts = (1, 2) if order % 2 == 0 else (2, 1)
    rates = {count: statistics.mean(together(count)) for count in counts}
    return rates[2] / rates[1]


def scaling_rates(data_dir: Path, work: Path, epochs: int, batch_size: int, horovodrun_args: list[str],
                  order: int = 0) -> tuple[float, float]:
    """(np=1, np=2) steady img/s of ringflow with one intra-op thread per rank; `order` odd: np=2 first."""
    counts = (1, 2) if order % 2 == 0 else (2, 1)
    rates = {np_: ringflow_rate(data_dir, work, epochs, np_, intra_op_threads=1, batch_size=batch_size,
                                horovodrun_args=horovodrun_args) for np_ in counts}
    return rates[1], rates[2]


def efficiency(rates: tuple[float, float]) -> float:
    one, two = rates
    return two / (2 * one)


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f}, " \
           f"{len(values)} rounds)"


def generated_workspace(work: Path, count: int) -> tuple[np.ndarray, np.ndarray, Path]:
    """`count` generated images (also as work/data.npz) and the prepared data of a workspace under `work` whose
    params.yaml names them, prepared and versioned there by the driver's steps: (images, labels, prepared dir)."""
    from benchmarks.driver_runs import workspace, workspace_for
    from tasks.paths import Workspace
    images, labels = generated_images(count)
    np.savez(work / "data.npz", x=images, y=labels)
    data = {"dataset": f"npz:{work / 'data.npz'}", "val_fraction": 0.01, "test_fraction": 0.01}
    prepared = Workspace(workspace(work / "workspace", data)).prepared_dir
    workspace_for(prepared, work)
    return images, labels, prepared


def print_scaling(label: str, rates: tuple[float, float]) -> None:
    one, two = rates
    print(f"   {label}: np=1 {one:8,.0f} img/s   np=2 {two:8,.0f} img/s   efficiency {two / (2 * one):.2f}")


def default_scaling(data: Path, work: Path, args: argparse.Namespace) -> tuple[list[float], list[float]]:
    """(efficiencies, ceilings): --rounds rounds of ringflow's np=2 vs np=1 at its defaults and of the machine's
    ceiling, each round in the other order than the last."""
    efficiencies, ceilings = [], []
    for order in range(args.rounds):
        efficiencies.append(efficiency(scaling_rates(data, work, args.epochs, args.batch_size, [], order)))
        ceilings.append(machine_ceiling(work / "data.npz", args.batch_size, order=order))
    return efficiencies, ceilings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=40_000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scaling-batch-size", type=int, default=512, help="the table's per-replica batch")
    parser.add_argument("--solo", nargs=4, metavar=("NPZ", "BATCH", "START_AT", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.solo:
        path, batch, start_at, seconds = args.solo
        print(solo_rate(Path(path), int(batch), float(start_at), float(seconds)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        images, labels, data = generated_workspace(work, args.images)
        train_images = int(args.images * 0.98)
        ours = ringflow_rate(data, work, args.epochs, 1, batch_size=args.batch_size)
        plain = plain_keras_rate(images[:train_images], labels[:train_images], args.epochs, args.batch_size)
        efficiencies, ceilings = default_scaling(data, work, args)
        default_cycle = scaling_rates(data, work, args.epochs, args.scaling_batch_size, [])
        long_cycle = scaling_rates(data, work, args.epochs, args.scaling_batch_size, ["--cycle-time-ms", "10"])
    print(f"P1 cnn, {train_images:,} 28x28 images, batch {args.batch_size}, {args.epochs} epochs (steady epochs)")
    print(f"   ringflow horovod np=1 (TFRecords): {ours:8,.0f} img/s   plain keras fit (arrays): {plain:8,.0f} img/s")
    print(f"   ratio: {ours / plain:.2f}  (goal >= 1.00)")
    print("P2 one intra-op thread per rank, scaling efficiency = ips(np=2) / (2 x ips(np=1))")
    print(f"   defaults (batch {args.batch_size}/replica, the job's tuning): efficiency {spread(efficiencies)}")
    print(f"   machine ceiling, no communication (each of two at once / one alone): {spread(ceilings)}")
    ratio = statistics.median(efficiencies) / statistics.median(ceilings)
    print(f"   efficiency / ceiling: {ratio:.2f}  (goal >= 0.85)")
    print_scaling(f"batch {args.scaling_batch_size}/replica, the job's tuning", default_cycle)
    print_scaling(f"batch {args.scaling_batch_size}/replica, cycle 10 ms", long_cycle)


if __name__ == "__main__":
    main()
