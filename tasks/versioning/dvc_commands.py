"""Several DVC commands one after another in one process (DVC's own start is most of a small command's time):

python -m tasks.versioning.dvc_commands '[["commit", "--force", "prepare"], ["push", "prepare"]]'

Each runs as `dvc ARGS...` would; the first that fails stops the rest, and the exit status says which
(FIRST_FAILED + its index), its own message last on standard error.
"""
from __future__ import annotations

import json
import sys

FIRST_FAILED = 10  # the exit status of a failure of the first command; the next ones count on from it


def run_commands(commands: list[list[str]]) -> int:
    """0 when every command succeeded, else FIRST_FAILED + the index of the one that failed."""
    from dvc.cli import main
    for index, args in enumerate(commands):
        if main(args) != 0:
            return FIRST_FAILED + index
    return 0


if __name__ == "__main__":
    sys.exit(run_commands(json.loads(sys.argv[1])))
