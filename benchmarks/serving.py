"""make serve-model vs plain `mlflow models serve` of the same registered version, side by side in one run.

Each server gets the same stream of requests, one PNG of a digit (drawn with PIL) per request, from 1, 8 and 32
clients at once (threads with a kept-alive connection each), for --seconds per level after a warm-up; the levels
alternate between the servers. Reported per server and level: requests per second, p50 and p99 latency (ms).
make serve-model is asked through TensorFlow Serving's predict API and through MLflow's /invocations (the same
body plain MLflow gets), and once more with its prediction log off (serving.log_fraction 0; on, it logs every item
into a temporary folder). Goals (2-core machine): >= 3x plain MLflow's throughput at 32 clients; p99 <= 2x p50 at 1;
the prediction log and the metrics cost <= 10 % of the throughput at 32 clients (log on / log off >= 0.9: the median
of three pairs of loads, alternating).
The limit beside them: the same PNGs decoded and classified in batches of 32 by the server's own functions
(ServedModel.classify of the version, loaded as the server loads it), no HTTP, in a process of its own on the same
cores; goal: the server at 32 clients sending 32 images per request >= 0.7 of it (what HTTP and JSON cost once per
request, shared by its images; with one image per request, the work per request bounds it). A second peer:
MLServer with its MLflow runtime (its /invocations, the same body plain MLflow gets), from a venv of its own made on
first use (.venv-mlserver: MLServer's packages over ringflow's stack; its parallel workers crash here, so
parallel_workers is 0).

Usage: .venv/bin/python -m benchmarks.serving [--version N] [--seconds 10]  (after make run: its champion)
"""
from __future__ import annotations

import argparse
import base64
import http.client
import io
import json
import os
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from tasks.paths import ROOT

BIN = ROOT / ".venv" / "bin"
MLSERVER_VENV = ROOT / ".venv-mlserver"
MLSERVER_PINS = ("mlserver==1.7.1", "mlserver-mlflow==1.7.1")
CLIENTS = (1, 8, 32)
LOG_OFF = "make serve-model, log off (predict)"
BATCHED = "make serve-model, 32 images per request (predict)"


@dataclass(frozen=True)
class Target:
    """A server's endpoint and the body it is sent."""
    name: str
    port: int
    path: str
    bodies: list[bytes]


def digit_pngs() -> list[bytes]:
    """The digits 0-9, drawn with PIL's font on 32x32 canvases, as PNG bytes."""
    from PIL import Image, ImageDraw
    pngs = []
    for digit in range(10):
        image = Image.new("L", (32, 32), 0)
        ImageDraw.Draw(image).text((8, 0), str(digit), fill=255, font_size=28, stroke_width=2, stroke_fill=255)
        out = io.BytesIO()
        image.save(out, "PNG")
        pngs.append(out.getvalue())
    return pngs


def batch_body(pngs: list[bytes], images: int = 32) -> bytes:
    """One TensorFlow Serving predict body of `images` PNGs."""
    return json.dumps({"instances": [{"b64": base64.b64encode(pngs[index % len(pngs)]).decode()}
                                     for index in range(images)]}).encode()


def bodies(pngs: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """(TensorFlow Serving predict bodies, MLflow dataframe_split bodies) of one image each."""
    texts = [base64.b64encode(png).decode() for png in pngs]
    return ([json.dumps({"instances": [{"b64": text}]}).encode() for text in texts],
            [json.dumps({"dataframe_split": {"columns": ["image"], "data": [[text]]}}).encode() for text in texts])


@contextmanager
def server(command: list[str], port: int, log: Path, ready: str = "/ping") -> Iterator[None]:
    """A server in a session of its own, until it answers GET `ready`; stopped (its group) at the end."""
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command[:3]} did not start: {log.read_text()[-1500:]}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{ready}", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        yield
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)


