"""The training engine for real: every backend, resume after a kill, LR scaling and warmup."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from tasks.launch.environment import rank_environment
from tasks.launch.job import train
from tasks.launch.job_config import job_spec, write_trainer_config
from tasks.launch.plan import launch_plan
from tasks.launch.preflight import check_launch
from tasks.launch.supervise.processes import Process, RankFailed, run_processes
from tasks.outputs.evaluate import evaluate
from tasks.params import Params, TrainParams
from tests.helpers import ROOT, free_port, numbered_data, quiet_env
from trainer.checkpoint_files import saved_epochs
from trainer.model_io import read_train_summary
from trainer.prepared_data import read_manifest
from trainer.protocol import resumed_epochs, weights_digests

pytestmark = pytest.mark.slow  # real Horovod and tf.distribute jobs

SAME_WEIGHTS = ("horovod", "horovod-tape", "multiworker", "multiworker-tape")


def digests(lines: list[str]) -> list[str]:
    return [digest for _, digest in weights_digests("\n".join(lines))]


def train_for_test(params: Params, data_dir: Path, tmp_path: Path, lines: list[str]) -> Path:
    out = tmp_path / "model"
    quiet = params.model_copy(update={"train": params.train.model_copy(update={"tensorboard": False})})
    train(quiet, data_dir, out, tmp_path / "checkpoints", None, lines.append)
    return out


def six_epochs(backend: str, epochs: int = 6) -> Params:
    return Params(train=TrainParams(backend=backend, np=2, epochs=epochs, warmup_epochs=1, tensorboard=False))


@dataclass
class Trained:
    out: Path  # the model folder
    lines: list[str]
    checkpoints: Path


@pytest.fixture(scope="module")
def trained(digits_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Trained]:
    """A backend's two-replica training of six epochs, made once for the module's tests (the resume tests go on from
    its checkpoints)."""
    done: dict[str, Trained] = {}

    def training(backend: str) -> Trained:
        if backend not in done:
            folder, lines = tmp_path_factory.mktemp(f"six-epochs-{backend}"), []
            out = train_for_test(six_epochs(backend), digits_data, folder, lines)
            done[backend] = Trained(out, lines, folder / "checkpoints")
        return done[backend]
    return training


@pytest.mark.parametrize("backend", ["horovod", "horovod-tape", "mirrored", "mirrored-tape", "multiworker",
                                     "multiworker-tape", "central-storage", "one-device", "parameter-server"])
def test_every_backend_trains_the_cnn(backend: str, digits_data: Path, trained: Callable[[str], Trained]) -> None:
    out, lines = trained(backend).out, trained(backend).lines
    assert evaluate(out, digits_data).metrics["test_accuracy"] >= 0.8, lines[-10:]
    epochs = [line for line in lines if re.search(r"epoch \d+: ", line)]
    assert len(epochs) == 6 and all("images_per_sec=" in line for line in epochs)
    if backend in SAME_WEIGHTS:
        found = digests(lines)
        assert len(found) == 2 and found[0] == found[1]


def start_and_kill_after_epoch(params: Params, data_dir: Path, tmp_path: Path, epoch: int) -> list[str]:
    """Launch the real job and SIGKILL it (all ranks) as soon as `epoch` has been reported; the lines it said."""
    quiet = params.model_copy(update={"train": params.train.model_copy(update={"tensorboard": False})})
    config_file = write_trainer_config(quiet, job_spec(quiet, data_dir, tmp_path / "killed", tmp_path / "checkpoints"))
    (process_spec,) = launch_plan(quiet, check_launch(quiet, data_dir).controller, config_file,
                                  rank_environment() | quiet_env())
    job = subprocess.Popen(process_spec.command, env=process_spec.env, cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    said: list[str] = []
    for line in job.stdout:
        said.append(line)
        if f"epoch {epoch}:" in line:  # reported first, checkpointed right after: kill once the checkpoint is there
            deadline = time.monotonic() + 60  # a bounded wait, not a speed goal
            while saved_epochs(tmp_path / "checkpoints") < epoch and time.monotonic() < deadline:
                time.sleep(0.05)
            os.killpg(job.pid, signal.SIGKILL)
            break
    job.wait()
    assert job.returncode != 0
    return said


def test_a_killed_run_resumes_from_its_last_epoch_at_the_scaled_learning_rate(digits_data: Path,
                                                                              tmp_path: Path) -> None:
    """Two ranks: the learning rate scaled by the world size (0.001 x 2) after a warmup epoch from 0.001; the job
    killed after epoch 2 is launched again and its ranks restore that epoch identically and train the last two."""
    params = Params(train=TrainParams(np=2, epochs=4, warmup_epochs=1))
    killed = start_and_kill_after_epoch(params, digits_data, tmp_path, epoch=2)
    rates = [float(re.search(r"learning_rate=([\d.e-]+)", line)[1]) for line in killed if "epoch " in line]
    assert rates[0] == pytest.approx(0.001 + 0.001 * 18 / 19, rel=1e-3) and rates[1] == pytest.approx(0.002)
    lines: list[str] = []
    out = train_for_test(params, digits_data, tmp_path, lines)
    reported = [int(m[1]) for line in lines if (m := re.search(r"epoch (\d+): ", line))]
    assert 2 in resumed_epochs("\n".join(lines))
    assert reported == [3, 4]
    found = digests(lines)
    assert len(found) == 2 and found[0] == found[1]  # all ranks restored identically
    summary = read_train_summary(out)
    assert summary["resumed_from_epoch"] == 2
    assert (summary["learning_rate"], summary["warmup_start_learning_rate"]) == (0.002, 0.001)
    assert summary["warmup_steps"] == summary["steps_per_epoch"] == 1257 // 64


@pytest.mark.parametrize("backend", ["multiworker", "multiworker-tape"])
def test_multiworker_workers_resume_from_the_same_epoch(backend: str, digits_data: Path, tmp_path: Path,
                                                        trained: Callable[[str], Trained],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two workers restore the run's checkpoints, agree on the epoch (checked across them) and go on together;
    the worker that is not the lead leaves none of its scratch checkpoints and model copies behind."""
    checkpoints = Path(shutil.copytree(trained(backend).checkpoints, tmp_path / "checkpoints"))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # the workers' temporary files
    lines: list[str] = []
    train(six_epochs(backend, epochs=8), digits_data, tmp_path / "model", checkpoints, None, lines.append)
    assert [int(m[1]) for line in lines if (m := re.search(r"epoch (\d+): ", line))] == [7, 8]
    found = digests(lines)
    assert len(found) == 2 and found[0] == found[1]
    assert [path.name for path in scratch.iterdir()] in ([], ["__pycache__"])  # autograph's own compiled code


