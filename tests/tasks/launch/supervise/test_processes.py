"""Running a job's processes: a failing rank is named with its error."""
from __future__ import annotations

from pathlib import Path

import psutil
import pytest

from tasks.launch.supervise.processes import Process, RankFailed, run_processes, run_streaming
from tests.helpers import PYTHON, ROOT, quiet_env
from trainer.slurm_cluster import rank_from_environment

pytestmark = pytest.mark.slow  # real horovodrun


def test_a_failing_rank_is_named_with_its_error(tmp_path: Path) -> None:
    script = tmp_path / "fail_on_rank_1.py"
    script.write_text("import os\nif os.environ['HOROVOD_RANK'] == '1':\n"
                      "    raise ValueError('shard 3 is unreadable')\n")
    command = [str(Path(PYTHON).with_name("horovodrun")), "--gloo", "-np", "2", "-H", "localhost:2",
               PYTHON, str(script)]
    with pytest.raises(RankFailed, match=r"^rank 1 on localhost failed \(exit 1\): ValueError: shard 3 is unreadable$"):
        run_streaming(command, quiet_env(), ROOT, lambda line: None)


NESTED_GRAPH_ERROR = """
import tensorflow as tf

def embedded(labels, depth):  # a deep stack where the failing node is made, as a Keras model's training step has
    if depth:
        return embedded(labels, depth - 1)
    return tf.gather(tf.constant([0.5, 1.5, 2.5]), labels)

@tf.function
def step(labels):
    return embedded(labels, 30)

step(tf.constant([5]))
"""


def test_a_rank_s_tensorflow_graph_error_is_named_by_its_cause(tmp_path: Path) -> None:
    """A real graph execution error, its node made 30 calls deep (its heading and its cause 60 lines apart): the
    line names the error and its cause."""
    script = tmp_path / "label_out_of_range.py"
    script.write_text(NESTED_GRAPH_ERROR)
    rank = Process([PYTHON, str(script)], quiet_env(), "1")
    with pytest.raises(RankFailed, match=r"^rank 1 on localhost failed \(exit 1\): InvalidArgumentError: "
                                         r"indices\[0\] = 5 is not in \[0, 3\)$"):
        run_processes([rank], tmp_path, lambda line: None)


def test_a_stopped_rank_ends_the_job_within_the_stall_timeout(digits_data: Path, tmp_path: Path) -> None:
    import os
    import re
    import signal

    import psutil

    from tasks.launch.job import train
    from tasks.params import Params, TrainParams
    params = Params(train=TrainParams(np=2, epochs=200, stall_timeout_seconds=15, tensorboard=False))
    stopped: list[int] = []

    def stop_rank_1(line: str) -> None:
        if not stopped and re.search(r"epoch 1: ", line):
            for process in psutil.process_iter(["cmdline", "environ"]):
                if "-m trainer --config" in " ".join(process.info["cmdline"] or []) and \
                        str(tmp_path) in " ".join(process.info["cmdline"]) and \
                        rank_from_environment(process.info["environ"] or {}) == "1":
                    os.kill(process.pid, signal.SIGSTOP)
                    stopped.append(process.pid)

    with pytest.raises(RankFailed, match=r"^rank 1 stopped responding: its process \(pid \d+\) has been stopped "
                                         r"for 1\d s \(train.stall_timeout_seconds: 15\)$"):
        train(params, digits_data, tmp_path / "model", tmp_path / "checkpoints", None, stop_rank_1)
    assert stopped and not psutil.pid_exists(stopped[0])
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or [])]


def test_a_launcher_that_failed_ends_the_job_though_a_process_it_left_holds_its_output(tmp_path: Path) -> None:
    """A killed horovodrun or mpirun leaves ranks that keep its output open: the job fails on the launcher's exit,
    not when the last of them has gone (the job's clean-up stops them by its marker)."""
    pid_file = tmp_path / "left.pid"
    launcher = Process(["sh", "-c", f"sleep 120 & echo $! > '{pid_file}'; echo started; exit 3"], {}, "0")
    with pytest.raises(RankFailed, match=r"^rank 0 on localhost exited with status 3: started$"):
        run_processes([launcher], tmp_path, print)
    left = psutil.Process(int(pid_file.read_text()))
    try:
        assert left.is_running()  # the job ended while the process it left still held the output
    finally:
        left.kill()
