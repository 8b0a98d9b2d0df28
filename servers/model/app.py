"""The HTTP side of make serve-model (FastAPI under uvicorn, one process): TensorFlow Serving's REST API
(`POST /v1/models/<name>[/versions/N | /labels/champion | /labels/challenger]:predict` and `:classify`, the same
paths' status and `/metadata`: servers/model/tf_serving.py), the Open Inference Protocol (`/v2/...`:
servers/model/open_inference.py), Prometheus metrics (`/metrics`: servers/model/metrics.py), MLflow's scoring server
(`POST /invocations`, `GET /ping`, `GET /health`) and the request limits. Every answer names the version that made
it (the header X-Model-Version): the one current when its request came, which read it for its input shape. Every
refused request is one line of the log, what the client chose in it escaped (no newline or terminal code of theirs
reaches it)."""
from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any, Callable, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from servers.model.batcher import Batcher, Busy
from servers.model.champion import Champion, log
from servers.model.metrics import VERSION_HEADER, Metrics
from servers.model.open_inference import HEADER_LENGTH, infer_answer, infer_inputs, model_metadata, split_body
from servers.model.prediction_log import PredictionLog, served_items
from servers.model.protocol import (
    Inputs,
    Refused,
    mlflow_answer,
    mlflow_inputs,
    mlflow_tensor_answer,
    mlflow_tensor_inputs,
    tensor_answer,
    tensor_inputs,
    tf_serving_answer,
    tf_serving_inputs,
)
from servers.model.served_model import Answer, ServedModel, TensorAnswer
from servers.model.tf_serving import classify_answer, classify_inputs, metadata, servable, version_status
from tasks.project import ringflow_version
from trainer.serving_bytes import size_refusal


@dataclass(frozen=True)
class Limits:
    """What one request may hold, and how long its client may take to send it."""
    max_request_bytes: int
    max_instances: int
    max_image_pixels: int
    read_timeout_seconds: float


async def body_of(request: Request, limits: Limits) -> bytes:
    """The request's body; Refused as soon as it is known to be over max_request_bytes (413), before the rest is
    read, or when it is not all sent within read_timeout_seconds (408)."""
    limit = limits.max_request_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and len(declared) < 20 and int(declared) > limit:
        raise Refused(413, f"a body of {int(declared)} bytes: over serving.max_request_bytes ({limit})")

    async def read() -> bytes:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise Refused(413, f"a body of over {limit} bytes: over serving.max_request_bytes ({limit})")
            chunks.append(chunk)
        return b"".join(chunks)
    try:
        return await asyncio.wait_for(read(), limits.read_timeout_seconds)
    except TimeoutError:
        raise Refused(408, "the body was not all sent within serving.read_timeout_seconds "
                           f"({limits.read_timeout_seconds:g} s)") from None


async def document_of(request: Request, limits: Limits) -> Any:
    """The request's JSON document; Refused (400) for what Python's JSON reader cannot read: not JSON, nested
    deeper than its recursion limit, an integer of more digits than int() takes."""
    if request.headers.get("content-type", "").startswith("text/csv"):
        raise Refused(415, "CSV is not read here: send JSON (dataframe_split, dataframe_records, instances, inputs)")
    body = await body_of(request, limits)
    try:
        return json.loads(body)
    except RecursionError:
        raise Refused(400, "the body is not JSON this server reads: nested too deep") from None
    except ValueError as error:  # not UTF-8, not JSON, an integer over sys.get_int_max_str_digits() digits
        raise Refused(400, f"the body is not JSON this server reads ({str(error).split(';')[0][:200]})") from None


class Failed(RuntimeError):
    """The model failed on a request's images (the server goes on): HTTP 500, one line of the log."""
    status = 500


async def answered(batcher: Batcher, model: ServedModel, inputs: Inputs,
                   max_pixels: int) -> Answer | TensorAnswer:
    """`model`'s answer: encoded images (and a tensor model's instances) through the batcher, each image declaring
    over max_pixels in its header refused before it reaches TensorFlow (sent as an empty item, answered with its
    reason); float images straight to the model's float signature."""
    try:
        if inputs.features is not None:
            return await batcher.classify(list(inputs.features), model)
        if inputs.encoded is not None:
            refusals = [size_refusal(image, max_pixels) for image in inputs.encoded]
            answer = await batcher.classify([b"" if reason else image
                                             for reason, image in zip(refusals, inputs.encoded)], model)
            assert isinstance(answer, Answer)
            return replace(answer, errors=[reason or error for reason, error in zip(refusals, answer.errors)])
        assert inputs.pixels is not None
        return await run_in_threadpool(model.classify_pixels, inputs.pixels)
    except Busy:
        raise
    except Exception as error:  # TensorFlow's error on these images: this request fails, not the server
        what = "instances" if inputs.features is not None else "images"
        raise Failed(f"v{model.version} failed on the request's {what}: {what_failed(error)}") from error


