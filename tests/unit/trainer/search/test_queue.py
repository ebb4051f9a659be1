"""The trial queue's transport (trainer/search/queue.py) through a real HTTP server and client on loopback:
hosts pull trials from the chief's study, a silent host's trial goes to another, a host that cannot
reach the chief gives up in bounded time, and only the cluster's hosts — each for itself — are heard."""
from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request

import pytest

from support.common import free_ports
from trainer.search import queue as q, queue_client, wire
from trainer.spec.config import TrainConfig
from trainer.search.coordinator import Coordinator
from trainer.spec.errors import ClusterError
from trainer.search.study import Study
from trainer.search.wire import Done, Offer

RUN_KEY = bytes(range(32))
# h1 calls from 127.0.0.1, h2 from 127.0.0.2 (both this machine's loopback)
ADDRESSES = {"h1": "127.0.0.1", "h2": "127.0.0.2"}


def free_port() -> int:
    return free_ports(1)[0]


@pytest.fixture
def served(tmp_path):
    cfg = TrainConfig.model_validate({"candidates": ["small_cnn"], "epochs": 3,
                                      "search": {"mode": "parallel", "learning_rates": [0.1, 0.01, 0.001]}})
    said = []
    coordinator = Coordinator(Study(cfg, tmp_path), lost_after_s=1.0, log=said.append, hosts=["h1", "h2"], classes=2)
    coordinator.said = said
    port = free_port()
    server, stopped = q.serve(coordinator, wire.Gate(RUN_KEY, wire.resolve(ADDRESSES)), port, bind="0.0.0.0")
    yield coordinator, port
    q.stop(server, stopped)


def client(port: int, host: str = "h1", patience_s: float = 5) -> queue_client.Client:
    return queue_client.Client(f"127.0.0.1:{port}", host, wire.host_key(RUN_KEY, host), patience_s=patience_s)


def figures() -> dict:
    return {"val_accuracy": 0.5, "val_loss": 0.5, "train_seconds": 1.0, "images_per_second": 10.0,
            "params": 100, "epochs": 2}


def signed_post(port: int, verb: str, host: str, key: bytes, doc: dict, source: str = "127.0.0.1",
                stamp: wire.Stamp | None = None) -> tuple[int, dict]:
    """A call as a host (or an impostor) sends it, from `source`."""
    body = json.dumps(doc).encode()
    stamp = stamp or wire.sign_call(key, verb, host, body)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=(source, 0))
    try:
        conn.request("POST", f"/{verb}", body=body, headers={"Content-Type": "application/json", **stamp.headers()})
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        conn.close()


def test_two_hosts_pull_every_trial_once_and_are_told_when_the_search_is_done(served):
    coordinator, port = served
    h1 = client(port, "h1")
    taken = []
    while isinstance(offer := h1.ask(1, 0), Offer):
        assert h1.report(offer.trial.number, 1, 0.5, 0.7) == wire.Verdict(prune=False, lost=False)
        h1.finish(offer.trial.number, figures())
        taken.append(offer.trial.name)
    assert sorted(taken) == ["small_cnn@lr=0.001,bs=32", "small_cnn@lr=0.01,bs=32", "small_cnn@lr=0.1,bs=32"]
    assert isinstance(h1.ask(1, 0), Done)
    assert {r["host"] for r in coordinator.study.records()} == {"h1"}


def test_a_silent_hosts_trial_is_handed_to_another_and_the_silent_host_drops_it(served):
    coordinator, port = served                 # the server's own watchdog hands silent hosts' trials on
    h1 = client(port, "h1")
    mine = h1.ask(1, 0).trial
    deadline = time.monotonic() + 10
    while "h1" not in coordinator.lost and time.monotonic() < deadline:      # h1 says nothing for lost_after_s
        time.sleep(0.2)
    assert coordinator.lost["h1"] == [f"{mine.name}~r1"]
    status, answer = signed_post(port, "next", "h2", wire.host_key(RUN_KEY, "h2"), {}, source="127.0.0.2")
    assert status == 200 and answer["trial"]["name"] == f"{mine.name}~r1"
    assert answer["trial"]["learning_rate"] == mine.learning_rate
    assert h1.report(mine.number, 1, 0.9, 0.1).lost is True
    h1.finish(mine.number, figures())                    # ignored: the trial went elsewhere
    assert next(r for r in coordinator.study.records() if r["trial"] == mine.number)["state"] == "retried"


def test_a_record_results_json_could_not_hold_is_refused_at_once_and_its_trial_stays_open(served):
    coordinator, port = served
    h1 = client(port, "h1", patience_s=30)
    mine = h1.ask(1, 0).trial
    started = time.monotonic()
    with pytest.raises(ClusterError, match=r"refused `finish`: h1's trial 0.val_accuracy: Received 'high'"):
        h1.finish(mine.number, {**figures(), "val_accuracy": "high"})
    assert time.monotonic() - started < 5                                   # an answer, not a silence to wait out
    assert next(r for r in coordinator.study.records() if r["trial"] == mine.number)["state"] == "running"


