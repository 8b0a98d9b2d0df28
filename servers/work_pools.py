"""The work pools `make serve` and `make services` create: process pools whose base job template fixes what the
worker executes. Prefect merges a flow run's own `job_variables` over the deployment's, and a process pool's
default template lets them set the worker's `command`, `env` and `working_dir`: whoever could start a deployment
run could run a command as the worker's user. Here the template offers only harmless variables (a name, labels,
whether output is streamed) and refuses any other (`additionalProperties: false`: Prefect's server answers such a
flow run with 422 before it exists); the command is the worker's own (`python -m prefect.engine`), the environment
fixed below. The policy, once: here and in docs/security.md.

    python -m servers.work_pools template FILE   # write the base job template (servers/deploy.py uses it)
    python -m servers.work_pools check [PREFECT_FILE]   # refuse a deployment that opens them again
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

FLOW_RUN_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}  # every flow run's environment beyond the worker's own
CLOSED_VARIABLES = ("command", "env", "working_dir")  # what decides what the worker runs: never a job variable
OPEN_VARIABLES: dict[str, Any] = {
    "name": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Name"},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}, "title": "Labels"},
    "stream_output": {"type": "boolean", "default": True, "title": "Stream Output"},
}


def base_job_template() -> dict[str, Any]:
    """The process pools' base job template: no command (the worker's engine command), a fixed environment."""
    return {
        "job_configuration": {"env": FLOW_RUN_ENV, **{name: "{{ %s }}" % name for name in OPEN_VARIABLES}},
        "variables": {"type": "object", "properties": OPEN_VARIABLES, "additionalProperties": False},
    }


def opened_variables(prefect_file: Path) -> list[str]:
    """`deployment: variable` for each deployment (or its work pool entry) of prefect.yaml that sets a closed
    job variable."""
    document = yaml.safe_load(prefect_file.read_text()) or {}
    found = []
    for deployment in document.get("deployments") or []:
        pool = deployment.get("work_pool") or {}
        for variables in (deployment.get("job_variables") or {}, pool.get("job_variables") or {}):
            found += [f"{deployment.get('name')}: {name}" for name in CLOSED_VARIABLES if name in variables]
    return found


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "template":
        Path(argv[1]).write_text(json.dumps(base_job_template(), indent=2))
        return 0
    if argv[:1] == ["check"] and len(argv) <= 2:
        prefect_file = Path(argv[1] if len(argv) == 2 else "prefect.yaml")
        if opened := opened_variables(prefect_file):
            print(f"error: {prefect_file}: deployment {opened[0]} is a job variable the work pools fix (the "
                  f"worker's command, environment and directory are never chosen by a deployment or a run: "
                  f"servers/work_pools.py)", file=sys.stderr)
            return 1
        return 0
    print("error: usage: python -m servers.work_pools template FILE | check [PREFECT_FILE]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