def client(target: Target, until: float, latencies: list[float], errors: list[str], offset: int) -> None:
    """One client: requests one after another on one connection until `until`."""
    connection = http.client.HTTPConnection("127.0.0.1", target.port, timeout=60)
    sent = offset
    while time.monotonic() < until:
        body = target.bodies[sent % len(target.bodies)]
        started = time.perf_counter()
        connection.request("POST", target.path, body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = response.read()
        latencies.append(time.perf_counter() - started)
        if response.status != 200:
            errors.append(f"{response.status} {answer[:200]!r}")
        sent += 1
    connection.close()


def load(target: Target, clients: int, seconds: float) -> dict[str, float]:
    """Requests per second and latency percentiles of `clients` concurrent clients for `seconds`."""
    latencies: list[float] = []
    errors: list[str] = []
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=client, args=(target, until, latencies, errors, index))
               for index in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    if errors:
        raise RuntimeError(f"{target.name}: {len(errors)} failed requests, e.g. {errors[0]}")
    ordered = sorted(latencies)
    return {"rps": len(latencies) / elapsed, "p50": statistics.median(ordered) * 1000,
            "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000}


def champion_version() -> str:
    from servers.model.served_model import champion_version as asked
    from tasks.tracking import mlflow_store
    os.environ.setdefault("MLFLOW_TRACKING_URI", mlflow_store.tracking_uri())
    version = asked("ringflow")
    if version is None:
        raise SystemExit("no champion in the registry: make run first")
    return version


def site_packages(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"], check=True,
                          capture_output=True, text=True).stdout.strip()


def mlserver_bin() -> Path:
    """The bin folder of MLServer's venv, made on first use: MLServer's pinned packages, and under them (a .pth
    file, last on its path) ringflow's stack, so that it loads the model with the same TensorFlow and MLflow."""
    python = MLSERVER_VENV / "bin" / "python"
    if not (MLSERVER_VENV / "bin" / "mlserver").exists():
        subprocess.run([str(BIN / "python"), "-m", "venv", str(MLSERVER_VENV)], check=True)
        (Path(site_packages(python)) / "ringflow-stack.pth").write_text(site_packages(BIN / "python") + "\n")
        subprocess.run([str(python), "-m", "pip", "install", "-q", *MLSERVER_PINS], check=True)
    return MLSERVER_VENV / "bin"


def mlserver_folder(version: str, folder: Path, port: int) -> Path:
    """MLServer's settings for the version's MLflow model (downloaded into `folder`), HTTP on `port`."""
    from mlflow.artifacts import download_artifacts
    model = download_artifacts(f"models:/ringflow/{version}", dst_path=str(folder / "model"))
    settings = {"http_port": port, "grpc_port": port + 1000, "metrics_port": port + 2000, "parallel_workers": 0}
    (folder / "settings.json").write_text(json.dumps(settings))
    (folder / "model-settings.json").write_text(json.dumps({
        "name": "ringflow", "implementation": "mlserver_mlflow.MLflowRuntime", "parameters": {"uri": model}}))
    return folder


def in_process_rate(version: str, seconds: float) -> float:
    """Images per second of the server's own classify (decode and model, ServedModel.classify) on batches of 32 of
    the benchmark's PNGs, in this process: the limit an HTTP server of this model can approach."""
    from servers.model.served_model import load_version
    pngs = digit_pngs()
    batch = [pngs[index % len(pngs)] for index in range(32)]
    model = load_version("ringflow", version, batch)
    for _ in range(10):  # as the servers are warmed
        model.classify(batch)
    images, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        model.classify(batch)
        images += len(batch)
    return images / (time.perf_counter() - started)


def in_process_limit(version: str, seconds: float) -> float:
    """in_process_rate in a fresh process (TensorFlow's threads as a server's: the same cores, nothing else)."""
    done = subprocess.run([str(BIN / "python"), "-m", "benchmarks.serving", "--in-process", "--version", version,
                           "--seconds", str(seconds)], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    if done.returncode != 0:
        raise RuntimeError(f"the in-process limit failed: {done.stderr[-1500:]}")
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", help="the registered version (default: the champion)")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--in-process", action="store_true", help="only the in-process limit, in images/s")
    args = parser.parse_args()
    version = args.version or champion_version()
    if args.in_process:
        print(f"{in_process_rate(version, args.seconds):.1f}")
        return
    limit = in_process_limit(version, args.seconds)  # before the servers start: nothing shares the cores
    predict_bodies, mlflow_bodies = bodies(digit_pngs())
    targets = [Target("make serve-model (predict)", 18501, "/v1/models/ringflow:predict", predict_bodies),
               Target("make serve-model (invocations)", 18501, "/invocations", mlflow_bodies),
               Target("mlflow models serve", 18502, "/invocations", mlflow_bodies),
               Target(LOG_OFF, 18503, "/v1/models/ringflow:predict", predict_bodies),
               Target("mlserver (invocations)", 18504, "/invocations", mlflow_bodies)]
    logs = Path(tempfile.mkdtemp(prefix="ringflow-bench-serving-"))
    ours = [str(BIN / "python"), "-m", "servers.model", "--set", "serving.poll_seconds=3600",
            "--set", f"serving.log_dir={logs / 'predictions'}"]
    plain = [str(BIN / "mlflow"), "models", "serve", "-m", f"models:/ringflow/{version}", "--env-manager", "local",
             "-h", "127.0.0.1", "-p", "18502"]
    results: dict[tuple[str, int], dict[str, float]] = {}
    mlserver = [str(mlserver_bin() / "mlserver"), "start", str(mlserver_folder(version, logs / "mlserver", 18504))]
    with server([*ours, "--set", "serving.port=18501"], 18501, logs / "serve-model.log"), \
            server(plain, 18502, logs / "mlflow-serve.log"), \
            server([*ours, "--set", "serving.port=18503", "--set", "serving.log_fraction=0"], 18503,
                   logs / "serve-model-log-off.log"), \
            server(mlserver, 18504, logs / "mlserver.log", "/v2/health/ready"):
        for target in targets:
            load(target, 4, 2)  # warm-up: every connection path and the batcher's first batches
        for clients in CLIENTS:
            for target in targets:
                results[target.name, clients] = load(target, clients, args.seconds)
        batched = load(Target(BATCHED, 18501, targets[0].path, [batch_body(digit_pngs())]), 32, args.seconds)
        results[BATCHED, 32] = {**batched, "rps": batched["rps"] * 32}
        logged = log_on_off(targets[0], targets[3], args.seconds)
    report(results, targets, version, args.seconds, limit, logged)


def log_on_off(on: Target, off: Target, seconds: float, rounds: int = 3) -> float:
    """The throughput at 32 clients with the prediction log on over off: the median of `rounds` pairs, each pair's
    order alternating (two servers sharing two cores with the clients: one pair alone is noise)."""
    ratios = []
    for index in range(rounds):
        pair = (on, off) if index % 2 == 0 else (off, on)
        rates = {target.name: load(target, 32, seconds)["rps"] for target in pair}
        ratios.append(rates[on.name] / rates[off.name])
    return statistics.median(ratios)


def report(results: dict[tuple[str, int], dict[str, float]], targets: list[Target], version: str,
           seconds: float, limit: float, logged: float) -> None:
    print(f"ringflow v{version}, one PNG per request, {seconds:g} s per level")
    print(f"{'server':36} {'clients':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for clients in CLIENTS:
        for target in targets:
            row = results[target.name, clients]
            print(f"{target.name:36} {clients:7d} {row['rps']:8.1f} {row['p50']:8.2f} {row['p99']:8.2f}")
    print(f"prediction log on / off at 32 clients: {logged:.2f} of the throughput (median of 3 alternating pairs; "
          "goal >= 0.9)")
    print(f"in-process limit (the server's classify, batches of 32, no HTTP): {limit:.1f} images/s")
    print(f"{BATCHED}, 32 clients: {results[BATCHED, 32]['rps']:.1f} images/s, "
          f"{results[BATCHED, 32]['rps'] / limit:.2f} of the in-process limit (goal >= 0.7)")
    for target in targets[:2]:
        share = results[target.name, 32]["rps"] / limit
        print(f"{target.name}, one image per request, at 32 clients: {share:.2f} of the in-process limit (bound by "
              "the work per request)")
    plain = results["mlflow models serve", 32]["rps"]
    print(f"mlserver at 32 clients: {results['mlserver (invocations)', 32]['rps'] / plain:.1f}x plain MLflow's")
    for target in targets[:2]:
        ratio = results[target.name, 32]["rps"] / plain
        one = results[target.name, 1]
        print(f"{target.name}: throughput at 32 clients {ratio:.1f}x plain MLflow's (goal >= 3x); p99/p50 at 1 "
              f"client {one['p99'] / one['p50']:.2f} (goal <= 2)")


if __name__ == "__main__":
    main()
