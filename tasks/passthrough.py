"""Parameters that reach a command or name a program to run (the policy, written once here and in
docs/security.md): they are taken from params.yaml and from `--set` on the command line, but not from a deployment
run's `overrides` unless that deployment says `allow_passthrough: true` in prefect.yaml. Whoever can start a
deployment run (the local Prefect API has no authentication) cannot thereby run a command as the worker's user.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tasks.params import ParamsError, load_params
from tasks.paths import ROOT

PASSTHROUGH_KEYS = ("train.horovodrun_args", "train.elastic.discovery_script", "slurm.sbatch_args")
PREFECT_FILE = ROOT / "prefect.yaml"


def _value(params: dict[str, Any], key: str) -> Any:
    """A dotted key's value in dumped params (None where a section is absent)."""
    value: Any = params
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def passthrough_overridden(overrides: dict[str, Any]) -> list[str]:
    """The pass-through keys whose value `overrides` changes from params.yaml's."""
    written, given = load_params().model_dump(), load_params(overrides).model_dump()
    return [key for key in PASSTHROUGH_KEYS if _value(written, key) != _value(given, key)]


def allows_passthrough(deployment: str, prefect_file: Path = PREFECT_FILE) -> bool:
    """Whether the deployment of that name says `allow_passthrough: true` in prefect.yaml."""
    entries = (yaml.safe_load(prefect_file.read_text()) or {}).get("deployments") or []
    return any(entry.get("name") == deployment and entry.get("allow_passthrough") is True for entry in entries)


def check_deployment_overrides(overrides: dict[str, Any] | None, deployment: str | None,
                               prefect_file: Path = PREFECT_FILE) -> None:
    """Refuse, in one line naming the key, a pass-through parameter in a deployment run's overrides (deployment:
    its name; None: not a deployment run, where everything given is the user's own)."""
    if deployment is None or not overrides or allows_passthrough(deployment, prefect_file):
        return
    refused = passthrough_overridden(overrides)
    if refused:
        raise ParamsError(f"{refused[0]}: not taken from a deployment run's overrides (it reaches a command line); "
                          f"set it in params.yaml, or give deployment {deployment} `allow_passthrough: true` in "
                          f"prefect.yaml")
