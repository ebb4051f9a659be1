"""A host's side of the trial queue (trainer/search/queue_client.py): it gives up in bounded time on
a chief it cannot reach, and takes no answer the chief did not sign."""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from support.common import free_ports
from trainer.search.queue import CALL_TIMEOUT_S
from trainer.search.queue_client import Client
from trainer.search.wire import host_key
from trainer.spec.errors import ClusterError

RUN_KEY = bytes(range(32))


def test_a_host_that_cannot_reach_the_chief_gives_up_after_its_patience():
    started = time.monotonic()
    with pytest.raises(ClusterError, match="did not answer for 2 s"):
        Client(f"127.0.0.1:{free_ports(1)[0]}", "h1", host_key(RUN_KEY, "h1"), patience_s=2).ask(1, 0)
    assert time.monotonic() - started < 2 + CALL_TIMEOUT_S


def test_an_answer_the_chief_did_not_sign_is_not_taken(tmp_path):
    """A machine between a host and the chief cannot make up answers (prune this, take that trial)."""
    port = free_ports(1)[0]
    listener = socket.create_server(("127.0.0.1", port))

    def impostor():
        conn, _ = listener.accept()
        conn.recv(65536)
        body = json.dumps({"trial": {"name": "evil", "candidate": "small_cnn", "learning_rate": 9.0,
                                     "batch_per_replica": 1}}).encode()
        conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        conn.close()
        listener.close()             # then gone: the client's retries are refused, not held for a call's timeout

    threading.Thread(target=impostor, daemon=True).start()
    try:
        with pytest.raises(ClusterError, match="did not answer"):
            Client(f"127.0.0.1:{port}", "h1", host_key(RUN_KEY, "h1"), patience_s=0.5).ask(1, 0)
    finally:
        listener.close()
