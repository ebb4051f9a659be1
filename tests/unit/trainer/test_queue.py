"""The trial queue (trainer/queue.py): hosts pull trials over HTTP from the chief's study, a silent
host's trial goes to another, and a host that cannot reach the chief gives up in bounded time."""
from __future__ import annotations

import socket
import time

import pytest

from trainer import queue as q
from trainer.config import TrainConfig
from trainer.errors import ClusterError
from trainer.study import Study


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    cfg = TrainConfig.model_validate({"candidates": ["small_cnn"], "epochs": 3,
                                      "search": {"mode": "parallel", "learning_rates": [0.1, 0.01, 0.001]}})
    coordinator, port = q.Coordinator(Study(cfg, tmp_path), lost_after_s=1.0, log=print), free_port()
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
