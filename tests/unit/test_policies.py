"""The launcher's decisions as pure functions: fail-fast, finishing, deadlines, preflight, merging."""
from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from launcher import plan as plan_mod, preflight, wait
from launcher.group import fan_out
from launcher.inventory import Cluster, Host
from launcher.inventory_schema import Inventory, RunSpec
from launcher.status import HostStatus
from trainer import results


def host(name: str, index: int = 0, **kw) -> Host:
    values = dict(name=name, address=f"10.0.0.{index + 1}", ssh_user="u", ssh_port=22, identity_file=None,
                  tf_port=2222, workdir="/opt/tfcompose", gpus=0, data_dir=None, nic=None, shm_size="2g",
                  chief=index == 0, index=index, bundle_dir="/opt/tfcompose/c")
    return Host(**{**values, **kw})


def cluster(n: int = 2, **spec) -> Cluster:
    hosts = tuple(host(f"h{i}", i) for i in range(n))
    inv = Inventory.model_validate({"cluster": "c", "hosts": [{"name": h.name, "address": h.address} for h in hosts],
                                    **spec})
    return Cluster(Path("inv.yaml"), inv, hosts)


def st(name: str, state: str, code=None, restarts: int = 0, finished: str = "") -> HostStatus:
    return HostStatus(name, state, code, restarts, finished_at=finished)


# --- wait ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("status, retries, final", [
    (st("a", "exited", 1, restarts=2), 2, True),       # restarts used up
    (st("a", "exited", 1, restarts=1), 2, False),      # Docker will restart it
    (st("a", "exited", 0), 0, False),                  # success is not a failure
    (st("a", "running"), 0, False),
    (st("a", "restarting", 1), 0, False),
    (st("a", "dead"), 5, True),
    (st("a", "absent"), 5, True),                      # the container is gone
    (st("a", "unreachable"), 0, False),                # judged by `lost`, not here
])
def test_a_host_fails_for_good_only_when_docker_gave_up(status, retries, final):
    assert wait.final_failure(status, retries) is final


def test_sync_ends_when_the_chief_exits_0_parallel_when_every_host_does():
    sync, par = plan_mod.make(cluster()), plan_mod.make(cluster(train={"search": {"mode": "parallel"},
                                                                        "candidates": ["small_cnn", "deep_cnn"]}))
    states = {"h0": st("h0", "exited", 0), "h1": st("h1", "running")}
    assert wait.finished(states, wait.must_finish(sync))
    assert not wait.finished(states, wait.must_finish(par))
    assert wait.finished({**states, "h1": st("h1", "exited", 0)}, wait.must_finish(par))
    assert not wait.finished({"h0": st("h0", "exited", 1), "h1": st("h1", "exited", 0)}, wait.must_finish(sync))


def test_the_first_host_to_fail_is_named_first():
    states = {"a": st("a", "exited", 1, finished="2026-01-01T10:00:05Z"),
              "b": st("b", "exited", 137, finished="2026-01-01T10:00:01Z"),
              "c": st("c", "absent"), "d": st("d", "running")}
    assert [s.host for s in wait.first_failures(states, retries=0)] == ["b", "a", "c"]


def test_a_host_silent_past_the_limit_is_lost_and_one_that_answers_again_is_not():
    assert wait.lost({"a": 0.0, "b": 250.0}, now=301.0, limit=300) == ["a"]
    assert wait.lost({}, now=1e9, limit=1) == []


def test_run_programs_are_stopped_by_their_join_and_finish_deadlines():
    run = RunSpec(command=["python", "x.py"], code_dir=".", join_timeout_s=60, deadline_s=3600)
    ports = {"a": 2222, "b": 2223}
    assert wait.deadline(None, 1e9, ["a"], ports) is None           # the trainer has its own watchdog
    assert wait.deadline(run, 59, ["b"], ports) is None
    why = wait.deadline(run, 61, ["b"], ports)
    assert "b (port 2223)" in why and "join_timeout_s" in why and "a (port" not in why
    assert wait.deadline(run, 61, None, ports) is None               # joined: only the finish limit counts
    assert "deadline_s" in wait.deadline(run, 3601, None, ports)


