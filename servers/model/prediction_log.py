"""Served predictions, logged for later analysis (drift), and the last served images, kept to warm a new version
with real traffic: a sample of the served items (serving.log_fraction of them, at most serving.log_max_per_second)
with the time, the request's id, the version, the input's summary features (trainer/input_summary.py: those the
training's reference holds of its test split) and the answer, written by a thread of its own as Parquet files, a
folder an hour (LOG_DIR/YYYY-MM-DDTHH/part-*.parquet, each written whole, then renamed into place). No request
waits for it: items go to a bounded queue, and one that does not fit is dropped and counted."""
from __future__ import annotations

import os
import queue
import random
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from tasks.logs import logger
from trainer.input_summary import image_summary, tensor_summary

log = logger("serve-model")
QUEUE_ITEMS = 4096  # items waiting to be written; more: dropped (counted)
FLUSH_SECONDS = 10.0  # a file at most this often (and at the end)
DRAIN_SECONDS = 1.0  # how often the writer takes what waits
WARM_UP_IMAGES = 32  # the last served images kept to warm a new version with (TensorFlow Serving's warm-up records)


@dataclass(frozen=True)
class Served:
    """One served item: its input (encoded image bytes, float pixels or a tensor instance) and its answer."""
    time: float
    request_id: str
    version: str
    item: int
    given: bytes | np.ndarray
    answer: str
    score: float
    error: str
    latency_ms: float


def schema() -> Any:
    """The files' columns: every row has them all (null where they do not apply)."""
    import pyarrow as pa
    floats = ("mean", "spread", "minimum", "maximum")
    return pa.schema([("time", pa.timestamp("us", tz="UTC")), ("request_id", pa.string()),
                      ("model_version", pa.string()), ("item", pa.int32()), ("kind", pa.string()),
                      ("height", pa.int32()), ("width", pa.int32()), ("channels", pa.int32()),
                      *[(name, pa.float64()) for name in floats], ("values", pa.list_(pa.float32())),
                      ("answer", pa.string()), ("score", pa.float64()), ("error", pa.string()),
                      ("latency_ms", pa.float64())])


def item_answer(result: Any, index: int) -> tuple[str, float, str]:
    """(answer, score, error) of one item: an image classifier's class name and best score; a tensor classifier's
    class id and best probability; a regressor's first output (no answer)."""
    if hasattr(result, "classes"):
        error = result.errors[index]
        return str(result.classes[index]), 0.0 if error else float(np.max(result.scores[index])), error
    outputs = result.outputs
    if "classes" in outputs and "probabilities" in outputs:
        return str(int(outputs["classes"][index])), float(np.max(outputs["probabilities"][index])), ""
    return "", float(np.asarray(next(iter(outputs.values()))[index]).ravel()[0]), ""


def served_items(inputs: Any, result: Any, version: str, request_id: str, latency_ms: float) -> list[Served]:
    """A request's items as served: each input (Inputs: encoded images, pixels or a tensor model's instances) with
    its row of the answer (item_answer)."""
    given = inputs.encoded if inputs.encoded is not None else inputs.pixels if inputs.pixels is not None \
        else inputs.features
    now, served = time.time(), []
    for index in range(len(given)):
        answer, score, error = item_answer(result, index)
        served.append(Served(now, request_id, version, index, given[index], answer, score, error, latency_ms))
    return served


def row(served: Served, tensor: bool) -> dict[str, Any]:
    """The Parquet row of a served item: what was asked, of which version, its summary features and answer."""
    features: dict[str, Any] = {"kind": "tensor" if tensor else "image"}
    if not served.error:  # an image the model could not use is not decoded here either
        features = tensor_summary(np.asarray(served.given)) if tensor else image_summary(served.given)
    return {"time": datetime.fromtimestamp(served.time, timezone.utc), "request_id": served.request_id,
            "model_version": served.version, "item": served.item, **features, "answer": served.answer,
            "score": served.score, "error": served.error, "latency_ms": served.latency_ms}


