"""Relayed ship on a LAN lab (tests/lab.py): three hosts, each with its own network namespace,
sshd and ~/.ssh; h1 and h2 each with a Docker engine of their own that starts with the trainer
image (the run's engine template: shipping the whole image to an empty engine is test_cluster's and
test_bootstrap's), h0 this machine. A `run:` project's code is a new layer h1 and h2 lack: it goes
from the launcher to h1 only, h1 passes it to h2, and all three train together. The relay's
temporary keys are gone after `up`, after an interrupted `up`, and after `down` (when `up` was killed
before it could remove them): those tests ship a code layer of random bytes over links slow enough
that the chain is caught on its way."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from support.common import FIXTURES, require
from launcher.files import REPO
from support.lab import Lab, available
from support.sshd import write_inventory
from support.cluster import cli, labelled

pytestmark = pytest.mark.integration
MARK = "tfcompose-relay"


BULK = 24 << 20        # random bytes in the interrupted tests' code layer: seconds on the way at RATE
RATE = "100mbit"


@pytest.fixture(scope="module")
def lab(engine_template):
    ok, why = available()
    require(ok, why)
    # Its own /24 (10.213.8): the bench lab (10.213.9) or test_links (10.213.0) may be up at the same time.
    built = Lab(tag=f"r{os.getpid() % 1000}", subnet="10.213.8", template=engine_template).up(
        3, rate=RATE, local_first=True)
    yield built
    built.down()


@pytest.fixture
def relay_inventory(lab, tmp_path, trainer_image, image_cache, monkeypatch):  # noqa: F811
    """A `run:` project that sleeps, with BULK random bytes in its code (new each time, so no host
    holds that layer from an earlier test): the chain takes seconds to carry it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(image_cache))   # the image's layers, split once per suite
    name, inv = code_inventory(lab, tmp_path, trainer_image, bulk=BULK)
    yield name, inv
    for host in lab.hosts:
        ids = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=tfcompose.cluster={name}"], env=host.env,
                             capture_output=True, text=True).stdout.split()
        if ids:
            host.docker("rm", "-f", *ids, check=False)


def relay_traces(lab: Lab) -> list[str]:
    """Relay keys in any host's authorized_keys, relay folders under any workdir, relay processes."""
    found = [f"{h.name}: {line}" for h in lab.hosts for line in h.authorized_keys.read_text().splitlines() if MARK in line]
    found += [str(p) for h in lab.hosts for p in h.workdir.glob("*/.relay-*")]
    procs = subprocess.run(["pgrep", "-af", "/.relay-"], capture_output=True, text=True).stdout.splitlines()
    return found + [p for p in procs if "pgrep" not in p]


def up_in_background(inv: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "launcher", "up", "-i", str(inv)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=os.environ.copy())


def image_on_its_way(lab: Lab) -> bool:
    """The last host holds a relay key: the chain is set up and the image is on its way."""
    return MARK in lab.hosts[2].authorized_keys.read_text()


def chain_being_set_up(lab: Lab) -> bool:
    """The first host of the chain has its relay folder: the hosts are being set up in parallel."""
    return any(lab.hosts[1].workdir.glob("*/.relay-*"))


def wait_for(lab: Lab, proc: subprocess.Popen, moment, seconds: float = 600) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if moment(lab):
            return
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"{moment.__name__} did not happen within {seconds} s")


def test_down_removes_the_keys_of_an_up_that_was_killed_mid_relay(lab, relay_inventory, capsys):
    name, inv = relay_inventory
    proc = up_in_background(inv)
    wait_for(lab, proc, image_on_its_way)
    proc.kill()                                    # no `finally` runs: as after a power cut
    proc.wait()
    assert any(MARK in t for t in relay_traces(lab))   # what the killed `up` left
    code, out, err = cli(capsys, "down", "-i", str(inv))
    assert code == 0, out + err
    time.sleep(1)                                  # the hops end when their input closes
    assert relay_traces(lab) == []


