"""The job's tuning rules: each rank's share of its host's cores, Horovod's cycle and fusion buffer from the
hosts' GPUs and the model's gradient size, params.yaml's settings first."""
from __future__ import annotations

from trainer.config import ElasticParams, TrainParams
from trainer.tuning import (
    CPU_CYCLE_MS,
    CYCLE_ENV,
    FUSION_ENV,
    HOROVOD_CYCLE_MS,
    HOROVOD_FUSION_MB,
    MB,
    HorovodCycle,
    RankThreads,
    applied_cycle,
    horovod_cycle,
    horovod_environment,
    rank_threads,
    resolved,
)


def test_each_rank_takes_its_share_of_the_host_s_cores_for_every_pool() -> None:
    assert rank_threads(TrainParams(), cores=8, local_ranks=2) == RankThreads(4, 4, 4)
    assert rank_threads(TrainParams(), cores=2, local_ranks=2) == RankThreads(1, 1, 1)
    assert rank_threads(TrainParams(), cores=2, local_ranks=4) == RankThreads(1, 1, 1)  # never none
    assert rank_threads(TrainParams(), cores=7, local_ranks=2) == RankThreads(3, 3, 3)  # no pool overlaps another's


def test_params_yaml_s_threads_win_and_intra_op_carries_the_others() -> None:
    explicit = TrainParams(intra_op_threads=2, inter_op_threads=1, data_threads=3)
    assert rank_threads(explicit, cores=8, local_ranks=1) == RankThreads(2, 1, 3)
    assert rank_threads(TrainParams(intra_op_threads=2), cores=8, local_ranks=1) == RankThreads(2, 2, 2)  # a trial's


def test_cpu_ranks_get_a_short_cycle_and_gpu_ranks_horovod_s_own() -> None:
    assert horovod_cycle(TrainParams(), gpus_per_host=0, gradient_bytes=None) == HorovodCycle(CPU_CYCLE_MS, None)
    assert horovod_cycle(TrainParams(), gpus_per_host=4, gradient_bytes=None) == HorovodCycle(None, None)
    assert horovod_environment(HorovodCycle(None, None)) == {}
    assert applied_cycle({}) == HorovodCycle(HOROVOD_CYCLE_MS, HOROVOD_FUSION_MB)


def test_the_fusion_buffer_holds_the_whole_gradient_once_it_is_known() -> None:
    assert horovod_cycle(TrainParams(), 0, 200_000) == HorovodCycle(CPU_CYCLE_MS, HOROVOD_FUSION_MB)
    assert horovod_cycle(TrainParams(), 4, 400 * MB + 1) == HorovodCycle(None, 401)


def test_params_yaml_s_cycle_and_buffer_win_and_zero_turns_fusion_off() -> None:
    assert horovod_cycle(TrainParams(cycle_time_ms=3.5, fusion_threshold_mb=0), 0, 200_000) == HorovodCycle(3.5, 0)
    assert horovod_cycle(TrainParams(cycle_time_ms=3.5), 4, None) == HorovodCycle(3.5, None)
    assert applied_cycle({CYCLE_ENV: "fast"}) == HorovodCycle(HOROVOD_CYCLE_MS, HOROVOD_FUSION_MB)  # not a number


def test_the_cycle_reaches_horovod_as_its_variables_and_is_read_back_as_applied() -> None:
    env = horovod_environment(HorovodCycle(0.25, 32))
    assert env == {CYCLE_ENV: "0.25", FUSION_ENV: str(32 * MB)}
    assert applied_cycle(env) == HorovodCycle(0.25, 32)
    assert resolved(RankThreads(1, 2, 3), applied_cycle(env)) == {
        "intra_op_threads": 1, "inter_op_threads": 2, "data_threads": 3, "cycle_time_ms": 0.25,
        "fusion_threshold_mb": 32}


def test_one_rank_alone_keeps_horovod_s_cycle() -> None:
    assert horovod_cycle(TrainParams(np=1), gpus_per_host=0, gradient_bytes=None) == HorovodCycle(None, None)


def test_ranks_across_hosts_and_an_elastic_ring_keep_horovod_s_cycle() -> None:
    assert horovod_cycle(TrainParams(), 0, None, one_host=False) == HorovodCycle(None, None)
    elastic = TrainParams(elastic=ElasticParams(min_np=1, max_np=2))
    assert horovod_cycle(elastic, 0, None) == HorovodCycle(None, None)
