"""What every host connection offers the stages, and the pure parts of a remote command: the
`Runner` protocol (the real Connection and the unit tests' FakeConnection both satisfy it; a test
says so), a command's `Result`, its quoting and its bound on the host. No paramiko here.
"""
from __future__ import annotations

import secrets
import shlex
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Protocol, Sequence, runtime_checkable

DEFAULT = float("nan")      # "the connection's own command timeout" (a float, so type hints hold)
KILL_AFTER_S = 5            # after TERM, the host's `timeout` sends KILL
MAX_ANSWER = 16 << 20       # what `run` reads of a command's output before calling it not an answer


@dataclass(frozen=True)
class Result:
    status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.status == 0


def quote_command(command: str | Sequence[str]) -> str:
    """Every remote command goes through here: an argv list is joined with shlex.quote."""
    return command if isinstance(command, str) else shlex.join(str(part) for part in command)


FOREVER_S = 10 ** 8         # `timeout`'s bound for a command that has none of its own but an idle one


def bounded(command: str | Sequence[str], seconds: Optional[float], tag: Optional[str] = None) -> str:
    """The command under coreutils/busybox `timeout`, so the host ends it when the bound passes.
    With a tag, the command is findable on the host by it (`end_command`), to end it early."""
    argv = ["sh", "-c", command] if isinstance(command, str) else [str(part) for part in command]
    if tag is not None:
        argv = ["sh", "-c", '"$@"', tag, *argv]
    elif seconds is None:
        return quote_command(argv)
    return f"timeout -k {KILL_AFTER_S} {max(1, int(seconds if seconds is not None else FOREVER_S))} {quote_command(argv)}"


def new_tag() -> str:
    return f"tfcompose-cmd-{secrets.token_hex(8)}"


class TooLong(Exception):
    """A command's answer outgrew the bound set for it."""


def bounded_sink(buffer: bytearray, limit: int) -> Callable[[bytes], None]:
    """Collects output into `buffer`, refusing (TooLong) to hold more than `limit` bytes."""
    def take(chunk: bytes) -> None:
        if len(buffer) + len(chunk) > limit:
            raise TooLong()
        buffer.extend(chunk)
    return take


@runtime_checkable
class Runner(Protocol):
    """A connection to one host as the stages use it: run a command and wait, stream one, upload
    a small text file. `host` names the host (its `.name`); `command_timeout` is its default bound."""

    host: Any
    command_timeout: float
    bytes_sent: int

    def run(self, command: str | Sequence[str], check: bool = True, timeout: Optional[float] = DEFAULT,
            stdin: bytes | None = None, limit: int = MAX_ANSWER, idle_timeout: Optional[float] = None) -> Result: ...

    def stream(self, command: str | Sequence[str], on_output: Callable[[bytes], None],
               stdin_chunks: Optional[Iterable[bytes]] = None, check: bool = True, timeout: Optional[float] = None,
               idle_timeout: Optional[float] = DEFAULT, stop=None) -> Result: ...

    def put_text(self, text: str, remote: str, mode: int = 0o600) -> int: ...
