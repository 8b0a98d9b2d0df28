"""Entry point of one training process: `python -m trainer --backend ... --data-dir ... --out-dir ...`.

Launched by the train task: by horovodrun (horovod backends), once (single-process strategies), or once per
worker with TF_CONFIG (multiworker, parameter-server coordinator).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from trainer.config import BACKENDS, PRECISIONS, TrainConfig


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    parser = argparse.ArgumentParser(prog="python -m trainer", description=__doc__)
    add = parser.add_argument
    add("--data-dir", type=Path, required=True)
    add("--out-dir", type=Path, required=True)
    add("--backend", choices=BACKENDS, default="horovod")
    add("--model", default="cnn")
    add("--epochs", type=int, default=1)
    add("--batch-size", type=int, default=32, help="per replica")
    add("--learning-rate", type=float, default=0.001, help="for one replica")
    add("--no-scale-lr", dest="scale_lr", action="store_false")
    add("--warmup-epochs", type=float, default=0.0)
    add("--precision", choices=PRECISIONS, default="fp32")
    add("--jit-compile", action="store_true")
    add("--seed", type=int, default=0)
    add("--keep-checkpoints", type=int, default=3)
    add("--checkpoint-dir", type=Path, default=None)
    add("--no-resume", dest="resume", action="store_false")
    add("--replicas", type=int, default=1, help="single-process strategies: devices (logical CPUs without GPU)")
    add("--fp16-allreduce", action="store_true")
    add("--steps-per-execution", type=int, default=1, help="Keras fit: steps per compiled call")
    add("--image-size", type=int, default=None, help="square input size (default: the data's)")
    add("--augment", dest="augmented", action="store_true", help="augment training images")
    add("--no-cache", dest="cache", action="store_false", help="do not cache decoded images")
    add("--no-tensorboard", dest="tensorboard", action="store_false")
    add("--intra-threads", type=int, default=0, help="CPU threads per process (0: cores / local ranks)")
    add("--print-weights-digest", action="store_true", help="every process prints a sha256 of its final weights")
    return TrainConfig(**vars(parser.parse_args(argv)))


def main(argv: list[str] | None = None) -> None:
    config = parse_args(argv)
    if config.backend in ("horovod", "horovod-tape"):  # TensorFlow and Horovod load here, after argument checks
        from trainer import horovod_fit, horovod_tape
        (horovod_fit if config.backend == "horovod" else horovod_tape).train(config)
    else:
        if config.backend == "mirrored":
            # oneDNN's CPU kernels fail evaluating on the second logical CPU device (TF 2.21); GPUs are unaffected.
            os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
        from trainer import distribute
        distribute.train(config)


if __name__ == "__main__":
    main()
