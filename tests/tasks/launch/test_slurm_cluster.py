"""The training step as a Slurm job, for real: the test cluster's Slurm (`scripts/testcluster.sh up 2 --slurm`),
slurmctld on this machine and a slurmd on each of h1 and h2, with their munged. Every job is submitted by the train
step from this machine, the head node, and followed there."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tasks.launch.job import train
from tasks.launch.output.diagnosis import RankFailed
from tasks.launch.preflight import PreflightError, check_launch
from tasks.launch.slurm.commands import job_state
from tasks.outputs.evaluate import evaluate
from tasks.params import Params, SlurmParams, TrainParams, load_params
from tests.helpers import BIN, ROOT, make_project, make_workspace, quiet_env, run, wait_until, workspace_env
from tests.tasks.launch.cluster_hosts import cluster_up, ranks_on
from trainer.protocol import resumed_epochs, weights_digests

pytestmark = pytest.mark.slow  # real Slurm daemons, munge, Horovod and TensorFlow across two nodes
RUN_ID = re.compile(r"^mlflow run id:\s+(\w+)$", re.M)
JOB_ID = re.compile(r"slurm: submitted batch job (\d+)")

@pytest.fixture(scope="module")
def cluster() -> Iterator[list[str]]:
    yield from cluster_up("--slurm")

def slurm_params(epochs: int, backend: str = "horovod", controller: str = "auto", **slurm: object) -> Params:
    return Params(train=TrainParams(scheduler="slurm", backend=backend, controller=controller, epochs=epochs,
                                    tensorboard=False), slurm=SlurmParams(**slurm))  # type: ignore[arg-type]

def job_field(job_id: str, field: str) -> str:
    """One field of `scontrol show job` (the job's record is kept for MinJobAge after its end)."""
    shown = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, check=True)
    found = re.search(rf"\b{field}=(\S*)", shown.stdout)
    assert found, shown.stdout
    return found[1]

def no_rank_left() -> bool:
    return not ranks_on("h1") and not ranks_on("h2")

def assert_two_node_training(lines: list[str]) -> None:
    text = "\n".join(lines)
    assert re.search(r"rank 0 of 2 on h1\b", text) and re.search(r"rank 1 of 2 on h2\b", text), text[-3000:]
    digests = [digest for _, digest in weights_digests(text)]
    assert len(digests) == 2 and digests[0] == digests[1]  # synchronous training kept both nodes' weights equal

@pytest.mark.parametrize(("controller", "start", "model"), [
    ("mpi", 'srun --label --kill-on-bad-exit=1 --distribution=block --mpi="$mpi" ', "cnn"),
    ("gloo", '--gloo -np 2 -H "$hosts" ', "models/own_net.py:build")],
    ids=["mpi-srun", "gloo-horovodrun-in-the-allocation-a-user-s-model"])
def test_horovod_through_slurm_is_a_finished_pipeline_run(cluster: list[str], tmp_path: Path, controller: str,
                                                          start: str, model: str) -> None:
    """`ringflow run` in a project of the user's own with train.scheduler slurm, ranks on h1 and h2: the MLflow run
    FINISHED with every epoch and tagged with the job id, the job COMPLETED in Slurm, both ranks' weights equal. The
    Gloo job trains a model of the user's own (examples/own-image-model's subclassed model with its own train_step,
    a file of the project): the nodes built it from that file."""
    workspace = make_project(tmp_path / "project")
    shutil.copy(ROOT / "examples" / "own-image-model" / "model.py", workspace / "models" / "own_net.py")
    overrides = ["train.scheduler=slurm", "train.epochs=4", f"train.controller={controller}", f"train.model={model}"]
    done = run([str(BIN / "ringflow"), "run", *[f"--set={item}" for item in overrides]], workspace, quiet_env())
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    said = done.stdout + done.stderr
    run_id, job_id = RUN_ID.search(said)[1], JOB_ID.search(said)[1]  # type: ignore[index]
    job_files = workspace / "outputs" / "runs" / run_id / "slurm"
    assert start in (job_files / "job.sh").read_text()
    assert job_field(job_id, "JobState") == "COMPLETED"
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=f"sqlite:///{workspace / 'mlruns' / 'mlflow.db'}")
    mlflow_run = client.get_run(run_id)
    assert mlflow_run.info.status == "FINISHED" and mlflow_run.data.tags["slurm.job_id"] == job_id
    assert mlflow_run.data.params["train.model"] == model
    assert ":" not in model or mlflow_run.data.params["model.source"].startswith(f"{model}@")  # the file's hash
    assert len(client.get_metric_history(run_id, "loss")) == 4
    log = (job_files / f"slurm-{job_id}.out").read_text()
    assert (job_files / f"slurm-{job_id}.out").stat().st_mode & 0o777 == 0o600  # the ranks' lines: the user's only
    assert_two_node_training(re.sub(r"^\s*(\d+): ", r"[\1]<stdout>:", log, flags=re.M).splitlines())
    assert no_rank_left()


