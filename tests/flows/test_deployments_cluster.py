"""A deployment run cancelled while it trains on the test cluster's hosts (scripts/testcluster.sh), directly or
through its Slurm, through `make serve` (its own, for this module: the test cluster is one per machine, so these
tests run one after another with the other tests that use it, and the rest of the deployments' tests need not)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import pytest

from tests.flows.test_deployments import Served, cancel_flow_run, serving
from tests.helpers import BIN, run, wait_until
from tests.tasks.launch.cluster_hosts import cluster_up, ranks_on
from tests.tasks.launch.test_slurm_cluster import job_field, no_rank_left

pytestmark = pytest.mark.slow  # make serve, the test cluster, its Slurm


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """This module's own `make serve` (as test_deployments.py's)."""
    yield from serving(tmp_path_factory)


@pytest.fixture
def cluster() -> Iterator[list[str]]:
    """The test cluster (hosts h1 and h2) for one test: `up` takes a second or two."""
    yield from cluster_up()


@pytest.fixture
def slurm_cluster() -> Iterator[list[str]]:
    """The test cluster with its Slurm (slurmctld here, a slurmd on each host) for one test."""
    yield from cluster_up("--slurm")


def start_deployment_run(served: Served, overrides: str) -> str:
    """`prefect deployment run training-pipeline/train` with these overrides (JSON); the flow run's id, once its
    ranks run on both hosts."""
    started = run([str(BIN / "prefect"), "deployment", "run", "training-pipeline/train", "--param",
                   f"overrides={overrides}"], served.repo, served.env, timeout=300)
    flow_run_id = re.search(r"UUID:\s*([0-9a-f-]{36})", started.stdout)
    assert started.returncode == 0 and flow_run_id, started.stdout[-2000:] + started.stderr[-2000:]
    assert wait_until(lambda: bool(ranks_on("h1") and ranks_on("h2")), 600), "training never started on both hosts"
    return flow_run_id[1]


def test_cancelling_a_deployment_run_leaves_no_process_on_any_host(served: Served, cluster: list[str]) -> None:
    """`prefect deployment run` of training across h1 and h2 through `make serve`, cancelled mid-training with
    `prefect flow-run cancel`: the worker stops the run's process group, and with it every rank on every host."""
    flow_run_id = start_deployment_run(served, '{"train.hosts": "h1:1,h2:1", "train.epochs": 2000}')
    cancel_flow_run(served, flow_run_id)
    assert wait_until(lambda: not ranks_on("h1") and not ranks_on("h2"), 60), (ranks_on("h1"), ranks_on("h2"))


def slurm_job_files(served: Served) -> set[Path]:
    """The Slurm job records of the served checkout's runs (outputs/runs/<MLflow run id>/slurm/jobs)."""
    return set((served.repo / "outputs" / "runs").glob("*/slurm/jobs"))


def test_cancelling_a_deployment_run_cancels_the_slurm_job(served: Served, slurm_cluster: list[str]) -> None:
    """`prefect flow-run cancel` of a deployment run training through Slurm: the job is CANCELLED in Slurm, no
    rank is left on either node, and the MLflow run is not FINISHED."""
    jobs_before = slurm_job_files(served)
    flow_run_id = start_deployment_run(served, '{"train.scheduler": "slurm", "train.epochs": 2000}')
    (job_file,) = slurm_job_files(served) - jobs_before
    job_id, run_id = job_file.read_text().split()[0], job_file.parent.parent.name
    cancel_flow_run(served, flow_run_id)
    assert wait_until(lambda: job_field(job_id, "JobState") == "CANCELLED", 60), job_field(job_id, "JobState")
    assert wait_until(no_rank_left, 60), (ranks_on("h1"), ranks_on("h2"))
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=f"sqlite:///{served.repo / 'mlruns' / 'mlflow.db'}")
    assert client.get_run(run_id).info.status != "FINISHED"
