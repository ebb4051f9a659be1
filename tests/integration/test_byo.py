"""Bring your own MWMS script: baked into an image layer, run across sshd hosts with `up --wait`."""
from __future__ import annotations

import json
import shutil

import pytest

from support.common import FIXTURES
from launcher import plan
from launcher.inventory.load import load_cluster
from support.cluster import cli, labelled

pytestmark = pytest.mark.integration


def code(tmp_path):
    folder = tmp_path / "my_project"
    shutil.copytree(FIXTURES / "byo", folder)
    return folder


def test_a_custom_loop_script_runs_unchanged_across_two_hosts(cluster_env, capsys, tmp_path):
    run = {"command": ["python", "train.py"], "code_dir": str(code(tmp_path)), "join_timeout_s": 120, "deadline_s": 600}
    name, inv, hosts = cluster_env(n=2, run=run)
    runs = tmp_path / "runs"
    code_, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--runs", str(runs))
    assert code_ == 0, out + err
    latest = runs / name / "latest"
    output = json.loads((latest / "output.json").read_text())
    assert output["replicas"] == 2 and output["task"] == "0"  # written by the chief only
    cluster = load_cluster(inv)
    for host in cluster.hosts:
        log = (latest / "logs" / f"{host.name}.log").read_text()
        printed = json.loads(next(line for line in log.splitlines() if line.startswith("TFC "))[4:])
        assert printed == {
            "TFC_CHIEF_ADDR": cluster.chief.tf_address, "TFC_CLUSTER": name, "TFC_EXPECT_GPUS": "0",
            "TFC_HOST": host.name, "TFC_IS_CHIEF": "1" if host.chief else "0", "TFC_NUM_WORKERS": "2",
            "TFC_OWNER_OF": "/config/run.yaml", "TFC_RESULTS_DIR": "/results", "TFC_RUN_ID": latest.resolve().name,
            "TFC_TASK_INDEX": str(host.index), "TFC_TASK_TYPE": "worker"}
        assert "epoch 3: loss" in log
    assert plan.make(cluster).container_image.startswith("tfcompose-trainer:run-")

    assert cli(capsys, "down", "-i", str(inv))[0] == 0 and labelled(name) == []


def test_a_host_that_never_creates_the_strategy_is_stopped_by_the_join_deadline(cluster_env, capsys, tmp_path):
    run = {"command": ["python", "train.py"], "code_dir": str(code(tmp_path)), "env": {"BYO_STALL_ON_TASK": "1"},
           "join_timeout_s": 20, "deadline_s": 600}
    name, inv, hosts = cluster_env(n=2, run=run)
    code_, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--runs", str(tmp_path / "runs"))
    assert code_ == 1, out + err
    assert (f"stopped every container of the cluster: never opened TensorFlow's port within run.join_timeout_s "
            f"(20 s): h1 (port {hosts[1].tf_port})") in err
    assert cli(capsys, "down", "-i", str(inv))[0] == 0