def test_multiworker_workers_that_restored_different_epochs_refuse_to_train(
        digits_data: Path, tmp_path: Path, trained: Callable[[str], Trained]) -> None:
    """Worker 0 sees the run's checkpoints (epoch 6), worker 1 a directory without them (as a host with a stale
    copy would): both stop with one line instead of training on from different models."""
    more = six_epochs("multiworker", epochs=7)
    checkpoint_dirs = (Path(shutil.copytree(trained("multiworker").checkpoints, tmp_path / "checkpoints")),
                       tmp_path / "empty")
    cluster = {"worker": [f"localhost:{free_port()}" for _ in checkpoint_dirs]}
    processes = []
    for index, checkpoint_dir in enumerate(checkpoint_dirs):
        config = write_trainer_config(more, job_spec(more, digits_data, tmp_path / f"out{index}", checkpoint_dir))
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        env = rank_environment() | quiet_env(TF_CONFIG=tf_config)
        processes.append(Process([sys.executable, "-m", "trainer", "--config", str(config)], env, str(index)))
    with pytest.raises(RankFailed, match=r"failed \(exit 1\): .*WorkersDisagreeError: the workers found different "
                                         r"epochs \(this one [06], the mean 3\): every worker must see the run's "
                                         r"checkpoint directory$"):
        run_processes(processes, ROOT, print)


def test_parameter_server_workers_read_disjoint_parts_that_cover_each_epoch(tmp_path: Path) -> None:
    """Both workers of a real parameter-server cluster take steps from the backend's own input. Each pass of the
    split is handed out once across the workers; an epoch's steps are a pass's worth, so only the few records one
    worker holds buffered at the turn of a pass can be read twice in the window (measured: 6 or 7 of 848).
    Every worker reading pipeline 0 of 1, as before the tf.data service, repeats about a quarter of them."""
    data_dir = numbered_data(tmp_path, count=1000)
    records = read_manifest(data_dir)["splits"]["train"]["count"]
    probe = subprocess.run([sys.executable, "-m", "tests.trainer.backends.ps_input_probe", str(data_dir)], cwd=ROOT,
                           env=quiet_env() | {"PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr[-3000:]
    taken = json.loads(probe.stdout.strip().splitlines()[-1])
    seen = [number for batch in taken["batches"] for number in batch]
    assert len(seen) == taken["steps"] * 8 == records - records % 8
    buffered = 3 * 8  # at most three batches in flight at the turn of a pass
    assert len(seen) - len(set(seen)) <= buffered and set(seen) <= set(range(1000))
