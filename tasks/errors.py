"""How a failure ends on the command line: one sentence, last, as `error: ...`; exit 2 for bad input (it fails the
same way every time until the input changes), 1 for a failure of the run."""
from __future__ import annotations

import sys

BAD_INPUT_EXIT, FAILURE_EXIT = 2, 1


def bad_input_types() -> tuple[type[BaseException], ...]:
    """Errors that say the input (params, data, hosts, checkpoints to resume) is wrong."""
    from tasks.data.source_data import SourceError
    from tasks.data.validate import DataInvalid
    from tasks.launch.preflight import PreflightError
    from tasks.params import ParamsError
    from trainer.checkpoint_files import CheckpointMismatch
    return ParamsError, PreflightError, SourceError, DataInvalid, CheckpointMismatch


def is_bad_input(error: BaseException) -> bool:
    return isinstance(error, bad_input_types())


def sentence(error: BaseException) -> str:
    """The error's first line (its type when it says nothing)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def report(error: BaseException) -> int:
    """Print `error: <sentence>` last on stderr; the exit status for it."""
    sys.stdout.flush()
    print(f"error: {sentence(error)}", file=sys.stderr, flush=True)
    return BAD_INPUT_EXIT if is_bad_input(error) else FAILURE_EXIT
