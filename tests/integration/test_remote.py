"""The SSH transport against real OpenSSH servers: commands, files, host keys, failures."""
from __future__ import annotations

import signal
import socket
import threading
import time

import pytest

from support.common import free_ports
from launcher.inventory.load import load_cluster
from launcher.errors import CalledOff, ConnectError, ExitCode, HostKeyError, KeyFileError, RemoteError
from launcher.ssh import group
from launcher.ssh.group import Group
from launcher.ssh.explain import PASSPHRASE_ENV
from support.sshd import keygen, write_inventory

pytestmark = pytest.mark.integration


def connect(farm, tmp_path, host, **kw):
    path = write_inventory(farm, tmp_path / "inv.yaml", "t", [host], **kw)
    cluster = load_cluster(path)
    return group.connect(cluster, cluster.hosts[0])


@pytest.fixture
def one_host(sshd_farm):
    port, tf = free_ports(2)
    host = sshd_farm.start("h1", port, tf)
    sshd_farm.known_hosts()
    return host


def test_run_put_get_and_quoting(sshd_farm, one_host, tmp_path):
    with connect(sshd_farm, tmp_path, one_host) as conn:
        result = conn.run(["printf", "%s|", "a b", "$(id)", "x;y"])
        assert result.ok and result.stdout == "a b|$(id)|x;y|"  # quoted: nothing expanded or split
        target = f"{one_host.workdir}/file.txt"
        conn.put_text("hello\n", target)
        assert (one_host.workdir / "file.txt").read_text() == "hello\n"
        assert not (one_host.workdir / "file.txt.tfc-tmp").exists()
        assert (one_host.workdir / "file.txt").stat().st_mode & 0o777 == 0o600  # may hold run.env values
        conn.get(target, tmp_path / "back.txt")
        assert (tmp_path / "back.txt").read_text() == "hello\n"
        assert conn.run("exit 3", check=False).status == 3


def test_what_a_command_writes_after_sshd_sent_its_exit_status_is_read_too(sshd_farm, one_host, tmp_path):
    # sshd sends the exit status when it reaps the command, and what is still in the pipe after:
    # under load a preflight probe's answer was cut after its first lines ("workdir … is not
    # writable") and a dataset look's after `kind=marked` (a marker "tfcompose did not write").
    # Here the shell exits at once and its last line comes later, from a child holding the pipe.
    with connect(sshd_farm, tmp_path, one_host) as conn:
        for _ in range(3):
            result = conn.run(["sh", "-c", "echo first; (sleep 0.5; echo last) & exit 0"])
            assert (result.status, result.stdout) == (0, "first\nlast\n")


def test_commands_are_not_held_back_by_nagle(sshd_farm, one_host, tmp_path):
    """TCP_NODELAY on the SSH socket: a short command's reply is not delayed ~40 ms (bench/fanout.py)."""
    import socket
    with connect(sshd_farm, tmp_path, one_host) as conn:
        assert conn.run(["echo", "ok"]).stdout == "ok\n"
        sock = conn.client.get_transport().sock
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_failed_command_error_carries_host_command_status_and_stderr_tail(sshd_farm, one_host, tmp_path):
    with connect(sshd_farm, tmp_path, one_host) as conn:
        with pytest.raises(RemoteError) as err:
            conn.run(["sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do echo line$i >&2; done; exit 4"])
    message = str(err.value)
    assert message.startswith("h1: exited with status 4")
    assert "command: sh -c 'for i in" in message
    assert "line10" in message and "line2\n" not in message  # only the tail
    assert err.value.status == 4 and err.value.host == "h1"


def test_strict_refuses_an_unknown_key_and_says_what_to_run(sshd_farm, one_host, tmp_path):
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    with pytest.raises(HostKeyError) as err:
        connect(sshd_farm, tmp_path, one_host, known_hosts=empty).run("true")
    message = str(err.value)
    assert message.startswith("h1: host key ssh-ed25519 SHA256:")
    assert f"ssh-keyscan -p {one_host.port} 127.0.0.1 >> {empty}" in message and "accept-new" in message
    assert err.value.exit_code == ExitCode.BAD_INPUT
    assert empty.read_text() == ""  # nothing silently added


def test_accept_new_records_an_unknown_key_once(sshd_farm, one_host, tmp_path):
    known = tmp_path / "fresh_known_hosts"
    with connect(sshd_farm, tmp_path, one_host, known_hosts=known, policy="accept-new") as conn:
        assert conn.run("echo ok").stdout == "ok\n"
    assert known.read_text() == one_host.known_hosts_line()
    with connect(sshd_farm, tmp_path, one_host, known_hosts=known, policy="strict") as conn:  # now known
        assert conn.run("true").ok
    assert known.read_text() == one_host.known_hosts_line()  # recorded once


def test_a_changed_key_is_refused_even_with_accept_new(sshd_farm, one_host, tmp_path):
    other = keygen(tmp_path / "other_host_key")
    kind, b64 = other.with_suffix(".pub").read_text().split()[:2]
    known = tmp_path / "stale_known_hosts"
    known.write_text(f"[127.0.0.1]:{one_host.port} {kind} {b64}\n")
    for policy in ("strict", "accept-new"):
        with pytest.raises(HostKeyError) as err:
            connect(sshd_farm, tmp_path, one_host, known_hosts=known, policy=policy).run("true")
        assert "CHANGED" in str(err.value) and f"ssh-keygen -R '[127.0.0.1]:{one_host.port}'" in str(err.value)
    assert known.read_text() == f"[127.0.0.1]:{one_host.port} {kind} {b64}\n"


