"""launcher/ssh/channel.py: a command's channel read to its end, also when sshd sends the exit
status before the last of the output."""
from __future__ import annotations

import threading

from launcher.ssh.channel import drain


class LateOutputChannel:
    """A paramiko channel as sshd under load drives it: the exit status arrives, then the last of
    the command's output, then EOF (sshd reaps the command before it has sent all its pipe held)."""

    def __init__(self, first: bytes, last: bytes, polls_before_last: int = 5):
        self.chunks, self.late, self.polls = [first], last, polls_before_last
        self.eof_received, self.closed = False, False
        self.status_event = threading.Event()

    def _tick(self) -> None:
        self.polls -= 1
        if self.polls == 0:
            self.chunks.append(self.late)
            self.eof_received = True

    def recv_ready(self) -> bool:
        return bool(self.chunks)

    def recv(self, n: int) -> bytes:
        return self.chunks.pop(0)

    def recv_stderr_ready(self) -> bool:
        return False

    def exit_status_ready(self) -> bool:
        self._tick()
        return True

    def recv_exit_status(self) -> int:
        return 0

    def close(self) -> None:
        self.closed = True


def test_the_output_that_comes_after_the_exit_status_is_read_to_its_end():
    # Under load, a preflight probe's answer was cut after its first lines (read as "workdir … is
    # not writable"), and a dataset look's after `kind=marked` (read as a marker tfcompose did not write).
    out = bytearray()
    channel = LateOutputChannel(b"docker=ok\n", b"workdir=ok\nend=ok\n")
    status = drain(channel, out.extend, bytearray(), None, threading.Event(), "h0")
    assert status == 0 and bytes(out) == b"docker=ok\nworkdir=ok\nend=ok\n"


class DataWithEofChannel(LateOutputChannel):
    """The last of the output and EOF arrive together, between the look at the buffers and the
    look at EOF (the window that a loaded machine widens): the EOF must not hide that last data."""

    def __init__(self, first: bytes, last: bytes):
        super().__init__(first, last, polls_before_last=-1)
        self._eof = False

    @property
    def eof_received(self) -> bool:
        if not self._eof and not self.chunks:
            self.chunks.append(self.late)
            self._eof = True
        return self._eof

    @eof_received.setter
    def eof_received(self, value: bool) -> None:
        self._eof = value


def test_output_that_arrives_with_the_eof_is_read_too():
    out = bytearray()
    status = drain(DataWithEofChannel(b"first\n", b"last\n"), out.extend, bytearray(), None, threading.Event(), "h0")
    assert status == 0 and bytes(out) == b"first\nlast\n"