@pytest.mark.parametrize("moment", [chain_being_set_up, image_on_its_way], ids=lambda m: m.__name__)
def test_an_interrupted_up_removes_its_keys_on_the_way_out(lab, relay_inventory, moment):
    name, inv = relay_inventory
    proc = up_in_background(inv)
    wait_for(lab, proc, moment)
    proc.send_signal(signal.SIGINT)                # Ctrl-C while the hosts are set up, or the image is on its way
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    assert "interrupted" in out
    assert relay_traces(lab) == []


def test_the_code_goes_once_from_here_and_the_hosts_pass_it_on_then_all_three_train(lab, tmp_path, trainer_image,
                                                                                      image_cache, monkeypatch, capsys):
    # A user's own MWMS script (tests/fixtures/byo) on all three hosts.
    monkeypatch.setenv("XDG_CACHE_HOME", str(image_cache))
    name, inv = code_inventory(lab, tmp_path, trainer_image, script=FIXTURES / "byo" / "train.py")
    runs = tmp_path / "runs"
    try:
        code, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--runs", str(runs))
        assert code == 0, out + err
        assert re.search(r"^h0: image \(present, 0 B\)$", out, re.M), out
        assert re.search(r"^h1: image \(shipped 1/\d+ layers, [\d,]+ B; passed on to h2\)$", out, re.M), out
        assert re.search(r"^h2: image \(relayed 1/\d+ layers, 0 B; from h1\)$", out, re.M), out
        latest = runs / name / "latest"
        assert json.loads((latest / "output.json").read_text())["replicas"] == 3     # all three trained together
        for host in lab.hosts:
            assert "epoch 3: loss" in (latest / "logs" / f"{host.name}.log").read_text(), host.name
        ran = {host.name: host.docker("ps", "-aq", "--filter", f"label=tfcompose.cluster={name}").stdout.split()
               for host in lab.hosts}
        images = {host.docker("inspect", "--format", "{{.Image}}", *ran[host.name]).stdout.strip() for host in lab.hosts}
        assert len(images) == 1, images                    # the same code image on every host, as made here
        assert relay_traces(lab) == []
    finally:
        code, out, err = cli(capsys, "down", "-i", str(inv))
    assert code == 0 and labelled(name) == [], out + err
    assert relay_traces(lab) == []


def test_a_broken_hop_does_not_fail_up_the_launcher_serves_the_host_after_it(lab, tmp_path, trainer_image,  # noqa: F811
                                                                              image_cache, monkeypatch, capsys):
    # Your code as a new layer h1 and h2 lack (h0, this machine, has it: the code image is loaded here
    # too): a chain h1 → h2, and h2's firewall refuses h1's SSH.
    monkeypatch.setenv("XDG_CACHE_HOME", str(image_cache))
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    (code_dir / "main.py").write_text("import time\nprint('relay test code', flush=True)\ntime.sleep(600)\n")
    name = f"r{uuid.uuid4().hex[:8]}"
    inv = write_inventory(lab, tmp_path / "inv.yaml", name, lab.hosts, known_hosts=lab.known_hosts(), image=trainer_image,
                          image_relay="on", run={"command": ["python", "main.py"], "code_dir": str(code_dir)})
    rule = ["iptables", "-I", "INPUT", "-s", lab.hosts[1].address, "-p", "tcp", "--dport", "22", "-j", "REJECT"]
    lab.hosts[2].run(*rule)
    try:
        code, out, err = cli(capsys, "up", "-i", str(inv))
    finally:
        lab.hosts[2].run("iptables", "-D", *rule[2:])
    image_lines = [line for line in out.splitlines() if ": image (" in line]
    try:
        assert code == 0, out + err
        assert re.search(r"^h0: image \(present, 0 B\)$", out, re.M), out
        assert re.search(r"^h1: image \(shipped \d+/\d+ layers, [\d,]+ B; passed on to no other host\)$", out, re.M), out
        assert re.search(r"^h2: image \(shipped \d+/\d+ layers, [\d,]+ B; sent directly: the relay did not serve it "
                         r"\(h1 → h2: the hop ended with status 255: .*Connection refused\)\)$", out, re.M), "\n".join(image_lines)
        assert relay_traces(lab) == []
    finally:
        cli(capsys, "down", "-i", str(inv))