def test_a_host_waits_longer_for_a_chief_that_has_not_answered_yet(served):
    """The chief may still be importing TensorFlow when a faster host first calls."""
    _, port = served
    late = queue_client.Client(f"127.0.0.1:{free_port()}", "h1", wire.host_key(RUN_KEY, "h1"), patience_s=1, first_patience_s=3)
    started = time.monotonic()
    with pytest.raises(ClusterError, match="did not answer for 3 s"):
        late.ask(1, 0)
    assert time.monotonic() - started >= 3
    answered = client(port, "h1", patience_s=1)
    answered.ask(1, 0)
    answered.url = f"http://127.0.0.1:{free_port()}"          # the chief gone after it answered once
    with pytest.raises(ClusterError, match="did not answer for 1 s"):
        answered.ask(1, 0)


def test_what_is_not_a_call_the_queue_knows_is_refused(served):
    _, port = served
    key = wire.host_key(RUN_KEY, "h1")
    for verb, doc in (("nonsense", {}), ("report", {"number": "x"}), ("next", {"replicas": True}),
                      ("report", {"number": 0, "epoch": 1, "val_accuracy": 1e300}),
                      ("report", {"number": 0, "epoch": 1, "val_accuracy": 0.5, "val_loss": -3.0}),
                      ("finish", {"number": 0, "figures": "x"})):
        status, answer = signed_post(port, verb, "h1", key, doc)
        assert status == 400 and "error" in answer, (verb, doc)


def test_a_host_reporting_an_accuracy_beyond_one_is_refused_and_nothing_is_pruned_for_it(served):
    coordinator, port = served
    h1 = client(port, "h1")
    mine = h1.ask(1, 0).trial
    with pytest.raises(ClusterError, match="val_accuracy: Received 1e\\+300"):
        h1.report(mine.number, 1, 1e300, 0.1)
    assert coordinator.study.trials()[0].intermediate_values == {}


