"""Tracking through the real thing: a real `mlflow server` on loopback (SQLite, its artifact store in
the test's folder), searches on sshd hosts, everything read back through MLflow's own client.

- a 2-worker sync search: one parent, one child run per trial (not one per worker), params,
  metric histories equal to results.json's, epochs sent while it trained, the registered model
  loads and predicts in the trainer image; `tfcompose track` twice adds nothing; a token in the
  URI and in the environment appears in no rendered file, log, result, output or hook environment;
- a parallel search whose tracker is killed mid-run: training finishes, `up` says what is left,
  and `tfcompose track` sends it once the tracker is back;
- a parallel search with ASHA where a builder refuses one trial's values and a host is killed
  mid-trial: its pruned, failed and retried trials each with the status and tags the README's
  table says, every run starting and ending when its trial did and every figure at its epoch's end.
"""
from __future__ import annotations

import csv
import datetime as dt
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from support.cluster import CliProcess, run_results
from support.common import REPO, require

# A whole search on two hosts each: on this shared 2-core machine, minutes when it is busy.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]
TRIALS_SYNC = {"dataset": {"kind": "synthetic", "image_size": [16, 16], "per_class": 16}, "candidates": ["small_cnn"],
               "epochs": 2, "batch_per_replica": 16, "join_timeout_s": 90,
               "search": {"sampler": "random", "trials": 2, "seed": 3, "learning_rate": {"log_uniform": [0.001, 0.03]},
                          "hyperparameters": {"small_cnn": {"width": {"log_integer": [8, 24]}}}}}
TRIALS_PARALLEL = {"dataset": {"kind": "synthetic", "image_size": [16, 16], "per_class": 16}, "candidates": ["small_cnn"],
                   "epochs": 3, "batch_per_replica": 16,
                   "search": {"mode": "parallel", "learning_rates": [0.01, 0.003, 0.001]}}


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    import importlib.util
    require(importlib.util.find_spec("mlflow") is not None, "MLflow is not installed (pip install -e '.[dev]')")
    from support.mlflow_server import MlflowServer
    server = MlflowServer(tmp_path_factory.mktemp("mlflow")).start()
    yield server
    server.kill()


def run_cli(*args: str, env: dict | None = None, timeout: float = 900) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "launcher", *args], cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    return proc.returncode, proc.stdout


def search_runs(client, experiment: str):
    """(the parent runs, the child runs) of an experiment, deleted runs left out."""
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=1000) if exp else []
    parents = [r for r in runs if r.data.tags.get("tfcompose.kind") == "search"]
    return parents, [r for r in runs if "mlflow.parentRunId" in r.data.tags]


def history_rows(run_dir: Path, record: dict) -> list[dict]:
    with (run_dir / record["history"]).open(newline="") as fh:
        return list(csv.DictReader(fh))


def assert_trials_match(client, run_dir: Path, experiment: str, hosts: list[str]) -> tuple:
    """One parent, exactly one child per trial, with its values, state and every epoch as results.json says."""
    doc = json.loads((run_dir / "results.json").read_text())
    parents, children = search_runs(client, experiment)
    assert len(parents) == 1, [p.info.run_name for p in parents]
    parent = parents[0]
    assert parent.data.tags["tfcompose.run_id"] == run_dir.resolve().name
    assert parent.data.tags["tfcompose.hosts"] == ",".join(hosts) and parent.info.status == "FINISHED"
    assert parent.data.params["epochs"] == str(doc["candidates"][0]["epochs"]) and parent.data.params["hosts"] == "2"
    names = sorted(r.data.tags["tfcompose.trial"] for r in children)
    assert names == sorted(r["candidate"] for r in doc["candidates"])          # one run per trial, not per worker
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in children)
    by_name = {r.data.tags["tfcompose.trial"]: r for r in children}
    for record in doc["candidates"]:
        run = by_name[record["candidate"]]
        assert run.info.run_name == record["candidate"]
        assert float(run.data.params["learning_rate"]) == record["learning_rate"]
        for key, value in (record.get("hyperparameters") or {}).items():
            assert run.data.params[key] == str(value)
        assert run.data.tags["tfcompose.state"] == record.get("state", "complete")
        assert run.info.status == {"complete": "FINISHED", "pruned": "FINISHED"}.get(record.get("state", "complete"))
        if record.get("host"):
            assert run.data.tags["tfcompose.host"] == record["host"]
        curve = [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "val_accuracy")]
        assert sorted(curve) == list(enumerate(record["curve"], start=1)), record["candidate"]   # each epoch once
        loss = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "loss"))
        assert loss == [(int(r["epoch"]), float(r["loss"])) for r in history_rows(run_dir, record)]
        assert run.data.metrics["final_val_accuracy"] == pytest.approx(record["val_accuracy"], rel=1e-5)
    best = by_name[doc["best"]["candidate"]]
    assert best.data.tags["tfcompose.best"] == "true"
    files = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"results.json", "report.md", "leaderboard.png", "curves.png"} <= files
    return doc, parent, by_name


