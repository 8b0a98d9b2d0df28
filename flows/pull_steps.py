"""A pull step of a project's deployments (prefect.yaml): the flow run works in the clone of the project's commit
that the step before it made. Prefect runs pull steps in the flow run's own process before it loads the flow, so the
workspace named here is the one every later import of tasks/paths.py, and every process the run starts, sees."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from tasks.project import WORKSPACE_ENV, find_project


def enter_project(directory: str) -> dict[str, str]:
    """Work in the project at `directory` (a clone: its params.yaml must be ringflow's, else ProjectError, one
    line): its folder the current one and RINGFLOW_WORKSPACE, over the worker's own workspace."""
    if "tasks.paths" in sys.modules:
        raise RuntimeError("enter_project ran after tasks/paths.py was imported: the workspace is fixed already")
    project = find_project(Path(directory).resolve())
    os.chdir(project)
    os.environ[WORKSPACE_ENV] = str(project)
    return {"directory": str(project)}
