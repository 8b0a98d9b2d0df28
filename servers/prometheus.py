"""A Prometheus of ringflow's own (Debian's `prometheus`) that scrapes model servers' /metrics, its data in a folder
of its own; Ctrl-C stops it (exit 130).

    python -m servers.prometheus [--port 9090] [--every 5] [--data DIR] HOST:PORT...
    then: http://127.0.0.1:9090/graph, or its query API (docs/serving.md)
"""
from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from tasks.paths import OUTPUTS_DIR

JOB = "ringflow-serving"


def scrape_config(targets: list[str], every_seconds: float) -> str:
    """Prometheus's configuration: one job scraping each target's /metrics every `every_seconds`."""
    interval = f"{round(every_seconds * 1000)}ms"  # Prometheus's durations are whole numbers of a unit
    return yaml.safe_dump({"global": {"scrape_interval": interval, "evaluation_interval": "15s"},
                           "scrape_configs": [{"job_name": JOB, "metrics_path": "/metrics",
                                               "static_configs": [{"targets": targets}]}]})


def start(folder: Path, targets: list[str], port: int, every_seconds: float = 5.0) -> subprocess.Popen:
    """Prometheus on 127.0.0.1:port scraping `targets`, its configuration and data in `folder`; its log beside."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise FileNotFoundError("no prometheus on PATH: install Debian's package (apt-get install prometheus; make "
                                "setup's test profile does)")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prometheus.yml").write_text(scrape_config(targets, every_seconds))
    command = [binary, f"--config.file={folder / 'prometheus.yml'}", f"--storage.tsdb.path={folder / 'data'}",
               f"--web.listen-address=127.0.0.1:{port}"]
    return subprocess.Popen(command, stdout=open(folder / "prometheus.log", "w"), stderr=subprocess.STDOUT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servers.prometheus", description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="+", help="the model servers, HOST:PORT")
    parser.add_argument("--port", type=int, default=9090)
    parser.add_argument("--every", type=float, default=5.0, help="seconds between scrapes")
    parser.add_argument("--data", type=Path, default=OUTPUTS_DIR / "prometheus")
    options = parser.parse_args(argv)
    try:
        process = start(options.data, options.targets, options.port, options.every)
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"Prometheus: http://127.0.0.1:{options.port} scraping {', '.join(options.targets)} every "
          f"{options.every:g} s (its data in {options.data}); Ctrl-C stops it", flush=True)
    try:
        return process.wait()
    except KeyboardInterrupt:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        print("Prometheus stopped (Ctrl-C)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
