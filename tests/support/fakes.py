"""The one fake transport of the unit tests (after fabric's testing/base.py and httpx's
_transports/mock.py): a connection that records every command and upload, and answers from a
function the test gives (command → Result)."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable, Optional

from launcher.errors import RemoteError
from launcher.ssh.connection import Result

OK = Result(0, "", "")


def prefix_answers(answers: dict[tuple, Result], default: Result = OK) -> Callable[[list], Result]:
    """Answer a command by the longest prefix of its argv found in `answers`."""
    def answer(command) -> Result:
        argv = tuple(command)
        for size in range(len(argv), 0, -1):
            if argv[:size] in answers:
                return answers[argv[:size]]
        return default
    return answer


class FakeConnection:
    """Records commands (`commands`), streamed input (`streams`) and uploads (`uploads`); `run`
    raises RemoteError like the real one when a checked command fails."""

    def __init__(self, answer: Callable[[list], Result] = lambda command: OK,
                 on_stream: Optional[Callable[[list, bytes], None]] = None, host: str = "h1",
                 output: Callable[[list], bytes] = lambda command: b""):
        self.answer, self.on_stream, self.host, self.output = answer, on_stream, SimpleNamespace(name=host), output
        self.commands: list = []
        self.stdin: list[bytes] = []           # what `run` was given on its stdin, command by command
        self.streams: list[tuple[list, bytes]] = []
        self.uploads: dict[str, str] = {}
        self.bytes_sent = 0
        self.command_timeout = 120.0

    def run(self, command, check: bool = True, stdin: Optional[bytes] = None, **kw) -> Result:
        self.commands.append(command)
        self.stdin.append(stdin or b"")
        result = self.answer(command)
        if check and not result.ok:
            raise RemoteError(self.host.name, str(command), result.status, result.stderr)
        return result

    def stream(self, command, on_output, stdin_chunks=(), check: bool = True, **kw) -> Result:
        self.commands.append(command)
        data = b""
        for chunk in stdin_chunks or ():
            data += chunk
            self.bytes_sent += len(chunk)
        self.streams.append((command, data))
        if self.on_stream:
            self.on_stream(command, data)
        said = self.output(command)        # what the command streams back, in chunks of up to 64 KB
        for start in range(0, len(said), 1 << 16):
            on_output(said[start:start + (1 << 16)])
        return OK

    def put_text(self, text: str, remote: str, mode: int = 0o600) -> int:
        self.uploads[remote] = text
        return len(text.encode())


class FakeGroup:
    """What a stage uses of a Group (launcher/ssh/group.py): the cluster, a reporter, and `run` of a
    step on every host at once through the real fan-out, each host on its own fake connection."""

    def __init__(self, cluster, conns: dict, reporter=None):
        import threading
        from launcher.reporter import RecordingReporter
        self.cluster, self.conns, self.reporter = cluster, conns, reporter or RecordingReporter()
        self.cancel = threading.Event()

    def __enter__(self) -> "FakeGroup":
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def conn(self, host):
        return self.conns[host.name]

    def run(self, step: str, fn, hosts=None):
        from launcher.ssh.fanout import fan_out
        return fan_out(self.cluster.hosts if hosts is None else hosts, step, lambda h: fn(h, self.conns[h.name]),
                       None, self.cancel)
