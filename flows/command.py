"""`ringflow`: the pipeline's command, installed once and run in a project of the user's own (found from the current
directory up, as git finds its repository; `ringflow init` makes one). Each command acts on that project: its
params.yaml, data, outputs, runs and servers' state, as `make run` and the other targets act on the checkout.

  ringflow init [DIR]            a starter project in DIR (the current directory): params.yaml, a model, dvc.yaml,
                                 prefect.yaml, .gitignore, a README; git and DVC set up; nothing overwritten
  ringflow run [--set K=V ...]   the pipeline (prepare, version, train, evaluate, export, register)
  ringflow sweep [--set K=V ...] a hyperparameter sweep (sweep: in params.yaml)
  ringflow monitor [--end TIME]  the served predictions of the last window against the champion's reference (drift)
  ringflow serve-model           the registry's champion over HTTP (TensorFlow Serving's REST conventions)
  ringflow ui                    MLflow's UI on the project's runs
  ringflow services [up|down]    a team's servers (PostgreSQL, MLflow, Prefect, the pools and a worker)
  ringflow stop                  the local Prefect server a run started
  ringflow copy-runs --to URI    the project's runs and model versions into a team's server, each once
  ringflow stage NAME            one dvc.yaml stage (dvc repro runs these)
Each takes --help."""
from __future__ import annotations

import os
import sys
from importlib import import_module
from pathlib import Path
from typing import Callable

from tasks.project import WORKSPACE_ENV, ProjectError, find_project  # not tasks.paths: it reads the env at import

COMMANDS: dict[str, tuple[str, list[str]]] = {  # the command -> the module whose main() it is, words put first
    "run": ("flows.pipeline", []),
    "sweep": ("flows.sweep", []),
    "monitor": ("flows.monitor", []),
    "serve-model": ("servers.model.__main__", []),
    "ui": ("servers.ui", []),
    "services": ("servers.__main__", ["services"]),
    "stop": ("servers.local_prefect", ["stop"]),
    "copy-runs": ("tasks.__main__", ["copy-runs"]),
    "stage": ("tasks.__main__", []),
}


def enter_project(project: Path) -> None:
    """Every process of the command works in `project` (tasks/paths.py reads it), its Prefect state there too."""
    os.environ[WORKSPACE_ENV] = str(project)
    os.environ.setdefault("PREFECT_HOME", str(project / ".prefect"))


def command_main(name: str) -> Callable[[list[str]], int]:
    module, first_words = COMMANDS[name]
    main: Callable[[list[str]], int] = import_module(module).main
    return lambda words: main([*first_words, *words])


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    if not words or words[0] in ("-h", "--help", "help"):
        print(__doc__)
        return 0 if words else 2
    name, rest = words[0], words[1:]
    if name == "init":
        from tasks.project_init import main as init_main
        return init_main(rest)
    if name not in COMMANDS:
        print(f"error: unknown command {name!r}: {', '.join(['init', *COMMANDS])} (ringflow --help)", file=sys.stderr)
        return 2
    try:
        project = find_project(Path(os.environ.get(WORKSPACE_ENV) or Path.cwd()).resolve())
    except ProjectError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    enter_project(project)
    return command_main(name)(rest)


if __name__ == "__main__":
    sys.exit(main())
