"""The job's choices beside its backend, each name with the one spec that says what it means: Horovod's controller
(train.controller) and the scheduler that runs the job (train.scheduler). As with the backend registry, code asks a
spec; no other module compares these names. Standard library only (the rank side and the flows read it)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ControllerChoice = Literal["auto", "gloo", "mpi"]  # auto: MPI if built and mpirun exists (not elastic), else Gloo
SchedulerChoice = Literal["none", "slurm"]  # slurm: the job is a Slurm batch job (the `slurm` section)


@dataclass(frozen=True)
class ControllerSpec:
    """One of Horovod's controllers: how its ranks meet and what starting them needs."""
    name: str
    build_mark: str  # its line in `horovodrun --check-build` when built
    rendezvous: bool  # the ranks meet through horovodrun's rendezvous (Gloo); else MPI starts them (mpirun, srun)
    elastic: bool  # Horovod's elastic mode runs on it
    needs_mpirun: bool
    root_environment: tuple[tuple[str, str], ...] = ()  # what it needs to run as root

    @property
    def horovodrun_flag(self) -> str:
        return f"--{self.name}"


CONTROLLERS = {
    "gloo": ControllerSpec("gloo", "[X] Gloo", rendezvous=True, elastic=True, needs_mpirun=False),
    # Open MPI refuses to run as root unless told twice (containers, the test cluster)
    "mpi": ControllerSpec("mpi", "[X] MPI", rendezvous=False, elastic=False, needs_mpirun=True,
                          root_environment=(("OMPI_ALLOW_RUN_AS_ROOT", "1"), ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"))),
}


def controller_spec(name: str) -> ControllerSpec:
    """The spec of a resolved controller (gloo or mpi)."""
    return CONTROLLERS[name]


def chosen_controller(choice: ControllerChoice) -> ControllerSpec | None:
    """The spec of the controller asked for by name; None for auto (preflight resolves it)."""
    return CONTROLLERS.get(choice)


AUTO_ORDER = ("mpi", "gloo")  # what train.controller auto takes: the first usable, else the last


def resolve_controller(choice: ControllerChoice, elastic: bool, built: set[str], mpirun_found: bool) -> str:
    """The controller a job uses: the chosen one, or for auto MPI when Horovod has it (`built`: the names of the
    controllers built) and mpirun exists, unless elastic (Horovod's elastic mode needs one that runs it)."""
    if choice != "auto":
        return choice
    usable = (name for name in AUTO_ORDER if name in built and (mpirun_found or not CONTROLLERS[name].needs_mpirun)
              and (CONTROLLERS[name].elastic or not elastic))
    return next(usable, AUTO_ORDER[-1])


@dataclass(frozen=True)
class SchedulerSpec:
    """A way the job is run: by ringflow on hosts it names (none), or as a batch job of a cluster's scheduler,
    which allocates the nodes and the rank count (train.hosts and train.np give way to its own section)."""
    name: str
    allocates: bool


SCHEDULERS: dict[SchedulerChoice, SchedulerSpec] = {"none": SchedulerSpec("none", allocates=False),
                                                    "slurm": SchedulerSpec("slurm", allocates=True)}


def scheduler_spec(name: SchedulerChoice) -> SchedulerSpec:
    return SCHEDULERS[name]
