"""Entry point of one rank: `python -m trainer --data-dir ... --out-dir ...` (launched by horovodrun)."""
from __future__ import annotations

import argparse
from pathlib import Path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m trainer", description=__doc__)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=0.001)
    parser.add_argument("--no-scale-lr", dest="scale_lr", action="store_false")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-checkpoints", type=int, default=3)
    parser.add_argument("--image-size", type=int, default=None, help="square input size (default: the data's)")
    parser.add_argument("--augment", dest="augmented", action="store_true", help="augment training images")
    parser.add_argument("--no-cache", dest="cache", action="store_false", help="do not cache decoded images")
    parser.add_argument("--print-weights-digest", action="store_true",
                        help="every rank prints a sha256 of its final weights")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from trainer.train import TrainConfig, train  # TensorFlow and Horovod load here, after argument checks
    train(TrainConfig(**vars(args)))


if __name__ == "__main__":
    main()
