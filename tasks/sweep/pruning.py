"""A trial's epochs on their way to the pruner: rank 0's epoch line, as the launcher passes it on, gives the
metric to the Optuna trial at once; when the pruner says stop, the trial's job is ended by raising from the line
handler (the launcher stops every process of the job on the way out)."""
from __future__ import annotations

from typing import Any, Callable

from tasks.launch.output.diagnosis import RANK_LINE, horovodrun_line
from trainer.protocol import parse_epoch_line


class TrialPruned(Exception):
    """The pruner stopped the trial; not a failure, never retried."""
    retryable = False

    def __init__(self, number: int, epoch: int, metric: str, value: float) -> None:
        super().__init__(f"after epoch {epoch}: {metric} {value:.4g} is below the other trials' median at that "
                         "epoch")
        self.epoch = epoch


def rank0_epoch(line: str) -> tuple[int, dict[str, float]] | None:
    """(1-based epoch, metrics) of the epoch line of rank 0 (or of a one-process job), else None."""
    tagged = RANK_LINE.match(horovodrun_line(line))
    if tagged:
        if tagged["rank"] != "0":
            return None
        line = tagged["text"]
    return parse_epoch_line(line.strip())


class EpochReporter:
    """An on_line for a trial's training job: every line goes on to `on_line`; rank 0's epoch metric is reported to
    the trial (its 0-based epoch as the step), and TrialPruned is raised when the pruner says so, before the trial's
    last epoch (`epochs`; after it, the training is done: stopping it would only lose a finished result)."""

    def __init__(self, trial: Any, metric: str, on_line: Callable[[str], None], epochs: int) -> None:
        self._trial, self._metric, self._on_line, self._epochs = trial, metric, on_line, epochs
        self.values: list[float] = []  # the metric of each epoch reported, in order

    def __call__(self, line: str) -> None:
        self._on_line(line)
        report = rank0_epoch(line)
        if report is None or self._metric not in report[1]:
            return
        epoch, metrics = report
        value = metrics[self._metric]
        self.values.append(value)
        self._trial.report(value, epoch - 1)
        if epoch < self._epochs and self._trial.should_prune():
            raise TrialPruned(self._trial.number, epoch, self._metric, value)
