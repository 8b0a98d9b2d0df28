"""horovodrun backends: Horovod's ranks started by horovodrun over the configured hosts (Gloo, or MPI where built
and present), with its stall check; elastic: the hosts come from the discovery script."""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from tasks.launch import horovodrun_cli
from tasks.launch.elastic import elastic_arguments, elastic_interface
from tasks.launch.hostlist import host_slots, rank_hosts
from tasks.launch.launchers.base import Launcher, trainer_command
from tasks.launch.remote.addresses import is_local
from tasks.launch.remote.discovery import discovery_script
from tasks.launch.slurm.commands import MPI_PLUGINS, SRUN
from tasks.launch.supervise.processes import Process
from tasks.params import Params
from trainer.choices import controller_spec
from trainer.config import TrainParams

# horovodrun's command line, answering its build question from set-up's record (tasks/launch/horovodrun_cli.py)
HOROVODRUN = [sys.executable, horovodrun_cli.__file__]


def stall_times(stall_seconds: int) -> tuple[int, int] | None:
    """Horovod's stall check: a warning at half the time, shutdown at the full time (None: off, as by default)."""
    if stall_seconds <= 0:
        return None
    warning = max(1, stall_seconds // 2)
    return warning, max(stall_seconds, warning + 1)


def stall_arguments(stall_seconds: int) -> list[str]:
    """The stall check as horovodrun's arguments."""
    times = stall_times(stall_seconds)
    if times is None:
        return ["--no-stall-check"]
    return ["--stall-check-warning-time-seconds", str(times[0]), "--stall-check-shutdown-time-seconds", str(times[1])]


def stall_environment(stall_seconds: int) -> dict[str, str]:
    """The stall check as Horovod's variables, for ranks started without horovodrun (srun)."""
    times = stall_times(stall_seconds)
    if times is None:
        return {"HOROVOD_STALL_CHECK_DISABLE": "1"}
    return {"HOROVOD_STALL_CHECK_TIME_SECONDS": str(times[0]), "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": str(times[1])}


LOOPBACK = "lo"  # Linux's loopback interface


def rank_interface(train: TrainParams) -> str | None:
    """The interface the ranks talk over: train.network_interface; for a job on this machine alone, loopback (the
    ranks' connections then listen on 127.0.0.1 only); else None (Horovod finds a routable one)."""
    if train.network_interface or train.elastic:
        return train.network_interface
    return LOOPBACK if all(is_local(host) for host in host_slots(train)) else None


def horovod_command(params: Params, controller: str, config_file: Path, hosts: str | None = None) -> list[str]:
    """horovodrun over the configured hosts (or `hosts`, horovodrun's -H), with the stall check and any extra
    arguments passed through."""
    train = params.train
    # the hosts as preflight read them (horovodrun's own hostfile reader refuses comments and 'host:N' lines)
    where = ["-H", hosts or ",".join(f"{h}:{n}" for h, n in host_slots(train).items())]
    interface = train.network_interface if hosts else rank_interface(train)
    if train.elastic:  # Horovod: the hosts come from the discovery script
        where = elastic_arguments(train.elastic, discovery_script(train.elastic, config_file.parent))
        interface = elastic_interface(train, host_slots(train))
    return [*HOROVODRUN, controller_spec(controller).horovodrun_flag, "-np", str(train.np), *where,
            *stall_arguments(train.stall_timeout_seconds),
            *(["--network-interface", interface] if interface else []),
            *train.horovodrun_args, *trainer_command(config_file)]


def controller_environment(controller: str) -> dict[str, str]:
    """What the controller needs in the ranks' environment: Open MPI's permission to run as root (containers,
    the test cluster)."""
    return dict(controller_spec(controller).root_environment) if os.geteuid() == 0 else {}


class HorovodrunLauncher(Launcher):
    """horovodrun, which starts every rank (or, under Slurm, horovodrun or srun inside the allocation)."""

    def processes(self, params: Params, controller: str | None, config_file: Path, env: dict[str, str],
                  ports: list[int] | None) -> list[Process]:
        """One horovodrun, which starts every rank."""
        if controller is None:
            raise ValueError("a horovodrun backend needs Horovod's controller (preflight names it)")
        return [Process(horovod_command(params, controller, config_file), env | controller_environment(controller),
                        hosts=rank_hosts(params.train))]

    def listens(self, params: Params, controller: str | None) -> list[str]:
        """horovodrun's rendezvous here and the ranks' connections on their hosts, for the job's length."""
        train = params.train
        where = "the hosts discovery finds" if train.elastic else ", ".join(host_slots(train))
        chosen = rank_interface(train)
        interface = (f"interface {chosen}" + (" (this machine only)" if chosen == LOOPBACK else "")) if chosen else None
        # measured: without the rendezvous (MPI), mpirun's and the ranks' sockets listen on 0.0.0.0 and :: whatever
        # they use
        if controller and not controller_spec(controller).rendezvous:
            used = f"traffic over {chosen}" if chosen else "traffic over the interfaces Horovod finds routable"
            return [f"Open MPI's daemons and the ranks' TCP transport on {where}, every interface (Open MPI binds them "
                    f"so; {used})"]
        return ["horovodrun's rendezvous (HTTP) on this machine, every interface (Horovod binds it so)",
                f"Gloo between the ranks on {where}, {interface or 'the interface Horovod finds'}"]

    def in_allocation(self, params: Params, controller: str | None, config_file: Path, job_dir: Path) -> list[str]:
        """Under Slurm: with Gloo, horovodrun over the allocation's nodes (Gloo needs its rendezvous); with MPI, the
        ranks as one srun step (PMIx, or PMI-2, whichever srun offers)."""
        if controller is None:
            raise ValueError("a horovodrun backend needs Horovod's controller (preflight names it)")
        if controller_spec(controller).rendezvous:
            hosts = ('"$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed "s/$/:$SLURM_NTASKS_PER_NODE/" '
                     '| paste -sd,)"')
            command = shlex.join(horovod_command(params, controller, config_file, "HOSTS"))
            return [f"hosts={hosts}", command.replace(" HOSTS ", ' "$hosts" ') + " &"]
        stall_env = stall_environment(params.train.stall_timeout_seconds)
        stall = " ".join(f"{key}={value}" for key, value in stall_env.items())
        plugins = "|".join(MPI_PLUGINS)
        return [f"mpi=$(srun --mpi=list 2>&1 | grep -owE -m1 '{plugins}')  # what srun offers: PMIx, else PMI-2",
                f'{stall} {shlex.join(SRUN)} --mpi="$mpi" {shlex.join(trainer_command(config_file))} &']


LAUNCHER = HorovodrunLauncher()
