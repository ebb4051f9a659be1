"""Hosts behind a jump host, on a LAN lab (tests/support/lab.py): two hosts, each a network
namespace with its own sshd and Docker engine, whose firewalls drop SSH from this machine and
accept it from the bastion `j0`, a namespace running sshd alone. Everything the launcher does
goes through the bastion; the hosts reach each other directly (the links check, MWMS, the relay).

Once with `ssh.proxy_jump` and once with a `ProxyJump` line in the ssh config: preflight (links
matrix included), `up --wait`, `logs`, `collect` and `down`. A bastion whose key is unknown is
refused under strict, and the relay passes your code from host to host behind the bastion."""
from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from support.cluster import cli, up_wait
from support.common import require
from support.lab import Lab, available
from support.sshd import write_inventory

pytestmark = pytest.mark.integration
TRAIN = {"dataset": {"kind": "synthetic", "image_size": [32, 32], "per_class": 32}, "candidates": ["small_cnn"],
         "epochs": 1, "batch_per_replica": 16, "join_timeout_s": 90}


@pytest.fixture(scope="module")
def lab(engine_template):
    ok, why = available()
    require(ok, why)
    # Its own /24 (10.213.60): the other labs (10.213.8, 10.213.9, 10.213.0) may be up at the same time.
    # Its engines start with the trainer image (the run's engine template).
    built = Lab(tag=f"jp{os.getpid() % 1000}", subnet="10.213.60", template=engine_template)
    try:
        built.up(2, bastions=1)
        built.only_through(built.bastions[0])
        yield built
    finally:
        built.down()


def containers(lab: Lab, cluster: str) -> list[str]:
    return [line for h in lab.hosts for line in
            h.docker("ps", "-aq", "--filter", f"label=tfcompose.cluster={cluster}").stdout.split()]


def inventory(lab: Lab, tmp_path: Path, image: str, known_hosts: Path | None = None, **ssh) -> tuple[str, Path]:
    name = f"jp{uuid.uuid4().hex[:8]}"
    inv = write_inventory(lab, tmp_path / f"{name}.yaml", name, lab.hosts, known_hosts=known_hosts or lab.known_hosts(),
                          train=TRAIN, image=image, ssh={"connect_timeout_s": 5, **ssh})
    return name, inv


@pytest.fixture
def cleaned(lab):
    made: list[str] = []
    yield made
    for name in made:
        for host in lab.hosts:
            ids = host.docker("ps", "-aq", "--filter", f"label=tfcompose.cluster={name}").stdout.split()
            if ids:
                host.docker("rm", "-f", *ids, check=False)


def test_the_hosts_drop_ssh_from_this_machine(lab, tmp_path, trainer_image, capsys):
    _, inv = inventory(lab, tmp_path, trainer_image, connect_timeout_s=2)         # no bastion
    code, out, err = cli(capsys, "preflight", "-i", str(inv))
    assert code == 1, out + err
    for host in lab.hosts:
        assert f"{host.name}: ssh root@{host.address}:22: cannot connect (no answer within the timeout)" in err, err


def flow(lab: Lab, capsys, inv: Path, name: str, runs: Path) -> None:
    """preflight, up --wait, logs, collect, down: each must work through the bastion."""
    code, out, err = cli(capsys, "preflight", "-i", str(inv))
    assert code == 0, out + err
    assert all(f"{h.name}: ready (" in out for h in lab.hosts), out
    # The links matrix ran host to host (not through the bastion): each reached the other's tf_port.
    link = r"(open|[\d,]+ Mbit/s)"                    # open, and measured when it could be
    assert re.search(rf"^h0 +- +{link}$", out, re.M) and re.search(rf"^h1 +{link} +-$", out, re.M), out
    out, run = up_wait(capsys, inv, name, runs)
    doc = json.loads((run / "results.json").read_text())
    assert doc["workers"] == 2 and doc["candidates"][0]["candidate"] == "small_cnn"
    code, out, err = cli(capsys, "logs", "-i", str(inv), "--no-follow", "--host", "h1")
    assert code == 0 and "[worker:1] small_cnn epoch 1/1" in out, out + err
    code, out, err = cli(capsys, "collect", "-i", str(inv), "--runs", str(runs))
    assert code == 0, out + err
    assert "[worker:0] small_cnn epoch 1/1" in (runs / name / "latest" / "logs" / "h0.log").read_text()
    assert containers(lab, name)
    code, out, err = cli(capsys, "down", "-i", str(inv))
    assert code == 0 and containers(lab, name) == [], out + err


