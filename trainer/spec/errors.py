"""One error family and one exit-code enum for the trainer and the launcher.

The trainer runs inside the image without the launcher, so the family lives here; the launcher's
errors (launcher/errors.py) derive from it. Every front end (the CLI, `python -m trainer`) maps
an error to its exit code in one place: `exit_code`.
"""
from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    FAILED = 1
    BAD_INPUT = 2
    INTERRUPTED = 130


class TfcError(Exception):
    """Base of every error tfcompose reports to the user without a traceback."""

    exit_code = ExitCode.FAILED


class BadInput(TfcError):
    """Bad input: one line per problem, each naming the file (and line), the field and what was
    expected. Nothing was started."""

    exit_code = ExitCode.BAD_INPUT

    def __init__(self, lines: list[str] | str):
        self.lines = [lines] if isinstance(lines, str) else list(lines)
        super().__init__("\n".join(self.lines))


class ConfigError(BadInput):
    """Bad trainer configuration, flags or TF_CONFIG: nothing was trained."""


class DataError(BadInput):
    """The dataset is missing, empty or unreadable."""


class ClusterError(TfcError):
    """The cluster did not form, lost a peer, or lacks the devices it was promised."""


def one_line(exc: BaseException) -> str:
    """One line on why something failed (a trial, for its record and the log): its kind and the
    first line of its message."""
    first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
