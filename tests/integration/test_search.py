"""Model search at cluster scale: parallel placement over sshd hosts, and the sync search space."""
from __future__ import annotations

import json

import matplotlib.image
import pytest

from launcher import plan as plan_mod
from launcher.inventory.load import load_cluster
from launcher.stages import render
from support.cluster import cli, labelled

pytestmark = pytest.mark.integration
SPACE = {"dataset": {"kind": "synthetic", "image_size": [24, 24], "per_class": 32}, "candidates": ["small_cnn", "deep_cnn"],
         "epochs": 2, "batch_per_replica": 16, "search": {"mode": "parallel", "learning_rates": [0.01, 0.001]}}
TRIALS = ["small_cnn@lr=0.01,bs=16", "small_cnn@lr=0.001,bs=16", "deep_cnn@lr=0.01,bs=16", "deep_cnn@lr=0.001,bs=16"]


def test_parallel_mode_spreads_four_trials_over_two_hosts_and_gathers_one_report(cluster_env, capsys, tmp_path):
    name, inv, hosts = cluster_env(n=2, train=SPACE)
    cluster = load_cluster(inv)
    plan = plan_mod.make(cluster)
    placement = plan.placement
    assert sorted(n for names in placement.values() for n in names) == sorted(TRIALS) and all(placement.values())
    assert all("TF_CONFIG" not in render.host_service(plan, h).environment for h in cluster.hosts)
    runs = tmp_path / "runs"
    code, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--runs", str(runs))
    assert code == 0, out + err
    latest = runs / name / "latest"
    doc = json.loads((latest / "results.json").read_text())
    assert doc["mode"] == "parallel" and doc["workers"] == 2
    assert [r["candidate"] for r in doc["candidates"]] == [n for names in placement.values() for n in names]
    assert sorted(r["candidate"] for r in doc["candidates"]) == sorted(TRIALS)  # each exactly once
    for record in doc["candidates"]:
        assert record["candidate"] in placement[record["host"]]  # trained where it was placed
    logs = "".join((latest / "logs" / f"{h}.log").read_text() for h in ("h0", "h1"))
    assert all(logs.count(f"{t} done:") == 1 for t in TRIALS)
    best = max(doc["candidates"], key=lambda r: r["val_accuracy"])
    assert doc["best"]["candidate"] == best["candidate"] and (latest / "best_model.keras").is_file()
    report = (latest / "report.md").read_text()
    assert all(t in report for t in TRIALS)
    for png in ("leaderboard.png", "curves.png", "confusion_matrix.png"):
        assert matplotlib.image.imread(latest / png).shape[0] > 100
    assert "leaderboard" in out and cli(capsys, "down", "-i", str(inv))[0] == 0 and labelled(name) == []


def test_sync_search_space_with_early_stopping(trainers, tmp_path):
    args = ["--epochs", "4", "--results-dir", str(tmp_path / "r"), "--set", "dataset.per_class=24",
            "--set", "search={learning_rates: [0.01, 0.001], batch_per_replica: [8, 16], patience: 1}"]
    proc = trainers.start(args, name="space")
    assert proc.wait(timeout=300) == 0, proc.log_path.read_text()[-3000:]
    doc = json.loads((tmp_path / "r" / "results.json").read_text())
    records = {r["candidate"]: r for r in doc["candidates"]}
    assert list(records) == ["small_cnn@lr=0.01,bs=8", "small_cnn@lr=0.01,bs=16", "small_cnn@lr=0.001,bs=8",
                             "small_cnn@lr=0.001,bs=16"]
    for name, r in records.items():
        assert (r["learning_rate"], r["batch_per_replica"]) == (float(name.split("lr=")[1].split(",")[0]),
                                                               int(name.split("bs=")[1]))
        assert sum(map(sum, r["confusion_matrix"])) == doc["images"]["val"]
        assert r["stopped_early"] == (r["epochs_run"] < 4)
    assert any(r["stopped_early"] for r in records.values())  # val_accuracy saturates on this data
