"""ringflow installed as a user installs it: a wheel built from the checkout (the package's files only, no editable
link back) installed by pip into a Python environment of its own that holds the pinned stack. The stack is the
checkout's .venv's, named by a .pth file (installing 3 GB again would be the test's whole cost), and its programs
(prefect, mlflow, ...) are written into the environment's bin/ as pip writes them: scripts on its own Python."""
from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

from tasks.project_init import CODE_FOLDERS
from tests.helpers import BIN, ROOT, quiet_env, run


def built_wheel(folder: Path) -> Path:
    """A wheel of the checkout's committed and untracked (not ignored) package files, built in `folder`."""
    source = folder / "source"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z", "pyproject.toml", *CODE_FOLDERS],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    built = run([str(BIN / "python"), "-m", "pip", "--disable-pip-version-check", "-q", "wheel", "--no-deps",
                 "--no-build-isolation", "-w", str(folder / "wheels"), str(source)], folder, quiet_env())
    assert built.returncode == 0, built.stderr
    (wheel,) = (folder / "wheels").glob("ringflow-*.whl")
    return wheel


def stack_programs(environment: Path) -> None:
    """The .venv's console scripts (prefect, mlflow, dvc, horovodrun...), each on the environment's Python."""
    for program in (BIN).iterdir():
        target = environment / "bin" / program.name
        if target.exists() or program.is_symlink() or not program.is_file():
            continue
        with program.open("rb") as file:
            first = file.readline()
        if first.startswith(b"#!") and b"python" in first:
            target.write_bytes(f"#!{environment / 'bin' / 'python'}\n".encode() + program.read_bytes()[len(first):])
            target.chmod(0o755)


def installed_ringflow(folder: Path) -> Path:
    """The bin/ of a Python environment made in `folder` with ringflow's wheel installed by pip (`ringflow` there)."""
    environment = folder / "environment"
    made = run([str(BIN / "python"), "-m", "venv", "--without-pip", str(environment)], folder, quiet_env())
    assert made.returncode == 0, made.stderr
    site_packages = sysconfig.get_paths(vars={"base": str(environment), "platbase": str(environment)})["purelib"]
    (Path(site_packages) / "ringflow-stack.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = run([str(BIN / "python"), "-m", "pip", "--disable-pip-version-check", "-q", "--python",
                     str(environment / "bin" / "python"), "install", "--no-deps", str(built_wheel(folder))],
                    folder, quiet_env())
    assert installed.returncode == 0, installed.stderr
    stack_programs(environment)
    os.chmod(folder, 0o755)
    return environment / "bin"