# --- preflight -----------------------------------------------------------------------------------

GOOD = {"docker": "ok", "runtimes": '{"runc":{}}', "compose": "2.26.1", "gpu_count": "0", "own_running": "0",
        "port_busy": "0", "workdir": "ok", "free_kb": str(50 * 1024 * 1024), "bundle": "none", "clock": "1000.0"}


@pytest.mark.parametrize("change, problem", [
    ({}, None),
    ({"docker": "permission denied"}, "`docker info` fails"),
    ({"compose": "1.29.2"}, "compose v2 is needed"),
    ({"compose": "missing"}, "compose v2 is needed"),
    ({"port_busy": "1"}, "tf_port 2222 is already in use"),
    ({"port_busy": "1", "own_running": "1"}, None),           # our own container holds it: a re-run
    ({"workdir": "not writable"}, "not writable"),
    ({"free_kb": "1024"}, "MB free"),
    ({"bundle": "foreign"}, "was not made by tfcompose"),
])
def test_preflight_blocks_on_what_would_break_the_start(change, problem):
    problems, _ = preflight.judge(host("a"), {**GOOD, **change}, midpoint=1000.0)
    assert (problems == []) if problem is None else any(problem in p for p in problems), problems


def test_preflight_checks_gpus_and_warns_on_clock_skew():
    problems, _ = preflight.judge(host("a", gpus=[0, 3]), {**GOOD, "runtimes": "nvidia", "gpu_count": "2"}, 1000.0)
    assert problems == ["gpus 0,3 requested but nvidia-smi lists 2 GPU(s)"]
    problems, _ = preflight.judge(host("a", gpus="all"), GOOD, 1000.0)
    assert any("no nvidia runtime" in p for p in problems)
    _, warnings = preflight.judge(host("a"), {**GOOD, "clock": "1003.5"}, 1000.0)
    assert warnings and "+3.5 s" in warnings[0]


# --- merging a parallel search --------------------------------------------------------------------

def record(name: str, acc: float) -> dict:
    return {"candidate": name, "val_accuracy": acc, "val_loss": 1 - acc, "train_seconds": 1.0,
            "images_per_second": 10.0, "params": 100, "epochs": 2, "history": f"history/{name}.csv"}


def test_parallel_results_merge_in_placement_order_with_the_best_over_all_hosts():
    docs = {"a": {"schema": 1, "replicas": 1, "restarts": 0, "started": "2026-01-01T10:00:00", "finished": "2026-01-01T10:05:00",
                  "candidates": [record("t1", 0.5), record("t3", 0.9)]},
            "b": {"schema": 1, "replicas": 2, "restarts": 1, "started": "2026-01-01T09:59:00", "finished": "2026-01-01T10:07:00",
                  "candidates": [record("t2", 0.7)]}}
    merged = results.merge_parallel(docs, ["t3", "t2", "t1"], {"a": ["t3", "t1"], "b": ["t2"]})
    assert [r["candidate"] for r in merged["candidates"]] == ["t3", "t2", "t1"]
    assert merged["best"] == {"candidate": "t3", "val_accuracy": 0.9, "host": "a"}
    assert merged["candidates"][1]["history"] == "hosts/b/history/t2.csv"
    assert (merged["mode"], merged["workers"], merged["replicas"], merged["restarts"]) == ("parallel", 2, 3, 1)
    assert (merged["started"], merged["finished"]) == ("2026-01-01T09:59:00", "2026-01-01T10:07:00")
    results.check(merged, "merged")


