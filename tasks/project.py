"""A ringflow project: a folder of the user's own (their git repository) whose params.yaml is ringflow's, found from
the current directory up as git finds its repository. Everything a run makes lives in it (tasks/paths.py names the
places once RINGFLOW_WORKSPACE names the project).

A params.yaml is ringflow's when it has a `project:` section with the format it was written in (PROJECT_FORMAT); a
newer ringflow may write a higher one, which this one refuses rather than misread."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

PROJECT_FORMAT = 1  # the params.yaml, dvc.yaml and prefect.yaml this ringflow writes and reads
PARAMS_NAME = "params.yaml"
WORKSPACE_ENV = "RINGFLOW_WORKSPACE"  # the project every process of a run works in (tasks/paths.py reads it)


def ringflow_version() -> str:
    """The installed ringflow's version (the checkout's pyproject.toml before set-up installed it)."""
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("ringflow")
    except PackageNotFoundError:
        return "unknown"


class ProjectError(ValueError):
    """No ringflow project here, or one this ringflow cannot read; str() is one line saying what to do."""
    bad_input = True


def project_format(params_file: Path) -> int | None:
    """The project format a params.yaml declares; None when it is not ringflow's (no `project.format`)."""
    try:
        raw: Any = yaml.safe_load(params_file.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ProjectError(f"cannot read {params_file}: {error}".splitlines()[0]) from None
    section = raw.get("project") if isinstance(raw, dict) else None
    declared = section.get("format") if isinstance(section, dict) else None
    return declared if isinstance(declared, int) and not isinstance(declared, bool) else None


def find_project(start: Path) -> Path:
    """The nearest folder from `start` up whose params.yaml is ringflow's and of a format this ringflow reads."""
    foreign: Path | None = None
    for folder in (start, *start.parents):
        params_file = folder / PARAMS_NAME
        if not params_file.is_file():
            continue
        declared = project_format(params_file)
        if declared is None:
            foreign = foreign or params_file
            continue
        if declared > PROJECT_FORMAT:
            raise ProjectError(f"{params_file} was written by a newer ringflow (project format {declared}; this "
                               f"ringflow reads {PROJECT_FORMAT}): upgrade ringflow to run this project")
        return folder
    if foreign is not None:
        raise ProjectError(f"{foreign} is not ringflow's (it has no `project: format:` entry) and no folder above "
                           f"holds one: run `ringflow init` in a folder of its own to start a project")
    raise ProjectError(f"no ringflow project in {start} or any folder above it: `ringflow init` makes one")