@pytest.fixture(scope="module")
def alone_accuracies(digits_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], float]:
    """The test accuracy of the same training on this machine alone, by backend (its Horovod controller does not
    change what it learns: trained once for both)."""
    found: dict[str, float] = {}

    def alone_accuracy(backend: str) -> float:
        if backend not in found:
            alone = tmp_path_factory.mktemp(f"alone-{backend}")
            params = slurm_params(6, backend)
            one_host = params.model_copy(update={"train": params.train.model_copy(update={"scheduler": "none"})})
            trained = train(one_host, digits_data, alone / "model", alone / "checkpoints", None, print)
            found[backend] = float(evaluate(trained.model_dir, digits_data).metrics["test_accuracy"])
        return found[backend]
    return alone_accuracy


@pytest.mark.parametrize(("backend", "controller"), [("horovod", "mpi"), ("multiworker", "auto")],
                         ids=["horovod-mpi", "multiworker"])  # (Horovod's Gloo in an allocation: the pipeline's test)
def test_two_nodes_through_slurm_train_as_well_as_one_host(cluster: list[str], digits_data: Path, tmp_path: Path,
                                                           alone_accuracies: Callable[[str], float], backend: str,
                                                           controller: str) -> None:
    """World size 2 across h1 and h2, equal weights on both, and a test accuracy no worse than the same training
    on this machine alone (same seed, shards and global batch) by more than the spread of identical trainings:
    the training input is read in whatever order it arrives, and six such trainings here ended between 0.981 and
    0.996."""
    lines: list[str] = []
    params = slurm_params(6, backend, controller)
    result = train(params, digits_data, tmp_path / "model", tmp_path / "checkpoints", None, lines.append)
    text = "\n".join(lines)
    if backend == "horovod":
        assert_two_node_training(lines)
    else:
        digests = dict(weights_digests(text))
        assert set(digests) == {"task=worker:0", "task=worker:1"} and len(set(digests.values())) == 1, text[-2000:]
    assert result.summary["world_size"] == 2 and no_rank_left()
    accuracies = [evaluate(result.model_dir, digits_data).metrics["test_accuracy"],
                  alone_accuracies(backend)]
    print(f"test accuracy: two nodes through Slurm {accuracies[0]:.4f}, this machine alone {accuracies[1]:.4f}")
    assert accuracies[0] >= 0.9 and accuracies[0] >= accuracies[1] - 0.03, accuracies


def test_a_node_lost_mid_training_requeues_the_job_which_resumes(cluster: list[str], digits_data: Path,
                                                                  tmp_path: Path) -> None:
    """h2 set DOWN after epoch 3: Slurm requeues the job (same id, Restarts=1), which resumes from the last
    checkpoint once h2 is back (ReturnToService), losing at most the epoch in progress."""
    lines: list[str] = []

    def down_after_epoch_3(line: str) -> None:
        lines.append(line)
        if re.search(r"epoch 3: ", line):
            subprocess.run(["scontrol", "update", "nodename=h2", "state=down", "reason=lost"], check=True)
    result = train(slurm_params(12), digits_data, tmp_path / "model", tmp_path / "checkpoints", None,
                   down_after_epoch_3)
    text = "\n".join(lines)
    job_id = JOB_ID.search(text)[1]  # type: ignore[index]
    assert f"slurm: job {job_id} requeued (restart 1)" in text, text[-3000:]
    assert resumed_epochs(text) and resumed_epochs(text)[0] >= 3, text[-3000:]
    assert job_field(job_id, "Restarts") == "1" and job_field(job_id, "JobState") == "COMPLETED"
    assert len(result.summary["history"]["loss"]) == 12 - resumed_epochs(text)[0]
    assert no_rank_left()

