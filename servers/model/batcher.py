"""Dynamic batching: the images of concurrent requests are classified together, in batches of up to
max_batch_size images, each batch waiting at most max_wait for more once it has one (TensorFlow Serving's
max_batch_size and batch_timeout_micros). One thread runs the model, so the event loop only parses and answers.
Each request is answered by the model it was read for (its input shape; a swap can come between the two): a batch
holds the requests of one model. At most max_queued requests wait; one more is Busy (TensorFlow Serving's
RESOURCE_EXHAUSTED)."""
from __future__ import annotations

import asyncio
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from servers.model.served_model import Answer, ServedModel, TensorAnswer


@dataclass
class Waiting:
    """A request's images (or a tensor model's instances), the model it was read for, and where their answer goes."""
    images: list[Any]
    model: ServedModel
    answer: asyncio.Future
    loop: asyncio.AbstractEventLoop


def settle(answer: asyncio.Future, result: object, failed: bool) -> None:
    """Give a request its answer (or error), unless it was given up (its client went away)."""
    if answer.done():
        return
    if failed:
        assert isinstance(result, BaseException)
        answer.set_exception(result)
    else:
        answer.set_result(result)


class Busy(RuntimeError):
    """Too many requests wait for the model: HTTP 429, as TensorFlow Serving says RESOURCE_EXHAUSTED."""
    status = 429

    def __init__(self) -> None:
        super().__init__("The batch scheduling queue to which this task was submitted is full")


class Batcher:
    """Classifies the images of many requests in shared batches, on a thread of its own."""

    def __init__(self, max_batch_size: int, max_wait_seconds: float, max_queued: int) -> None:
        self._max_size, self._max_wait = max_batch_size, max_wait_seconds
        self._queue: queue.Queue[Waiting | None] = queue.Queue(max_queued)
        self._held: list[Waiting | None] = []  # what ended the last gathering: a request that did not fit (the
        # next batch's first) or the stop
        self.batches = self.images = 0  # how many batches ran, of how many images (the status tells)
        self.on_batch: Callable[[int], None] = lambda size: None  # told each batch's size (the metrics)
        self._thread = threading.Thread(target=self._run, name="batcher", daemon=True)
        self._thread.start()

    async def classify(self, images: list[Any], model: ServedModel) -> Answer | TensorAnswer:
        """`model`'s answer for these images (a tensor model's: instances); Busy when max_queued requests wait
        already."""
        loop = asyncio.get_running_loop()
        waiting = Waiting(images, model, loop.create_future(), loop)
        try:
            self._queue.put_nowait(waiting)
        except queue.Full:
            raise Busy() from None
        return await waiting.answer

    @property
    def queued(self) -> int:
        """Requests waiting for the model now."""
        return self._queue.qsize()

    def close(self) -> None:
        """Stop after the batches already asked for."""
        self._queue.put(None)  # waits for room: what is queued is answered first
        self._thread.join()

    def _run(self) -> None:
        while (batch := self._gather()) is not None:
            self._answer(batch)

    def _gather(self) -> list[Waiting] | None:
        """The next batch: the first request waiting, then others of its model until max_batch_size images or
        max_wait (a request of another model, or one that does not fit, starts the next batch)."""
        first = self._held.pop() if self._held else self._queue.get()
        if first is None:
            return None
        batch, size = [first], len(first.images)
        deadline = time.monotonic() + self._max_wait
        while size < self._max_size:
            try:
                waiting = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if waiting is None or waiting.model is not first.model or size + len(waiting.images) > self._max_size:
                self._held.append(waiting)
                break
            batch.append(waiting)
            size += len(waiting.images)
        return batch

    def _answer(self, batch: list[Waiting]) -> None:
        """Run the batch's model on its images and give each request its rows."""
        model = batch[0].model
        try:
            answer = model.answer([image for waiting in batch for image in waiting.images])
        except Exception as error:  # the model failed on this batch: each of its requests is told, not the server
            for waiting in batch:
                waiting.loop.call_soon_threadsafe(settle, waiting.answer, error, True)
            return
        size = sum(len(waiting.images) for waiting in batch)
        self.batches, self.images = self.batches + 1, self.images + size
        self.on_batch(size)
        start = 0
        for waiting in batch:
            rows = answer.rows(start, start + len(waiting.images))
            waiting.loop.call_soon_threadsafe(settle, waiting.answer, rows, False)
            start += len(waiting.images)
