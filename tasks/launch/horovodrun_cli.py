"""horovodrun, told what Horovod's build has: `python tasks/launch/horovodrun_cli.py ARGS` takes horovodrun's own
arguments and runs horovodrun's own command line.

Before it starts any rank, horovodrun asks whether Horovod was built with Gloo or MPI by importing TensorFlow in a
child process (3 s of a core, every launch). set-up recorded `horovodrun --check-build` once, and preflight checked
the job's controller against that record; this answers horovodrun's question from the same record. Without the
record, horovodrun asks as usual.

An elastic job's driver gives up on a connection after DRIVER_SOCKET_SECONDS: when discovery finds a host gone,
Horovod's driver tells the ranks' coordinator so, holding the lock that the job's recovery waits on, over a socket
without a timeout; when the coordinator's own host went down, the kernel tried that connection for over two minutes
(measured on the test cluster: the surviving rank sat 75 s before training on alone; 5 s with this bound).

Run by path, not as a module, with only the standard library and Horovod: it also runs inside a Slurm allocation.
"""
from __future__ import annotations

import socket
import sys
from pathlib import Path

CHECK_BUILD_CACHE = Path(sys.executable).parent.parent / ".ringflow-check-build"  # written by scripts/setup.sh
DRIVER_SOCKET_SECONDS = 5.0  # the driver's requests are answered at once; a host that does not is gone
ELASTIC_OPTIONS = ("--host-discovery-script", "--min-np", "--max-np")


def controllers_built(report: str) -> dict[str, bool]:
    """Which controllers a `horovodrun --check-build` report marks as built."""
    controllers = report.split("Available Controllers:", 1)[-1].split("Available Tensor Operations", 1)[0]
    return {name: f"[X] {name}" in controllers for name in ("MPI", "Gloo")}


def driver_socket_seconds(arguments: list[str]) -> float | None:
    """How long the driver's sockets wait: DRIVER_SOCKET_SECONDS for an elastic job, else without a bound."""
    return DRIVER_SOCKET_SECONDS if any(option in ELASTIC_OPTIONS for option in arguments) else None


def main() -> None:
    from horovod.runner import launch
    if CHECK_BUILD_CACHE.is_file() and "Available Controllers:" in (report := CHECK_BUILD_CACHE.read_text()):
        built = controllers_built(report)
        launch.mpi_built = lambda verbose=False: built["MPI"]
        launch.gloo_built = lambda verbose=False: built["Gloo"]
    socket.setdefaulttimeout(driver_socket_seconds(sys.argv[1:]))
    sys.argv[0] = "horovodrun"
    sys.exit(launch.run_commandline())


if __name__ == "__main__":
    main()
