"""The connection's command bounds, its session opened again once ended, and its held commands' beat."""
from __future__ import annotations

import subprocess
from launcher.ssh.connection import bounded


def test_a_bounded_command_is_ended_by_the_hosts_timeout(tmp_path):
    # Run what the host would run, locally: the bound ends it and nothing of it is left.
    marker = tmp_path / "still-running"
    cmd = bounded(["sh", "-c", 'sleep 30; touch "$1"', "sh", str(marker)], 1)
    proc = subprocess.run(["sh", "-c", cmd], timeout=20)
    assert proc.returncode == 124 and not marker.exists()


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
