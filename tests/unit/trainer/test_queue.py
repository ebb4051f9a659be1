"""The trial queue (trainer/queue.py): hosts pull trials over HTTP from the chief's study, a silent
host's trial goes to another, and a host that cannot reach the chief gives up in bounded time."""
from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request

import pytest

from support.common import free_ports
from trainer import queue as q
from trainer.config import TrainConfig
from trainer.errors import ClusterError
from trainer.study import Study


def free_port() -> int:
    return free_ports(1)[0]


@pytest.fixture
def served(tmp_path):
    cfg = TrainConfig.model_validate({"candidates": ["small_cnn"], "epochs": 3,
                                      "search": {"mode": "parallel", "learning_rates": [0.1, 0.01, 0.001]}})
    coordinator = q.Coordinator(Study(cfg, tmp_path), lost_after_s=1.0, log=print, hosts=["h1", "h2"], classes=2)
    port = free_port()
    server, stopped = q.serve(coordinator, port)
    yield coordinator, port
    q.stop(server, stopped)


def record(name: str) -> dict:
    return {"candidate": name, "val_accuracy": 0.5, "val_loss": 0.5, "train_seconds": 1.0, "images_per_second": 10.0,
            "params": 100, "epochs": 2, "state": "complete"}


def test_two_hosts_pull_every_trial_once_and_are_told_when_the_search_is_done(served):
    coordinator, port = served
    hosts = {h: q.Client(f"127.0.0.1:{port}", h, patience_s=5) for h in ("h1", "h2")}
    taken = []
    for _ in range(2):
        for name, client in hosts.items():
            answer = client.call("next", {})
            if "trial" in answer:
                trial = q.trial_from(answer["trial"])
                assert client.call("report", {"number": trial.number, "epoch": 1, "val_accuracy": 0.5}) == \
                    {"prune": False, "lost": False}
                client.call("finish", {"number": trial.number, "record": record(trial.name)})
                taken.append(trial.name)
    assert sorted(taken) == ["small_cnn@lr=0.001,bs=32", "small_cnn@lr=0.01,bs=32", "small_cnn@lr=0.1,bs=32"]
    assert hosts["h1"].call("next", {}) == {"done": True}
    assert {r["host"] for r in coordinator.study.records()} <= {"h1", "h2"}


def test_a_silent_hosts_trial_is_handed_to_another_and_the_silent_host_drops_it(served):
    coordinator, port = served                 # the server's own watchdog hands silent hosts' trials on
    h1, h2 = (q.Client(f"127.0.0.1:{port}", h, patience_s=5) for h in ("h1", "h2"))
    mine = q.trial_from(h1.call("next", {})["trial"])
    deadline = time.monotonic() + 10
    while "h1" not in coordinator.lost and time.monotonic() < deadline:      # h1 says nothing for lost_after_s
        time.sleep(0.2)
    assert coordinator.lost["h1"] == [f"{mine.name}~r1"]
    retry = q.trial_from(h2.call("next", {})["trial"])
    assert (retry.name, retry.learning_rate) == (f"{mine.name}~r1", mine.learning_rate)
    assert h1.call("report", {"number": mine.number, "epoch": 1, "val_accuracy": 0.9})["lost"] is True
    h1.call("finish", {"number": mine.number, "record": record(mine.name)})       # ignored: the trial went elsewhere
    assert next(r for r in coordinator.study.records() if r["trial"] == mine.number)["state"] == "retried"


def test_a_record_results_json_could_not_hold_is_refused_at_once_and_its_trial_stays_open(served):
    coordinator, port = served
    h1 = q.Client(f"127.0.0.1:{port}", "h1", patience_s=30)
    mine = q.trial_from(h1.call("next", {})["trial"])
    started = time.monotonic()
    with pytest.raises(ClusterError, match=r"refused `finish`: h1's trial 0.val_accuracy: Received 'high'"):
        h1.call("finish", {"number": mine.number, "record": {**record(mine.name), "val_accuracy": "high"}})
    assert time.monotonic() - started < 5                                   # an answer, not a silence to wait out
    assert next(r for r in coordinator.study.records() if r["trial"] == mine.number)["state"] == "running"


def test_a_host_that_cannot_reach_the_chief_gives_up_after_its_patience():
    client = q.Client(f"127.0.0.1:{free_port()}", "h1", patience_s=2)
    started = time.monotonic()
    with pytest.raises(ClusterError, match="did not answer for 2 s"):
        client.call("next", {})
    assert time.monotonic() - started < 2 + q.CALL_TIMEOUT_S


