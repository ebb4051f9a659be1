"""The connection's command bounds."""
from __future__ import annotations

import subprocess
from launcher.ssh.connection import bounded


def test_a_bounded_command_is_ended_by_the_hosts_timeout(tmp_path):
    # Run what the host would run, locally: the bound ends it and nothing of it is left.
    marker = tmp_path / "still-running"
    cmd = bounded(["sh", "-c", 'sleep 30; touch "$1"', "sh", str(marker)], 1)
    proc = subprocess.run(["sh", "-c", cmd], timeout=20)
    assert proc.returncode == 124 and not marker.exists()


class LateOutputChannel:
    """A paramiko channel as sshd under load drives it: the exit status arrives, then the last of
    the command's output, then EOF (sshd reaps the command before it has sent all its pipe held)."""

    def __init__(self, first: bytes, last: bytes, polls_before_last: int = 5):
        import threading
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
    from launcher.ssh.connection import Connection
    from support.builders import host
    conn = Connection(host("h0"), known_hosts=__file__)
    out = bytearray()
    status = conn._drain(LateOutputChannel(b"docker=ok\n", b"workdir=ok\nend=ok\n"), out.extend, bytearray(), None)
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
    from launcher.ssh.connection import Connection
    from support.builders import host
    conn = Connection(host("h0"), known_hosts=__file__)
    out = bytearray()
    status = conn._drain(DataWithEofChannel(b"first\n", b"last\n"), out.extend, bytearray(), None)
    assert status == 0 and bytes(out) == b"first\nlast\n"


class OldSession:
    """A paramiko client whose session ended (the host rebooted, a link dropped long enough)."""

    def __init__(self, active: bool):
        self.active, self.closed = active, False

    def get_transport(self):
        return type("Transport", (), {"is_active": lambda _: self.active})()

    def close(self):
        self.closed = True


def test_a_session_that_ended_is_opened_again_at_the_next_use_and_a_live_one_is_kept():
    # elastic.rejoin: a host lost by silence is looked at again; its old session must not answer
    # "SSH session not active" for ever once the host is back.
    from launcher.ssh.connection import Connection
    from support.builders import host
    conn = Connection(host("h0"), known_hosts=__file__)
    fresh = OldSession(active=True)
    conn._connect = lambda: fresh
    ended = conn._client = OldSession(active=False)
    assert conn.client is fresh and ended.closed
    assert conn.client is fresh and not fresh.closed


def test_every_held_command_hears_a_beat_until_the_connection_closes(monkeypatch):
    import threading
    import time
    from launcher.ssh import connection
    from support.builders import host
    monkeypatch.setattr(connection, "HOLD_BEAT_S", 0.05)
    conn = connection.Connection(host("h0"), known_hosts=__file__)
    heard = []
    held = type("Channel", (), {"sendall": lambda _, data: heard.append(data)})()
    conn._hold = lambda command, ready: held
    conn._off_the_main_thread = lambda fn: (conn._held.append(fn()), fn())[1]
    conn.hold("session", "held")
    time.sleep(0.3)
    assert heard[:3] == [b".", b".", b"."]
    conn._held = []                                       # what close() leaves
    time.sleep(0.2)
    count = len(heard)
    time.sleep(0.2)
    assert len(heard) == count and not any(t.name == "tfcompose-beat-h0" for t in threading.enumerate())
