"""`ringflow init [DIR]`: a starter project in DIR (the current directory), without overwriting anything: params.yaml
(every key, its default and what it does: tasks/params_file.py), a model of the user's own (models/model.py, which
params.yaml trains), dvc.yaml and prefect.yaml (ringflow's own, with its commands and flows as an installed ringflow
runs them), .gitignore and a README; `git init` and `dvc init` (with a remote in the project) where not done yet."""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tasks.params import Params
from tasks.params_file import render_params
from tasks.project import PARAMS_NAME, ProjectError, project_format

STARTER = Path(__file__).resolve().parent / "starter"  # with links to the checkout's dvc.yaml and prefect.yaml,
# stages.yaml and deployments.yaml (their content in an installed package; not named dvc.yaml: DVC would take it for
# a pipeline of the checkout's)
STARTER_MODEL = "models/model.py:build"
CODE_FOLDERS = ("flows", "servers", "tasks", "trainer")  # ringflow's own: a project's stages do not depend on them
GITIGNORE = "/mlruns/\n/outputs/\n/.dvc-remote/\n/.prefect/\n/.services/\n__pycache__/\n*.pyc\n"
DVC_REMOTE = ("local", ".dvc-remote")  # as the checkout's: the remote's folder in the project
DEPLOYMENTS_HEADER = """\
# Prefect deployments of this project's pipeline (written by `ringflow init`), on the pools `ringflow services` makes.
# Every run, on either pool, works in a clone of the commit deployed: `ringflow services` pushes this repository's
# HEAD to a bare one of its own (or RINGFLOW_REPOSITORY names one the workers reach) and deploys with RINGFLOW_COMMIT;
# a worker clones it and runs it with the ringflow installed beside the worker.
#   ringflow services        # then, in another shell:  . .services/client.env
#   prefect deployment run 'training-pipeline/train' --param epochs=3 --watch
"""
ENTER_STEP = ("    - flows.pull_steps.enter_project:\n"
              "        directory: \"{{ clone.directory }}\"\n")
HEADER = ("# This project's parameters: every `ringflow run` reads this file (`ringflow init` wrote it with ringflow's "
          "defaults).\n# Override one for a run with `ringflow run --set train.epochs=5`.\n")


def starter_params() -> str:
    """params.yaml of a new project: the defaults, training the project's own model file."""
    document = Params().model_dump(mode="json")
    document["train"]["model"] = STARTER_MODEL
    return render_params(document, HEADER)


def project_stages() -> str:
    """dvc.yaml of a project: ringflow's stages, each run by `ringflow stage NAME`, depending on the project's files
    only (ringflow's own code is the installed ringflow's)."""
    stages: dict[str, Any] = yaml.safe_load((STARTER / "stages.yaml").read_text())["stages"]
    for name, stage in stages.items():
        deps = [dep for dep in stage.pop("deps", []) if Path(dep).parts[0] not in CODE_FOLDERS]
        stages[name] = {"cmd": f"ringflow stage {name}", **({"deps": deps} if deps else {}),
                        **{key: value for key, value in stage.items() if key != "cmd"}}
    return "# `dvc repro` runs the pipeline's steps through `ringflow stage NAME` (written by `ringflow init`).\n" + \
        yaml.safe_dump({"stages": stages}, sort_keys=False)


def project_deployments() -> str:
    """prefect.yaml of a project: ringflow's deployments, their flows named as modules of the installed ringflow,
    each run in a clone of the project's commit (flows/pull_steps.py) on either pool."""
    text = (STARTER / "deployments.yaml").read_text()
    text = DEPLOYMENTS_HEADER + text[text.index("\nname: ") + 1:]
    text = re.sub(r"entrypoint: (\w+)/(\w+)\.py:", r"entrypoint: \1.\2:", text)
    checkout_steps = r"(?m)(^    - prefect\.deployments\.steps\.(run_shell_script|set_working_directory):\n(  +.*\n)+)+"
    text = re.sub(checkout_steps, ENTER_STEP, text)
    return re.sub(r"(\n    work_pool: \*local_pool\n)", r"\1    pull: *pull_the_commit\n", text)


def starter_files() -> dict[str, str]:
    """A new project's files, by path."""
    return {PARAMS_NAME: starter_params(), "models/model.py": (STARTER / "model.py").read_text(),
            "dvc.yaml": project_stages(), "prefect.yaml": project_deployments(), ".gitignore": GITIGNORE,
            "README.md": (STARTER / "README.md").read_text()}


def write_new(folder: Path, files: dict[str, str]) -> list[str]:
    """Each file that does not exist yet; the paths written."""
    written = []
    for name, text in files.items():
        path = folder / name
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(name)
    return written


def set_up_tools(folder: Path) -> list[str]:
    """git and DVC in the folder where they are not yet (DVC with its remote in the project); what was done."""
    done = []
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=folder, capture_output=True, text=True)
    if top.returncode != 0:
        subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
        done.append("git init")
    if not (folder / ".dvc").is_dir():
        dvc = str(Path(sys.executable).parent / "dvc")
        inside = top.returncode == 0 and Path(top.stdout.strip()).resolve() != folder  # a folder of a bigger repo
        subprocess.run([dvc, "init", "-q", *(["--subdir"] if inside else [])], cwd=folder, check=True)
        subprocess.run([dvc, "config", "core.analytics", "false"], cwd=folder, check=True)
        subprocess.run([dvc, "remote", "add", "-d", *DVC_REMOTE], cwd=folder, check=True, capture_output=True)
        done.append("dvc init (remote: .dvc-remote/)")
    return done


def init_project(folder: Path) -> str:
    """Make `folder` a ringflow project; what was done, in one line. Raises ProjectError for a folder that holds a
    params.yaml that is not ringflow's."""
    folder.mkdir(parents=True, exist_ok=True)
    params_file = folder / PARAMS_NAME
    if params_file.is_file() and project_format(params_file) is None:
        raise ProjectError(f"{params_file} exists and is not ringflow's: a ringflow project needs its own "
                           f"params.yaml (init it in another folder, or move that file away)")
    written = write_new(folder, starter_files())
    done = set_up_tools(folder)
    kept = sorted(set(starter_files()) - set(written))
    return (f"ringflow project in {folder}: wrote {', '.join(written) or 'nothing'}"
            + (f"; kept {', '.join(kept)}" if kept else "") + (f"; {', '.join(done)}" if done else "")
            + "; next: git add -A && git commit -m 'a ringflow project', then ringflow run")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ringflow init", description=__doc__)
    parser.add_argument("folder", nargs="?", type=Path, default=Path.cwd(), help="the project's folder (here)")
    args = parser.parse_args(argv)
    try:
        print(init_project(args.folder.resolve()))
    except (ProjectError, subprocess.CalledProcessError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0
