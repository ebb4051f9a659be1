"""Push: a host's bundle is sent once; the link figure `up` measured does not make a new bundle."""
from __future__ import annotations

from launcher.ssh.connection import Result
from launcher.stages import push
from support.builders import host
from support.fakes import FakeConnection, OK


def host_keeping_files() -> FakeConnection:
    """A host whose folder keeps what was uploaded (`cat` of the hash file reads it back)."""
    conn = FakeConnection()
    conn.answer = lambda command: (Result(0, conn.uploads.get(command[1], ""), "") if command[0] == "cat" else OK)
    return conn


def test_a_bundle_is_sent_once_and_a_new_link_figure_alone_sends_nothing():
    h, conn = host("h0"), host_keeping_files()
    first = {"train.yaml": "allreduce: {auto: true, link_mbit_s: 94.1}\n", "compose.yaml": "services: {}\n"}
    identity = {"train.yaml": "allreduce: {auto: true, link_mbit_s: null}\n", "compose.yaml": "services: {}\n"}
    assert push.push_host(h, conn, first, identity) > 0
    assert conn.uploads["/opt/tfcompose/c/train.yaml"] == first["train.yaml"]
    remeasured = {**first, "train.yaml": "allreduce: {auto: true, link_mbit_s: 97.3}\n"}
    assert push.push_host(h, conn, remeasured, identity) == 0      # the run keeps the figure it started with
    assert conn.uploads["/opt/tfcompose/c/train.yaml"] == first["train.yaml"]
    changed = {**identity, "compose.yaml": "services: {x: {}}\n"}
    assert push.push_host(h, conn, {**remeasured, **{"compose.yaml": changed["compose.yaml"]}}, changed) > 0
    assert conn.uploads["/opt/tfcompose/c/train.yaml"] == remeasured["train.yaml"]   # a new run: the new figure
