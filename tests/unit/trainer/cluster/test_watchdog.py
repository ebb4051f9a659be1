"""trainer/cluster/watchdog.py: probing a peer's address, and a worker leaving only after its chief."""
import socket
import threading
import time

from trainer.cluster.watchdog import probe, verdict, wait_until_gone


def listening_socket() -> tuple[socket.socket, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock, f"127.0.0.1:{sock.getsockname()[1]}"


def test_a_worker_waits_while_its_chief_still_listens_and_leaves_once_it_stopped():
    sock, address = listening_socket()
    threading.Timer(0.6, sock.close).start()
    started = time.monotonic()
    assert wait_until_gone(address, limit_s=10, every_s=0.05)
    assert 0.5 < time.monotonic() - started < 5


def test_a_chief_that_lingers_is_waited_for_only_as_long_as_the_bound():
    sock, address = listening_socket()
    try:
        started = time.monotonic()
        assert not wait_until_gone(address, limit_s=0.3, every_s=0.05)
        assert time.monotonic() - started < 3
    finally:
        sock.close()


def test_the_verdict_names_the_peer_that_never_joined_and_why():
    sock, address = listening_socket()
    sock.close()
    assert probe(address) != "listening"
    line = verdict("worker:0", 5, [("worker:1", address)])
    assert "never joined: worker:1 at " + address in line and "within 5 s" in line