def predicts(image: str, uri: str, model: str, shape: tuple) -> str:
    """The registered model loaded by MLflow's own client in the trainer image (it has TensorFlow),
    through pyfunc and the TensorFlow flavour, without TF_USE_LEGACY_KERAS: each one prediction."""
    code = ("import numpy as np, mlflow.pyfunc, mlflow.tensorflow\n"
            f"x = np.zeros((3, {', '.join(map(str, shape))}), np.float32)\n"
            f"p = mlflow.pyfunc.load_model('models:/{model}')\n"
            "print('pyfunc', p.predict(x).shape)\n"
            f"k = mlflow.tensorflow.load_model('models:/{model}')\n"
            "print('keras', k.predict(x, verbose=0).sum(axis=1).round(3).tolist())\n")
    out = subprocess.run(["docker", "run", "--rm", "--network", "host", "-e", f"MLFLOW_TRACKING_URI={uri}",
                          "--entrypoint", "python3", image, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


def files_under(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if p.is_file() and not p.is_symlink()]


def test_a_sync_search_is_one_parent_and_one_run_per_trial_with_the_best_model_registered_and_no_secret_anywhere(
        mlflow_server, cluster_env, trainer_image, tmp_path):
    password, token, basic = (f"{what}-{uuid.uuid4().hex}" for what in ("pw", "tok", "basic"))
    secrets_env = {"MLFLOW_TRACKING_TOKEN": token, "MLFLOW_TRACKING_USERNAME": "tfc-user",
                   "MLFLOW_TRACKING_PASSWORD": basic}
    uri = mlflow_server.uri.replace("http://", f"http://tfc:{password}@")
    hook_env = tmp_path / "hook-env.txt"
    name, inv, hosts = cluster_env(n=2, train=TRIALS_SYNC, on_finish=f"env > {hook_env}",
                                   tracking={"mlflow": {"uri": uri, "experiment": "sync-search",
                                                        "register_as": "tfc-sync-best"}})
    runs = tmp_path / "runs"
    code, out = run_cli("up", "-i", str(inv), "--wait", "--runs", str(runs), env=secrets_env)
    assert code == 0, out
    run_dir = runs / name / "latest"
    assert f"MLflow at http://***@127.0.0.1:{mlflow_server.port}" in out          # the live view's row
    assert "tracked in MLflow: 2 trial run(s)" in out and "registered as tfc-sync-best version 1" in out

    client = mlflow_server.client()
    doc, parent, by_name = assert_trials_match(client, run_dir, "sync-search", ["h0", "h1"])
    # Sent while it trained, not only at collect: the first epochs are older than the results.
    finished = dt.datetime.fromisoformat(doc["finished"]).timestamp() * 1000
    first = min(m.timestamp for r in by_name.values() for m in client.get_metric_history(r.info.run_id, "val_accuracy"))
    assert first < finished
    # The best trial's model: logged with its run, registered, loads and predicts.
    (version,) = client.search_model_versions("name = 'tfc-sync-best'")
    assert version.run_id == by_name[doc["best"]["candidate"]].info.run_id
    said = predicts(trainer_image, mlflow_server.uri, "tfc-sync-best/1", (16, 16, 1))
    assert "pyfunc (3, 4)" in said and "keras [1.0, 1.0, 1.0]" in said, said

    # Twice more by hand: nothing is sent twice.
    for _ in range(2):
        code, again = run_cli("track", str(run_dir), "-i", str(inv), env=secrets_env, timeout=300)
        assert code == 0 and "tracked in MLflow: 2 trial run(s)" in again, again
    assert_trials_match(client, run_dir, "sync-search", ["h0", "h1"])        # each epoch still once
    assert len(client.search_model_versions("name = 'tfc-sync-best'")) == 1

    # No secret anywhere: what was pushed to the hosts, every collected file, what was printed, the hook.
    assert hook_env.is_file()
    hook_text = hook_env.read_text()
    assert "TFC_RUN_DIR=" in hook_text and "MLFLOW_TRACKING_TOKEN" not in hook_text
    bundles = [Path(h.workdir) / name for h in hosts]
    everything = [(str(p), p.read_bytes()) for p in files_under(*bundles, runs)]
    assert any(p.endswith("compose.yaml") for p, _ in everything) and any(p.endswith("tracking.json") for p, _ in everything)
    for secret in (password, token, basic):
        assert secret not in out + again and secret not in hook_text
        assert [p for p, data in everything if secret.encode() in data] == []
    assert "TFC_MLFLOW_MODEL" in (bundles[0] / "compose.yaml").read_text()


def test_a_tracker_killed_mid_run_stops_no_training_and_track_sends_the_rest_afterwards(mlflow_server, cluster_env,
                                                                                          tmp_path):
    name, inv, hosts = cluster_env(n=2, train=TRIALS_PARALLEL,
                                   tracking={"mlflow": {"uri": mlflow_server.uri, "experiment": "parallel-search",
                                                        "register_as": "tfc-parallel-best", "timeout_s": 2}})
    runs = tmp_path / "runs"
    up = CliProcess("up", "-i", str(inv), "--wait", "--runs", str(runs))
    try:
        client = mlflow_server.client()
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and up.proc.poll() is None:
            parents, _ = search_runs(client, "parallel-search")
            if parents:         # the search's run is made as the wait begins: the hosts are starting to train
                break
            time.sleep(0.5)
        assert up.proc.poll() is None and "h0: running" in up.output, "the search ended before:\n" + up.output
        mlflow_server.kill()
        code = up.finish(600)
    finally:
        up.proc.kill()
    out = up.output
    assert code == 0, out                                                      # training finished regardless
    assert f"warning: tracking: MLflow at {mlflow_server.uri}" in out and "training goes on" in out
    assert f"`tfcompose track {runs / name / up_run(runs / name)}` sends the rest" in out
    run_dir = runs / name / "latest"
    doc = json.loads((run_dir / "results.json").read_text())
    assert len(doc["candidates"]) == 3 and all(r["state"] == "complete" for r in doc["candidates"])
    ledger = json.loads((run_dir / "tracking.json").read_text())
    assert ledger["complete"] is False and "no answer" in ledger["pending"]
    # what `track` needs without the inventory: the search run's params (the tracker may have been
    # killed between making that run and giving it its params; CI once saw it)
    assert ledger["search_params"]["epochs"] == str(doc["candidates"][0]["epochs"])

    mlflow_server.start()
    code, said = run_cli("track", str(run_dir), timeout=300)          # where the run went before (tracking.json)
    assert code == 0 and "tracked in MLflow: 3 trial run(s)" in said, said
    client = mlflow_server.client()
    _, _, by_name = assert_trials_match(client, run_dir, "parallel-search", ["h0", "h1"])
    assert {r.data.tags["tfcompose.host"] for r in by_name.values()} <= {"h0", "h1"}
    (version,) = client.search_model_versions("name = 'tfc-parallel-best'")
    assert version.run_id == by_name[doc["best"]["candidate"]].info.run_id
    from mlflow.entities import LoggedModelStatus
    model = client.get_logged_model(json.loads((run_dir / "tracking.json").read_text())["model_id"])
    assert model.status == LoggedModelStatus.READY and model.source_run_id == version.run_id
    assert {f.path for f in client.list_logged_model_artifacts(model.model_id)} >= {"MLmodel", "data"}


def up_run(cluster_dir: Path) -> str:
    return (cluster_dir / "latest").resolve().name


def test_two_trials_of_one_name_stay_two_runs_with_printable_names_and_a_second_track_deletes_nothing(
        mlflow_server, tmp_path):
    """#46: trials were found again by name: two of one name were two children of which a second
    `track` deleted one (the README promises `track` is idempotent), and an escape sequence in a
    name reached MLflow's run names. A run folder made by hand, sent twice: no TensorFlow here."""
    run_dir = tmp_path / "runs" / "named" / "20261127-120000-0badc0de"
    (run_dir / "history").mkdir(parents=True)
    names = [("small_cnn", 0.5), ("small_cnn", 0.6), ("deep\x1b[31m_cnn\u202e", 0.4)]
    records = []
    for i, (name, acc) in enumerate(names):
        (run_dir / "history" / f"{i}.csv").write_text(f"epoch,loss,accuracy,val_loss,val_accuracy\n1,1,0.3,1,0.3\n"
                                                      f"2,0.9,{acc},0.8,{acc}\n")
        records.append({"candidate": name, "val_accuracy": acc, "val_loss": 0.8, "train_seconds": 1.0,
                        "images_per_second": 10.0, "params": 10, "epochs": 2, "learning_rate": 0.01,
                        "history": f"history/{i}.csv"})
    (run_dir / "results.json").write_text(json.dumps({"schema": 1, "mode": "sync", "candidates": records,
                                                      "best": {"candidate": "small_cnn", "val_accuracy": 0.6}}))
    env = {"MLFLOW_TRACKING_URI": mlflow_server.uri, "MLFLOW_EXPERIMENT_NAME": "one-name-twice"}
    for _ in range(2):
        code, said = run_cli("track", str(run_dir), env=env, timeout=300)
        assert code == 0 and "tracked in MLflow: 3 trial run(s)" in said, said
    client = mlflow_server.client()
    parents, children = search_runs(client, "one-name-twice")
    assert len(parents) == 1 and len(children) == 3
    by_key = {r.data.tags["tfcompose.trial"]: r for r in children}
    assert sorted(by_key) == ["deep_cnn", "small_cnn", "small_cnn (2)"]
    assert sorted(r.info.run_name for r in children) == ["deep_cnn", "small_cnn", "small_cnn (2)"]
    assert [k for k, r in by_key.items() if r.data.tags["tfcompose.best"] == "true"] == ["small_cnn (2)"]
    for key, (_, acc) in zip(["small_cnn", "small_cnn (2)", "deep_cnn"], names):
        history = client.get_metric_history(by_key[key].info.run_id, "val_accuracy")
        assert sorted((m.step, m.value) for m in history) == [(1, 0.3), (2, acc)], key       # each epoch once
    deleted = client.search_runs([client.get_experiment_by_name("one-name-twice").experiment_id],
                                 run_view_type=2, max_results=100)          # ViewType.DELETED_ONLY
    assert deleted == []


# A learning rate that diverges (5.0, pruned by ASHA at a rung), two hosts, the host killed mid-trial
# having its trial retried on the other; and a builder given a value it refuses, as a user's may: the
# image's own small_cnn by its import path, whose dropout no check of the config bounds (a builder's
# arguments are its own business), given 1.5, which Keras refuses when the model is built. The
# grid's points go in order and `trials: 5` takes the first five: the four small_cnn trials, then
# that one, which fails at once (one failure: no host is quarantined).
REFUSING = "trainer.train.models:small_cnn"
TRIALS_EVERY_STATE = {"dataset": {"kind": "synthetic", "image_size": [16, 16], "per_class": 16},
                      "candidates": ["small_cnn", REFUSING], "epochs": 6, "batch_per_replica": 8,
                      "search": {"mode": "parallel", "learning_rates": [0.003, 0.002, 5.0, 0.001],
                                 "pruner": "asha", "min_epochs": 2, "reduction_factor": 2, "trials": 5,
                                 "hyperparameters": {REFUSING: {"dropout": [1.5]}}}}
STATUS = {"complete": "FINISHED", "pruned": "FINISHED", "failed": "FAILED", "retried": "KILLED"}


def containers_of(name: str, host: int) -> list[str]:
    return subprocess.run(["docker", "ps", "-q", "--filter", f"label=tfcompose.cluster={name}",
                           "--filter", f"label=tfcompose.host=h{host}"], capture_output=True, text=True).stdout.split()


def kill_mid_trial(hosts, name: str, host: int, up: CliProcess, seconds: float = 600) -> None:
    """Kill the host's container while it trains a trial with epochs still to go: its own progress
    file mid-trial, and the chief's queue naming that trial as the host's. Every container is held
    to a fraction of a CPU from its start, so that the host's epochs last long enough to be caught
    (a tiny epoch takes a few milliseconds) and no decision (ASHA's, at min_epochs 2) ends its trial
    first; the chief alike until then (at full speed it once trained all four trials while the
    other host was still importing TensorFlow), and at full speed after."""
    deadline = time.monotonic() + seconds
    throttled: set[int] = set()
    while time.monotonic() < deadline:
        assert up.proc.poll() is None, up.output
        mine, chiefs = run_results(hosts[host].workdir / name), run_results(hosts[0].workdir / name)
        doc = next((json.loads(p.read_text()) for p in mine.glob("progress-*.json")), None) if mine else None
        search = chiefs / "search-progress.json" if chiefs else None
        queue = json.loads(search.read_text()) if search and search.is_file() else {}
        said = queue.get("hosts", {}).get(f"h{host}", {})
        for each in {0, host} - throttled:
            ids = containers_of(name, each)
            if ids and subprocess.run(["docker", "update", "--cpus", "0.3", *ids], capture_output=True).returncode == 0:
                throttled.add(each)
        if doc and 1 <= doc["epoch"] <= doc["epochs"] - 2 and not doc["done"] and said.get("trial") == doc["trial"] \
                and said.get("state") == "training":
            subprocess.run(["docker", "kill", *containers_of(name, host)], check=True, capture_output=True)
            subprocess.run(["docker", "update", "--cpus", "0", *containers_of(name, 0)], capture_output=True)
            return
        time.sleep(0.2)
    raise AssertionError(f"h{host} never got into a trial:\n{up.output[-4000:]}")


def test_pruned_failed_and_retried_trials_carry_their_state_tags_and_their_own_times(mlflow_server, cluster_env,
                                                                                     tmp_path):
    name, inv, hosts = cluster_env(n=2, train=TRIALS_EVERY_STATE,
                                   tracking={"mlflow": {"uri": mlflow_server.uri, "experiment": "every-state"}})
    runs = tmp_path / "runs"
    up = CliProcess("up", "-i", str(inv), "--wait", "--runs", str(runs))
    try:
        kill_mid_trial(hosts, name, 1, up)
        assert up.finish(900) == 0, up.output
    finally:
        up.proc.kill()
    run_dir = runs / name / "latest"
    doc = json.loads((run_dir / "results.json").read_text())
    states = [r["state"] for r in doc["candidates"]]
    assert {"complete", "pruned", "retried", "failed"} <= set(states), states
    client = mlflow_server.client()
    parents, children = search_runs(client, "every-state")
    (parent,) = parents
    by_name = {r.data.tags["tfcompose.trial"]: r for r in children}
    assert sorted(by_name) == sorted(r["candidate"] for r in doc["candidates"])       # one run per trial
    for record in doc["candidates"]:
        run, state = by_name[record["candidate"]], record["state"]
        assert (run.info.status, run.data.tags["tfcompose.state"]) == (STATUS[state], state), record["candidate"]
        # the trial's own times, to the millisecond: not when the launcher sent it (a trial lost with its
        # host: its run was made while it trained, from when its host began it; the queue handed it out before)
        assert run.info.end_time == round(record["ended_at"] * 1000), record["candidate"]
        if state == "retried":
            assert round(record["started_at"] * 1000) <= run.info.start_time <= run.info.end_time
        else:
            assert run.info.start_time == round(record["started_at"] * 1000), record["candidate"]
        if state == "pruned":
            assert run.data.tags["tfcompose.pruned_at_epoch"] == str(record["pruned_at_epoch"])
        if state == "failed":
            assert "Invalid value 1.5 received for `rate`" in run.data.tags["tfcompose.why"], run.data.tags
        if state == "retried":
            assert run.data.tags["tfcompose.retried_as"] == record["retried_as"] == record["candidate"] + "~r1"
            assert record["host"] == "h1" and by_name[record["retried_as"]].data.tags["tfcompose.host"] == "h0"
        if record.get("history"):                          # each epoch's figures at that epoch's end
            rows = history_rows(run_dir, record)
            assert rows and all(r["ended_at"] for r in rows)
            stamped = {m.step: m.timestamp for m in client.get_metric_history(run.info.run_id, "val_loss")}
            assert stamped == {int(r["epoch"]): round(float(r["ended_at"]) * 1000) for r in rows}, record["candidate"]
            assert record["started_at"] * 1000 <= min(stamped.values()) <= max(stamped.values()) <= record["ended_at"] * 1000
    finished = dt.datetime.fromisoformat(doc["finished"]).timestamp() * 1000
    assert parent.info.status == "FINISHED" and parent.info.end_time == round(finished)