@pytest.mark.parametrize("doc, field", [
    ({"schema": 1, "candidates": []}, "no candidates"),
    ({"schema": 2, "candidates": [record("t", 0.5)]}, "no candidates"),
    ({"schema": 1, "candidates": [{**record("t", 0.5), "val_accuracy": "high"}]}, "candidates[0].val_accuracy"),
    ({"schema": 1, "candidates": [{"candidate": "t"}]}, "candidates[0].val_accuracy"),
    ({"schema": 1, "candidates": [{**record("t", 0.5), "history": "../../etc/passwd"}]}, "history"),
    ({"schema": 1, "candidates": [{**record("t", 0.5), "history": "/etc/passwd"}]}, "history"),
    ([1, 2], "no candidates"),
])
def test_results_that_tfcompose_did_not_write_are_refused_by_name(doc, field):
    with pytest.raises(results.ResultsError, match=field.replace("[", r"\[").replace("]", r"\]")):
        results.check(doc, "r.json")


# --- fan-out ----------------------------------------------------------------------------------------

def test_fan_out_keeps_inventory_order_and_splits_successes_from_failures():
    hosts = [host(f"h{i}", i) for i in range(4)]

    def work(h: Host) -> int:
        if h.index % 2:
            raise RuntimeError(f"{h.name} broke")
        return h.index * 10

    result = fan_out(hosts, "step", work, parallel=2)
    assert result.hosts == ["h0", "h1", "h2", "h3"]
    assert result.succeeded == {"h0": 0, "h2": 20} and list(result.failed) == ["h1", "h3"]
    with pytest.raises(Exception, match="step failed on 2 of 4 host"):
        result.raise_if_failed()


def test_an_interrupted_fan_out_starts_no_more_hosts_and_returns_only_once_the_work_in_flight_has_ended():
    hosts = [host(f"h{i}", i) for i in range(4)]
    cancel, started, ended, both = threading.Event(), [], [], threading.Barrier(2)

    def work(h: Host) -> None:
        started.append(h.name)
        if h.name in ("h0", "h1") and both.wait(30) == 0:   # Ctrl-C while h0 and h1 are at work,
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)   # h2, h3 waiting for a thread
        cancel.wait(30)          # a step that ends when its work is called off…
        time.sleep(0.3)          # …after finishing what it was writing
        ended.append(h.name)

    with pytest.raises(KeyboardInterrupt):
        fan_out(hosts, "step", work, parallel=2, cancel=cancel)
    assert sorted(ended) == ["h0", "h1"]         # both ended before the interrupt reached the clean-up
    assert sorted(started) == ["h0", "h1"]       # the others were never begun
    assert not cancel.is_set()                   # the clean-up may use the connections again


def test_the_code_folder_is_hashed_once_per_command_however_many_hosts(tmp_path, monkeypatch):
    calls = []
    real = plan_mod.code_hash
    monkeypatch.setattr(plan_mod, "code_hash", lambda folder: calls.append(folder) or real(folder))
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_bytes(b"x" * (3 << 20))  # read in chunks, not at once
    hosts = [{"name": f"h{i}", "address": f"10.0.0.{i + 1}"} for i in range(8)]
    inv = Inventory.model_validate({"cluster": "c", "hosts": hosts,
                                    "run": {"command": ["python", "train.py"], "code_dir": str(tmp_path / "code")}})
    made = plan_mod.make(Cluster(tmp_path / "inv.yaml", inv, tuple(host(h["name"], i) for i, h in enumerate(hosts))))
    assert len(calls) == 1 and made.container_image == f"tfcompose-trainer:run-{made.code_hash[:12]}"
    from launcher import render
    bundles = render.render_cluster(made)
    assert len(bundles) == 8 and len(calls) == 1


def test_a_rebuilt_image_or_a_changed_dataset_source_is_a_new_run_and_nothing_else_is():
    made = plan_mod.make(cluster(2))
    assert plan_mod.with_contents(made).run_id == made.run_id  # render and export know no image: same id
    ids = {plan_mod.with_contents(made, image, data).run_id
           for image, data in (("sha256:a", ""), ("sha256:b", ""), ("sha256:a", "d1"), ("sha256:a", "d2"))}
    assert len(ids) == 4 and made.run_id not in ids
    assert plan_mod.with_contents(made, "sha256:a").run_id == plan_mod.with_contents(made, "sha256:a").run_id
