"""The work pools' base job template: a flow run or a deployment chooses no command, environment or directory of
the worker's (Prefect's own validation of job variables, as its server runs it, refuses them), and prefect.yaml
opens none of them again."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flows.work_pools import CLOSED_VARIABLES, base_job_template, main, opened_variables
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
