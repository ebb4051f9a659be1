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


def keras_tutorial(tmp_path, **extra) -> dict:
    folder = tmp_path / "keras_tutorial"
    shutil.copytree(FIXTURES / "keras_tutorial", folder)
    return {"command": ["python", "train.py"], "code_dir": str(folder), "join_timeout_s": 180, "deadline_s": 900, **extra}


def test_a_plain_tf_keras_program_as_the_tutorial_writes_it_runs_unchanged_and_is_told_where_its_files_go(
        cluster_env, capsys, tmp_path):
    """#47: on TensorFlow 2.21 `tf.keras` is Keras 3, whose fit fails under MWMS; the image makes it
    tf_keras (said once per host), and a program that saved its model under /tmp, not to
    TFC_RESULTS_DIR, is told where its files must go instead of "This run left no results"."""
    name, inv, hosts = cluster_env(n=2, run=keras_tutorial(tmp_path))
    runs = tmp_path / "runs"
    code_, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--runs", str(runs))
    assert code_ == 0, out + err
    latest = runs / name / "latest"
    for host in ("h0", "h1"):
        log = (latest / "logs" / f"{host}.log").read_text()
        assert log.count("tf.keras is tf_keras here") == 1 and "Epoch 2/2" in log and "Traceback" not in log, log[-3000:]
    assert "your program wrote nothing to its results folder" in out + err and "$TFC_RESULTS_DIR (/results" in out + err
    report = (latest / "report.md").read_text()
    assert "left no results" not in report and "$TFC_RESULTS_DIR (/results" in report
    assert cli(capsys, "down", "-i", str(inv))[0] == 0


def test_a_program_that_fails_alike_at_its_start_is_not_restarted_into_it_and_up_shows_its_error(
        cluster_env, capsys, tmp_path):
    """Keras 3 by the user's own choice (run.env): the tutorial's fit fails on every start; Docker's
    restarts (3 here) are not spent on it: the second failure alike ends it, and `up` names the
    program's own error, not the tail of what it printed."""
    run = keras_tutorial(tmp_path, env={"TF_USE_LEGACY_KERAS": "0"})
    name, inv, hosts = cluster_env(n=2, run=run, defaults={"restart_retries": 3})
    code_, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--runs", str(tmp_path / "runs"))
    assert code_ == 1, out + err
    first = next(line for line in err.splitlines() if line.startswith("tfcompose: "))
    assert "failed (exit code 3" in first and "ValueError: Attempt to convert a value (PerReplica" in first, err
    latest = tmp_path / "runs" / name / "latest"
    for host in ("h0", "h1"):
        log = (latest / "logs" / f"{host}.log").read_text()
        assert "tf.keras is tf_keras here" not in log and log.count("Traceback (most recent call last)") <= 2, log[-3000:]
    assert any("tfcompose runner: not started again" in (latest / "logs" / f"{h}.log").read_text() for h in ("h0", "h1"))
    assert cli(capsys, "down", "-i", str(inv))[0] == 0