def test_closed_port_fails_within_the_timeout(sshd_farm, one_host, tmp_path):
    (closed,) = free_ports(1)
    one_host.port, real = closed, one_host.port
    started = time.monotonic()
    with pytest.raises(ConnectError) as err:
        connect(sshd_farm, tmp_path, one_host).run("true")
    assert f"127.0.0.1:{closed}: cannot connect (connection refused)" in str(err.value)
    assert time.monotonic() - started < 30
    one_host.port = real


def test_passphrase_protected_key_from_the_environment(sshd_farm, one_host, tmp_path, monkeypatch):
    locked = keygen(tmp_path / "id_locked", passphrase="correct horse")
    sshd_farm.authorize(locked.with_suffix(".pub"))
    monkeypatch.delenv(PASSPHRASE_ENV, raising=False)
    with pytest.raises(ConnectError) as err:
        connect(sshd_farm, tmp_path, one_host, identity_file=locked).run("true")
    assert PASSPHRASE_ENV in str(err.value)
    monkeypatch.setenv(PASSPHRASE_ENV, "wrong horse")
    with pytest.raises(KeyFileError) as err:
        connect(sshd_farm, tmp_path, one_host, identity_file=locked).run("true")
    assert f"does not open the private key {locked}" in str(err.value) and err.value.exit_code == ExitCode.BAD_INPUT
    monkeypatch.setenv(PASSPHRASE_ENV, "correct horse")
    with connect(sshd_farm, tmp_path, one_host, identity_file=locked) as conn:
        assert conn.run("echo in").stdout == "in\n"


def test_an_identity_file_that_is_no_key_is_named(sshd_farm, one_host, tmp_path):
    not_a_key = tmp_path / "passwd"
    not_a_key.write_text("root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(KeyFileError) as err:
        connect(sshd_farm, tmp_path, one_host, identity_file=not_a_key).run("true")
    assert f"identity_file {not_a_key}: not a private key" in str(err.value)


def test_a_port_where_no_ssh_server_speaks_is_said_as_such_without_retrying(sshd_farm, one_host, tmp_path):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)                        # accepts, never says a word
    one_host.port, real = silent.getsockname()[1], one_host.port
    started = time.monotonic()
    try:
        with pytest.raises(ConnectError) as err:
            connect(sshd_farm, tmp_path, one_host, ssh={"connect_timeout_s": 2}).run("true")
    finally:
        one_host.port = real
        silent.close()
    assert "no SSH banner within 2 s" in str(err.value) and "No existing session" not in str(err.value)
    assert time.monotonic() - started < 10      # one attempt, not three


def test_a_command_past_its_bound_is_ended_on_the_host(sshd_farm, one_host, tmp_path):
    import time
    marker = one_host.workdir / "still-running"
    with connect(sshd_farm, tmp_path, one_host) as conn:
        started = time.monotonic()
        with pytest.raises(RemoteError, match="timed out after 2 s"):
            conn.run(["sh", "-c", 'sleep 4.5; touch "$1"', "sh", str(marker)], timeout=2)
        assert time.monotonic() - started < 10
    time.sleep(3)
    assert not marker.exists()  # the host's `timeout` ended it: it never got to write


def test_ctrl_c_calls_off_the_hosts_work_a_short_step_ends_first_and_the_clean_up_after_runs(sshd_farm, tmp_path):
    # h1 is in the middle of a short step (a mkdir a second away) and has another to do; h2 is sending
    # an upload that would never end. Ctrl-C comes while both are at it.
    h1, h2 = (sshd_farm.start(name, *free_ports(2)) for name in ("h1", "h2"))
    sshd_farm.known_hosts()
    cluster = load_cluster(write_inventory(sshd_farm, tmp_path / "inv.yaml", "t", [h1, h2]))
    streaming, outcome = threading.Event(), {}

    def endless():
        while True:
            streaming.set()
            yield b"x" * 65536

    def step(host, conn):
        if host.name == "h2":
            with pytest.raises(CalledOff):
                conn.stream(["sh", "-c", "cat > /dev/null"], on_output=lambda _: None, stdin_chunks=endless())
            outcome["h2"] = "called off"
            return
        conn.run(["true"])
        streaming.wait(30)
        threading.Timer(0.3, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()
        conn.run(["sh", "-c", 'sleep 1; mkdir "$1"', "sh", str(h1.workdir / "first")])
        outcome["h1"] = "first step done"
        conn.run(["mkdir", str(h1.workdir / "second")])

    with Group(cluster) as group:
        with pytest.raises(KeyboardInterrupt):
            group.run("step", step)
        after_interrupt = dict(outcome), (h1.workdir / "first").exists()
        assert group.conn(cluster.hosts[0]).run(["echo", "clean-up"]).stdout == "clean-up\n"
    assert after_interrupt == ({"h1": "first step done", "h2": "called off"}, True)
    assert not (h1.workdir / "second").exists()     # a step not begun is not begun after the interrupt


def test_ctrl_c_during_an_upload_from_the_main_thread_to_a_host_that_stopped_reading(sshd_farm, one_host, tmp_path):
    # As the relay sends its first hop from the main thread: Ctrl-C lands while the host's window
    # is full. The upload is called off (not left to its 60 s idle bound), no paramiko lock is left
    # held by the interrupt, and the same connection runs the clean-up after it.
    def endless():
        while True:
            yield b"x" * 65536

    with connect(sshd_farm, tmp_path, one_host) as conn:
        timer = threading.Timer(2.0, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
        timer.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            conn.stream(["sleep", "300"], on_output=lambda _: None, stdin_chunks=endless(), idle_timeout=60)
        assert time.monotonic() - started < 30
        assert conn.run(["echo", "clean-up"]).stdout == "clean-up\n"