def test_a_node_failure_without_requeue_fails_retryably_and_the_retry_resumes(cluster: list[str],
                                                                              digits_data: Path,
                                                                              tmp_path: Path) -> None:
    lines: list[str] = []

    def down_after_epoch_3(line: str) -> None:
        lines.append(line)
        if re.search(r"epoch 3: ", line):
            subprocess.run(["scontrol", "update", "nodename=h2", "state=down", "reason=lost"], check=True)
    params = slurm_params(12, requeue=False)
    with pytest.raises(RankFailed) as failure:
        train(params, digits_data, tmp_path / "model", tmp_path / "checkpoints", None, down_after_epoch_3)
    assert "ended NODE_FAIL" in str(failure.value) and failure.value.retryable, str(failure.value)
    assert wait_until(no_rank_left, 60)
    subprocess.run(["scontrol", "update", "nodename=h2", "state=resume"], check=False)  # if not back already
    lines.clear()
    train(params, digits_data, tmp_path / "model", tmp_path / "checkpoints", None, lines.append)
    assert resumed_epochs("\n".join(lines))[0] >= 3

def test_slurms_notice_stops_the_ranks_after_their_checkpoint_and_the_job_resumes(cluster: list[str],
                                                                                  digits_data: Path,
                                                                                  tmp_path: Path) -> None:
    """The notice before a time limit (what `--signal=B:USR1@N` sends, here at once with scancel): the ranks stop,
    the job requeues itself and resumes from the checkpoint of the epoch before."""
    lines: list[str] = []

    def notice_after_epoch_3(line: str) -> None:
        lines.append(line)
        if re.search(r"epoch 3: ", line):
            job_id = JOB_ID.search("\n".join(lines))[1]  # type: ignore[index]
            subprocess.run(["scancel", "--signal=USR1", "--batch", job_id], check=True)
    train(slurm_params(12), digits_data, tmp_path / "model", tmp_path / "checkpoints", None, notice_after_epoch_3)
    text = "\n".join(lines)
    assert "stopping on SIGUSR1" in text and "stopped on Slurm's notice" in text, text[-3000:]
    assert "requeued (restart 1)" in text and resumed_epochs(text)[0] >= 3, text[-3000:]

