"""The spool of a job's epoch metrics: one JSON line per epoch, on disk before the epoch's checkpoint (rank 0 writes
it where it shares the launcher's filesystem, the launcher where it does not). Whatever the spool holds that the
run lacks is logged by the launcher when the job ends, so no epoch is lost."""
from __future__ import annotations

import json
import os
from pathlib import Path

SPOOL_FILE = "epoch_metrics.jsonl"  # beside the checkpoints, which outlive a failed job as these must
Spooled = tuple[int, dict[str, float], int]


def append_to_spool(spool: Path, epoch: int, metrics: dict[str, float], timestamp: int) -> None:
    """One epoch as one line, on disk before this returns."""
    spool.parent.mkdir(parents=True, exist_ok=True)
    with open(spool, "a") as handle:
        handle.write(json.dumps({"epoch": epoch, "metrics": metrics, "timestamp": timestamp}) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_spool(spool: Path) -> list[Spooled]:
    """The spooled epochs in order; a last line cut short by a killed process is left out."""
    if not spool.is_file():
        return []
    epochs = []
    for line in spool.read_text().splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        metrics = {key: float(value) for key, value in record["metrics"].items()}
        epochs.append((int(record["epoch"]), metrics, int(record["timestamp"])))
    return epochs
