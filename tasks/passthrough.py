"""Parameters that reach a command, name a program to run or name code to import and call (the user's model or loss
as "file.py:function"; the policy, written once here and in docs/security.md): they are taken from params.yaml and
from `--set` on the command line, but not from a deployment run's parameters unless that deployment says
`allow_passthrough: true` in prefect.yaml, and never from a sweep's space. Whoever can start a deployment run cannot
thereby run a command, or a function of their choice, as the worker's user.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tasks.params import ParamsError, load_params
from tasks.paths import code_repository
from trainer.config import IMPORT_PATH

PASSTHROUGH_KEYS = ("train.horovodrun_args", "train.elastic.discovery_script", "slurm.sbatch_args")
CODE_KEYS = ("train.model", "train.loss")  # a catalog or Keras name, or code to import and call: "file.py:function"
PREFECT_FILE = code_repository() / "prefect.yaml"  # the project's deployments (the checkout's when none)


def _value(params: dict[str, Any], key: str) -> Any:
    """A dotted key's value in dumped params (None where a section is absent)."""
    value: Any = params
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def names_code(value: Any) -> bool:
    """Whether a value of a CODE_KEYS parameter names code to import and call (not a catalog or Keras name)."""
    return isinstance(value, str) and IMPORT_PATH.fullmatch(value) is not None


def passthrough_overridden(overrides: dict[str, Any]) -> list[tuple[str, str]]:
    """The pass-through keys whose value `overrides` changes from params.yaml's, and the code keys it sets to code
    other than params.yaml's; each with why it is refused."""
    written, given = load_params().model_dump(), load_params(overrides).model_dump()
    commands = [(key, "it reaches a command line") for key in PASSTHROUGH_KEYS
                if _value(written, key) != _value(given, key)]
    code = [(key, "it names code to import and run") for key in CODE_KEYS
            if names_code(_value(given, key)) and _value(written, key) != _value(given, key)]
    return commands + code


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
        key, why = refused[0]
        raise ParamsError(f"{key}: not taken from a deployment run's overrides ({why}); set it in params.yaml, or "
                          f"give deployment {deployment} `allow_passthrough: true` in prefect.yaml")
