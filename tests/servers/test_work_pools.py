"""The work pools' base job template: a flow run or a deployment chooses no command, environment or directory of
the worker's (Prefect's own validation of job variables, as its server runs it, refuses them), and prefect.yaml
opens none of them again."""
from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import pytest
import yaml

from servers.work_pools import CLOSED_VARIABLES, base_job_template, main, opened_variables
from tasks.paths import ROOT


def prefect_refuses(job_variables: dict) -> bool:
    """Whether Prefect's server-side check of a flow run's job variables (all of them, required ones too) fails."""
    from prefect.utilities.schema_tools.validation import ValidationError, validate
    try:
        validate(job_variables, base_job_template()["variables"], raise_on_error=True, preprocess=True,
                 ignore_required=False, allow_none_with_default=True)
    except ValidationError:
        return True
    return False


@pytest.mark.parametrize("variable", [{"command": "touch /tmp/proof"}, {"env": {"BASH_ENV": "/tmp/x"}},
                                      {"working_dir": "/tmp"}])
def test_the_workers_command_environment_and_directory_are_refused(variable: dict) -> None:
    assert prefect_refuses(variable)


def test_what_is_left_open_is_harmless_and_accepted() -> None:
    assert not prefect_refuses({}) and not prefect_refuses({"name": "a run", "labels": {"team": "vision"},
                                                            "stream_output": False})
    template = base_job_template()
    assert not set(CLOSED_VARIABLES) & set(template["variables"]["properties"])
    assert "command" not in template["job_configuration"]  # the worker's own engine command
    assert template["job_configuration"]["env"] == {"TF_CPP_MIN_LOG_LEVEL": "2"}


def test_the_projects_prefect_file_opens_nothing_and_one_that_does_is_refused(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture) -> None:
    assert opened_variables(ROOT / "prefect.yaml") == [] and main(["check", str(ROOT / "prefect.yaml")]) == 0
    document = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    document["deployments"][1]["work_pool"] = {"name": "ringflow-local", "job_variables": {"env": {"A": "1"}}}
    opened = tmp_path / "prefect.yaml"
    opened.write_text(yaml.safe_dump(document))
    assert main(["check", str(opened)]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        f"error: {opened}: deployment retrain: env is a job variable the work pools fix")


def test_the_workers_check_leaves_parameters_free_and_refuses_a_job_variable_the_pool_does_not_offer() -> None:
    """servers/worker.py's check, on Prefect's own objects: a flow run that sets a closed job variable (which
    Prefect's server checks only when it makes a flow run from a deployment) is refused; a deployment's parameters
    and schedule are not what it checks."""
    from prefect.client.schemas.objects import FlowRun, WorkPool
    from prefect.client.schemas.responses import DeploymentResponse

    from servers.deploy import deployment_digest, digest
    from servers.worker import refusal
    pool = WorkPool(name="ringflow-local", type="process", base_job_template=base_job_template())
    deployment = DeploymentResponse(id=uuid4(), name="train", flow_id=uuid4(), work_pool_name="ringflow-local",
                                    entrypoint="flows/pipeline.py:training_pipeline", pull_steps=[
                                        {"prefect.deployments.steps.set_working_directory": {"directory": "/x"}}])
    record = {"work_pool": "ringflow-local", "base_job_template": digest(base_job_template()),
              "deployments": {str(deployment.id): {"name": "train", "digest": deployment_digest(deployment)}}}
    flow_run = FlowRun(flow_id=deployment.flow_id, deployment_id=deployment.id, parameters={"epochs": 3})
    assert refusal(flow_run, pool, deployment.model_copy(update={"parameters": {"epochs": 5}}), record) is None
    for variable in CLOSED_VARIABLES:
        assert refusal(flow_run.model_copy(update={"job_variables": {variable: "x"}}), pool, deployment, record) == \
            f"the flow run sets job variable {variable}, which the work pool does not offer"
    assert refusal(flow_run, pool, deployment.model_copy(update={"entrypoint": "evil.py:flow"}), record) == (
        "deployment train is not the one deployed (its pull steps, job variables, entrypoint or work pool were "
        "changed through the API since)")
