"""Dynamic batching: the images of concurrent requests are classified together, in batches of up to
max_batch_size images, each batch waiting at most max_wait for more once it has one (TensorFlow Serving's
max_batch_size and batch_timeout_micros). One thread runs the model, so the event loop only parses and answers;
each batch is answered by the model that is current when it starts (a swap never splits a batch)."""
from __future__ import annotations

import asyncio
import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable

from tasks.serving.served_model import Answer, ServedModel


@dataclass
class Waiting:
    """A request's images, and where their answer goes."""
    images: list[bytes]
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


class Batcher:
    """Classifies the images of many requests in shared batches, on a thread of its own."""

    def __init__(self, current: Callable[[], ServedModel], max_batch_size: int, max_wait_seconds: float) -> None:
        self._current, self._max_size, self._max_wait = current, max_batch_size, max_wait_seconds
        self._queue: queue.Queue[Waiting | None] = queue.Queue()
        self._held: list[Waiting | None] = []  # what ended the last gathering: a request that did not fit (the
        # next batch's first) or the stop
        self.batches = self.images = 0  # how many batches ran, of how many images (the status tells)
        self._thread = threading.Thread(target=self._run, name="batcher", daemon=True)
        self._thread.start()

    async def classify(self, images: list[bytes]) -> tuple[ServedModel, Answer]:
        """The model that answered, and its answer for these images."""
        loop = asyncio.get_running_loop()
        waiting = Waiting(images, loop.create_future(), loop)
        self._queue.put(waiting)
        return await waiting.answer

    def close(self) -> None:
        """Stop after the batches already asked for."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        while (batch := self._gather()) is not None:
            self._answer(batch)

    def _gather(self) -> list[Waiting] | None:
        """The next batch: the first request waiting, then others until max_batch_size images or max_wait."""
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
            if waiting is None or size + len(waiting.images) > self._max_size:
                self._held.append(waiting)
                break
            batch.append(waiting)
            size += len(waiting.images)
        return batch

    def _answer(self, batch: list[Waiting]) -> None:
        """Run the current model on the batch's images and give each request its rows."""
        model = self._current()
        try:
            answer = model.classify([image for waiting in batch for image in waiting.images])
        except Exception as error:  # the model failed on this batch: each of its requests is told, not the server
            for waiting in batch:
                waiting.loop.call_soon_threadsafe(settle, waiting.answer, error, True)
            return
        self.batches, self.images = self.batches + 1, self.images + len(answer.errors)
        start = 0
        for waiting in batch:
            rows = answer.rows(start, start + len(waiting.images))
            waiting.loop.call_soon_threadsafe(settle, waiting.answer, (model, rows), False)
            start += len(waiting.images)
