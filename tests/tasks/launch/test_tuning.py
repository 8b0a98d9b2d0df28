"""The job's tuning as the launcher plans and says it: params.yaml first, then what the user set through horovodrun
or the environment, then the rule's choice; the preflight's line names each host's share and where each setting
comes from."""
from __future__ import annotations

import pytest

from tasks.launch.tuning import job_cycle, tuning_line
from tasks.params import Params, TrainParams
from trainer.config import ElasticParams
from trainer.tuning import CPU_CYCLE_MS, CYCLE_ENV, FUSION_ENV, HorovodCycle

GRADIENT = 200_000  # bytes: about the digits' cnn


@pytest.fixture(autouse=True)
def no_horovod_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CYCLE_ENV, raising=False)
    monkeypatch.delenv(FUSION_ENV, raising=False)


def test_the_job_sets_the_rule_s_choice() -> None:
    assert job_cycle(Params(), 0, None) == HorovodCycle(CPU_CYCLE_MS, None)
    assert job_cycle(Params(), 0, GRADIENT) == HorovodCycle(CPU_CYCLE_MS, 128)
    assert job_cycle(Params(), 8, None) == HorovodCycle(None, None)  # GPU hosts: Horovod's own until it is known


def test_a_tf_distribute_job_has_no_horovod_cycle() -> None:
    assert job_cycle(Params(train=TrainParams(backend="multiworker")), 0, GRADIENT) is None


def test_what_the_user_set_through_horovodrun_or_the_environment_is_left_to_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    through_horovodrun = Params(train=TrainParams(horovodrun_args=["--cycle-time-ms", "10"]))
    assert job_cycle(through_horovodrun, 0, GRADIENT) == HorovodCycle(None, 128)
    monkeypatch.setenv(FUSION_ENV, str(32 << 20))
    assert job_cycle(through_horovodrun, 0, GRADIENT) == HorovodCycle(None, None)


def test_params_yaml_wins_over_horovodrun_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CYCLE_ENV, "10")
    params = Params(train=TrainParams(cycle_time_ms=2.5, fusion_threshold_mb=0,
                                      horovodrun_args=["--fusion-threshold-mb=16"]))
    assert job_cycle(params, 0, GRADIENT) == HorovodCycle(2.5, 0)


def test_the_preflight_line_gives_each_host_s_share_and_why_each_setting_is_what_it_is() -> None:
    line = tuning_line(Params(), {"localhost": 2}, 0, GRADIENT)
    assert line == ("tuning: localhost (2 cores, 2 ranks): 1 intra-op, 1 inter-op, 1 tf.data thread(s) per rank; "
                    "Horovod cycle 0.25 ms (the ranks' threads take the host's cores), fusion buffer 128 MB (holds the "
                    "model's 0.19 MB gradient, as the last run of this config logged it)")
    across = Params(train=TrainParams(np=3, hosts="a:2,b:2"))  # across hosts: Horovod's own cycle
    assert tuning_line(across, {"a": 8, "b": 2}, 0, None) == (
        "tuning: a (8 cores, 2 ranks): 4 intra-op, 4 inter-op, 4 tf.data thread(s) per rank; b (2 cores, 1 rank): "
        "2 intra-op, 2 inter-op, 2 tf.data thread(s) per rank; Horovod cycle 1 ms (Horovod's own), fusion buffer "
        "128 MB (Horovod's own until a run of this config has logged its gradient)")


def test_ranks_across_hosts_an_elastic_ring_and_gpu_hosts_keep_horovod_s_cycle() -> None:
    assert job_cycle(Params(train=TrainParams(hosts="a:1,b:1")), 0, None) == HorovodCycle(None, None)
    elastic = TrainParams(elastic=ElasticParams(min_np=1, max_np=2), hosts="localhost:2")
    assert job_cycle(Params(train=elastic), 0, None) == HorovodCycle(None, None)
    assert job_cycle(Params(), 2, None) == HorovodCycle(None, None)


def test_the_line_says_whose_each_setting_is() -> None:
    params = Params(train=TrainParams(scheduler="slurm", cycle_time_ms=2.5,
                                      horovodrun_args=["--fusion-threshold-mb", "16"]))
    assert tuning_line(params, {}, 0, None) == (
        "tuning: each node's cores divided among its ranks at their start; Horovod cycle 2.5 ms "
        "(train.cycle_time_ms), fusion buffer yours (train.horovodrun_args or the environment)")
    assert tuning_line(Params(train=TrainParams(backend="mirrored")), {}, 0, None) is None


def test_one_rank_alone_is_said_to_keep_horovod_s_cycle() -> None:
    line = tuning_line(Params(train=TrainParams(np=1)), {"localhost": 2}, 0, None)
    assert line is not None and "Horovod cycle 1 ms (Horovod's own)" in line
