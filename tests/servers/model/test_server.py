"""make serve-model against a real MLflow registry (a temporary SQLite store) and real models: images in as
TensorFlow Serving's and MLflow's clients send them, class names out; refused requests one line each; a champion
promoted while clients ask is served without a failed request; no champion, a taken port and Ctrl-C are one line.
What a client can send does not stall or grow the server: an image declaring 20000x20000 pixels is refused from
its header, silent and slow clients are cut off, a full queue is 429, JSON Python cannot read is a 400, and what the
client chose is escaped in the log."""
from __future__ import annotations

import base64
import io
import json
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from tests.helpers import (
    PYTHON,
    ROOT,
    drawn_digit,
    free_port,
    quiet_env,
    read_split,
    run,
    wait_for_http,
    wait_until,
)

pytestmark = pytest.mark.slow
CLASS_NAMES = [f"digit {index}" for index in range(10)]
MAX_REQUEST_BYTES, MAX_INSTANCES = 100_000, 16


@dataclass(frozen=True)
class Server:
    url: str
    log: Path
    process: subprocess.Popen
    store_uri: str
    test_images: np.ndarray


def png(image: np.ndarray) -> bytes:
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(image.astype(np.uint8)).save(out, "PNG")
    return out.getvalue()


def register(uri: str, digits_data: Path, folder: Path, epochs: int, alias: str = "champion") -> str:
    """A small CNN trained on the digits, registered as ringflow and given the alias (the champion); its version."""
    import mlflow

    from tasks.tracking import mlflow_store
    from tasks.tracking.model_registry import log_registered_model
    from trainer.model_outputs import write_savedmodel
    from trainer.models import build_model
    images, labels = read_split(digits_data, "train")
    model = build_model("small_cnn", (8, 8, 1), 10)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(images, labels, epochs=epochs, batch_size=32, verbose=0)
    write_savedmodel(model, folder / "savedmodel", CLASS_NAMES)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        run_id = mlflow_store.start_run("serving-test", {}, {})
        version = log_registered_model(run_id, folder / "savedmodel", images[:2], CLASS_NAMES, "ringflow")
        mlflow.MlflowClient(uri).set_registered_model_alias("ringflow", alias, version)
    return version


def predictions_dir(log: Path) -> Path:
    """Where the server that writes `log` logs its predictions (beside it, never in the checkout)."""
    return log.with_name(f"{log.stem}-predictions")


