"""The job's tuning, as the launcher plans it (trainer/tuning.py holds the rules the ranks apply): Horovod's cycle
(from where the ranks run) and fusion buffer (from the model's gradient size, as the last finished run of the same
config logged it), each host's cores divided among its ranks, and the preflight's line that says so."""
from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from tasks.launch.hostlist import rank_hosts
from tasks.launch.launchers.choose import scheduler_for
from tasks.params import Params
from trainer.backend_specs import backend_spec
from trainer.prepared_data import read_manifest
from trainer.tuning import (
    CYCLE_ENV,
    FUSION_ENV,
    GRADIENT_KEY,
    HOROVOD_CYCLE_MS,
    HOROVOD_FUSION_MB,
    MB,
    HorovodCycle,
    horovod_cycle,
    rank_threads,
)

GRADIENT_PARAM = f"resolved.{GRADIENT_KEY}"  # what a training run logs of its model (tasks/tracking/run_log.py)
USERS_OWN = {"cycle": ("--cycle-time-ms", CYCLE_ENV), "fusion": ("--fusion-threshold-mb", FUSION_ENV)}


def set_outside_params(params: Params) -> set[str]:
    """Which of Horovod's cycle and fusion buffer the user set outside params.yaml's keys for them: a horovodrun
    flag in train.horovodrun_args or a variable in the environment the ranks inherit."""
    args = params.train.horovodrun_args
    return {name for name, (flag, variable) in USERS_OWN.items()
            if variable in os.environ or any(arg == flag or arg.startswith(flag + "=") for arg in args)}


def job_cycle(params: Params, gpus_per_host: int, gradient_bytes: int | None) -> HorovodCycle | None:
    """The cycle and fusion buffer the job sets for a Horovod backend (None: not a Horovod job): the rule's choice,
    params.yaml's values first; what the user set another way is left to them."""
    if not backend_spec(params.train.backend).horovod:
        return None
    one_host = not scheduler_for(params) and len(set(rank_hosts(params.train))) == 1
    chosen = horovod_cycle(params.train, gpus_per_host, gradient_bytes, one_host)
    theirs = set_outside_params(params)
    cycle = chosen.cycle_time_ms if params.train.cycle_time_ms or "cycle" not in theirs else None
    explicit_fusion = params.train.fusion_threshold_mb is not None
    fusion = chosen.fusion_threshold_mb if explicit_fusion or "fusion" not in theirs else None
    return HorovodCycle(cycle, fusion)


def last_gradient_bytes(params: Params, data_dir: Path) -> int | None:
    """A Horovod job's model's gradient size, as the newest finished run of the same config (any np: its scaling
    key) logged it; None when none did, or the job is not Horovod's."""
    from tasks.launch.job_config import config_key
    from tasks.tracking import mlflow_store
    if not backend_spec(params.train.backend).horovod:
        return None
    key = config_key(params, read_manifest(data_dir), with_np=False)
    runs = mlflow_store.newest_runs(params.tracking.experiment, f"params.scaling_key = '{key}' and "
                                    f"params.`{GRADIENT_PARAM}` != '' and attributes.status = 'FINISHED'")
    return int(runs[0].data.params[GRADIENT_PARAM]) if runs else None


def threads_part(params: Params, host_cores: dict[str, int], hosts: tuple[str, ...]) -> str:
    """Each host's share of its cores per rank, in words; a scheduler's nodes are known only at the start."""
    if not host_cores:
        return "each node's cores divided among its ranks at their start"
    parts = []
    for host, ranks in Counter(hosts).items():
        threads = rank_threads(params.train, host_cores[host], ranks)
        parts.append(f"{host} ({host_cores[host]} cores, {ranks} rank{'s' * (ranks > 1)}): {threads.intra_op} "
                     f"intra-op, {threads.inter_op} inter-op, {threads.data} tf.data thread(s) per rank")
    return "; ".join(parts)


def setting_text(value: float | None, unit: str, key: str, explicit: bool, theirs: bool, default: float,
                 why: str) -> str:
    """One of Horovod's settings in words: its value and whose it is, or why the job chose it."""
    if explicit:
        return f"{value:g} {unit} ({key})"
    if theirs:
        return "yours (train.horovodrun_args or the environment)"
    return f"{default if value is None else value:g} {unit} ({why})"


def cycle_part(params: Params, cycle: HorovodCycle, gpus_per_host: int, gradient_bytes: int | None) -> str:
    """Horovod's cycle and fusion buffer, in words, each with why it is what it is."""
    train, theirs = params.train, set_outside_params(params)
    cycle_why = "the ranks' threads take the host's cores" if cycle.cycle_time_ms else "Horovod's own"
    cycle_text = setting_text(cycle.cycle_time_ms, "ms", "train.cycle_time_ms", bool(train.cycle_time_ms),
                              "cycle" in theirs, HOROVOD_CYCLE_MS, cycle_why)
    fusion_why = "Horovod's own until a run of this config has logged its gradient" if gradient_bytes is None \
        else f"holds the model's {gradient_bytes / MB:.2g} MB gradient, as the last run of this config logged it"
    fusion_text = setting_text(cycle.fusion_threshold_mb, "MB", "train.fusion_threshold_mb",
                               train.fusion_threshold_mb is not None, "fusion" in theirs, HOROVOD_FUSION_MB, fusion_why)
    return f"Horovod cycle {cycle_text}, fusion buffer {fusion_text}"


def tuning_line(params: Params, host_cores: dict[str, int], gpus_per_host: int,
                gradient_bytes: int | None) -> str | None:
    """The preflight's line of what the job chose for its ranks (None: not a Horovod job)."""
    cycle = job_cycle(params, gpus_per_host, gradient_bytes)
    if cycle is None:
        return None
    threads = threads_part(params, host_cores, rank_hosts(params.train))
    return f"tuning: {threads}; {cycle_part(params, cycle, gpus_per_host, gradient_bytes)}"