def code_inventory(lab: Lab, tmp_path: Path, image: str, script: Path | None = None,
                   bulk: int = 0) -> tuple[str, Path]:
    """A `run:` project: its code is a new layer h1 and h2 lack (h0, this machine, has it), so
    the chain h1 → h2 carries the code, not the image. `script`: its main.py (else one that prints
    and sleeps); `bulk`: that many random bytes beside it."""
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    main = script.read_text() if script else "import time\nprint('relay test code', flush=True)\ntime.sleep(600)\n"
    (code_dir / "main.py").write_text(f"# {uuid.uuid4()}\n{main}")
    if bulk:
        (code_dir / "bulk.bin").write_bytes(os.urandom(bulk))
    name = f"r{uuid.uuid4().hex[:8]}"
    run = {"command": ["python", "main.py"], "code_dir": str(code_dir), "join_timeout_s": 120, "deadline_s": 600}
    inv = write_inventory(lab, tmp_path / "inv.yaml", name, lab.hosts, known_hosts=lab.known_hosts(), image=image,
                          image_relay="on", run=run)
    return name, inv


def test_a_host_whose_ssh_folder_cannot_be_written_keeps_every_key_and_is_served_directly(
        lab, tmp_path, trainer_image, image_cache, monkeypatch, capsys):  # noqa: F811
    # ~/.ssh immutable, authorized_keys itself writable: a key added there could never be removed
    # again without rewriting the file in place, so the relay is refused on h2 before it begins.
    monkeypatch.setenv("XDG_CACHE_HOME", str(image_cache))
    name, inv = code_inventory(lab, tmp_path, trainer_image)
    keys, before = lab.hosts[2].authorized_keys, lab.hosts[2].authorized_keys.read_bytes()
    subprocess.run(["chattr", "+i", str(keys.parent)], check=True)
    try:
        code, out, err = cli(capsys, "up", "-i", str(inv))
    finally:
        subprocess.run(["chattr", "-i", str(keys.parent)], check=True)
    try:
        assert code == 0, out + err
        assert keys.read_bytes() == before
        line = [line for line in out.splitlines() if line.startswith("h2: image (")][-1]   # its summary
        assert "sent directly: the relay did not serve it" in line and "could not be removed again" in line, out
        assert relay_traces(lab) == []
    finally:
        cli(capsys, "down", "-i", str(inv))


def test_a_hop_loads_only_the_image_this_up_ships_whoever_sends_it(lab, tmp_path, trainer_image, image_cache,
                                                                   monkeypatch):  # noqa: F811
    # What a compromised host before h1 and h2 could send with its hop key: another image, tagged
    # `victim:latest`. Both hosts' real engines refuse it; the chain is taken down all the same.
    from launcher.image import local, relay
    from launcher.image.local import Shipment
    from launcher.inventory.load import load_cluster
    from launcher.ssh.group import Group
    monkeypatch.setenv("XDG_CACHE_HOME", str(image_cache))
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "Dockerfile").write_text("FROM scratch\nCOPY evil /evil\n")
    (tmp_path / "victim" / "evil").write_text("attacker's file\n")
    subprocess.run(["docker", "build", "-q", "-t", "victim:latest", str(tmp_path / "victim")], check=True,
                   capture_output=True)
    attack = subprocess.run("docker save victim:latest | gzip -1", shell=True, check=True, capture_output=True).stdout
    parts = Shipment(trainer_image, local.local_image_id(trainer_image)).parts()
    name = f"r{uuid.uuid4().hex[:8]}"
    cluster = load_cluster(write_inventory(lab, tmp_path / "inv.yaml", name, lab.hosts[1:],
                                           known_hosts=lab.known_hosts(), image=trainer_image, image_relay="on"))
    with Group(cluster) as group:
        result = relay.run_chain(group, list(cluster.hosts), iter([attack]), name, parts.expectation([0]))
    for host in lab.hosts[1:]:
        assert host.docker("image", "inspect", "victim:latest", check=False).returncode != 0, host.name
    assert "h1" in result.broken and "status 3" in result.broken["h1"], result
    assert relay_traces(lab) == [] and not result.not_removed
