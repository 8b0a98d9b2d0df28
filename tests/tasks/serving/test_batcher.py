"""Dynamic batching: the images of concurrent requests share batches of at most max_batch_size, each request gets
its own rows, a request that does not fit waits for the next batch, and a swap happens between batches."""
from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

import numpy as np

from tasks.serving.batcher import Batcher
from tasks.serving.served_model import Answer


@dataclass
class CountingModel:
    """Answers each image with its own first byte as its class; records the size of each batch."""
    version: str
    batches: list[int] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)

    def classify(self, encoded: list[bytes]) -> Answer:
        self.gate.wait(5)
        self.batches.append(len(encoded))
        return Answer(np.array([item[:1].decode() for item in encoded]), np.zeros((len(encoded), 2)),
                      np.zeros((len(encoded), 2), int), [""] * len(encoded))


def asked(batcher: Batcher, requests: list[list[bytes]]) -> list[tuple[str, list[str]]]:
    """Each request's answering version and classes, the requests sent at once."""
    async def all_at_once() -> list[tuple[str, list[str]]]:
        answers = await asyncio.gather(*(batcher.classify(images) for images in requests))
        return [(model.version, answer.classes.tolist()) for model, answer in answers]
    return asyncio.run(all_at_once())


def test_concurrent_requests_share_batches_of_at_most_max_batch_size() -> None:
    model = CountingModel("1")
    batcher = Batcher(lambda: model, max_batch_size=4, max_wait_seconds=0.5)  # type: ignore[arg-type,return-value]
    try:
        model.gate.set()
        requests = [[b"a", b"b"], [b"c"], [b"d", b"e"], [b"f"]]
        answers = asked(batcher, requests)
    finally:
        batcher.close()
    assert answers == [("1", ["a", "b"]), ("1", ["c"]), ("1", ["d", "e"]), ("1", ["f"])]
    assert model.batches == [3, 3]  # [a b][c] then [d e] did not fit: the next batch's first, with [f]


def test_a_swap_takes_effect_from_the_next_batch() -> None:
    old, new = CountingModel("1"), CountingModel("2")
    current = [old]
    batcher = Batcher(lambda: current[0], max_batch_size=1, max_wait_seconds=0)  # type: ignore[arg-type,return-value]
    try:
        async def swap_during_the_first_batch() -> list[str]:
            first = asyncio.ensure_future(batcher.classify([b"x"]))
            await asyncio.sleep(0.2)  # the first batch has started on the old model (held at its gate)
            current[0] = new
            old.gate.set()
            new.gate.set()
            second = await batcher.classify([b"y"])
            return [(await first)[0].version, second[0].version]
        assert asyncio.run(swap_during_the_first_batch()) == ["1", "2"]
    finally:
        batcher.close()


def test_a_stop_that_comes_while_a_batch_gathers_ends_after_that_batch() -> None:
    model = CountingModel("1")
    model.gate.set()
    batcher = Batcher(lambda: model, max_batch_size=4, max_wait_seconds=1)  # type: ignore[arg-type,return-value]

    async def stopped_while_gathering() -> list[str]:
        asked = asyncio.ensure_future(batcher.classify([b"a"]))
        await asyncio.sleep(0.2)  # the batch waits for more images
        closing = threading.Thread(target=batcher.close)
        closing.start()
        answer = (await asked)[1].classes.tolist()
        closing.join(5)
        assert not closing.is_alive()  # the stop was not lost with the batch
        return answer
    assert asyncio.run(stopped_while_gathering()) == ["a"]
