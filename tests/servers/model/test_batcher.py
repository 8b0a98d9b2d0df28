"""Dynamic batching: the images of concurrent requests share batches of at most max_batch_size, each request gets
its own rows, a request that does not fit waits for the next batch, each request is answered by the model it was read
for (a batch holds one model's requests), and a request over the queue's room is Busy."""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

import numpy as np
import pytest

from servers.model.batcher import Batcher, Busy
from servers.model.served_model import Answer


@dataclass
class CountingModel:
    """Answers each image with its version and its own first byte as its class; records the size of each batch."""
    version: str
    batches: list[int] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)

    def answer(self, encoded: list[bytes]) -> Answer:
        self.gate.wait(5)
        self.batches.append(len(encoded))
        return Answer(np.array([f"{self.version}:{item[:1].decode()}" for item in encoded]),
                      np.zeros((len(encoded), 2)), np.zeros((len(encoded), 2), int), [""] * len(encoded))


def asked(batcher: Batcher, requests: list[tuple[list[bytes], CountingModel]]) -> list[list[str]]:
    """Each request's classes, the requests sent at once."""
    async def all_at_once() -> list[list[str]]:
        answers = await asyncio.gather(*(batcher.classify(images, model)  # type: ignore[arg-type]
                                         for images, model in requests))
        return [answer.classes.tolist() for answer in answers]
    return asyncio.run(all_at_once())


def test_concurrent_requests_share_batches_of_at_most_max_batch_size() -> None:
    model = CountingModel("1")
    batcher = Batcher(max_batch_size=4, max_wait_seconds=0.5, max_queued=8)
    try:
        model.gate.set()
        requests = [[b"a", b"b"], [b"c"], [b"d", b"e"], [b"f"]]
        answers = asked(batcher, [(images, model) for images in requests])
    finally:
        batcher.close()
    assert answers == [["1:a", "1:b"], ["1:c"], ["1:d", "1:e"], ["1:f"]]
    assert model.batches == [3, 3]  # [a b][c] then [d e] did not fit: the next batch's first, with [f]


def test_each_request_is_answered_by_the_model_it_was_read_for() -> None:
    """A swap between a request's reading (for its model's input shape) and its batch: the model it was read for
    answers it, in a batch of that model's requests only."""
    old, new = CountingModel("1"), CountingModel("2")
    batcher = Batcher(max_batch_size=8, max_wait_seconds=0.5, max_queued=8)
    try:
        old.gate.set()
        new.gate.set()
        answers = asked(batcher, [([b"a"], old), ([b"b"], new), ([b"c"], old), ([b"d"], new)])
    finally:
        batcher.close()
    assert answers == [["1:a"], ["2:b"], ["1:c"], ["2:d"]]
    assert sum(old.batches) == 2 and sum(new.batches) == 2


def test_a_request_over_the_queue_s_room_is_busy_as_tensorflow_serving_says() -> None:
    model = CountingModel("1")  # its gate closed: the first batch holds the thread
    batcher = Batcher(max_batch_size=1, max_wait_seconds=0, max_queued=1)

    async def three_at_once() -> list[str]:
        first = asyncio.ensure_future(batcher.classify([b"a"], model))  # type: ignore[arg-type]
        await asyncio.sleep(0.2)  # taken from the queue: the model holds it
        second = asyncio.ensure_future(batcher.classify([b"b"], model))  # type: ignore[arg-type]
        await asyncio.sleep(0.1)  # queued: the queue is full
        with pytest.raises(Busy, match="The batch scheduling queue to which this task was submitted is full"):
            await batcher.classify([b"c"], model)  # type: ignore[arg-type]
        model.gate.set()
        return [(await first).classes[0], (await second).classes[0]]
    try:
        assert asyncio.run(three_at_once()) == ["1:a", "1:b"]
    finally:
        model.gate.set()
        batcher.close()


def test_a_stop_that_comes_while_a_batch_gathers_ends_after_that_batch() -> None:
    model = CountingModel("1")
    model.gate.set()
    batcher = Batcher(max_batch_size=4, max_wait_seconds=1, max_queued=8)

    async def stopped_while_gathering() -> list[str]:
        asked = asyncio.ensure_future(batcher.classify([b"a"], model))  # type: ignore[arg-type]
        await asyncio.sleep(0.2)  # the batch waits for more images
        closing = threading.Thread(target=batcher.close)
        closing.start()
        answer = (await asked).classes.tolist()
        closing.join(5)
        assert not closing.is_alive()  # the stop was not lost with the batch
        return answer
    assert asyncio.run(stopped_while_gathering()) == ["1:a"]


@dataclass
class FailingModel:
    """A model version whose every batch fails, as TensorFlow fails on images it cannot run."""
    version: str

    def answer(self, encoded: list[bytes]) -> Answer:
        raise RuntimeError(f"cannot run on {len(encoded)} images\n  node trace")


def test_a_failure_names_the_version_that_failed_not_the_one_current_since() -> None:
    from servers.model.app import Failed, answered
    from servers.model.protocol import Inputs
    batcher = Batcher(max_batch_size=4, max_wait_seconds=0, max_queued=4)
    try:
        with pytest.raises(Failed, match=r"^v3 failed on the request's images: cannot run on 1 images$"):
            asyncio.run(answered(batcher, FailingModel("3"), Inputs([b"x"], None), 4_000_000))  # type: ignore[arg-type]
    finally:
        batcher.close()