def test_only_calls_that_prove_their_host_are_answered(served):
    coordinator, port = served
    h1_key, h2_key = wire.host_key(RUN_KEY, "h1"), wire.host_key(RUN_KEY, "h2")
    cases = [("x0", wire.host_key(RUN_KEY, "x0"), "127.0.0.1"),     # not a host of the cluster
             ("h1", wire.new_key(), "127.0.0.1"),                      # no key of this run: a machine on the LAN
             ("h1", h2_key, "127.0.0.2"),                              # h2 naming itself h1, with its own key
             ("h1", h1_key, "127.0.0.2"),                              # h1's key (stolen), from h2's address
             ("h1\x1b[31m", h1_key, "127.0.0.1")]
    for host, key, source in cases:
        status, answer = signed_post(port, "next", host, key, {}, source=source)
        assert status == 403 and "\x1b" not in answer["error"], (host, source, answer)
    unsigned = urllib.request.Request(f"http://127.0.0.1:{port}/next", data=b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(unsigned, timeout=5)
    assert refused.value.code == 400 and "signed call" in json.loads(refused.value.read())["error"]
    assert coordinator.hosts == {} and coordinator.study.counts()["running"] == 0     # nothing handed out


def test_a_call_is_heard_once(served):
    coordinator, port = served
    key = wire.host_key(RUN_KEY, "h1")
    body = json.dumps({}).encode()
    stamp = wire.sign_call(key, "next", "h1", body)
    assert signed_post(port, "next", "h1", key, {}, stamp=stamp)[0] == 200
    status, answer = signed_post(port, "next", "h1", key, {}, stamp=stamp)        # replayed from a capture
    assert status == 403 and "replayed" in answer["error"]
    stale = wire.Stamp("h1", int(time.time()) - 3600, "ab" * 16)
    stale = wire.Stamp("h1", stale.time, stale.nonce, wire._mac(key, "next", "h1", str(stale.time), stale.nonce, body=body))
    status, answer = signed_post(port, "next", "h1", key, {}, stamp=stale)
    assert status == 403 and "off the chief's clock" in answer["error"]


def test_a_caller_that_is_no_host_is_closed_unread(tmp_path):
    cfg = TrainConfig.model_validate({"search": {"mode": "parallel", "learning_rates": [0.1]}})
    coordinator = Coordinator(Study(cfg, tmp_path), 60, hosts=["h1"], classes=2, log=lambda line: None)
    port = free_port()
    server, stopped = q.serve(coordinator, wire.Gate(RUN_KEY, {"h1": frozenset({"127.0.0.9"})}), port, bind="0.0.0.0")
    try:
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            signed_post(port, "next", "h1", wire.host_key(RUN_KEY, "h1"), {})
    finally:
        q.stop(server, stopped)


def test_slow_callers_from_one_address_lock_no_other_host_out(tmp_path, monkeypatch):
    monkeypatch.setattr(q, "MAX_CALLERS", 16)           # as many as the queue has threads, sooner
    cfg = TrainConfig.model_validate({"search": {"mode": "parallel", "learning_rates": [0.1, 0.01]}})
    coordinator = Coordinator(Study(cfg, tmp_path), 60, hosts=["h1", "h2"], classes=2, log=lambda line: None)
    port = free_port()
    server, stopped = q.serve(coordinator, wire.Gate(RUN_KEY, wire.resolve(ADDRESSES)), port, bind="0.0.0.0")
    stalled = []
    try:
        for _ in range(40):                              # h1 compromised: callers that send a byte, then wait
            sock = socket.create_connection(("127.0.0.1", port), timeout=2)
            sock.sendall(b"P")
            stalled.append(sock)
        time.sleep(1.5)                                  # every one of them accepted (or turned away) by now
        started = time.monotonic()
        status, answer = signed_post(port, "next", "h2", wire.host_key(RUN_KEY, "h2"), {"replicas": 1},
                                     source="127.0.0.2")
        assert status == 200 and "trial" in answer and time.monotonic() - started < 2
    finally:
        for sock in stalled:
            sock.close()
        q.stop(server, stopped)


def test_a_caller_that_hangs_up_before_its_answer_leaves_no_trace_in_the_log(served, capfd):
    coordinator, port = served
    key = wire.host_key(RUN_KEY, "h1")
    for _ in range(5):
        body = b"{}"
        stamp = wire.sign_call(key, "next", "h1", body)
        sock = socket.create_connection(("127.0.0.1", port))
        head = "".join(f"{k}: {v}\r\n" for k, v in stamp.headers().items())
        sock.sendall(f"POST /next HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n{head}\r\n".encode() + body)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        sock.close()                                      # a reset, before reading the answer
    time.sleep(0.5)
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and not [line for line in coordinator.said if "Error" in line]


def test_a_caller_that_stops_mid_request_holds_up_no_one(served):
    _, port = served
    stalled = socket.create_connection(("127.0.0.1", port))
    stalled.sendall(b"POST /next HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")     # and nothing more
    try:
        started = time.monotonic()
        assert isinstance(client(port, "h1", patience_s=3).ask(1, 0), Offer) and time.monotonic() - started < 4
    finally:
        stalled.close()


def test_a_caller_that_trickles_its_request_is_cut_off_after_the_request_time(served, monkeypatch):
    monkeypatch.setattr(q, "REQUEST_S", 2.0)             # read at each request: the rule sooner
    _, port = served
    sock = socket.create_connection(("127.0.0.1", port))
    started, cut = time.monotonic(), False
    try:
        while time.monotonic() - started < q.REQUEST_S + 5:
            sock.sendall(b"x")                           # a byte every half second: never silent for long
            time.sleep(0.5)
    except OSError:
        cut = True
    finally:
        sock.close()
    assert cut and time.monotonic() - started < q.REQUEST_S + 3


def test_a_trial_that_reports_no_epoch_for_far_longer_than_any_took_is_handed_on(served):
    coordinator, port = served                 # lost_after_s 1: the heartbeat alone keeps it alive
    h1 = client(port, "h1")
    first = h1.ask(1, 0).trial
    time.sleep(0.3)
    h1.report(first.number, 1, 0.5, 0.5)                 # an epoch takes ~0.3 s
    deadline = time.monotonic() + 10
    while "h1" not in coordinator.lost and time.monotonic() < deadline:
        h1.beat(first.number)                            # alive: the heartbeat keeps coming
        time.sleep(0.2)
    assert coordinator.lost["h1"] == [f"{first.name}~r1"]


def test_the_hosts_reach_the_chief_directly_whatever_proxy_they_were_given(served, monkeypatch):
    _, port = served
    dead = free_port()
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{dead}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.setattr(urllib.request, "_opener", None)     # urlopen's opener reads the variables anew
    assert isinstance(client(port, "h1", patience_s=1).ask(1, 0), Offer)


def test_the_chief_waits_until_every_host_it_heard_from_was_told_the_search_is_done(served):
    coordinator, port = served
    h1 = client(port, "h1")
    while isinstance(offer := h1.ask(1, 0), Offer):
        h1.finish(offer.trial.number, figures())
    status, answer = signed_post(port, "next", "h2", wire.host_key(RUN_KEY, "h2"), {}, source="127.0.0.2")
    assert answer["done"] is True
    started = time.monotonic()
    q.wait_for_done(coordinator, grace_s=5)
    assert time.monotonic() - started < 1 and coordinator.told_done == {"h1", "h2"}


def test_the_queue_listens_on_the_chiefs_own_address_only(tmp_path):
    cfg = TrainConfig.model_validate({"search": {"mode": "parallel", "learning_rates": [0.1]}})
    coordinator = Coordinator(Study(cfg, tmp_path), 60, hosts=["h1"], classes=2, log=lambda line: None)
    port = free_port()
    server, stopped = q.serve(coordinator, wire.Gate(RUN_KEY, {"h1": frozenset()}), port, bind="127.0.0.1")
    try:
        assert server.server_address[0] == "127.0.0.1"
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.2", port), timeout=2).close()
    finally:
        q.stop(server, stopped)
