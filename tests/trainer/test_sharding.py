"""Which records each rank reads: shares that are disjoint, balanced and complete at any number of ranks and
shards, contiguous runs of the seed's shard order, and the training plan's equal steps and reported drops."""
from __future__ import annotations

import pytest

from trainer.sharding import Piece, RankShare, TrainingPlan, rank_share, shard_order, split_shares, training_plan


def manifest_of(counts: list[int]) -> dict:
    """A manifest whose training split has shards of these record counts."""
    return {"splits": {"train": {"shards": [{"count": count} for count in counts]}}}


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 8, 9, 16, 64])
def test_shares_are_disjoint_balanced_and_complete(size: int) -> None:
    counts = [157, 157, 157, 157, 157, 157, 157, 158]
    for seed in (None, 0, 42):
        shares = split_shares(counts, size, seed)
        seen = [(piece.shard, piece.skip + i) for share in shares for piece in share.pieces for i in range(piece.take)]
        assert len(seen) == len(set(seen)) == sum(counts)  # every record exactly once
        assert max(s.records for s in shares) - min(s.records for s in shares) <= 1
    assert split_shares(counts, size, 42) == split_shares(counts, size, 42)  # the same on every rank


def test_evaluation_keeps_the_manifests_shard_order_and_training_follows_the_seed() -> None:
    assert shard_order(6, None) == [0, 1, 2, 3, 4, 5]
    assert sorted(shard_order(6, 7)) == list(range(6)) and shard_order(6, 7) == shard_order(6, 7)
    assert len({tuple(shard_order(6, seed)) for seed in range(5)}) > 1  # the seed decides


def test_a_rank_reads_one_contiguous_range_cut_across_shard_boundaries() -> None:
    assert split_shares([3, 3, 3], 2) == [RankShare(0, (Piece(0, 0, 3), Piece(1, 0, 1))),
                                          RankShare(1, (Piece(1, 1, 2), Piece(2, 0, 3)))]
    assert [share.records for share in split_shares([2], 3)] == [0, 1, 1]  # more ranks than records
    assert rank_share(manifest_of([3, 3, 3]), "train", 1, 2) == split_shares([3, 3, 3], 2)[1]


def test_every_rank_runs_the_smallest_shares_full_batches_and_the_rest_is_reported_dropped() -> None:
    plan = TrainingPlan((4, 5), 2)
    assert (plan.steps_per_epoch, plan.dropped) == (2, (0, 1))
    assert plan.lines() == ["rank 0: 4 training records, 2 steps of 2, 0 dropped per epoch",
                            "rank 1: 5 training records, 2 steps of 2, 1 dropped per epoch"]
    assert training_plan(manifest_of([3, 3, 3]), 2, 2, seed=1) == plan
