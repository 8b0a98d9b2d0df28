"""make serve-model against a real MLflow registry (a temporary SQLite store) and real models: images in as
TensorFlow Serving's and MLflow's clients send them, class names out; refused requests one line each; a champion
promoted while clients ask is served without a failed request; no champion, a taken port and Ctrl-C are one line."""
from __future__ import annotations

import base64
import io
import json
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from tests.helpers import PYTHON, ROOT, drawn_digit, free_port, quiet_env, read_split, wait_for_http

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


def register(uri: str, digits_data: Path, folder: Path, epochs: int) -> str:
    """A small CNN trained on the digits, registered as ringflow and made the champion; its version."""
    import mlflow

    from tasks.tracking import mlflow_store
    from tasks.tracking.model_registry import CHAMPION, log_registered_model
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
        mlflow.MlflowClient(uri).set_registered_model_alias("ringflow", CHAMPION, version)
    return version


def start(uri: str, port: int, log: Path, *overrides: str) -> subprocess.Popen:
    settings = [f"serving.port={port}", "serving.poll_seconds=1", f"serving.max_instances={MAX_INSTANCES}",
                f"serving.max_request_bytes={MAX_REQUEST_BYTES}", *overrides]
    return subprocess.Popen([PYTHON, "-m", "tasks.serving", *[word for item in settings for word in ("--set", item)]],
                            cwd=ROOT, env=quiet_env(MLFLOW_TRACKING_URI=uri), stdout=open(log, "w"),
                            stderr=subprocess.STDOUT)


@pytest.fixture(scope="module")
def server(digits_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("serving")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    register(uri, digits_data, folder / "v1", epochs=8)
    port, log = free_port(), folder / "server.log"
    process = start(uri, port, log)
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


def test_png_bytes_and_float_pixels_of_the_test_split_agree(server: Server) -> None:
    by_bytes = call(f"{server.url}/v1/models/ringflow:predict",
                    {"instances": [b64(png(image)) for image in server.test_images]})[1]["predictions"]
    by_floats = call(f"{server.url}/v1/models/ringflow:predict", {
        "signature_name": "serving_default", "instances": server.test_images[..., None].tolist()})[1]["predictions"]
    assert [row["classes"] for row in by_bytes] == [row["classes"] for row in by_floats]


def test_a_refused_request_is_one_line_and_a_bad_image_one_error(server: Server) -> None:
    predict = f"{server.url}/v1/models/ringflow:predict"
    too_large = call(predict, raw=b"{" + b" " * MAX_REQUEST_BYTES + b"}")
    assert too_large[0] == 413 and "over serving.max_request_bytes" in too_large[1]["error"]
    assert call(predict, {"instances": [b64(drawn_digit(1))] * (MAX_INSTANCES + 1)})[0] == 413
    assert call(predict, raw=b"{not json")[0] == 400
    assert call(f"{server.url}/v1/models/other:predict", {"instances": [b64(drawn_digit(1))]})[0] == 404
    assert call(f"{server.url}/invocations", {"dataframe_records": [{"other": 1}]})[1]["error_code"] == "BAD_REQUEST"
    refused = [line for line in server.log.read_text().splitlines() if "] refused " in line]
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
    assert f"ringflow v{promoted} answers now" in server.log.read_text()


def test_no_champion_a_taken_port_and_ctrl_c_are_one_line_each(server: Server, tmp_path: Path) -> None:
    empty = start(f"sqlite:///{tmp_path / 'empty.db'}", free_port(), tmp_path / "empty.log")
    assert empty.wait(120) == 2
    assert (tmp_path / "empty.log").read_text().splitlines()[-1].startswith(
        "error: no version of ringflow holds the alias champion in the registry")
    taken = start(server.store_uri, int(server.url.rsplit(":", 1)[1]), tmp_path / "taken.log")
    assert taken.wait(120) == 2
    assert "cannot listen on 127.0.0.1:" in (tmp_path / "taken.log").read_text().splitlines()[-1]
    port = free_port()
    interrupted = start(server.store_uri, port, tmp_path / "interrupted.log")
    wait_for_http(f"http://127.0.0.1:{port}/health", 120, interrupted)
    interrupted.send_signal(signal.SIGINT)
    assert interrupted.wait(30) == 130
    assert (tmp_path / "interrupted.log").read_text().splitlines()[-1] == "[serve-model] stopped (Ctrl-C)"