def what_failed(error: Exception) -> str:
    """The line of an error that says what went wrong (TensorFlow's last unindented one: not its node trace)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip() and not line[0].isspace()]
    return lines[-1][:300] if lines else type(error).__name__


def printable(text: str) -> str:
    """`text` with its control and other unprintable characters escaped as Python writes them (\\n, \\x1b)."""
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def refusal(request: Request, error: Refused | Failed | Busy,
            body: Callable[[str], dict[str, Any]]) -> JSONResponse:
    """The answer to a refused (or failed) request, and its line in the log."""
    client = request.client.host if request.client else "?"
    verb = "failed" if isinstance(error, Failed) else "refused"
    log.info(printable(f"{verb} {request.method} {request.url.path} from {client} ({error.status}): {error}"))
    return JSONResponse(body(str(error)), status_code=error.status)


@dataclass(frozen=True)
class Serving:
    """What every route answers with: the champion's model, the batcher that computes, the request limits."""
    champion: Champion
    batcher: Batcher
    limits: Limits
    metrics: Metrics
    predictions: PredictionLog | None = None  # the log of served items (None: serving.log_fraction 0)

    @property
    def name(self) -> str:
        return self.champion.model.name

    @staticmethod
    def answer(content: dict[str, Any], model: ServedModel) -> JSONResponse:
        return JSONResponse(content, headers={VERSION_HEADER: model.version})

    async def computed(self, request: Request, model: ServedModel, read: Callable[..., Any]) -> tuple[Any, Any]:
        """The request's inputs, as its protocol's reader `read` takes them, and the model's answer to them."""
        inputs = read(await document_of(request, self.limits), self.limits.max_instances, model.image_shape)
        return inputs, await self.result(request, model, inputs)

    async def result(self, request: Request, model: ServedModel, inputs: Inputs) -> Answer | TensorAnswer:
        """The model's answer to the inputs, its unusable images counted, its items offered to the log."""
        started = time.perf_counter()
        result = await answered(self.batcher, model, inputs, self.limits.max_image_pixels)
        self.metrics.answered(result)
        if self.predictions is not None:
            latency_ms = (time.perf_counter() - started) * 1000
            self.predictions.offer(served_items(inputs, result, model.version, request_id(request), latency_ms),
                                   model.tensor)
        return result


class MetricsMiddleware:
    """The metrics' ASGI middleware (Metrics.middleware) in the form Starlette's add_middleware takes."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self._timed = metrics.middleware(app)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._timed(scope, receive, send)


def request_id(request: Request) -> str:
    """The client's X-Request-Id (printable, at most 64 characters), else one made for the request."""
    given = request.headers.get("x-request-id", "")
    return given if 0 < len(given) <= 64 and given.isprintable() else uuid.uuid4().hex


