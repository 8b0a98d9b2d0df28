"""make serve-model for a tensor model (a regressor of 3 features -> 2 targets, registered as the pipeline does):
TensorFlow Serving's `instances` (rows, or {"x": ...}) and `inputs` (columns) of numbers answered with the model's
predictions within float tolerance of model.predict, through the batcher; MLflow's /invocations with the tensor
signature; a wrong shape or a non-number is a 400 of one line."""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from tests.helpers import free_port, wait_for_http
from tests.servers.model.test_server import call, oip_client, start

pytestmark = pytest.mark.slow
FEATURES = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0], [0.0, 0.0, 0.0]], np.float32)


@dataclass(frozen=True)
class TensorServer:
    url: str
    log: Path
    expected: np.ndarray  # the model's predictions for FEATURES


def register_regressor(uri: str, folder: Path) -> np.ndarray:
    """A Dense regressor registered as ringflow and made the champion; its predictions for FEATURES."""
    import mlflow
    import tensorflow as tf

    from tasks.tracking import mlflow_store
    from tasks.tracking.model_registry import CHAMPION, ModelKind, log_registered_model
    from trainer.model_outputs import write_tensor_savedmodel
    model = tf.keras.Sequential([tf.keras.layers.Input((3,)), tf.keras.layers.Dense(2)])
    model.set_weights([np.array([[1.0, -2.0], [0.5, 0.0], [0.0, 3.0]], np.float32), np.array([0.1, -0.1], np.float32)])
    write_tensor_savedmodel(model, folder / "savedmodel", (3,), "regression")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        run_id = mlflow_store.start_run("serving-tensor-test", {}, {})
        version = log_registered_model(run_id, folder / "savedmodel", FEATURES[:2], [], "ringflow",
                                       ModelKind("regression", (3,), 2))
        mlflow.MlflowClient(uri).set_registered_model_alias("ringflow", CHAMPION, version)
    return model.predict(FEATURES, verbose=0)


@pytest.fixture(scope="module")
def tensor_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TensorServer]:
    folder = tmp_path_factory.mktemp("serving-tensor")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    expected = register_regressor(uri, folder)
    port, log = free_port(), folder / "server.log"
    process: subprocess.Popen = start(uri, port, log)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/health", 120, process)
        yield TensorServer(f"http://127.0.0.1:{port}", log, expected)
    finally:
        process.terminate()
        process.wait(30)


def predict(server: TensorServer, body: Any) -> tuple[int, dict[str, Any]]:
    status, answer, _ = call(f"{server.url}/v1/models/ringflow:predict", body)
    return status, answer


def test_instances_and_inputs_of_numbers_get_the_model_s_predictions(tensor_server: TensorServer) -> None:
    rows = FEATURES.tolist()
    status, answer = predict(tensor_server, {"instances": rows})
    assert status == 200 and np.allclose(answer["predictions"], tensor_server.expected, atol=1e-5)
    named = predict(tensor_server, {"instances": [{"x": row} for row in rows]})[1]
    assert np.allclose(named["predictions"], tensor_server.expected, atol=1e-5)
    status, columns = predict(tensor_server, {"inputs": {"x": rows}})
    assert status == 200 and np.allclose(columns["outputs"], tensor_server.expected, atol=1e-5)
    refused = call(f"{tensor_server.url}/v1/models/ringflow:classify", {"examples": [{"x": rows[0]}]})
    assert refused[0] == 400 and "classifies nothing: use :predict" in refused[1]["error"]
    status, mlflow_answer, _ = call(f"{tensor_server.url}/invocations", {"inputs": rows})
    assert status == 200 and np.allclose(mlflow_answer["predictions"], tensor_server.expected, atol=1e-5)
    split = call(f"{tensor_server.url}/invocations",
                 {"dataframe_split": {"columns": ["a", "b", "c"], "data": rows}})[1]
    assert np.allclose(split["predictions"], tensor_server.expected, atol=1e-5)
    assert call(f"{tensor_server.url}/health")[1]["images"] >= 3 * len(rows)  # through the batcher


def test_a_client_of_the_open_inference_protocol_sends_fp32_rows(tensor_server: TensorServer) -> None:
    told = oip_client(tensor_server.url, "tensor", json.dumps(FEATURES.tolist()))
    assert told["model_ready"] and told["metadata"]["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 3]}]
    (name,) = told["answer"]
    assert np.allclose(told["answer"][name], tensor_server.expected, atol=1e-5)


def test_a_wrong_shape_or_a_non_number_is_a_400_of_one_line(tensor_server: TensorServer) -> None:
    status, answer = predict(tensor_server, {"instances": [[1.0, 2.0]]})
    assert status == 400 and answer == {
        "error": "instances: instances of shape [2]; the model takes [3] (float32 'x')"}
    status, answer = predict(tensor_server, {"instances": [[1.0, "two", 3.0]]})
    assert status == 400 and "lists of numbers" in answer["error"]
    status, answer = predict(tensor_server, {"instances": [[1.0, float("nan"), 3.0]]})  # JSON's NaN, as Python sends
    assert status == 400 and "finite number" in answer["error"]  # (it was a 500: the model's NaN is not JSON)
    status, mlflow_answer, _ = call(f"{tensor_server.url}/invocations", {"inputs": [[1.0]]})
    assert status == 400 and mlflow_answer["error_code"] == "BAD_REQUEST"
    refused = [line for line in tensor_server.log.read_text().splitlines() if "] refused POST /v1/models/ringflow:"
               "predict" in line or "] refused POST /invocations" in line]
    assert len(refused) == 4 and all("(400): " in line for line in refused), json.dumps(refused)
