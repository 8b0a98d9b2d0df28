"""The HTTP side of make serve-model (FastAPI under uvicorn, one process): TensorFlow Serving's REST API
(`POST /v1/models/<name>:predict`, `GET /v1/models/<name>`), MLflow's scoring server (`POST /invocations`,
`GET /ping`, `GET /health`) and the request limits. Every answer names the version that made it (the header
X-Model-Version); every refused request is one line of the log."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from tasks.serving.batcher import Batcher
from tasks.serving.champion import Champion, say
from tasks.serving.protocol import Inputs, Refused, mlflow_answer, mlflow_inputs, tf_serving_answer, tf_serving_inputs
from tasks.serving.served_model import Answer, ServedModel

VERSION_HEADER = "X-Model-Version"


@dataclass(frozen=True)
class Limits:
    """What one request may hold."""
    max_request_bytes: int
    max_instances: int


async def body_of(request: Request, limit: int) -> bytes:
    """The request's body; Refused (413) as soon as it is known to be over `limit`, before the rest is read."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise Refused(413, f"a body of {int(declared)} bytes: over serving.max_request_bytes ({limit})")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise Refused(413, f"a body of over {limit} bytes: over serving.max_request_bytes ({limit})")
        chunks.append(chunk)
    return b"".join(chunks)


async def document_of(request: Request, limit: int) -> Any:
    """The request's JSON document."""
    if request.headers.get("content-type", "").startswith("text/csv"):
        raise Refused(415, "CSV is not read here: send JSON (dataframe_split, dataframe_records, instances, inputs)")
    try:
        return json.loads(await body_of(request, limit))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise Refused(400, f"the body is not JSON ({error})") from None


class Failed(RuntimeError):
    """The model failed on a request's images (the server goes on): HTTP 500, one line of the log."""
    status = 500


async def answered(batcher: Batcher, champion: Champion, inputs: Inputs) -> tuple[ServedModel, Answer]:
    """Encoded images through the batcher; float images straight to the served model's float signature."""
    try:
        if inputs.encoded is not None:
            return await batcher.classify(inputs.encoded)
        model = champion.current()
        assert inputs.pixels is not None
        return model, await run_in_threadpool(model.classify_pixels, inputs.pixels)
    except Exception as error:  # TensorFlow's error on these images: this request fails, not the server
        raise Failed(f"v{champion.model.version} failed on the request's images: {what_failed(error)}") from error


def what_failed(error: Exception) -> str:
    """The line of an error that says what went wrong (TensorFlow's last unindented one: not its node trace)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip() and not line[0].isspace()]
    return lines[-1][:300] if lines else type(error).__name__


def status_of(champion: Champion) -> dict[str, Any]:
    """TensorFlow Serving's model status: the version answering, and one being loaded."""
    ok = {"error_code": "OK", "error_message": ""}
    versions = [{"version": champion.model.version, "state": "AVAILABLE", "status": ok}]
    if champion.loading:
        versions.insert(0, {"version": champion.loading, "state": "LOADING", "status": ok})
    return {"model_version_status": versions}


def refusal(request: Request, error: Refused | Failed, body: Callable[[str], dict[str, Any]]) -> JSONResponse:
    """The answer to a refused (or failed) request, and its line in the log."""
    client = request.client.host if request.client else "?"
    verb = "refused" if isinstance(error, Refused) else "failed"
    say(f"{verb} {request.method} {request.url.path} from {client} ({error.status}): {error}")
    return JSONResponse(body(str(error)), status_code=error.status)


def serving_app(champion: Champion, batcher: Batcher, limits: Limits) -> FastAPI:
    """The app, answering with whatever model `champion` holds when a batch starts."""
    app = FastAPI(title="ringflow model server", docs_url="/docs", redoc_url=None)
    name = champion.model.name

    def answer(content: dict[str, Any], model: ServedModel) -> JSONResponse:
        return JSONResponse(content, headers={VERSION_HEADER: model.version})

    @app.post("/v1/models/{model_name}:predict")
    async def predict(model_name: str, request: Request) -> JSONResponse:
        try:
            if model_name != name:
                raise Refused(404, f"Servable not found for request: Latest({model_name}); this server serves {name}")
            document = await document_of(request, limits.max_request_bytes)
            inputs = tf_serving_inputs(document, limits.max_instances, champion.model.image_shape)
            model, result = await answered(batcher, champion, inputs)
        except (Refused, Failed) as error:
            return refusal(request, error, lambda reason: {"error": reason})
        return answer(tf_serving_answer(result, inputs.rows), model)

    @app.get("/v1/models/{model_name}")
    async def model_status(model_name: str, request: Request) -> JSONResponse:
        if model_name != name:
            return refusal(request, Refused(404, f"Could not find any versions of model {model_name}"),
                           lambda reason: {"error": reason})
        return answer(status_of(champion), champion.model)

    @app.post("/invocations")
    async def invocations(request: Request) -> JSONResponse:
        try:
            document = await document_of(request, limits.max_request_bytes)
            inputs = mlflow_inputs(document, limits.max_instances, champion.model.image_shape)
            model, result = await answered(batcher, champion, inputs)
        except (Refused, Failed) as error:
            code = "BAD_REQUEST" if isinstance(error, Refused) else "INTERNAL_ERROR"
            return refusal(request, error, lambda reason: {"error_code": code, "message": reason})
        return answer(mlflow_answer(result, model.class_names), model)

    @app.get("/ping")
    @app.get("/health")
    async def health() -> JSONResponse:
        model = champion.model
        return answer({"status": "ok", "model": model.name, "version": model.version,
                       "batches": batcher.batches, "images": batcher.images}, model)
    return app