def test_everything_works_through_ssh_proxy_jump(lab, tmp_path, trainer_image, capsys, cleaned):
    bastion = lab.bastions[0]
    name, inv = inventory(lab, tmp_path, trainer_image, proxy_jump=f"root@{bastion.address}")
    cleaned.append(name)
    flow(lab, capsys, inv, name, tmp_path / "runs")


def test_everything_works_through_a_proxyjump_line_in_the_ssh_config(lab, tmp_path, trainer_image, capsys, cleaned):
    config = tmp_path / "ssh_config"
    config.write_text(f"Host {' '.join(h.address for h in lab.hosts)}\n  ProxyJump lab-gate\n"
                      f"Host lab-gate\n  HostName {lab.bastions[0].address}\n  User root\n"
                      f"  IdentityFile {lab.user_key}\n")
    name, inv = inventory(lab, tmp_path, trainer_image, config_file=str(config))
    cleaned.append(name)
    flow(lab, capsys, inv, name, tmp_path / "runs")


def test_a_bastion_whose_key_is_unknown_is_refused_under_strict(lab, tmp_path, trainer_image, capsys):
    bastion = lab.bastions[0]
    known = lab.known_hosts(lab.hosts, name="known_hosts_without_the_bastion")
    _, inv = inventory(lab, tmp_path, trainer_image, known_hosts=known, proxy_jump=f"root@{bastion.address}")
    code, out, err = cli(capsys, "preflight", "-i", str(inv))
    assert code == 2, out + err
    for host in lab.hosts:
        assert f"{host.name}: bastion root@{bastion.address}:22 (hop 1 of 2): host key ssh-ed25519 SHA256:" in err, err
    assert "; refused (ssh.host_key_policy: strict)" in err and f"ssh-keyscan {bastion.address} >> {known}" in err


def test_the_relay_passes_your_code_from_host_to_host_behind_the_bastion(lab, tmp_path, trainer_image, image_cache,
                                                                          monkeypatch, capsys, cleaned):
    # Your code is a layer neither host has: the launcher sends it through the bastion to h0 only,
    # and h0 passes it on to h1 directly, checking h1's host key against the one the launcher
    # verified through the bastion (StrictHostKeyChecking=yes: a wrong key fails the hop).
    monkeypatch.setenv("XDG_CACHE_HOME", str(image_cache))
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    (code_dir / "main.py").write_text(f"# {uuid.uuid4()}\nimport time\nprint('behind the bastion', flush=True)\n"
                                      "time.sleep(600)\n")
    name = f"jp{uuid.uuid4().hex[:8]}"
    cleaned.append(name)
    inv = write_inventory(lab, tmp_path / "inv.yaml", name, lab.hosts, known_hosts=lab.known_hosts(), image=trainer_image,
                          image_relay="on", run={"command": ["python", "main.py"], "code_dir": str(code_dir)},
                          ssh={"proxy_jump": f"root@{lab.bastions[0].address}"})
    code, out, err = cli(capsys, "up", "-i", str(inv))
    try:
        assert code == 0, out + err
        assert re.search(r"^h0: image \(shipped \d+/\d+ layers, [\d,]+ B; passed on to h1\)$", out, re.M), out
        assert re.search(r"^h1: image \(relayed \d+/\d+ layers, 0 B; from h0\)$", out, re.M), out
        assert not any("tfcompose-relay" in h.authorized_keys.read_text() for h in lab.hosts)
    finally:
        code, out, err = cli(capsys, "down", "-i", str(inv))
    assert code == 0 and containers(lab, name) == [], out + err
    assert subprocess.run(["pgrep", "-af", "/.relay-"], capture_output=True, text=True).stdout.count(str(lab.root)) == 0
