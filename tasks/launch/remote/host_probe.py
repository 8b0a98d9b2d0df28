"""What preflight asks of a host, answered there: sent over ssh to the host's Python on standard input, so it needs
nothing on the host but that Python (standard library only). Prints one JSON line.

ssh HOST PYTHON - CHECKOUT DATA_DIR TOKEN_FILE < tasks/launch/remote/host_probe.py
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
from pathlib import Path


def trainer_digest(checkout: Path) -> str:
    """sha256 over the trainer's code at `checkout` (what every rank runs); empty when it is not there."""
    digest = hashlib.sha256()
    for path in sorted((checkout / "trainer").rglob("*.py")):
        digest.update(path.relative_to(checkout).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest() if (checkout / "trainer").is_dir() else ""


def horovod_build() -> dict[str, object]:
    """Which controllers this host's Horovod was built with, or why it cannot be imported."""
    try:
        import horovod.tensorflow as hvd
        return {"gloo": bool(hvd.gloo_built()), "mpi": bool(hvd.mpi_built())}
    except (ImportError, OSError, RuntimeError) as error:
        return {"error": f"{type(error).__name__}: {error}"}


SHIPPED_MARK = ".ringflow-shipped"  # in a data directory shipped to a host: the key of the data it holds


def read_text(path: Path) -> str:
    """A small file's text, stripped; empty when it is not there."""
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def gpu_count() -> int:
    return sum(1 for name in os.listdir("/dev") if name.startswith("nvidia") and name[6:].isdigit())


def interface_names() -> list[str]:
    """This host's network interfaces."""
    return sorted(name for _, name in socket.if_nameindex())


def main(checkout: Path, data_dir: Path, token_file: Path) -> None:
    """sees_token: whether this host sees the file the head node wrote just before asking (a shared filesystem);
    data_key: the data shipped here, if any."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    print(json.dumps({"python": sys.version.split()[0], "trainer": trainer_digest(checkout), "cores": os.cpu_count(),
                      "gpus": gpu_count(), "horovod": horovod_build(), "sees_token": token_file.is_file(),
                      "interfaces": interface_names(), "data_key": read_text(data_dir / SHIPPED_MARK)}), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