class TimeLimitCut:
    """Collects the job's lines; once an epoch is checkpointed, cuts the job's time limit to none left, as an
    operator's `scontrol update TimeLimit` does: slurmctld ends it TIMEOUT at its next look at the limits (every
    30 s), not after the minute of Slurm's shortest limit."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.cut = False

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        if not self.cut and re.search(r"epoch 2: ", line):
            self.cut = True
            job_id = JOB_ID.search("\n".join(self.lines))[1]  # type: ignore[index]
            subprocess.run(["scontrol", "update", f"JobId={job_id}", "TimeLimit=0"], check=True)

def test_a_time_limit_shorter_than_the_training_times_out_then_the_retry_resumes(cluster: list[str],
                                                                                  digits_data: Path,
                                                                                  tmp_path: Path) -> None:
    limit = TimeLimitCut()
    # one node: the limit is the job's whatever its size, and its ranks compute until it
    long = slurm_params(100_000, time_limit="00:10:00", notice_seconds=0, nodes=1)
    with pytest.raises(RankFailed) as failure:
        train(long, digits_data, tmp_path / "model", tmp_path / "checkpoints", None, limit)
    assert "ended TIMEOUT" in str(failure.value) and failure.value.retryable, str(failure.value)
    epochs_done = max(int(found) for found in re.findall(r"epoch (\d+): ", "\n".join(limit.lines)))
    lines: list[str] = []
    train(slurm_params(epochs_done + 2, nodes=1), digits_data, tmp_path / "model", tmp_path / "checkpoints", None,
          lines.append)
    assert resumed_epochs("\n".join(lines))[0] >= epochs_done - 1  # at most the epoch in progress was lost

def jobs_known() -> int:
    shown = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True).stdout
    return len(re.findall(r"JobId=", shown))

@pytest.mark.parametrize(("settings", "expected"), [
    ({"slurm.partition": "gpu"}, "slurm.partition gpu: no such partition (the cluster has debug)"),
    ({"slurm.nodes": 3}, "slurm.nodes 3 exceeds the 2 nodes of partition debug"),
    ({"slurm.tasks_per_node": 3}, "slurm.tasks_per_node 3 x cpus_per_task 1 exceeds the 2 CPUs of partition debug's"),
    ({"slurm.gpus_per_node": 1}, "sbatch --test-only refused the job: "),
    ({"train.backend": "parameter-server"}, "backend parameter-server does not run under Slurm yet"),
])
def test_bad_settings_end_in_one_line_before_any_job_is_submitted(cluster: list[str], digits_data: Path,
                                                                  settings: dict, expected: str) -> None:
    before = jobs_known()
    with pytest.raises(PreflightError) as problem:
        check_launch(load_params({"train.scheduler": "slurm", **settings}), digits_data)
    assert expected in str(problem.value) and "\n" not in str(problem.value), str(problem.value)
    assert jobs_known() == before

def test_an_unknown_partition_stops_the_pipeline_in_one_last_line_before_the_run_opens(cluster: list[str],
                                                                                        tmp_path: Path) -> None:
    workspace = make_workspace(tmp_path / "workspace")
    done = run([str(BIN / "python"), "-m", "flows.pipeline", "--set", "train.scheduler=slurm", "--set",
                "slurm.partition=gpu"], workspace, workspace_env(workspace))
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == \
        "error: slurm.partition gpu: no such partition (the cluster has debug)"
    assert "mlflow run id" not in done.stdout + done.stderr


def test_a_job_that_cannot_start_in_time_is_cancelled_in_one_line(cluster: list[str], digits_data: Path,
                                                                  tmp_path: Path) -> None:
    """Both nodes taken by another job: ours waits past slurm.pending_timeout_minutes, is cancelled, and the step
    fails in one line that says why it waited (not retried)."""
    blocker = subprocess.run(["sbatch", "--parsable", "--nodes=2", "--exclusive", "--output=/dev/null",
                              "--wrap", "sleep 600"],
                             capture_output=True, text=True, check=True).stdout.strip()
    try:
        assert wait_until(lambda: job_field(blocker, "JobState") == "RUNNING", 30)
        with pytest.raises(RankFailed) as failure:
            train(slurm_params(2, pending_timeout_minutes=0.1), digits_data, tmp_path / "model",
                  tmp_path / "checkpoints", None, print)
    finally:
        subprocess.run(["scancel", blocker], check=True)
    message = str(failure.value)
    assert "ended NEVER_STARTED" in message and "it waited for Resources" in message, message
    assert not failure.value.retryable
    job_id = re.search(r"Slurm job (\d+)", message)[1]  # type: ignore[index]
    assert wait_until(lambda: job_field(job_id, "JobState") == "CANCELLED", 30)

def test_a_running_jobs_state_is_slurms_whatever_its_name_and_comment_hold(cluster: list[str], tmp_path: Path) -> None:
    """A real job named `... JobState=COMPLETED` with a comment that holds `JobState=FAILED`, `Restarts=9` and a
    line break: while it runs it is read as RUNNING on a node of the cluster, after scancel as CANCELLED."""
    job_id = subprocess.run(["sbatch", "--parsable", "--job-name=ringflow-x JobState=COMPLETED Restarts=7",
                             "--comment=c JobState=FAILED Reason=None Restarts=9 ExitCode=1:0 NodeList=h9\n"
                             "   JobState=FAILED", f"--output={tmp_path / 'out'}", "--wrap", "sleep 600"],
                            capture_output=True, text=True, check=True).stdout.strip()
    try:
        assert wait_until(lambda: job_state(job_id).state != "PENDING", 30)
        running = job_state(job_id)
    finally:
        subprocess.run(["scancel", job_id], check=True)
    assert (running.state, running.restarts, running.exit_code, running.nodes in cluster) == ("RUNNING", 0, "0:0",
                                                                                              True), running
    assert wait_until(lambda: job_state(job_id).state == "CANCELLED", 30)


def test_a_job_suspended_after_it_started_is_not_waited_for_for_ever(cluster: list[str], digits_data: Path,
                                                                     tmp_path: Path) -> None:
    """`scontrol suspend` after epoch 2: no heartbeat is made up for its stopped ranks, and after
    slurm.pending_timeout_minutes the job is cancelled and the step fails in one line naming SUSPENDED."""
    lines: list[str] = []

    def suspend_after_epoch_2(line: str) -> None:
        lines.append(line)
        if re.search(r"epoch 2: ", line) and (found := JOB_ID.search("\n".join(lines))):
            subprocess.run(["scontrol", "suspend", found[1]], check=True)
    with pytest.raises(RankFailed) as failure:
        train(slurm_params(300, pending_timeout_minutes=0.1), digits_data, tmp_path / "model",
              tmp_path / "checkpoints", None, suspend_after_epoch_2)
    message = str(failure.value)
    assert "ended STUCK" in message and "then was SUSPENDED" in message, message
    job_id = JOB_ID.search("\n".join(lines))[1]  # type: ignore[index]
    assert wait_until(lambda: job_field(job_id, "JobState") == "CANCELLED", 30)
    assert wait_until(no_rank_left, 60)


def test_a_pipeline_killed_hard_leaves_a_job_that_the_resume_cancels_before_it_submits(cluster: list[str],
                                                                                      tmp_path: Path) -> None:
    """SIGKILL of the pipeline's whole process group while its job trains (no one left to scancel it), then
    --resume: the live job of that run is found by its name and cancelled before the new one is submitted (one job
    at a time), and the resumed run finishes with every epoch once. The orphan is held (`scontrol suspend`, before
    the kill) so that it is still live at the resume however slowly the resume starts: were it done, its job would
    be COMPLETED, not CANCELLED, and its checkpoints would leave nothing to resume (found under a loaded machine)."""
    import os
    import signal
    workspace = make_workspace(tmp_path / "workspace")
    epochs = 12
    command = [str(BIN / "python"), "-m", "flows.pipeline", "--set=train.scheduler=slurm",
               f"--set=train.epochs={epochs}"]
    job = subprocess.Popen(command, cwd=workspace, env=workspace_env(workspace), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    assert job.stdout is not None
    said = []
    for line in job.stdout:
        said.append(line)
        if re.search(r"epoch 3: ", line):
            break
    first_job = JOB_ID.search("".join(said))[1]  # type: ignore[index]
    subprocess.run(["scontrol", "suspend", first_job], check=True)
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    assert job_field(first_job, "JobState") == "SUSPENDED"  # orphaned, held
    done = run([*command, "--resume"], workspace, workspace_env(workspace))
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-3000:]
    assert f"slurm: job {first_job} of this run was still live" in text
    second_job = JOB_ID.search(text)[1]  # type: ignore[index]
    assert job_field(first_job, "JobState") == "CANCELLED"
    assert job_field(first_job, "EndTime") <= job_field(second_job, "StartTime")  # never two at once
    run_id = RUN_ID.search(text)[1]  # type: ignore[index]
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=f"sqlite:///{workspace / 'mlruns' / 'mlflow.db'}")
    steps = [metric.step for metric in client.get_metric_history(run_id, "loss")]
    assert sorted(set(steps)) == list(range(epochs)), steps  # every epoch (one resumed may be trained again)
    assert client.get_run(run_id).info.status == "FINISHED"


def test_a_sweeps_trials_are_slurm_jobs_at_once(cluster: list[str], tmp_path: Path, prefect_api: str) -> None:
    """train.scheduler slurm: each of 2 trials (2 at once) is its own Slurm job, COMPLETED, the two running at the
    same time; each trial's run FINISHED under the sweep's run with its job's id."""
    from tests.flows.test_sweep import overlapped, sweep, swept
    workspace = make_workspace(tmp_path / "workspace")
    code, said = sweep(workspace, prefect_api, "sweep.method=random", "sweep.trials=2", "sweep.parallel=2",
                       "train.scheduler=slurm", "train.np=1", "train.epochs=2", env=workspace_env(workspace))
    assert code == 0, said[-3000:]
    children = swept(workspace, code, said).children
    job_ids = {child.data.tags["slurm.job_id"] for child in children}
    assert len(job_ids) == 2 and {job_field(job_id, "JobState") for job_id in job_ids} == {"COMPLETED"}
    assert {child.info.status for child in children} == {"FINISHED"} and overlapped(children)
    starts = [job_field(job_id, "StartTime") for job_id in job_ids]
    ends = [job_field(job_id, "EndTime") for job_id in job_ids]
    assert max(starts) < min(ends), (starts, ends)  # the jobs ran at the same time (ISO times sort as text)
    assert no_rank_left()
