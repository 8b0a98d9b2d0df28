"""Elastic training on the test cluster: the host of the ranks' coordinator (rank 0) goes down mid-training (its rank
killed, its link cut), training goes on with the other and, once the host answers again, scales back up to both."""
from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Iterator

import pytest

from tasks.launch.job import train
from tasks.launch.output.diagnosis import untagged
from tasks.outputs.evaluate import evaluate
from tasks.params import InputParams, Params, TrainParams
from tests.tasks.launch.cluster_hosts import cluster_up, hosts_of, ranks_on, set_link
from trainer.config import ElasticParams
from trainer.protocol import elastic_starts, parse_placed, weights_digests

pytestmark = pytest.mark.slow  # real hosts, sshd and Horovod's elastic driver across them
TEST_CLUSTER = "g"  # beside cluster h's modules (tests/parallel.py)
H1, H2 = hosts_of(TEST_CLUSTER)


@pytest.fixture(scope="module")
def cluster() -> Iterator[list[str]]:
    yield from cluster_up(cluster=TEST_CLUSTER)


class HostOutage:
    """Collects the job's lines; takes the coordinator's host down once an epoch trained on both hosts is reported,
    and brings it back once training has gone on without it. (The driver then tells the coordinator of the host
    change: with the coordinator's host gone, that call held up the job's recovery for minutes.)"""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.coordinator_host = ""
        self.down = self.back = False

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        if (placed := parse_placed(untagged(line))) and placed[0] == 0 and not self.down:
            self.coordinator_host = placed[2]
        if not self.down and re.search(r"epoch 2: .*world_size=2\b", line):
            self.down = True
            for pid in ranks_on(self.coordinator_host):
                os.kill(pid, signal.SIGKILL)
            time.sleep(1)  # the peers hear of the ended connections before the link goes
            set_link(self.coordinator_host, "down")
        elif self.down and not self.back and "elastic: 1 ranks train" in line:
            self.back = True
            set_link(self.coordinator_host, "up")


def test_elastic_training_loses_a_host_goes_on_and_takes_it_back(cluster: list[str], digits_data: Path,
                                                                tmp_path: Path) -> None:
    elastic = ElasticParams(min_np=1, max_np=2, cooldown_seconds=(1, 5))
    params = Params(train=TrainParams(np=2, hosts=f"{H1}:1,{H2}:1", epochs=12, tensorboard=False, elastic=elastic),
                    input=InputParams(image_size=32))
    outage = HostOutage()
    try:
        result = train(params, digits_data, tmp_path / "model", tmp_path / "checkpoints", None, outage)
    finally:
        for host in (H1, H2):
            set_link(host, "up")
    text = "\n".join(outage.lines)
    starts = elastic_starts(text)
    assert starts[0] == (2, 1) and (1, 3) in starts, text[-3000:]  # one epoch lost at most: epoch 2 was committed
    assert starts[-1][0] == 2 and starts[-1][1] > 3, starts  # the second host back: both ranks again
    sizes = result.summary["history"]["world_size"]
    assert len(sizes) == 12 and sizes[:2] == [2, 2] and 1 in sizes and sizes[-1] == 2, sizes
    digests = [digest for _, digest in weights_digests(text)]
    assert len(digests) == 2 and digests[0] == digests[1], text[-3000:]  # the last ring's two ranks agree
    assert ranks_on(H1) == [] and ranks_on(H2) == []
    assert evaluate(result.model_dir, digits_data).metrics["test_accuracy"] >= 0.8
