"""The model server's Prometheus metrics (`GET /metrics`, prometheus_client's text format), in a registry of its own:
requests by route (the route's pattern, never the path a client chose), version and status, with their latency;
the batches' sizes; the requests waiting for the model; the images the model could not use, by reason; and the
version answering, with its load time. Every label has a bounded set of values: a client cannot make series."""
from __future__ import annotations

import time
from typing import Any, Awaitable, Callable, Iterator

from servers.model.champion import Champion
from servers.model.served_model import Answer, TensorAnswer

PREFIX = "ringflow_serving"
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# why an image could not be used, by what the bytes signature and the size check say (trainer/serving_bytes.py)
IMAGE_PROBLEMS = {"empty: ": "empty", "not an image: ": "not_an_image", "not decodable: ": "not_decodable",
                  " bytes: over the limit": "too_many_bytes",
                  "pixels, over serving.max_image_pixels": "too_many_pixels",
                  "its size is not declared": "size_not_declared", " pixels: smaller than": "too_small"}
VERSION_HEADER = "X-Model-Version"  # every answer names the version that made it


def image_problem(error: str) -> str:
    """The reason of an image's error, one of IMAGE_PROBLEMS' values (else `other`)."""
    return next((reason for said, reason in IMAGE_PROBLEMS.items() if said in error), "other")


class ChampionCollector:
    """The versions answering (by alias; one being loaded) and their load times, read at each scrape."""

    def __init__(self, champion: Champion) -> None:
        self._champion = champion

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily
        name, labels = self._champion.model.name, self._champion.labels
        answering = GaugeMetricFamily(f"{PREFIX}_model_version_info", "The versions answering, by alias (1), and "
                                      "one being loaded (0)", labels=["model", "version", "alias"])
        for alias, model in labels.items():
            answering.add_metric([name, model.version, alias], 1)
        if self._champion.loading:
            answering.add_metric([name, self._champion.loading, ""], 0)
        loaded = GaugeMetricFamily(f"{PREFIX}_model_load_seconds", "How long each version answering took to load",
                                   labels=["model", "version"])
        for model in self._champion.versions():
            loaded.add_metric([name, model.version], model.load_seconds)
        yield answering
        yield loaded


class Metrics:
    """The server's metrics and the calls that count them."""

    def __init__(self, champion: Champion, queued: Callable[[], int]) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        self.registry = CollectorRegistry()
        self.requests = Counter(f"{PREFIX}_requests", "Requests answered, by route pattern, version and HTTP status",
                                ["route", "version", "status"], registry=self.registry)
        self.latency = Histogram(f"{PREFIX}_request_seconds", "From the request's arrival to its answer, by route "
                                 "pattern", ["route"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.batch_size = Histogram(f"{PREFIX}_batch_size", "Images (or instances) in each batch the model ran",
                                    buckets=BATCH_BUCKETS, registry=self.registry)
        self.refused_images = Counter(f"{PREFIX}_images_refused", "Images the model could not use, by reason",
                                      ["reason"], registry=self.registry)
        self.log_dropped = Counter(f"{PREFIX}_log_dropped", "Served items not logged: the log's queue was full",
                                   registry=self.registry)
        queue_depth = Gauge(f"{PREFIX}_queue_depth", "Requests waiting for the model", registry=self.registry)
        queue_depth.set_function(lambda: float(queued()))
        self.registry.register(ChampionCollector(champion))

    def text(self) -> bytes:
        from prometheus_client import generate_latest
        return generate_latest(self.registry)

    def answered(self, result: Answer | TensorAnswer) -> None:
        """Count the images of an answer that the model could not use."""
        if isinstance(result, Answer):
            for error in result.errors:
                if error:
                    self.refused_images.labels(image_problem(error)).inc()

    def middleware(self, app: Any) -> Callable[[Any, Any, Any], Awaitable[None]]:
        """An ASGI middleware around `app` (plain ASGI: Starlette's BaseHTTPMiddleware halved the throughput at 32
        clients): each HTTP request counted, once answered, under its route's pattern (`unrouted` for a path no
        route has), the version that answered and its status, with its latency."""
        async def timed(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return await app(scope, receive, send)
            started, answer = time.perf_counter(), {"status": "", "version": ""}

            async def noted(message: Any) -> None:
                if message["type"] == "http.response.start":
                    answer["status"] = str(message["status"])
                    headers = dict(message.get("headers") or [])
                    answer["version"] = headers.get(VERSION_HEADER.lower().encode(), b"").decode("latin-1")
                await send(message)
            try:
                await app(scope, receive, noted)
            finally:
                route = getattr(scope.get("route"), "path", "unrouted")
                self.latency.labels(route).observe(time.perf_counter() - started)
                self.requests.labels(route, answer["version"], answer["status"] or "none").inc()
        return timed
