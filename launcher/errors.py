"""The launcher's errors, on the family shared with the trainer (trainer/spec/errors.py); the CLI turns
each into an exit code in one place.

Every error that involves a host carries the host, the command, its exit status and the tail of
its stderr in the message (after invoke's UnexpectedExit and pyinfra's exceptions).
"""
from __future__ import annotations

import shlex
from typing import Sequence

from launcher.text import one_line, printable
from trainer.spec.errors import BadInput, ExitCode, TfcError

__all__ = ["ExitCode", "TfcError", "BadInput", "InventoryError", "RemoteError", "HostKeyError", "ConnectError",
           "BadAnswer", "KeyFileError", "GroupError", "PreflightError", "ClusterFailed", "ImageError", "CalledOff", "summary"]

STDERR_TAIL_LINES = 8


class InventoryError(BadInput):
    """The inventory is wrong: one line per problem, each naming file:line:col and field."""


COMMAND_SHOWN = 240    # characters of a failed command shown (a long script is named by its first line)


def tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    return "\n".join(printable(text).strip().splitlines()[-lines:])


def command_text(command: str | Sequence[str] | None) -> str:
    """A command as a person reads it: one line, a script passed to `sh -c` named by its first line."""
    if command is None:
        return ""
    if not isinstance(command, str):
        parts = [str(p) for p in command]
        if len(parts) >= 3 and parts[:2] == ["sh", "-c"] and ("\n" in parts[2] or len(parts[2]) > 80):
            first = next((line.strip() for line in parts[2].splitlines() if line.strip() and not
                          line.strip().startswith("#")), "")
            parts[2] = f"<script: {first[:50]}…>"
        command = shlex.join(parts)
    return one_line(command, COMMAND_SHOWN)


class RemoteError(TfcError):
    """A command on a host failed (or could not be run)."""

    def __init__(self, host: str, command: str | Sequence[str] | None = None, status: int | None = None,
                 stderr: str = "", reason: str | None = None):
        self.host, self.command, self.status, self.stderr = host, command_text(command), status, stderr
        self.reason = reason or (f"exited with status {status}" if status is not None else "failed")
        message = f"{host}: {self.reason}"
        if self.command:
            message += f"\n  command: {self.command}"
        if stderr.strip():
            message += "\n  stderr: " + tail(stderr).replace("\n", "\n          ")
        super().__init__(message)

    @property
    def summary(self) -> str:
        """One line: the host, what went wrong, and the last thing it said on stderr."""
        said = tail(self.stderr, 1)
        return one_line(f"{self.host}: {self.reason}" + (f": {said}" if said else ""))


class CalledOff(RemoteError):
    """Work on a host called off because the launcher was interrupted; what runs after (removing
    temporary keys) waits for it, so the two never race."""

    def __init__(self, host: str):
        super().__init__(host, reason="called off: the launcher was interrupted")


class BadAnswer(RemoteError):
    """A host answered with something tfcompose does not write (broken or tampered with)."""


class ConnectError(RemoteError):
    """SSH could not connect or authenticate."""


class KeyFileError(ConnectError):
    """The identity file is not a key, or its passphrase does not open it: yours to fix."""

    exit_code = ExitCode.BAD_INPUT


class HostKeyError(RemoteError):
    """The host's key is unknown or changed: refused, with what to run instead."""

    exit_code = ExitCode.BAD_INPUT


class GroupError(TfcError):
    """A step failed on one or more hosts: carries every host's outcome (fabric's GroupException)."""

    def __init__(self, step: str, result):
        self.step, self.result = step, result
        lines = [f"{step} failed on {len(result.failed)} of {len(result.hosts)} host(s):"]
        lines += ["  " + str(err).replace("\n", "\n  ") for err in result.failed.values()]
        super().__init__("\n".join(lines))

    @property
    def summary(self) -> str:
        return one_line(f"{self.step} failed on " + "; ".join(summary(e) for e in self.result.failed.values()), 600)

    @property
    def exit_code(self):  # bad input anywhere (a refused host key) is the user's to fix
        codes = {getattr(e, "exit_code", ExitCode.FAILED) for e in self.result.failed.values()}
        return ExitCode.BAD_INPUT if codes == {ExitCode.BAD_INPUT} else ExitCode.FAILED


class PreflightError(GroupError):
    """One or more hosts are not ready: nothing was started anywhere."""


class ClusterFailed(TfcError):
    """The training job failed: names the host and the tail of its log."""


class ImageError(TfcError):
    """The image could not be built or inspected here."""


def summary(exc: BaseException) -> str:
    """Any error as one printable line that still says why (a host's, with its last stderr line)."""
    said = getattr(exc, "summary", None)
    if isinstance(said, str):
        return said
    return one_line(str(exc)) or type(exc).__name__
