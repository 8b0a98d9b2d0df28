"""The lines training processes print for the launcher (and for people): one function writes each line, one reads
it back from any text that holds it (a launcher's `[rank]<stdout>:` tag before it is fine). Imports no TensorFlow:
the launcher and the tests read these lines too.
"""
from __future__ import annotations

import json
import re

HEARTBEAT_LINE = "ringflow_heartbeat"  # a sign of life, every few seconds
HEARTBEAT_END_LINE = "ringflow_heartbeat_end"  # the process is ending of its own accord: no more beats to expect
HEARTBEAT_ENV = "RINGFLOW_HEARTBEAT_SECONDS"  # set by the launcher; unset or 0: no heartbeat
METRICS_SPOOL_ENV = "RINGFLOW_METRICS_SPOOL"  # set by the launcher when rank 0 shares its filesystem: spool each epoch
METRICS_PREFIX = "ringflow_metrics "  # followed by {"epoch": N, "metrics": {...}} on one line

_PLACED = re.compile(r"rank (?P<rank>\d+) of (?P<size>\d+) on (?P<host>\S+)(?: pid (?P<pid>\d+))?$")
_RESUMED = re.compile(r"resuming from checkpoint at epoch (?P<epoch>\d+)")
_ELASTIC_START = re.compile(r"elastic: (?P<size>\d+) ranks train from epoch (?P<epoch>\d+)")
_WEIGHTS = re.compile(r"weights_sha256 (?P<who>\S+) (?P<digest>[0-9a-f]{64})")
_EPOCH = re.compile(r"epoch (?P<epoch>\d+): (?P<values>.*)$")


def placed_line(rank: int, size: int, host: str, pid: int) -> str:
    """Each Horovod rank's first line: where it runs (its host, and its process id there)."""
    return f"rank {rank} of {size} on {host} pid {pid}"


def parse_placed(text: str) -> tuple[int, int, str] | None:
    """(rank, size, host) of a placed line (the text after any launcher tag), else None."""
    found = _PLACED.match(text)
    return (int(found["rank"]), int(found["size"]), found["host"]) if found else None


def placed_pid(text: str) -> int | None:
    """The process id a placed line gives, else None."""
    found = _PLACED.match(text)
    return int(found["pid"]) if found and found["pid"] else None


def stopping_line(signal_name: str) -> str:
    """A process stops on a signal (the scheduler's notice, a termination): its last checkpoint stands."""
    return f"stopping on {signal_name}: the last checkpoint stands for a resume"


def resumed_line(epoch: int) -> str:
    """The reporting process continues a run from its checkpoint of `epoch`."""
    return f"resuming from checkpoint at epoch {epoch}"


def resumed_epochs(text: str) -> list[int]:
    """Every epoch a run resumed from, in the order printed."""
    return [int(found["epoch"]) for found in _RESUMED.finditer(text)]


def elastic_start_line(size: int, epoch: int) -> str:
    """Rank 0 of an elastic ring (re)starts training with `size` ranks at the 1-based `epoch`."""
    return f"elastic: {size} ranks train from epoch {epoch}"


def elastic_starts(text: str) -> list[tuple[int, int]]:
    """(ranks, epoch) of every elastic (re)start, in order."""
    return [(int(found["size"]), int(found["epoch"])) for found in _ELASTIC_START.finditer(text)]


def weights_line(who: str, digest: str) -> str:
    """One line per process at the end: the sha256 of its weights (all equal for synchronous training)."""
    return f"weights_sha256 {who} {digest}"


def weights_digests(text: str) -> list[tuple[str, str]]:
    """(who, weights digest) of every weights line, in order."""
    return [(found["who"], found["digest"]) for found in _WEIGHTS.finditer(text)]


def epoch_line(epoch: int, metrics: dict[str, float]) -> str:
    """The reporting process's line for people: the 0-based `epoch` shown 1-based, its metrics sorted."""
    return f"epoch {epoch + 1}: " + " ".join(f"{key}={value:.4g}" for key, value in sorted(metrics.items()))


def parse_epoch_line(text: str) -> tuple[int, dict[str, float]] | None:
    """(1-based epoch, metrics) of an epoch line, else None."""
    found = _EPOCH.match(text)
    if not found:
        return None
    pairs = (item.partition("=") for item in found["values"].split())
    return int(found["epoch"]), {key: float(value) for key, _, value in pairs}


def metrics_line(epoch: int, metrics: dict[str, float]) -> str:
    """One epoch's metrics as the line the launcher logs to the run's MLflow run."""
    return METRICS_PREFIX + json.dumps({"epoch": epoch, "metrics": metrics})


class CutShort(ValueError):
    """A metrics line that does not parse (cut short by a dying process)."""


def parse_metrics_line(line: str) -> tuple[int, dict[str, float]] | None:
    """(epoch, metrics) of a metrics line anywhere in `line`, None for any other line; CutShort when it is one
    but does not parse."""
    start = line.find(METRICS_PREFIX)
    if start < 0:
        return None
    try:
        report = json.loads(line[start + len(METRICS_PREFIX):])
    except json.JSONDecodeError:
        raise CutShort(line) from None
    return int(report["epoch"]), report["metrics"]


def is_heartbeat_text(text: str) -> bool:
    """A heartbeat or the last one (kept off the console)."""
    return text in (HEARTBEAT_LINE, HEARTBEAT_END_LINE)
