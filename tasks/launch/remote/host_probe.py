"""What preflight asks of a host, answered there: sent over ssh to the host's Python on standard input, so it needs
nothing on the host but that Python (standard library only). Prints one JSON line.

ssh HOST PYTHON - CHECKOUT DATA_DIR TOKEN_FILE < tasks/launch/remote/host_probe.py
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path


def trainer_digest(checkout: Path) -> str:
    """sha256 over the trainer's code at `checkout` (what every rank runs); empty when it is not there."""
    digest = hashlib.sha256()
    for path in sorted((checkout / "trainer").rglob("*.py")):
        digest.update(path.relative_to(checkout).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest() if (checkout / "trainer").is_dir() else ""


def package_dir(name: str) -> Path | None:
    """Where an installed top-level package is, found without importing it."""
    spec = importlib.util.find_spec(name)
    return Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None


def imported_horovod() -> dict[str, object]:
    """Which controllers this host's Horovod was built with, or why it cannot be imported."""
    try:
        import horovod.tensorflow as hvd
        return {"gloo": bool(hvd.gloo_built()), "mpi": bool(hvd.mpi_built())}
    except (ImportError, OSError, RuntimeError) as error:
        return {"error": f"{type(error).__name__}: {error}"}


def horovod_build() -> dict[str, object]:
    """Whether this host can load Horovod's TensorFlow library: it is installed and every shared library it needs
    (Open MPI's, the C++ runtime) is found here, TensorFlow's own where TensorFlow is. That is what importing
    horovod.tensorflow fails on when a host lacks something; the import itself would also import TensorFlow, 3 s of
    a core at every probe."""
    horovod, tensorflow = package_dir("horovod"), package_dir("tensorflow")
    if horovod is None or tensorflow is None:
        return {"error": f"ModuleNotFoundError: No module named '{'horovod' if horovod is None else 'tensorflow'}'"}
    library = next((horovod / "tensorflow").glob("mpi_lib*.so"), None)
    if library is None:
        return {"error": "ImportError: Horovod was built without TensorFlow"}
    try:
        linked = subprocess.run(["ldd", str(library)], capture_output=True, text=True,
                                env=dict(os.environ, LD_LIBRARY_PATH=str(tensorflow)))
    except OSError:  # no ldd on this host: import it
        return imported_horovod()
    missing = [line.split()[0] for line in linked.stdout.splitlines() if "not found" in line]
    if linked.returncode != 0 or missing:
        return {"error": f"OSError: {', '.join(missing) or linked.stderr.strip()}: cannot open shared object file"}
    return {"library": str(library)}


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
