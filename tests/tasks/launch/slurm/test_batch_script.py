"""The batch script of a Slurm job, as written (no Slurm needed): its #SBATCH shape for GPU settings, how each
backend's ranks start, what it exports and what it refuses."""
from __future__ import annotations

from pathlib import Path

import pytest

from tasks.launch.launchers.choose import backend_launcher
from tasks.launch.plan import job_environment
from tasks.launch.slurm.batch_script import batch_script, sbatch_options, unsupported
from tasks.params import Params, load_params

CONFIG = Path("/shared/runs/abc/.model.tmp-x/trainer_config.json")
JOB_DIR = Path("/shared/runs/abc/slurm")


def job_script(params: Params, controller: str | None, config: Path, env: dict[str, str]) -> str:
    """The batch script, its ranks started by the backend's own launcher."""
    return batch_script(params, controller, config, env, JOB_DIR, backend_launcher(params.train.backend))


def slurm_job(**settings: object) -> Params:
    return load_params({"train.scheduler": "slurm", **settings})


def test_gpu_settings_give_the_job_its_shape_gpus_partition_account_and_qos() -> None:
    params = slurm_job(**{"slurm.nodes": 4, "slurm.tasks_per_node": 4, "slurm.gpus_per_node": 4,
                          "slurm.cpus_per_task": 8, "slurm.partition": "gpu", "slurm.account": "vision-lab",
                          "slurm.qos": "high", "slurm.time_limit": "1-12:00:00", "slurm.notice_seconds": 300})
    assert params.train.np == 16  # nodes x tasks_per_node
    assert sbatch_options(params, JOB_DIR) == [
        "--job-name=ringflow-horovod", "--nodes=4", "--ntasks-per-node=4", "--cpus-per-task=8", "--gpus-per-node=4",
        "--partition=gpu", "--account=vision-lab", "--qos=high", "--time=1-12:00:00",
        "--output=/shared/runs/abc/slurm/slurm-%j.out", "--open-mode=append", "--requeue", "--signal=B:USR1@300"]


def test_a_cpu_cluster_job_passes_no_gpu_option_and_leaves_out_what_is_unset() -> None:
    options = sbatch_options(slurm_job(**{"slurm.requeue": False, "slurm.notice_seconds": 0}), JOB_DIR)
    assert not any(option.startswith(("--gpus", "--partition", "--account", "--qos", "--time", "--signal"))
                   for option in options)
    assert "--no-requeue" in options


def test_horovod_with_mpi_starts_its_ranks_with_srun_over_what_srun_offers() -> None:
    script = job_script(slurm_job(), "mpi", CONFIG, {})
    assert "mpi=$(srun --mpi=list 2>&1 | grep -owE -m1 'pmix|pmi2')" in script
    assert 'srun --label --kill-on-bad-exit=1 --distribution=block --mpi="$mpi" ' in script
    assert f"-m trainer --config {CONFIG} &" in script
    assert "HOROVOD_STALL_CHECK_TIME_SECONDS=30 HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=60 srun" in script
    assert "mpirun" not in script and "horovodrun" not in script


def test_horovod_with_gloo_runs_horovodrun_over_the_allocations_nodes() -> None:
    script = job_script(slurm_job(**{"train.network_interface": "ib0"}), "gloo", CONFIG, {})
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST"' in script
    assert '--gloo -np 2 -H "$hosts" ' in script and "--network-interface ib0" in script
    assert 'kill -TERM "$ranks"' in script  # horovodrun stops its ranks on TERM, not USR1


def test_multiworker_picks_ports_on_each_node_then_starts_one_worker_per_task() -> None:
    script = job_script(slurm_job(**{"train.backend": "multiworker", "slurm.tasks_per_node": 2}), None, CONFIG,
                          {})
    ports, workers = script.index("trainer.slurm_cluster ports"), script.index(f"-m trainer --config {CONFIG} &")
    assert ports < workers and 'srun --ntasks-per-node=1' in script
    assert 'export RINGFLOW_SLURM_PORTS=/shared/runs/abc/slurm/ports-"$SLURM_JOB_ID.${SLURM_RESTART_COUNT:-0}"' \
        in script


def test_the_script_exports_what_the_ranks_need_and_nothing_secret() -> None:
    env = {"PYTHONPATH": "/shared/ringflow", "RINGFLOW_METRICS_SPOOL": "1", "MLFLOW_RUN_ID": "abc",
           "AWS_SECRET_ACCESS_KEY": "hidden", "MLFLOW_TRACKING_URI": "http://u:p@server"}
    script = job_script(slurm_job(), "mpi", CONFIG, env)
    assert "export PYTHONPATH=/shared/ringflow" in script and "export RINGFLOW_METRICS_SPOOL=1" in script
    assert "export OMPI_MCA_mpi_yield_when_idle=1" in job_script(slurm_job(), "mpi", CONFIG, job_environment(
        slurm_job(), env))  # the job's defaults
    assert "hidden" not in script and "u:p@" not in script and "MLFLOW" not in script


def test_notice_then_the_job_requeues_itself_or_exits_for_a_retry() -> None:
    script = job_script(slurm_job(), "mpi", CONFIG, {})
    assert "trap notice USR1" in script and 'kill -USR1 "$ranks"' in script
    assert 'scontrol requeue "$SLURM_JOB_ID" 2>/dev/null || exit 75' in script


@pytest.mark.parametrize(("settings", "problem"), [
    ({"train.backend": "parameter-server"}, "backend parameter-server does not run under Slurm yet"),
    ({"train.elastic": "{min_np: 1, max_np: 2}"}, "train.elastic does not run under Slurm yet"),
    ({"train.backend": "mirrored"}, "backend mirrored is one process: set slurm.nodes and slurm.tasks_per_node to 1"),
])
def test_what_does_not_run_under_slurm_is_one_line(settings: dict, problem: str) -> None:
    assert (unsupported(slurm_job(**settings)) or "").startswith(problem)


def test_a_one_process_backend_runs_on_one_node() -> None:
    params = slurm_job(**{"train.backend": "mirrored", "slurm.nodes": 1, "slurm.tasks_per_node": 1})
    assert unsupported(params) is None
    assert "--nodes=1 --ntasks=1 " in job_script(params, None, CONFIG, {})


def test_no_value_can_end_the_submitted_with_comment_and_start_a_command() -> None:
    """A newline in slurm.sbatch_args once ended the `# Submitted with:` comment and started a command line: params
    refuse it in one line, and the comment escapes it even in params that were never validated."""
    with pytest.raises(ValueError) as refused:
        slurm_job(**{"slurm.sbatch_args": ["--comment=x\ntouch /tmp/proof"]})
    assert str(refused.value).startswith("bad parameter slurm.sbatch_args: holds a control character ('\\n')")
    unchecked = slurm_job().model_copy(update={"slurm": slurm_job().slurm.model_copy(
        update={"sbatch_args": ["--comment=x\ntouch /tmp/proof"]})})
    script = job_script(unchecked, "mpi", CONFIG, {})
    assert not any(line.startswith("touch") for line in script.splitlines())
    assert "'--comment=x\\ntouch /tmp/proof'" in script.splitlines()[2]
