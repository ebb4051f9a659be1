"""Exit codes (one enum for the trainer and the launcher) and the trainer's exceptions."""
from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    FAILED = 1
    BAD_INPUT = 2
    INTERRUPTED = 130


class TrainerError(Exception):
    """Base of every error the trainer reports as one line; `exit_code` says how it ends."""

    exit_code = ExitCode.FAILED


class ConfigError(TrainerError):
    """Bad configuration, flags or TF_CONFIG: nothing was trained."""

    exit_code = ExitCode.BAD_INPUT

    def __init__(self, lines: list[str] | str):
        self.lines = [lines] if isinstance(lines, str) else list(lines)
        super().__init__("\n".join(self.lines))


class DataError(TrainerError):
    """The dataset is missing, empty or unreadable."""

    exit_code = ExitCode.BAD_INPUT


class ClusterError(TrainerError):
    """The cluster did not form, lost a peer, or lacks the devices it was promised."""
