"""The bastions' pool without an SSH server: a failed hop is named with its place on the way,
said once to every host behind it, bounded in time, and a host waiting for it hears Ctrl-C.
(Through real OpenSSH servers: tests/integration/test_jump_hosts.py and test_jump_lab.py.)"""
from __future__ import annotations

import socket
import threading
import time

import paramiko
import pytest

from launcher.errors import CalledOff, ConnectError, ExitCode, KeyFileError
from launcher.inventory.model import Bastion
from launcher.ssh.jump import Bastions, channel_why, keyscan_via
from support.builders import host
from support.common import free_ports


def gate(port: int) -> Bastion:
    return Bastion("gate", "127.0.0.1", "jump", port)


class Listener:
    """A TCP server that takes connections and then closes each at once (`close`), or says `banner`
    and no more."""

    def __init__(self, close: bool, banner: bytes = b""):
        self.server, self.close, self.taken, self.held = socket.create_server(("127.0.0.1", 0)), close, 0, []
        self.banner = banner
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.taken += 1
            conn.sendall(self.banner)
            conn.close() if self.close else self.held.append(conn)

    def stop(self) -> None:
        self.server.close()
        for conn in self.held:
            conn.close()


def test_a_bastion_that_refuses_is_named_as_the_first_hop(tmp_path):
    (port,) = free_ports(1)
    with Bastions(tmp_path / "known_hosts", retries=0) as jumps:
        with pytest.raises(ConnectError) as err:
            jumps.reach(host("h1", jumps=(gate(port),)))
    assert str(err.value) == f"h1: cannot reach bastion jump@127.0.0.1:{port} (hop 1 of 2): connection refused"


def test_a_failed_bastion_fails_every_host_behind_it_at_once_each_with_its_own_place_on_the_way(tmp_path):
    listener = Listener(close=True)
    inner = Bastion("inner", "10.0.0.2", "ops", 22)
    try:
        with Bastions(tmp_path / "known_hosts") as jumps:
            errors = []
            for h in (host("h1", jumps=(gate(listener.port),)), host("h2", 1, jumps=(gate(listener.port), inner))):
                with pytest.raises(ConnectError) as err:
                    jumps.reach(h)
                errors.append(str(err.value))
    finally:
        listener.stop()
    said = f"bastion jump@127.0.0.1:{listener.port} (hop 1 of {{}}): closed before saying anything (is an SSH " \
           f"server listening on port {listener.port}?)"
    assert errors == ["h1: " + said.format(2), "h2: " + said.format(3)]
    assert listener.taken == 1           # h2 was told what h1 found, without trying again


def test_a_silent_bastion_is_bounded_by_the_connect_timeout_and_a_host_waiting_for_it_hears_ctrl_c(tmp_path):
    listener = Listener(close=False)
    cancel, outcome = threading.Event(), {}

    def reach(name: str, jumps: Bastions) -> None:
        started = time.monotonic()
        try:
            jumps.reach(host(name, jumps=(gate(listener.port),)))
        except (ConnectError, CalledOff) as exc:
            outcome[name] = (type(exc).__name__, str(exc), time.monotonic() - started)

    try:
        with Bastions(tmp_path / "known_hosts", connect_timeout=2, cancel=cancel) as jumps:
            first = threading.Thread(target=reach, args=("h1", jumps))
            first.start()
            time.sleep(0.3)                                   # h1 is opening the bastion, h2 waits for it
            second = threading.Thread(target=reach, args=("h2", jumps))
            second.start()
            time.sleep(0.3)
            cancel.set()                                      # Ctrl-C: the hosts' work is called off
            second.join(5)
            first.join(5)
    finally:
        listener.stop()
    assert outcome["h2"][:2] == ("CalledOff", "h2: called off: the launcher was interrupted")
    assert outcome["h2"][2] < 1.0                              # heard within a poll, not after h1's wait
    assert outcome["h1"][:2] == ("ConnectError", f"h1: bastion jump@127.0.0.1:{listener.port} (hop 1 of 2): no SSH "
                                 f"banner within 2 s (is an SSH server listening on port {listener.port}?)")
    assert outcome["h1"][2] < 4.0


def test_a_bastion_key_file_that_is_no_key_is_named_with_its_hop_and_is_yours_to_fix(tmp_path):
    listener = Listener(close=False, banner=b"SSH-2.0-OpenSSH_9.2\r\n")
    (tmp_path / "id_gate").write_text("not a key\n")
    bastion = Bastion("gate", "127.0.0.1", "jump", listener.port, identity_file=tmp_path / "id_gate")
    try:
        with Bastions(tmp_path / "known_hosts", retries=0) as jumps:
            with pytest.raises(KeyFileError) as err:
                jumps.reach(host("h1", jumps=(bastion,)))
    finally:
        listener.stop()
    assert str(err.value).startswith(f"h1: bastion jump@127.0.0.1:{listener.port} (hop 1 of 2): identity_file "
                                     f"{tmp_path}/id_gate: not a private key")
    assert err.value.exit_code == ExitCode.BAD_INPUT


@pytest.mark.parametrize("exc, words", [
    (paramiko.ChannelException(1, "Administratively prohibited"), "AllowTcpForwarding"),
    (paramiko.ChannelException(2, "Connect failed"), "the bastion's connection to it failed"),
    (paramiko.SSHException("Timeout opening channel."), "no answer within 3 s"),
    (EOFError(), "EOFError"),
])
def test_why_a_channel_did_not_open_is_said_in_words(exc, words):
    assert words in channel_why(exc, 3)


def test_a_host_key_behind_bastions_is_scanned_from_the_last_of_them():
    chain = (Bastion("a", "10.0.0.1", "jump", 22), Bastion("b", "10.0.0.2", "ops", 2200))
    assert keyscan_via(chain) == "ssh -J jump@10.0.0.1:22 -p 2200 ops@10.0.0.2"
    assert keyscan_via(chain[:1]) == "ssh jump@10.0.0.1" and keyscan_via(()) is None
