"""A client of the Open Inference Protocol made by others (Triton's tritonclient[http]), run by the tests with the
Python of .venv-oip (scripts/setup.sh test): it asks a model server what the protocol lets a client ask and prints
what it was told, as one JSON object.

    .venv-oip/bin/python tests/servers/model/oip_client.py HOST:PORT MODEL images FILE...   # encoded images, BYTES
    .venv-oip/bin/python tests/servers/model/oip_client.py HOST:PORT MODEL tensor JSON      # rows of numbers, FP32
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException


def told(client: Any, model: str, inputs: list[Any], version: str = "") -> dict[str, Any]:
    """The outputs of one infer, or the error the server answered."""
    try:
        result = client.infer(model, inputs, model_version=version)
    except InferenceServerException as error:
        return {"error": str(error)}
    return {output["name"]: result.as_numpy(output["name"]).tolist() for output in result.get_response()["outputs"]}


def main(address: str, model: str, kind: str, *given: str) -> dict[str, Any]:
    client = httpclient.InferenceServerClient(address)
    if kind == "images":
        images = np.array([Path(name).read_bytes() for name in given], dtype=object)
        tensor = httpclient.InferInput("images_bytes", [len(images)], "BYTES")
        tensor.set_data_from_numpy(images)
    else:
        rows = np.asarray(json.loads(given[0]), np.float32)
        tensor = httpclient.InferInput("x", list(rows.shape), "FP32")
        tensor.set_data_from_numpy(rows, binary_data=False)
    metadata = client.get_model_metadata(model)
    return {"live": client.is_server_live(), "ready": client.is_server_ready(),
            "model_ready": client.is_model_ready(model), "other_ready": client.is_model_ready(f"{model}-other"),
            "metadata": metadata, "answer": told(client, model, [tensor]),
            "by_version": told(client, model, [tensor], metadata["versions"][0]),
            "other_version": told(client, model, [tensor], "999")}


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:]), default=str))
