"""How a failure ends on the command line: one sentence, last, as `error: ...`; exit 2 for bad input (it fails the
same way every time until the input changes), 1 for a failure of the run.

An error says it is bad input through its class attribute `bad_input = True` (params, data, hosts, checkpoints to
resume), as a launch failure says whether it may pass next time through `retryable`.
"""
from __future__ import annotations

import re
import sys

BAD_INPUT_EXIT, FAILURE_EXIT, INTERRUPTED_EXIT = 2, 1, 130
# a process's line that names an error: a traceback's last line, a logged exception, a SystemExit
ERROR_LINE = re.compile(r"^\s*(\w+\.)*\w*(Error|Exception|Exit)\b.*|^\s*\w+Error:")
INTERRUPTED = "interrupted (Ctrl-C): the run stopped; its checkpoints are kept and --resume continues it"


def is_bad_input(error: BaseException | None) -> bool:
    """Whether the error says the input is wrong (running again cannot help)."""
    return bool(getattr(error, "bad_input", False))


def may_pass_on_retry(error: BaseException | None) -> bool:
    """Whether running a failed step again may pass: not after Ctrl-C, not bad input, not a failure that says it
    would repeat (an out-of-memory kill, a bug in a rank)."""
    from tasks.interrupt import interrupted
    return not interrupted() and not is_bad_input(error) and bool(getattr(error, "retryable", True))


def sentence(error: BaseException) -> str:
    """The error's first line (its type when it says nothing)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def report(error: BaseException) -> int:
    """Print `error: <sentence>` last on stderr; the exit status for it."""
    sys.stdout.flush()
    print(f"error: {sentence(error)}", file=sys.stderr, flush=True)
    return BAD_INPUT_EXIT if is_bad_input(error) else FAILURE_EXIT


def report_interrupt() -> int:
    """Ctrl-C: one line, last, instead of a traceback; the shell's exit status for it."""
    sys.stdout.flush()
    print(f"error: {INTERRUPTED}", file=sys.stderr, flush=True)
    return INTERRUPTED_EXIT