def test_what_is_not_a_call_the_queue_knows_is_refused(served):
    import json
    import urllib.error
    import urllib.request
    _, port = served
    for path, body in (("/nonsense", b"{}"), ("/report", b'{"number": "x"}'), ("/next", b"[" * 10)):
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=5)
        assert err.value.code == 400 and "error" in json.loads(err.value.read())


def post(port: int, path: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_only_the_clusters_hosts_are_answered(served):
    coordinator, port = served
    for host in ("x0", "h1\x1b[31m", "", 7):
        code, answer = post(port, "/next", json.dumps({"host": host}).encode())
        assert code == 400 and "Expected one of the cluster's hosts" in answer["error"]
    assert coordinator.hosts == {} and coordinator.study.counts()["running"] == 0     # nothing handed out


def test_the_record_is_the_chiefs_and_only_the_hosts_figures_are_taken_checked(served):
    coordinator, port = served
    h1 = q.Client(f"127.0.0.1:{port}", "h1", patience_s=5)
    mine = q.trial_from(h1.call("next", {"replicas": 2, "restarts": 1})["trial"])
    sent = {**record("\x1b[2Jsomething else"), "architecture": {"x": 1}, "state": "running", "junk": "y" * 1000,
            "history": "../../etc/passwd", "confusion_matrix": [[3, 0], [1, 4]], "curve": [0.5, 0.5]}
    for key, bad in (("train_seconds", 10 ** 400), ("val_accuracy", 1e308), ("curve", [2.0]), ("confusion_matrix", [[1]])):
        with pytest.raises(ClusterError, match=f"h1's trial 0.{key}"):
            h1.call("finish", {"number": mine.number, "record": {**sent, key: bad}})
    h1.call("finish", {"number": mine.number, "record": sent})
    kept = next(r for r in coordinator.study.records() if r["trial"] == mine.number)
    assert (kept["candidate"], kept["architecture"], kept["state"], kept["host"]) == (mine.name, "small_cnn", "complete", "h1")
    assert kept["history"] == f"history/{mine.name}.csv" and "junk" not in kept and kept["confusion_matrix"] == [[3, 0], [1, 4]]
    assert coordinator.hosts == {"h1": {"replicas": 2, "restarts": 1}} and coordinator.trained == {"h1": [mine.name]}


def test_a_caller_that_stops_mid_request_holds_up_no_one(served):
    coordinator, port = served
    stalled = socket.create_connection(("127.0.0.1", port))
    stalled.sendall(b"POST /next HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")     # and nothing more
    try:
        started = time.monotonic()
        answer = q.Client(f"127.0.0.1:{port}", "h1", patience_s=1).call("next", {})
        assert "trial" in answer and time.monotonic() - started < 2
    finally:
        stalled.close()


def test_a_trial_that_reports_no_epoch_for_far_longer_than_any_took_is_handed_on(served):
    coordinator, port = served                 # lost_after_s 1: the heartbeat alone keeps it alive
    h1 = q.Client(f"127.0.0.1:{port}", "h1", patience_s=5)
    first = q.trial_from(h1.call("next", {})["trial"])
    time.sleep(0.3)
    h1.call("report", {"number": first.number, "epoch": 1, "val_accuracy": 0.5})        # an epoch takes ~0.3 s
    deadline = time.monotonic() + 10
    while "h1" not in coordinator.lost and time.monotonic() < deadline:
        h1.call("beat", {"number": first.number})         # alive: the heartbeat keeps coming
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
    assert "trial" in q.Client(f"127.0.0.1:{port}", "h1", patience_s=1).call("next", {})


def test_the_chief_waits_until_every_host_it_heard_from_was_told_the_search_is_done(served):
    coordinator, port = served
    h1, h2 = (q.Client(f"127.0.0.1:{port}", h, patience_s=5) for h in ("h1", "h2"))
    for client in (h1, h2):
        while "trial" in (answer := client.call("next", {})):
            trial = q.trial_from(answer["trial"])
            client.call("finish", {"number": trial.number, "record": record(trial.name)})
    assert h1.call("next", {}) == {"done": True}
    started = time.monotonic()
    q.wait_for_done(coordinator, grace_s=5)                 # h2 was told too, in its last call
    assert time.monotonic() - started < 1 and coordinator.told_done == {"h1", "h2"}
