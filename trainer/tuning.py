"""What a rank would otherwise have to be tuned by hand, chosen from the job's plan: TensorFlow's op threads and
tf.data's private thread pool (the host's cores divided among its ranks), Horovod's cycle time (from where the ranks
run) and fusion buffer (from the model's gradient size, once a run of its config has logged it). A setting given in
params.yaml wins over the choice.

Pure (no TensorFlow): the launcher states the choice in the preflight's line from its plan; each rank makes it again
from what it finds at its start (its host's cores, its ranks on that host) and reports what it applied, which the
run logs as `resolved.*` params.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from trainer.config import TrainParams

MB = 1 << 20
# Horovod 0.28's own values when nothing is set: a background cycle of 1 ms, a fusion buffer of 128 MB
HOROVOD_CYCLE_MS = 1.0
HOROVOD_FUSION_MB = 128
# Each cycle Horovod's background thread wakes, the ranks agree on the gradients ready on all of them and average
# those; a gradient waits for the next cycle. Where the ranks' own threads take the host's cores (no GPU), a cycle of
# a quarter of Horovod's trained two ranks on 2 cores at 0.97 of linear against 0.75 at 1 ms (the 28x28 cnn at batch
# 32, 36 ms steps; medians of 4 alternating rounds), and 0.82 against 0.68 at batch 512 (3 rounds, noisy); GPU
# hosts, where a spare core runs that thread, keep Horovod's own.
CPU_CYCLE_MS = 0.25
CYCLE_ENV, FUSION_ENV = "HOROVOD_CYCLE_TIME", "HOROVOD_FUSION_THRESHOLD"  # what Horovod reads at its init
GRADIENT_KEY = "gradient_bytes"  # a training summary's tuning: the model's gradient size


@dataclass(frozen=True)
class RankThreads:
    """One rank's CPU threads: TensorFlow's within one op and across independent ops, tf.data's private pool."""
    intra_op: int
    inter_op: int
    data: int


@dataclass(frozen=True)
class HorovodCycle:
    """Horovod's background cycle and fusion buffer for a job; None: Horovod's own (or the user's environment)."""
    cycle_time_ms: float | None
    fusion_threshold_mb: int | None


def usable_cores() -> int:
    """The cores this process may run on (its affinity: a scheduler's or a container's cpuset), else the host's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def rank_threads(train: TrainParams, cores: int, local_ranks: int) -> RankThreads:
    """Each rank's threads on a host of `cores` cores shared by `local_ranks` ranks: its share of the cores for
    each pool (no rank's pools overlapping another's), unless params.yaml sets them; inter-op and tf.data follow
    train.intra_op_threads when only it is set (a sweep's trial sets it to its share of the cores)."""
    share = max(1, cores // max(1, local_ranks))
    intra = train.intra_op_threads or share
    return RankThreads(intra, train.inter_op_threads or intra, train.data_threads or intra)


def horovod_cycle(train: TrainParams, gpus_per_host: int, gradient_bytes: int | None,
                  one_host: bool = True) -> HorovodCycle:
    """Horovod's cycle time and fusion buffer for ranks on hosts of `gpus_per_host` GPUs, for a model whose gradient
    is `gradient_bytes` (None: not logged yet): a short cycle for ranks that average on one CPU host (as measured;
    a rank alone averages nothing, GPU hosts, ranks across hosts and an elastic ring keep Horovod's own: with a
    0.25 ms cycle a rank joining an elastic ring across hosts failed its first sync every time); a buffer that holds
    the whole gradient, at least Horovod's own. train.cycle_time_ms and train.fusion_threshold_mb win."""
    short = one_host and not gpus_per_host and train.np > 1 and not train.elastic
    cycle = CPU_CYCLE_MS if short else None
    fusion = None if gradient_bytes is None else max(HOROVOD_FUSION_MB, -(-gradient_bytes // MB))
    return HorovodCycle(train.cycle_time_ms or cycle,
                        train.fusion_threshold_mb if train.fusion_threshold_mb is not None else fusion)


def horovod_environment(cycle: HorovodCycle) -> dict[str, str]:
    """The variables that make Horovod use `cycle` (set before its init); none for what stays Horovod's own."""
    env = {}
    if cycle.cycle_time_ms is not None:
        env[CYCLE_ENV] = f"{cycle.cycle_time_ms:g}"
    if cycle.fusion_threshold_mb is not None:
        env[FUSION_ENV] = str(cycle.fusion_threshold_mb * MB)
    return env


def applied_cycle(environ: Mapping[str, str]) -> HorovodCycle:
    """The cycle and buffer Horovod starts with in this environment (its own where unset; a value that is no number
    is reported as Horovod's own)."""
    cycle, fusion = number(environ.get(CYCLE_ENV)), number(environ.get(FUSION_ENV))
    return HorovodCycle(cycle or HOROVOD_CYCLE_MS,
                        HOROVOD_FUSION_MB if fusion is None else round(fusion / MB))


def number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def resolved(threads: RankThreads, cycle: HorovodCycle | None) -> dict[str, Any]:
    """What a rank applied, for its summary (`resolved.*` in the run)."""
    figures: dict[str, Any] = {f"{pool}_threads": count for pool, count in asdict(threads).items()}
    if cycle is not None:
        figures |= {"cycle_time_ms": cycle.cycle_time_ms, "fusion_threshold_mb": cycle.fusion_threshold_mb}
    return figures