class PredictionLog:
    """The sampler in front of the queue (called on the event loop) and the thread that writes the files."""

    def __init__(self, folder: Path, fraction: float, max_per_second: float) -> None:
        self.folder, self._fraction, self._rate = folder, fraction, max_per_second
        self.on_drop: Callable[[], None] = lambda: None  # told of each dropped item (the metrics)
        self._tokens, self._refilled = max_per_second, time.monotonic()
        self._queue: queue.Queue[tuple[Served, bool]] = queue.Queue(QUEUE_ITEMS)
        self._closing = threading.Event()
        self._recent: deque[bytes] = deque(maxlen=WARM_UP_IMAGES)  # the last served encoded images (usable ones)
        self._recent_lock = threading.Lock()
        self.written = self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="prediction-log", daemon=True)
        self._thread.start()

    def offer(self, items: list[Served], tensor: bool) -> None:
        """Queue a sample of a request's items; never waits (an item that does not fit is dropped, counted)."""
        now = time.monotonic()
        self._tokens = min(self._rate, self._tokens + (now - self._refilled) * self._rate)
        self._refilled = now
        for served in items:
            if self._fraction < 1 and random.random() >= self._fraction or self._tokens < 1:
                continue
            self._tokens -= 1
            if isinstance(served.given, bytes) and not served.error:
                with self._recent_lock:
                    self._recent.append(served.given)
            try:
                self._queue.put_nowait((served, tensor))
            except queue.Full:
                self.dropped += 1
                self.on_drop()

    def warm_up(self, default: list[bytes]) -> list[bytes]:
        """Images to warm a new version with before it takes traffic: the last ones served (real traffic: its
        sizes and encodings), else `default`."""
        with self._recent_lock:
            recent = list(self._recent)
        return recent or default

    def close(self) -> None:
        """Write what is queued, then stop."""
        self._closing.set()
        self._thread.join(60)

    def _run(self) -> None:
        """Wake every DRAIN_SECONDS and take all that waits (not an item at a time: each wake-up takes the GIL from
        the event loop), a file every FLUSH_SECONDS and at the end."""
        rows: list[dict[str, Any]] = []
        flushed = time.monotonic()
        while True:
            closing = self._closing.wait(DRAIN_SECONDS)
            rows += [self._row(*waiting) for waiting in self._drained()]
            if rows and (closing or time.monotonic() - flushed >= FLUSH_SECONDS):
                self._write(rows)
                rows, flushed = [], time.monotonic()
            if closing:
                return

    def _drained(self) -> Iterator[tuple[Served, bool]]:
        while True:
            try:
                yield self._queue.get_nowait()
            except queue.Empty:
                return

    def _row(self, served: Served, tensor: bool) -> dict[str, Any]:
        try:
            return row(served, tensor)
        except Exception as error:  # an input PIL cannot read as TensorFlow did: logged without its features
            return row(Served(**{**served.__dict__, "error": f"not summarized: {type(error).__name__}"}), tensor)

    def _write(self, rows: list[dict[str, Any]]) -> None:
        """Each hour's rows as one new Parquet file in that hour's folder (written whole, then renamed)."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        hours: dict[str, list[dict[str, Any]]] = {}
        for item in rows:
            hours.setdefault(item["time"].strftime("%Y-%m-%dT%H"), []).append(item)
        for hour, items in hours.items():
            target = self.folder / hour / f"part-{time.time_ns()}-{uuid.uuid4().hex[:8]}.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.partial")
            try:
                pq.write_table(pa.Table.from_pylist(items, schema=schema()), partial)
                os.replace(partial, target)
                self.written += len(items)
            except OSError as error:  # a full or vanished disk: these rows are lost, said once per file
                partial.unlink(missing_ok=True)
                log.info(f"{len(items)} logged predictions not written to {target.parent}: {error}")
