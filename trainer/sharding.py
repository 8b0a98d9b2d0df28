"""Which records each rank reads: exact shares of a split at any number of ranks and shards (no TensorFlow).

The split's shards are put in an order decided by the seed (the same on every rank), their records laid end to
end, and cut into `size` contiguous ranges whose lengths differ by at most one record. A rank reads its range as
pieces: (shard, records to skip, records to take). Shares are disjoint and together cover the split; in training,
every rank runs the same number of steps, so the records past the smallest share's last full batch are dropped
each epoch (reported by the plan).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Piece:
    """A run of consecutive records of one shard."""
    shard: int
    skip: int
    take: int


@dataclass(frozen=True)
class RankShare:
    """The records one rank reads from a split."""
    rank: int
    pieces: tuple[Piece, ...]

    @property
    def records(self) -> int:
        return sum(piece.take for piece in self.pieces)


def shard_order(count: int, seed: int | None) -> list[int]:
    """The order the shards are laid out in: by seed for training, the manifest's order for evaluation."""
    return list(range(count)) if seed is None else [int(i) for i in np.random.default_rng(seed).permutation(count)]


def split_shares(counts: list[int], size: int, seed: int | None = None) -> list[RankShare]:
    """Every rank's share of a split whose shards hold `counts` records."""
    total = sum(counts)
    bounds = [total * rank // size for rank in range(size + 1)]
    laid_out, start = [], 0
    for shard in shard_order(len(counts), seed):
        laid_out.append((shard, start, start + counts[shard]))
        start += counts[shard]
    shares = []
    for rank in range(size):
        low, high = bounds[rank], bounds[rank + 1]
        pieces = tuple(Piece(shard, max(low, first) - first, min(high, end) - max(low, first))
                       for shard, first, end in laid_out if first < high and end > low)
        shares.append(RankShare(rank, pieces))
    return shares


def rank_share(manifest: dict[str, Any], split: str, rank: int, size: int, seed: int | None = None) -> RankShare:
    """This rank's share of a split of the prepared data."""
    counts = [shard["count"] for shard in manifest["splits"][split]["shards"]]
    return split_shares(counts, size, seed)[rank]


@dataclass(frozen=True)
class TrainingPlan:
    """What each rank trains on per epoch: records, full batches (the same for all), records dropped."""
    records: tuple[int, ...]
    batch_size: int  # per input pipeline

    @property
    def steps_per_epoch(self) -> int:
        return min(self.records) // self.batch_size

    @property
    def dropped(self) -> tuple[int, ...]:
        return tuple(records - self.steps_per_epoch * self.batch_size for records in self.records)

    def lines(self) -> list[str]:
        """One line per rank, for the log and the run."""
        return [f"rank {rank}: {records} training records, {self.steps_per_epoch} steps of {self.batch_size}, "
                f"{dropped} dropped per epoch" for rank, (records, dropped) in enumerate(zip(self.records,
                                                                                             self.dropped))]


def training_plan(manifest: dict[str, Any], pipelines: int, batch_size: int, seed: int) -> TrainingPlan:
    """The training split cut for `pipelines` input pipelines reading `batch_size` records per step each."""
    counts = [shard["count"] for shard in manifest["splits"]["train"]["shards"]]
    return TrainingPlan(tuple(share.records for share in split_shares(counts, pipelines, seed)), batch_size)
