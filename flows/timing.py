"""Where a pipeline run's time went: each step's wall time, the training's epochs apart from its start and end, and
the rest (the process start, Prefect's own work). One line, the last of a successful `make run`:

    time: 51.2 s, 8.9 s of it epochs; outside them: start and Prefect 3.1, prepare 0.2, ..., train 18.2 (launch to
    first rank 9.0, to first epoch 4.9, after last epoch 3.1), evaluate 3.9, ...
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

from tasks.launch.output.diagnosis import untagged
from trainer.protocol import parse_epoch_line, parse_placed


def process_age() -> float:
    """Seconds since this process was started (the interpreter's start and imports included)."""
    import psutil
    return time.time() - psutil.Process().create_time()


@dataclass
class TrainingMarks:
    """When the training's first rank said where it runs, and its first and last epoch lines arrived."""
    launched: float | None = None
    first_rank: float | None = None
    first_epoch: float | None = None
    last_epoch: float | None = None

    def saw(self, line: str) -> None:
        """Note a rank line's arrival (lines may carry a launcher's `[rank]<stdout>:` tag)."""
        text = untagged(line).strip()
        now = time.monotonic()
        if self.first_rank is None and parse_placed(text):
            self.first_rank = now
        elif parse_epoch_line(text):
            self.first_epoch = self.first_epoch or now
            self.last_epoch = now


@dataclass
class RunClock:
    """The wall time of each step of one pipeline run, in the order they ran."""
    steps: dict[str, float] = field(default_factory=dict)
    training: TrainingMarks = field(default_factory=TrainingMarks)

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        if name == "train":
            self.training = TrainingMarks(launched=started)
        try:
            yield
        finally:
            self.steps[name] = self.steps.get(name, 0.0) + time.monotonic() - started

    def training_parts(self, first_epoch_seconds: float) -> str:
        """The train step's time outside its epochs: to the first rank's line, from there to the first epoch's
        start, after the last epoch's line."""
        marks = self.training
        if marks.launched is None or marks.first_rank is None or marks.first_epoch is None \
                or marks.last_epoch is None:
            return ""
        to_rank = marks.first_rank - marks.launched
        to_epoch = marks.first_epoch - marks.first_rank - first_epoch_seconds
        after = marks.launched + self.steps.get("train", 0.0) - marks.last_epoch
        return f" (launch to first rank {to_rank:.1f}, to first epoch {to_epoch:.1f}, after last epoch {after:.1f})"

    def line(self, epoch_seconds: list[float]) -> str:
        """The one line: the run's wall time, its epochs, each step's time outside them."""
        total, epochs = process_age(), sum(epoch_seconds)
        parts = {name: seconds - (epochs if name == "train" else 0.0) for name, seconds in self.steps.items()}
        other = total - sum(self.steps.values())
        shown = [f"start and Prefect {other:.1f}"] + [
            f"{name} {seconds:.1f}" + (self.training_parts(epoch_seconds[0] if epoch_seconds else 0.0)
                                       if name == "train" else "") for name, seconds in parts.items()]
        return f"time: {total:.1f} s, {epochs:.1f} s of it epochs; outside them: {', '.join(shown)}"
