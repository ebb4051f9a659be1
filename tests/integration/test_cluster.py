"""`tfcompose up --wait` and friends through real sshd hosts and the real Docker engine."""
from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from launcher.files import REPO
from launcher.image import local
from launcher.inventory.load import load_cluster
from support.cluster import TRAIN, cli, labelled, wait_for_log
from support.common import FIXTURES, free_ports
from support.engine import empty_engine

pytestmark = pytest.mark.integration



def changed_trainer_context(folder: Path, first_line: str) -> Path:
    """A copy of the image's build context whose trainer starts with `first_line`."""
    for name in ("trainer", "docker"):
        shutil.copytree(REPO / name, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".dockerignore", folder / ".dockerignore")
    main_py = folder / "trainer" / "__main__.py"
    main_py.write_text(first_line + main_py.read_text())
    return folder


def tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.mark.timeout(1500)      # the whole image over SSH into an empty engine: 6–8 min on a loaded machine
def test_up_wait_ships_trains_across_hosts_collects_and_down_cleans(cluster_env, second_engine, image_cache, capsys,
                                                                    tmp_path, monkeypatch):
    # h1 runs on a second, empty Docker engine: the image must really travel there over SSH.
    empty_engine(second_engine)
    monkeypatch.setenv("XDG_CACHE_HOME", str(image_cache))
    hook = tmp_path / "hook.txt"
    name, inv, hosts = cluster_env(n=2, engines={1: second_engine}, train={**TRAIN, "epochs": 2},
                                   on_finish=f'echo "$TFC_OUTCOME $TFC_RUN_DIR" >> {hook}', on_failure=f"echo failed >> {hook}")
    runs = tmp_path / "runs"
    code, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--runs", str(runs))
    assert code == 0, out + err
    # Off a terminal: one progress line per epoch of every trial on every host, in order, with an ETA.
    for host in ("h0", "h1"):
        seen = re.findall(rf"^{host}: trial (\d)/2 (\S+) epoch (\d)/2 \d+ img/s loss \S+ acc \S+ val_acc \S+ "
                          r"ETA \d+:\d\d:\d\d$", out, re.M)
        assert seen == [(t, c, e) for t, c in (("1", "small_cnn"), ("2", "deep_cnn")) for e in "12"], out
    assert "\x1b" not in out
    shipped = re.search(r"^h1: image \(shipped (\d+)/(\d+) layers, ([\d,]+) B\)$", out, re.M)
    assert shipped and shipped.group(1) == shipped.group(2), out  # an empty engine: every layer
    assert int(shipped.group(3).replace(",", "")) > 500_000_000, out  # the whole image, compressed
    assert re.search(r"^h0: image \(present, 0 B\)$", out, re.M), out
    latest = runs / name / "latest"
    doc = json.loads((latest / "results.json").read_text())
    assert [c["candidate"] for c in doc["candidates"]] == ["small_cnn", "deep_cnn"]
    assert doc["workers"] == 2 and (latest / "best_model.keras").is_file()
    logs = {p.stem: p.read_text() for p in (latest / "logs").iterdir()}
    assert set(logs) == {"h0", "h1"}
    assert "[worker:0] small_cnn epoch 2/2" in logs["h0"] and "[worker:1] small_cnn epoch 2/2" in logs["h1"]
    run_dir = (runs / name / "latest").resolve()
    assert hook.read_text() == f"finished {run_dir}\n"  # on_finish, once, with the run folder
    for stage in ("connect", "preflight", "push", "image", "start", "running", "collect"):
        assert f"h0: {stage}" in out

    code, out, _ = cli(capsys, "status", "-i", str(inv), "--json")
    states = {s["host"]: s for s in json.loads(out)}
    assert code == 0 and {h: (s["state"], s["exit_code"]) for h, s in states.items()} == {"h0": ("exited", 0), "h1": ("exited", 0)}
    assert states["h0"]["last_line"].startswith("best: ")

    code, out, _ = cli(capsys, "logs", "-i", str(inv), "--no-follow")
    assert code == 0 and "[worker:0] deep_cnn epoch 2/2 loss=" in out and "[worker:1]" not in out
    code, out, _ = cli(capsys, "logs", "-i", str(inv), "--no-follow", "--host", "h1")
    assert code == 0 and "[worker:1] deep_cnn epoch 2/2 loss=" in out
    code, out, _ = cli(capsys, "logs", "-i", str(inv), "--all", "--no-follow", "--tail", "50")
    assert code == 0 and re.search(r"^h0 \| \[worker:0\] deep_cnn epoch 2/2", out, re.M)
    assert re.search(r"^h1 \| \[worker:1\] deep_cnn epoch 2/2", out, re.M)
    assert all(line.startswith(("h0 | ", "h1 | ")) for line in out.splitlines())

    # Again after a finished run: a run of its own (the finished one is never overwritten), nothing
    # shipped; `up` again while that one runs restarts nothing and pushes nothing.
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 0, out + err
    again = re.search(r"^run (\S+): a new run$", out, re.M)
    assert again and again.group(1) != run_dir.name and out.count(" started ") == 2, out
    assert "shipped" not in out and len(re.findall(r"^h\d: image \(present, 0 B\)$", out, re.M)) == 2
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 0 and f"run {again.group(1)}: already running, left as it is" in out, out + err
    assert out.count("already running") >= 2 and out.count("│ 0 B") == 2  # bundle bytes

    # A change in trainer/: only the trainer's layer (and what follows it) travels, and it runs.
    context = changed_trainer_context(tmp_path / "context", 'print("TFC-DELTA-MARK", flush=True)\n')
    monkeypatch.setattr(local, "REPO", context)
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 0, out + err
    shipped = re.search(r"^h1: image \(shipped (\d+)/(\d+) layers, ([\d,]+) B\)$", out, re.M)
    assert shipped and int(shipped.group(1)) == 1 < int(shipped.group(2)), out
    assert int(shipped.group(3).replace(",", "")) <= tree_bytes(context / "trainer") + 1_000_000, out
    assert wait_for_log(capsys, inv, "h1", "TFC-DELTA-MARK"), "the new trainer did not run on h1"
    monkeypatch.undo()
    local.build_local(load_cluster(inv))  # the image tag back to this checkout's trainer, for later tests

    code, out, err = cli(capsys, "down", "-i", str(inv), "--purge")
    assert code == 0 and all(f"h{i}: removed 1 container(s), gave back its lease, purged" in out for i in (0, 1)), out
    assert labelled(name) == [] and labelled(name, second_engine) == []
    assert not any((h.workdir / name).exists() for h in hosts)
    code, out, err = cli(capsys, "down", "-i", str(inv))  # idempotent
    assert code == 0 and "h0: removed 0 container(s)" in out