def serving_app(champion: Champion, batcher: Batcher, limits: Limits,
                predictions: PredictionLog | None = None) -> FastAPI:
    """The app, answering each request with the model `champion` holds when it comes."""
    app = FastAPI(title="ringflow model server", docs_url="/docs", redoc_url=None)
    serving = Serving(champion, batcher, limits, Metrics(champion, lambda: batcher.queued), predictions)
    batcher.on_batch = serving.metrics.batch_size.observe
    if predictions is not None:
        predictions.on_drop = serving.metrics.log_dropped.inc
    app.add_middleware(MetricsMiddleware, metrics=serving.metrics)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(serving.metrics.text(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def refused(request: Request, error: Exception) -> JSONResponse:
        """A request refused (or failed) anywhere on its way, answered in its protocol's words."""
        assert isinstance(error, (Refused, Failed, Busy))
        if request.url.path == "/invocations":  # MLflow's
            code = {Refused: "BAD_REQUEST", Busy: "RESOURCE_EXHAUSTED"}.get(type(error), "INTERNAL_ERROR")
            return refusal(request, error, lambda reason: {"error_code": code, "message": reason})
        return refusal(request, error, lambda reason: {"error": reason})  # TensorFlow Serving's
    for kind in (Refused, Failed, Busy):
        app.add_exception_handler(kind, refused)
    tf_serving_routes(app, serving)
    tf_serving_status_routes(app, serving)
    open_inference_routes(app, serving)
    mlflow_routes(app, serving)
    return app


Handler = TypeVar("Handler", bound=Callable[..., Any])


def every_version(app: FastAPI, method: str, suffix: str) -> Callable[[Handler], Handler]:
    """Route a handler of TensorFlow Serving's at the latest version's path and at a version's and a label's:
    /v1/models/{model_name}[/versions/{version} | /labels/{label}]{suffix}."""
    def routed(handler: Handler) -> Handler:
        for version in ("", "/versions/{version}", "/labels/{label}"):
            app.add_api_route(f"/v1/models/{{model_name}}{version}{suffix}", handler, methods=[method])
        return handler
    return routed


def tf_serving_routes(app: FastAPI, serving: Serving) -> None:
    """TensorFlow Serving's :predict and :classify, of the latest version, a version or a label."""
    champion, answer = serving.champion, serving.answer

    @every_version(app, "POST", ":predict")
    async def predict(model_name: str, request: Request, version: str | None = None,
                      label: str | None = None) -> JSONResponse:
        model = servable(champion, serving.name, model_name, version, label)
        inputs, result = await serving.computed(request, model, tensor_inputs if model.tensor else tf_serving_inputs)
        if isinstance(result, TensorAnswer):
            return answer(tensor_answer(result, inputs.rows), model)
        return answer(tf_serving_answer(result, inputs.rows), model)

    @every_version(app, "POST", ":classify")
    async def classify(model_name: str, request: Request, version: str | None = None,
                       label: str | None = None) -> JSONResponse:
        model = servable(champion, serving.name, model_name, version, label)
        if model.tensor:
            raise Refused(400, f"{model.name} v{model.version} predicts values, it classifies nothing: use :predict")
        _, result = await serving.computed(request, model, classify_inputs)
        return answer(classify_answer(result, model.class_names), model)


def tf_serving_status_routes(app: FastAPI, serving: Serving) -> None:
    """TensorFlow Serving's model status and metadata, of the latest version, a version or a label."""
    champion, answer = serving.champion, serving.answer

    @every_version(app, "GET", "")
    async def model_status(model_name: str, version: str | None = None, label: str | None = None) -> JSONResponse:
        if model_name != serving.name:
            raise Refused(404, f"Could not find any versions of model {model_name}")
        if version is None or version != champion.loading:  # one being loaded has a status (LOADING) too
            model = servable(champion, serving.name, model_name, version, label)
            version = model.version if version or label else None
        return answer(version_status(champion, version), champion.model)

    @every_version(app, "GET", "/metadata")
    async def model_metadata(model_name: str, version: str | None = None, label: str | None = None) -> JSONResponse:
        model = servable(champion, serving.name, model_name, version, label)
        return answer(metadata(model), model)


def open_inference_routes(app: FastAPI, serving: Serving) -> None:
    """The Open Inference Protocol (servers/model/open_inference.py): health, the model's readiness and metadata,
    infer. The server listens once its model is loaded: live is ready."""
    champion = serving.champion

    @app.get("/v2")
    async def server_metadata() -> JSONResponse:
        return JSONResponse({"name": "ringflow", "version": ringflow_version(), "extensions": ["binary_tensor_data"]})

    @app.get("/v2/health/live")
    @app.get("/v2/health/ready")
    async def server_health(request: Request) -> JSONResponse:
        return JSONResponse({request.url.path.rsplit("/", 1)[1]: True})

    @app.get("/v2/models/{model_name}/ready")
    @app.get("/v2/models/{model_name}/versions/{version}/ready")
    async def model_ready(model_name: str, version: str | None = None) -> JSONResponse:
        model = servable(champion, serving.name, model_name, version)
        return serving.answer({"name": model.name, "ready": True}, model)

    @app.get("/v2/models/{model_name}")
    @app.get("/v2/models/{model_name}/versions/{version}")
    async def v2_metadata(model_name: str, version: str | None = None) -> JSONResponse:
        model = servable(champion, serving.name, model_name, version)
        return serving.answer(model_metadata(model, [served.version for served in champion.versions()]), model)

    @app.post("/v2/models/{model_name}/infer")
    @app.post("/v2/models/{model_name}/versions/{version}/infer")
    async def infer(model_name: str, request: Request, version: str | None = None) -> JSONResponse:
        model = servable(champion, serving.name, model_name, version)
        document, binary = split_body(await body_of(request, serving.limits), request.headers.get(HEADER_LENGTH))
        inputs = infer_inputs(document, binary, model, serving.limits.max_instances)
        result = await serving.result(request, model, inputs)
        return serving.answer(infer_answer(result, model, document.get("id")), model)


def mlflow_routes(app: FastAPI, serving: Serving) -> None:
    """MLflow's scoring server: /invocations of the champion, /ping and /health."""

    @app.post("/invocations")
    async def invocations(request: Request) -> JSONResponse:
        model = serving.champion.current()
        _, result = await serving.computed(request, model, mlflow_tensor_inputs if model.tensor else mlflow_inputs)
        if isinstance(result, TensorAnswer):
            return serving.answer(mlflow_tensor_answer(result, model.class_names), model)
        return serving.answer(mlflow_answer(result, model.class_names), model)

    @app.get("/ping")
    @app.get("/health")
    async def health() -> JSONResponse:
        model, batcher = serving.champion.model, serving.batcher
        return serving.answer({"status": "ok", "model": model.name, "version": model.version,
                               "batches": batcher.batches, "images": batcher.images}, model)