def start(uri: str, port: int, log: Path, *overrides: str) -> subprocess.Popen:
    settings = [f"serving.port={port}", "serving.poll_seconds=1", f"serving.max_instances={MAX_INSTANCES}",
                f"serving.max_request_bytes={MAX_REQUEST_BYTES}", f"serving.log_dir={predictions_dir(log)}",
                *overrides]
    return subprocess.Popen([PYTHON, "-m", "servers.model", *[word for item in settings for word in ("--set", item)]],
                            cwd=ROOT, env=quiet_env(MLFLOW_TRACKING_URI=uri), stdout=open(log, "w"),
                            stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def server(digits_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("serving")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    register(uri, digits_data, folder / "v1", epochs=8)
    port, log = free_port(), folder / "server.log"
    process = start(uri, port, log, "serving.challenger=true")
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", 120, process)
        test_images = read_split(digits_data, "test")[0][:MAX_INSTANCES, ..., 0]
        yield Server(f"http://127.0.0.1:{port}", log, process, uri, test_images)
    finally:
        process.terminate()
        process.wait(30)


def call(url: str, body: Any = None, raw: bytes | None = None) -> tuple[int, dict[str, Any], str]:
    """(status, JSON answer, X-Model-Version) of a GET (no body) or a POST."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data), timeout=60) as response:
            return response.status, json.loads(response.read()), response.headers.get("X-Model-Version", "")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), ""


def b64(data: bytes) -> dict[str, str]:
    return {"b64": base64.b64encode(data).decode()}


def test_a_digit_drawn_with_pil_gets_its_class_name_and_score(server: Server) -> None:
    status, answer, version = call(f"{server.url}/v1/models/ringflow:predict", {"instances": [b64(drawn_digit(7))]})
    prediction = answer["predictions"][0]
    assert status == 200 and prediction["classes"] in CLASS_NAMES and prediction["errors"] == ""
    assert len(prediction["scores"]) == 10 and abs(sum(prediction["scores"]) - 1) < 1e-4
    assert CLASS_NAMES[prediction["top_k"][0]] == prediction["classes"]
    assert call(f"{server.url}/v1/models/ringflow")[1]["model_version_status"][0] == {
        "version": version, "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
    mlflow_answer = call(f"{server.url}/invocations", {"dataframe_split": {
        "columns": ["image"], "data": [[b64(drawn_digit(7))["b64"]]]}})[1]["predictions"][0]
    assert mlflow_answer["class"] == prediction["classes"] and mlflow_answer["error"] == ""
    assert set(mlflow_answer["probabilities"]) == set(CLASS_NAMES)


def test_tensorflow_serving_s_version_and_label_paths_and_metadata(server: Server) -> None:
    """The served version by number and by the label champion: the same answer, status and metadata (the
    SavedModel's signature defs as TensorFlow Serving writes them); another version or label: 404, one error."""
    base = f"{server.url}/v1/models/ringflow"
    image = {"instances": [b64(drawn_digit(7))]}
    status, latest, version = call(f"{base}:predict", image)
    assert status == 200
    for path in (f"/versions/{version}", "/labels/champion"):
        assert call(f"{base}{path}:predict", image)[:2] == (200, latest)
        assert call(f"{base}{path}")[1] == {"model_version_status": [
            {"version": version, "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}
        described = call(f"{base}{path}/metadata")[1]
        assert described["model_spec"] == {"name": "ringflow", "signature_name": "", "version": version}
        signatures = described["metadata"]["signature_def"]["signature_def"]
        images = signatures["serving_default"]["inputs"]["images"]
        assert images["dtype"] == "DT_FLOAT" and [dim["size"] for dim in images["tensor_shape"]["dim"]] == \
            ["-1", "8", "8", "1"]
        assert signatures["serving_bytes"]["inputs"]["images_bytes"]["dtype"] == "DT_STRING"
        assert signatures["serving_default"]["method_name"] == "tensorflow/serving/predict"
    other = str(int(version) + 1)
    for path, said in ((f"/versions/{other}:predict", f"Specific(ringflow, {other})"),
                       ("/labels/canary:predict", "Unrecognized servable version label: canary"),
                       (f"/versions/{other}/metadata", f"Specific(ringflow, {other})")):
        status, refused, _ = call(f"{base}{path}", image if path.endswith(":predict") else None)
        assert status == 404 and said in refused["error"], refused


def test_the_challenger_answers_beside_the_champion_at_its_label_and_version(server: Server, digits_data: Path,
                                                                            tmp_path: Path) -> None:
    """serving.challenger: the version holding the alias challenger is loaded beside the champion; its label and
    its version answer, the champion still answers the rest; the status, the Open Inference Protocol's metadata and
    the metrics name both; the alias removed, its label is a 404 again."""
    import mlflow
    base, image = f"{server.url}/v1/models/ringflow", {"instances": [b64(drawn_digit(7))]}
    champion = call(f"{base}:predict", image)[2]
    assert "no version holds the alias challenger" in call(f"{base}/labels/challenger:predict", image)[1]["error"]
    challenger = register(server.store_uri, digits_data, tmp_path, epochs=1, alias="challenger")
    assert wait_until(lambda: call(f"{base}/labels/challenger")[0] == 200, 60), server.log.read_text()[-2000:]
    for path, answering in (("/labels/challenger", challenger), (f"/versions/{challenger}", challenger),
                            ("", champion), (f"/versions/{champion}", champion)):
        assert call(f"{base}{path}:predict", image)[::2] == (200, answering)
    assert {(entry["version"], entry["state"]) for entry in call(base)[1]["model_version_status"]} == \
        {(champion, "AVAILABLE"), (challenger, "AVAILABLE")}
    assert sorted(call(f"{server.url}/v2/models/ringflow")[1]["versions"]) == sorted([champion, challenger])
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=30) as answer:
        scraped = answer.read().decode()
    for version, alias in ((champion, "champion"), (challenger, "challenger")):
        assert metric(scraped, "ringflow_serving_model_version_info", version=version, alias=alias) == 1
    mlflow.MlflowClient(server.store_uri).delete_registered_model_alias("ringflow", "challenger")
    assert wait_until(lambda: call(f"{base}/labels/challenger:predict", image)[0] == 404, 60)
    assert f"ringflow v{challenger} answers as challenger now (loaded and warmed" in server.log.read_text()


def test_classify_gives_every_class_its_score_as_the_prediction_does(server: Server) -> None:
    base = f"{server.url}/v1/models/ringflow"
    images = [png(image) for image in server.test_images[:3]]
    predicted = call(f"{base}:predict", {"instances": [b64(image) for image in images]})[1]["predictions"]
    status, classified, _ = call(f"{base}/labels/champion:classify", {"examples": [
        {"image": b64(image)} for image in images]})
    assert status == 200 and len(classified["results"]) == 3
    for result, prediction in zip(classified["results"], predicted):
        assert [label for label, _ in result] == CLASS_NAMES
        assert np.allclose([score for _, score in result], prediction["scores"], atol=1e-6)
    broken = call(f"{base}:classify", {"examples": [{"image": b64(images[0])}, {"image": b64(images[0][:60])}]})
    assert broken[0] == 400 and broken[1]["error"].startswith("example 1: not decodable"), broken
    assert call(f"{base}:classify", {"examples": []})[0] == 400


def oip_client(url: str, kind: str, *given: str) -> dict[str, Any]:
    """What Triton's own client (tests/servers/model/oip_client.py, in .venv-oip) was told by the server."""
    done = run([str(ROOT / ".venv-oip" / "bin" / "python"), str(Path(__file__).with_name("oip_client.py")),
                url.removeprefix("http://"), "ringflow", kind, *given], ROOT, quiet_env())
    assert done.returncode == 0, done.stderr[-3000:]
    told: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return told


def test_a_client_of_the_open_inference_protocol_gets_what_tensorflow_serving_s_gives(server: Server,
                                                                                       tmp_path: Path) -> None:
    """tritonclient[http] sends encoded images as BYTES (the binary tensor data extension): the same classes and
    scores as TensorFlow Serving's :predict; the server, the model and its version are ready, another model or
    version is not (404)."""
    files = []
    for index, image in enumerate(server.test_images[:3]):
        files.append(tmp_path / f"{index}.png")
        files[-1].write_bytes(png(image))
    told = oip_client(server.url, "images", *map(str, files))
    predicted = call(f"{server.url}/v1/models/ringflow:predict", {
        "instances": [b64(path.read_bytes()) for path in files]})[1]["predictions"]
    assert (told["live"], told["ready"], told["model_ready"], told["other_ready"]) == (True, True, True, False)
    assert [item["name"] for item in told["metadata"]["inputs"]] == ["images_bytes", "images"]
    assert told["answer"]["classes"] == [row["classes"] for row in predicted]
    assert np.allclose(told["answer"]["scores"], [row["scores"] for row in predicted], atol=1e-6)
    assert told["by_version"] == told["answer"]
    assert "[404] Servable not found for request: Specific(ringflow, 999)" in told["other_version"]["error"]


def metric(text: str, name: str, **labels: str) -> float:
    """A sample's value in Prometheus's text format (0 when absent)."""
    for line in text.splitlines():
        if line.startswith(name + ("{" if labels else " ")) and all(f'{key}="{value}"' in line
                                                                    for key, value in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def prometheus_value(api: str, query: str) -> float | None:
    """The value Prometheus's query API gives a query that selects one series (None before it has one)."""
    url = f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            result = json.loads(answer.read())["data"]["result"]
    except OSError:
        return None
    return float(result[0]["value"][1]) if len(result) == 1 else None


def scraped(api: str, query: str, wanted: float) -> bool:
    """Whether Prometheus gives `wanted` for the query within a minute (it scrapes every half second)."""
    return wait_until(lambda: prometheus_value(api, query) == wanted, 60)


def test_prometheus_scrapes_requests_batches_and_refused_images(server: Server, tmp_path: Path) -> None:
    """A real Prometheus (servers/prometheus.py) scrapes /metrics during a short load of 12 requests at once, each
    with a good image and an empty one: its query API gives the requests by route, version and status, their
    latency, the batches and the empty images as the server counts them."""
    from servers.prometheus import start as start_prometheus
    port = free_port()
    prometheus = start_prometheus(tmp_path / "prometheus", [server.url.removeprefix("http://")], port, 0.5)
    try:
        before = urllib.request.urlopen(f"{server.url}/metrics", timeout=10).read().decode()
        body = {"instances": [b64(png(server.test_images[0])), b64(b"")]}
        with ThreadPoolExecutor(12) as pool:
            answers = list(pool.map(lambda _: call(f"{server.url}/v1/models/ringflow:predict", body), range(12)))
        version = answers[0][2]
        assert [status for status, _, _ in answers] == [200] * 12
        after = urllib.request.urlopen(f"{server.url}/metrics", timeout=10).read().decode()
        route = "/v1/models/{model_name}:predict"
        requests = ("ringflow_serving_requests_total", {"route": route, "version": version, "status": "200"})
        assert metric(after, requests[0], **requests[1]) - metric(before, requests[0], **requests[1]) == 12
        empty = ("ringflow_serving_images_refused_total", {"reason": "empty"})
        assert metric(after, empty[0], **empty[1]) - metric(before, empty[0], **empty[1]) == 12
        for name, labels in (requests, empty, ("ringflow_serving_batch_size_sum", {}),
                             ("ringflow_serving_request_seconds_count", {"route": route})):
            selector = ",".join(f'{key}="{value}"' for key, value in labels.items())
            wanted = metric(after, name, **labels)
            assert scraped(f"http://127.0.0.1:{port}", f"{name}{{{selector}}}", wanted), \
                (name, wanted, (tmp_path / "prometheus" / "prometheus.log").read_text()[-2000:])
        assert metric(after, "ringflow_serving_model_version_info", version=version) == 1
    finally:
        prometheus.terminate()
        prometheus.wait(30)


def test_served_items_are_logged_with_their_summary_and_answer_in_hourly_parquet_files(server: Server) -> None:
    """A request of a good image and an empty one, with the client's X-Request-Id: both items in a Parquet file of
    the hour's folder within the log's flush time, the image's size, channels and brightness, the answer, the
    empty one's error (and no features: it was not decoded)."""
    import pyarrow.parquet as pq
    request_id, image = f"logged-{time.monotonic_ns()}", server.test_images[0]
    body = json.dumps({"instances": [b64(png(image)), b64(b"")]}).encode()
    request = urllib.request.Request(f"{server.url}/v1/models/ringflow:predict", body, {"X-Request-Id": request_id})
    with urllib.request.urlopen(request, timeout=60) as answer:
        predicted = json.loads(answer.read())["predictions"]
    folder, rows = predictions_dir(server.log), []

    def logged() -> bool:
        rows[:] = [row for part in folder.glob("*/part-*.parquet") for row in pq.read_table(part).to_pylist()
                   if row["request_id"] == request_id]
        return len(rows) == 2
    assert wait_until(logged, 30), sorted(folder.rglob("*"))
    good, empty = sorted(rows, key=lambda row: row["item"])
    assert (good["kind"], good["height"], good["width"], good["channels"]) == ("image", 8, 8, 1)
    assert abs(good["mean"] - image.astype(np.uint8).mean()) < 1e-3 and good["error"] == ""
    assert good["answer"] == predicted[0]["classes"] and abs(good["score"] - max(predicted[0]["scores"])) < 1e-6
    assert good["model_version"] and good["latency_ms"] > 0
    assert empty["error"] == "empty: no image bytes" and empty["height"] is None and empty["answer"] == ""
    assert not list(folder.glob("*/.*"))  # no file half written


def test_png_bytes_and_float_pixels_of_the_test_split_agree(server: Server) -> None:
    by_bytes = call(f"{server.url}/v1/models/ringflow:predict",
                    {"instances": [b64(png(image)) for image in server.test_images]})[1]["predictions"]
    by_floats = call(f"{server.url}/v1/models/ringflow:predict", {
        "signature_name": "serving_default", "instances": server.test_images[..., None].tolist()})[1]["predictions"]
    assert [row["classes"] for row in by_bytes] == [row["classes"] for row in by_floats]


def test_a_refused_request_is_one_line_and_a_bad_image_one_error(server: Server) -> None:
    predict, logged_before = f"{server.url}/v1/models/ringflow:predict", len(server.log.read_text())
    too_large = call(predict, raw=b"{" + b" " * MAX_REQUEST_BYTES + b"}")
    assert too_large[0] == 413 and "over serving.max_request_bytes" in too_large[1]["error"]
    assert call(predict, {"instances": [b64(drawn_digit(1))] * (MAX_INSTANCES + 1)})[0] == 413
    assert call(predict, raw=b"{not json")[0] == 400
    assert call(f"{server.url}/v1/models/other:predict", {"instances": [b64(drawn_digit(1))]})[0] == 404
    assert call(f"{server.url}/invocations", {"dataframe_records": [{"other": 1}]})[1]["error_code"] == "BAD_REQUEST"
    refused = [line for line in server.log.read_text()[logged_before:].splitlines() if "] refused " in line]
    assert len(refused) == 5 and "(413): a body of" in refused[0] and "(413): 17 images" in refused[1]
    good = png(server.test_images[0])
    answer = call(predict, {"instances": [b64(good), b64(good[:60]), b64(b"")]})[1]["predictions"]
    assert answer[0]["classes"] in CLASS_NAMES and answer[0]["errors"] == ""
    assert answer[1]["errors"].startswith("not decodable") and answer[2]["errors"] == "empty: no image bytes"
    assert call(f"{server.url}/health")[1]["status"] == "ok"


def asking(url: str, until: threading.Event, seen: list[str], failures: list[str]) -> None:
    """A client: predict requests one after another until `until`, noting each answer's version or failure."""
    body = json.dumps({"instances": [b64(drawn_digit(3))]}).encode()
    while not until.is_set():
        try:
            with urllib.request.urlopen(urllib.request.Request(f"{url}/v1/models/ringflow:predict", body),
                                        timeout=30) as response:
                seen.append(response.headers["X-Model-Version"])
        except OSError as error:
            failures.append(repr(error))


def test_a_promoted_champion_is_served_without_a_failed_request(server: Server, digits_data: Path,
                                                                 tmp_path: Path) -> None:
    before = call(f"{server.url}/health")[1]["version"]
    until, failures = threading.Event(), []  # type: ignore[var-annotated]
    seen: list[list[str]] = [[] for _ in range(4)]
    clients = [threading.Thread(target=asking, args=(server.url, until, seen[index], failures)) for index in range(4)]
    for client in clients:
        client.start()
    try:
        promoted = register(server.store_uri, digits_data, tmp_path, epochs=2)
        deadline = time.monotonic() + 60
        while call(f"{server.url}/health")[1]["version"] != promoted and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)
    finally:
        until.set()
        for client in clients:
            client.join()
    assert failures == [] and promoted != before
    for versions in seen:  # each client: the old version, then the new one, never back
        assert versions[0] == before and versions[-1] == promoted
        assert versions == sorted(versions, key=lambda version: version == promoted)
    (swapped,) = [line for line in server.log.read_text().splitlines() if f"ringflow v{promoted} answers now" in line]
    assert re.search(r"warmed with (\d+) images?", swapped)[1] != "1", swapped  # served ones, not the blank default


def test_no_champion_and_a_taken_port_are_one_line_each(server: Server, tmp_path: Path) -> None:
    empty = start(f"sqlite:///{tmp_path / 'empty.db'}", free_port(), tmp_path / "empty.log")
    assert empty.wait(120) == 2
    assert (tmp_path / "empty.log").read_text().splitlines()[-1].startswith(
        "error: no version of ringflow holds the alias champion in the registry")
    taken = start(server.store_uri, int(server.url.rsplit(":", 1)[1]), tmp_path / "taken.log")
    assert taken.wait(120) == 2
    assert "cannot listen on 127.0.0.1:" in (tmp_path / "taken.log").read_text().splitlines()[-1]


@pytest.fixture(scope="module")
def tight_server(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The same registry's champion served with a queue of one request, batches of one request, reads timed out
    after 2 s, and requests large enough for the reviewer's 1.2 MB image."""
    port, log = free_port(), tmp_path_factory.mktemp("tight") / "server.log"
    process = start(server.store_uri, port, log, "serving.max_queued_requests=1", "serving.max_batch_size=1",
                    "serving.max_wait_ms=0", "serving.read_timeout_seconds=2", f"serving.max_request_bytes={4 * 2**20}")
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", 120, process)
        yield Server(f"http://127.0.0.1:{port}", log, process, server.store_uri, server.test_images)
    finally:
        process.terminate()
        process.wait(30)


def resident_bytes(pid: int) -> int:
    """The process's resident memory now (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def timed_call(url: str, body: Any) -> tuple[float, tuple[int, dict[str, Any], str]]:
    started = time.monotonic()
    answer = call(url, body)
    return time.monotonic() - started, answer


def beside_call(url: str, body: Any) -> tuple[float, tuple[int, dict[str, Any], str]]:
    """A request sent beside another, asked again while the queue of one request is full (429: the other's image
    may hold it); the time until it is answered."""
    started = time.monotonic()
    while (answer := call(url, body))[0] == 429 and time.monotonic() - started < 10:
        time.sleep(0.01)
    return time.monotonic() - started, answer


def test_an_image_declaring_20000x20000_pixels_is_refused_from_its_header_without_stalling_others(
        tight_server: Server) -> None:
    from tests.trainer.test_serving_bytes import png_declaring
    predict, digit = f"{tight_server.url}/v1/models/ringflow:predict", {"instances": [b64(drawn_digit(7))]}
    normal = max(timed_call(predict, digit)[0] for _ in range(5))
    bomb = png_declaring(20000, 20000)  # 1.2 MB; 1.2 GB decoded
    before = resident_bytes(tight_server.process.pid)
    results: dict[str, tuple[float, tuple[int, dict[str, Any], str]]] = {}
    sender = threading.Thread(target=lambda: results.update(bomb=timed_call(
        predict, {"instances": [b64(bomb), b64(drawn_digit(1))]})))
    sender.start()
    time.sleep(0.05)
    results["beside"] = beside_call(predict, digit)
    sender.join(60)
    after = resident_bytes(tight_server.process.pid)
    (bomb_seconds, (status, answer, _)), (beside_seconds, beside) = results["bomb"], results["beside"]
    print(f"refused in {bomb_seconds:.3f} s; beside it {beside_seconds:.3f} s (normal {normal:.3f} s); "
          f"RSS {before / 2**20:.0f} -> {after / 2**20:.0f} MiB")
    assert status == 200 and [row["errors"] for row in answer["predictions"]] == [
        "declares 20000x20000 pixels, over serving.max_image_pixels 4194304", ""]
    assert answer["predictions"][1]["classes"] in CLASS_NAMES and answer["predictions"][0]["classes"] == ""
    assert beside[0] == 200 and beside[1]["predictions"][0]["errors"] == ""
    assert bomb_seconds < 5 and beside_seconds < normal + 2  # decoded, it took 10.8 s, and every client waited
    assert after - before < 200 * 2**20  # decoded, the server grew by 6.8 GB


def test_silent_and_slow_clients_are_cut_off_and_200_idle_connections_stop_no_one(tight_server: Server) -> None:
    host, port = "127.0.0.1", int(tight_server.url.rsplit(":", 1)[1])
    idle = [socket.create_connection((host, port), timeout=10) for _ in range(200)]
    slow = socket.create_connection((host, port), timeout=10)
    try:
        slow.sendall(b"POST /v1/models/ringflow:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
        status, answer, _ = call(f"{tight_server.url}/v1/models/ringflow:predict",
                                 {"instances": [b64(drawn_digit(4))]})
        assert status == 200 and answer["predictions"][0]["classes"] in CLASS_NAMES
        assert b" 408 " in slow.recv(4096).split(b"\r\n")[0]  # the body not sent within read_timeout_seconds
        for connection in idle:  # closed by the server after read_timeout_seconds without a request's headers
            assert connection.recv(1) == b""
    finally:
        for connection in [*idle, slow]:
            connection.close()
    timed_out = [line for line in tight_server.log.read_text().splitlines() if "(408)" in line]
    assert len(timed_out) == 1 and "serving.read_timeout_seconds (2 s)" in timed_out[0]


def test_a_full_queue_is_429_as_tensorflow_serving_says_resource_exhausted(tight_server: Server) -> None:
    body = {"instances": [b64(png(image)) for image in tight_server.test_images]}
    statuses: list[tuple[int, dict[str, Any]]] = []
    start_together = threading.Barrier(24)
    lines_before = len(tight_server.log.read_text().splitlines())  # the module's other tests may have had a 429

    def client() -> None:
        start_together.wait()
        for _ in range(3):
            statuses.append(call(f"{tight_server.url}/v1/models/ringflow:predict", body)[:2])
    clients = [threading.Thread(target=client) for _ in range(24)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(120)
    busy = [answer for status, answer in statuses if status == 429]
    assert {status for status, _ in statuses} == {200, 429} and busy[0] == {
        "error": "The batch scheduling queue to which this task was submitted is full"}
    assert sum("(429): The batch scheduling queue" in line
               for line in tight_server.log.read_text().splitlines()[lines_before:]) == len(busy)


def test_ctrl_c_stops_the_server_in_one_line_exit_130(tight_server: Server) -> None:
    """(The tight server's last test: it ends it.)"""
    tight_server.process.send_signal(signal.SIGINT)
    assert tight_server.process.wait(30) == 130
    assert tight_server.log.read_text().splitlines()[-1] == "[serve-model] stopped (Ctrl-C)"


def test_json_python_cannot_read_is_a_400_in_one_line(server: Server) -> None:
    predict = f"{server.url}/v1/models/ringflow:predict"
    lines = len(server.log.read_text().splitlines())
    nested = call(predict, raw=b"[" * 50_000 + b"]" * 50_000)
    digits = call(predict, raw=b'{"instances": ' + b"7" * 5000 + b"}")
    assert nested[0] == digits[0] == 400
    assert "nested too deep" in nested[1]["error"] and "4300 digits" in digits[1]["error"]
    said = server.log.read_text().splitlines()[lines:]
    assert len(said) == 2 and all("] refused POST /v1/models/ringflow:predict" in line for line in said), said


def test_what_a_client_chose_is_escaped_in_the_log(server: Server) -> None:
    lines = len(server.log.read_text().splitlines())
    status = call(f"{server.url}/v1/models/evil%0A[serve-model]%20forged%1B[31m:predict",
                  {"instances": [b64(drawn_digit(1))]})[0]
    said = server.log.read_text().splitlines()[lines:]
    assert status == 404 and len(said) == 1 and "\x1b" not in said[0]
    assert "evil\\n[serve-model] forged\\x1b[31m" in said[0]
