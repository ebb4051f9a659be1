"""Faults in cluster mode: resume through Docker's restart policy, fail-fast, chief loss, a worker
that never arrives, and secrets that must not leak. Real sshd hosts, real Docker engine."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from support.common import REPO
from launcher.ssh.explain import PASSPHRASE_ENV
from support.sshd import keygen
from support.cluster import TRAIN, labelled

pytestmark = pytest.mark.integration


def tfcompose(*args, env=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "launcher", *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def container(cluster: str, host: str) -> str:
    ids = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=tfcompose.cluster={cluster}",
                          "--filter", f"label=tfcompose.host={host}"], capture_output=True, text=True).stdout.split()
    return ids[0] if ids else ""


def docker_logs(cid: str) -> str:
    proc = subprocess.run(["docker", "logs", cid], capture_output=True, text=True)
    return proc.stdout + proc.stderr


def wait_for_log(cluster: str, host: str, text: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while True:
        cid = container(cluster, host)
        if cid and text in docker_logs(cid):
            return
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{text!r} never appeared on {host}"
        time.sleep(0.5)


def crash(cluster: str, host: str) -> None:
    """SIGKILL the container's process from the host, like the OOM killer: Docker sees a crash."""
    pid = int(subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", container(cluster, host)],
                             capture_output=True, text=True, check=True).stdout)
    os.kill(pid, signal.SIGKILL)


TRAIN_LONG = {**TRAIN, "dataset": {"kind": "synthetic", "image_size": [24, 24], "per_class": 48},
              "candidates": ["small_cnn", "deep_cnn"], "epochs": 4, "batch_per_replica": 8}


def test_a_crashed_worker_is_restarted_and_the_run_resumes(cluster_env, tmp_path):
    name, inv, hosts = cluster_env(n=2, train=TRAIN_LONG, defaults={"gpus": 0, "shm_size": "256m", "restart_retries": 2})
    proc = tfcompose("up", "-i", str(inv), "--wait", "--runs", str(tmp_path / "runs"))
    wait_for_log(name, "h1", "deep_cnn epoch 2/4", proc)
    crash(name, "h1")
    killed = time.monotonic()
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, out + err
    print(f"[reliability] cluster crash of h1 during deep_cnn epoch 3 of 4: run completed {time.monotonic() - killed:.1f} s later")
    assert re.search(r"^h1: .*restarts [12]", out, re.M), out  # the live view shows the restart
    doc = json.loads((tmp_path / "runs" / name / "latest" / "results.json").read_text())
    first, second = doc["candidates"]
    assert doc["restarts"] >= 1 and first["start"] == 1 and first["resumed_from_epoch"] == 0
    assert second["start"] >= 2 and second["resumed_from_epoch"] >= 1
    assert second["resumed_from_epoch"] + second["epochs_run"] == 4
    restarts = subprocess.run(["docker", "inspect", "-f", "{{.RestartCount}}", container(name, "h1")],
                              capture_output=True, text=True).stdout.strip()
    assert int(restarts) >= 1


@pytest.mark.parametrize("victim", ["h1", "h0"], ids=["worker-lost", "chief-lost"])
def test_fail_fast_stops_everything_collects_logs_and_names_the_host(cluster_env, tmp_path, victim):
    hook = tmp_path / "hook.txt"
    name, inv, hosts = cluster_env(n=2, train={**TRAIN_LONG, "epochs": 50}, on_finish=f"echo finished >> {hook}",
                                   on_failure=f'echo "$TFC_OUTCOME $TFC_MESSAGE" >> {hook}')
    proc = tfcompose("up", "-i", str(inv), "--wait", "--runs", str(tmp_path / "runs"))
    wait_for_log(name, victim, "small_cnn epoch 2/50", proc)
    crash(name, victim)
    killed = time.monotonic()
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, out + err
    print(f"[reliability] {victim} SIGKILLed: up --wait stopped the cluster and exited 1 after {time.monotonic() - killed:.1f} s")
    # The crashed host is named first; the survivor, if it had exited by then, comes after ("then …").
    assert f"tfcompose: {victim} failed (exit code 137, after 0 restart(s))" in err
    assert "stopped every container of the cluster" in err
    assert "with an `elastic:` section in the inventory the other hosts would go on without it" in err
    assert "small_cnn epoch 2/50" in err  # the tail of its log
    assert time.monotonic() - killed < 60
    running = subprocess.run(["docker", "ps", "-q", "--filter", f"label=tfcompose.cluster={name}"],
                             capture_output=True, text=True).stdout.split()
    assert running == []
    logs = tmp_path / "runs" / name / "latest" / "logs"
    assert sorted(p.name for p in logs.iterdir()) == ["h0.log", "h1.log"]
    assert hook.read_text().startswith(f"failed {victim} failed (exit code 137")  # on_failure, not on_finish


def test_a_worker_that_never_arrives_is_named_by_the_chief_and_reported(cluster_env, tmp_path):
    name, inv, hosts = cluster_env(n=2, train={**TRAIN, "join_timeout_s": 15})
    started = tfcompose("up", "-i", str(inv))
    out, err = started.communicate(timeout=300)
    assert started.returncode == 0, out + err
    subprocess.run(["docker", "pause", container(name, "h1")], check=True, capture_output=True)  # frozen before joining
    paused = time.monotonic()
    proc = tfcompose("up", "-i", str(inv), "--wait", "--runs", str(tmp_path / "runs"))
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, out + err
    print(f"[reliability] h1 frozen before joining: up --wait exited 1 after {time.monotonic() - paused:.1f} s (join_timeout_s 15)")
    assert "h0 failed (exit code 1" in err and "cluster did not form within 15 s" in err and "worker:1" in err
    assert labelled(name)  # stopped, kept for `collect`; `down` removes them
    assert subprocess.run([sys.executable, "-m", "launcher", "down", "-i", str(inv)],
                          cwd=REPO, capture_output=True).returncode == 0
    assert labelled(name) == []


def test_passphrase_and_key_never_appear_in_rendered_files_logs_or_results(cluster_env, sshd_farm, tmp_path):
    passphrase = "s3cret-Passphrase-42"
    key = keygen(tmp_path / "id_locked", passphrase=passphrase)
    sshd_farm.authorize(key.with_suffix(".pub"))
    name, inv, hosts = cluster_env(n=1, train={**TRAIN, "candidates": ["small_cnn"], "epochs": 1}, identity_file=key)
    env = {PASSPHRASE_ENV: passphrase}
    rendered = tfcompose("render", "-i", str(inv), "-o", str(tmp_path / "build"), env=env)
    run = tfcompose("up", "-i", str(inv), "--wait", "--runs", str(tmp_path / "runs"), env=env)
    outputs = [rendered.communicate(timeout=60), run.communicate(timeout=300)]
    assert run.returncode == 0, outputs
    secrets = [passphrase, *[line for line in key.read_text().splitlines() if "PRIVATE KEY" not in line and line]]
    secrets += [key.with_suffix(".pub").read_text().split()[1]]
    places = [*(tmp_path / "build").rglob("*"), *(tmp_path / "runs").rglob("*"), *(hosts[0].workdir).rglob("*")]
    texts = [p.read_bytes() for p in places if p.is_file()] + [o.encode() for pair in outputs for o in pair]
    assert len(texts) > 10
    for secret in secrets:
        assert not any(secret.encode() in t for t in texts), "secret material leaked"
    assert tfcompose("down", "-i", str(inv), env=env).wait(timeout=60) == 0
