"""What one training process needs, parsed from the command line the launching task built."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BACKENDS = ("horovod", "horovod-tape", "mirrored", "multiworker", "central-storage", "one-device",
            "parameter-server")
PRECISIONS = ("fp32", "mixed_float16", "mixed_bfloat16")


@dataclass(frozen=True)
class TrainConfig:
    data_dir: Path
    out_dir: Path
    backend: str = "horovod"
    model: str = "cnn"
    epochs: int = 1
    batch_size: int = 32  # per replica
    learning_rate: float = 0.001  # for one replica
    scale_lr: bool = True
    warmup_epochs: float = 0.0
    precision: str = "fp32"
    jit_compile: bool = False
    seed: int = 0
    keep_checkpoints: int = 3
    checkpoint_dir: Path | None = None  # persistent across relaunches; None: out_dir/checkpoints
    resume: bool = True
    replicas: int = 1  # single-process strategies: devices to use (logical CPUs when there is no GPU)
    fp16_allreduce: bool = False
    steps_per_execution: int = 1  # Keras fit: training steps per compiled call (less Python per step)
    image_size: int | None = None
    augmented: bool = False
    cache: bool = True
    tensorboard: bool = True
    intra_threads: int = 0  # CPU threads per process for ops; 0: the cores divided among this host's ranks
    print_weights_digest: bool = False

    @property
    def checkpoints(self) -> Path:
        return self.checkpoint_dir or self.out_dir / "checkpoints"