def test_a_code_edit_reaches_a_host_as_one_small_layer_and_runs(cluster_env, second_engine, image_cache, capsys,
                                                                tmp_path, monkeypatch):
    """`run:` code on a host whose engine holds the trainer image (the test above put it there, or
    this test's first up does): after a one-line edit only the code layer travels."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(image_cache))
    folder = tmp_path / "my_project"
    shutil.copytree(FIXTURES / "byo", folder)
    run = {"command": ["python", "train.py"], "code_dir": str(folder), "join_timeout_s": 120, "deadline_s": 600}
    name, inv, hosts = cluster_env(n=2, run=run, engines={1: second_engine})
    runs = tmp_path / "runs"
    code, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--runs", str(runs))
    assert code == 0, out + err
    script = folder / "train.py"
    script.write_text(script.read_text().replace('print("TFC "', 'print("TFC-CODE-V2", flush=True)\nprint("TFC "', 1))
    code, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--runs", str(runs))
    assert code == 0, out + err
    shipped = re.search(r"^h1: image \(shipped (\d+)/(\d+) layers, ([\d,]+) B\)$", out, re.M)
    assert shipped and int(shipped.group(1)) == 1 < int(shipped.group(2)), out
    assert int(shipped.group(3).replace(",", "")) <= tree_bytes(folder) + 1_000_000, out
    assert re.search(r"^h0: image \(present, 0 B\)$", out, re.M), out  # made here, so already in this engine
    for host in ("h0", "h1"):
        assert "TFC-CODE-V2" in (runs / name / "latest" / "logs" / f"{host}.log").read_text()
    assert cli(capsys, "down", "-i", str(inv))[0] == 0 and labelled(name) == []


def test_closed_port_fails_preflight_and_starts_nothing_anywhere(cluster_env, capsys):
    (closed, tf) = free_ports(2)
    name, inv, hosts = cluster_env(n=2, extra_hosts=[{"name": "gone", "address": "127.0.0.1", "ssh_port": closed,
                                                      "tf_port": tf, "workdir": "/tmp/tfc-gone"}])
    started = time.monotonic()
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 1, out + err
    user = inv.read_text().split("user: ", 1)[1].split()[0]
    assert "lease failed on 1 of 3 host(s):" in err       # the first stage to reach the hosts
    assert f"gone: ssh {user}@127.0.0.1:{closed}: cannot connect (connection refused)" in err
    assert time.monotonic() - started < 60
    assert labelled(name) == []
    assert not any((h.workdir / name / "compose.yaml").exists() for h in hosts)  # nothing pushed either


def test_unknown_host_key_is_refused_with_exit_2_and_instructions(cluster_env, capsys, sshd_farm, tmp_path):
    name, inv, hosts = cluster_env(n=2)
    sshd_farm.known_hosts(hosts[:1])  # h1's key is not known
    code, out, err = cli(capsys, "preflight", "-i", str(inv))
    assert code == 2, out + err
    assert "h1: host key ssh-ed25519 SHA256:" in err and f"ssh-keyscan -p {hosts[1].port} 127.0.0.1 >>" in err
    assert "h0" not in err.split("host(s):", 1)[1]  # h0 was fine


def wait_until_exited(inv, capsys, timeout=240) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code, out, _ = cli(capsys, "status", "-i", str(inv), "--json")
        states = {s["host"]: s for s in json.loads(out)}
        if all(s["state"] == "exited" for s in states.values()):
            return states
        time.sleep(2)
    raise AssertionError(f"still running after {timeout} s: {states}")


def test_build_mode_builds_on_each_host_then_collect_brings_results_back(cluster_env, capsys, tmp_path):
    train = {**TRAIN, "candidates": ["small_cnn"], "epochs": 1}
    name, inv, hosts = cluster_env(n=2, train=train, image_mode="build")
    code, out, err = cli(capsys, "up", "-i", str(inv), "--parallel", "1")
    assert code == 0, out + err
    assert out.count("│ built, ") == 2 and "h0: image" in out
    assert all((h.workdir / name / "build-context" / "docker" / "Dockerfile").is_file() for h in hosts)
    states = wait_until_exited(inv, capsys)
    assert {h: s["exit_code"] for h, s in states.items()} == {"h0": 0, "h1": 0}
    code, out, err = cli(capsys, "collect", "-i", str(inv), "--runs", str(tmp_path / "runs"))
    assert code == 0, out + err
    latest = tmp_path / "runs" / name / "latest"
    assert json.loads((latest / "results.json").read_text())["candidates"][0]["candidate"] == "small_cnn"
    assert sorted(p.name for p in (latest / "logs").iterdir()) == ["h0.log", "h1.log"]
    assert cli(capsys, "down", "-i", str(inv))[0] == 0 and labelled(name) == []
