"""The launch's bad-input error, raised by every check before a launch."""
from __future__ import annotations


class PreflightError(RuntimeError):
    """A launch would fail; the message says why in one line."""
    bad_input = True
