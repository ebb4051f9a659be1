"""`tfcompose bootstrap` on bare Debian 12 hosts (tests/support/bare.py): a network namespace and a
root filesystem each, with nothing but OpenSSH's server and sudo; real apt and dpkg inside each
host install Docker, whose engine then runs in that host's namespaces; the hosts then train
together with `up --wait` on real images (scikit-learn's digits).

What is real and what stands in: the installations, the engines, the SSH sessions and the
training are real. The tree has no init, so the rig's `systemctl` starts the host's dockerd. This
machine has no GPU: the NVIDIA decisions are checked against stand-in `nvidia-smi` programs on a
host's PATH, in plan mode. Docker's and NVIDIA's repositories cannot be reached from here: the
distribution path and the offline bundle are exercised for real, Docker's repository as far as
fetching its key (which fails here, and changes nothing on the host). Downloaded .debs are shared
between online test hosts (copied into a host's apt cache, where apt checks them against the
indexes it fetched itself); every installation itself is the host's own apt and dpkg.

b0, b1: online, bootstrapped, then train. b2, b4: no route at all (the offline bundle, sent to both
at once). b3: online, for the faults.
"""
from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from launcher.files import REPO
from support.bare import BareLab, available, make_tree, resolver_image
from support.cluster import cli
from support.common import require
from support.digits import write_digits

pytestmark = pytest.mark.integration
PASSWORD = "tfc-Sudo-9d1f"
NOT_THERE = "docker.io"      # a package bootstrap installs: not installed means nothing was


@pytest.fixture(scope="session")
def bare_tree(tmp_path_factory) -> Path:
    ok, why = available()
    require(ok, why)
    return make_tree()          # made once per machine (from the Debian mirror), then kept


@pytest.fixture(scope="module")
def lab(bare_tree):
    built = BareLab(bare_tree, tag=f"bs{os.getpid() % 1000}", subnet="10.213.7").up([True, True, False, True, False])
    yield built
    built.down()


@pytest.fixture(autouse=True)
def own_cache(image_cache, monkeypatch):
    """The session's cache: the trainer image split once, the offline resolution's indexes and .debs."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(image_cache))


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Path:
    folder = write_digits(tmp_path_factory.mktemp("digits") / "digits")
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


def inventory(lab: BareLab, tmp_path: Path, hosts, **top) -> Path:
    return lab.inventory(tmp_path / f"inv-{uuid.uuid4().hex[:6]}.yaml", f"bs{uuid.uuid4().hex[:6]}", hosts, **top)


def plan_lines(out: str, host: str) -> list[str]:
    """A host's part of the plan: its header (`b0: <OS>, <arch>: N step(s)`) and the lines under it."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{host}: ") and ", amd64: " in line)
    return [lines[start]] + list(itertools.takewhile(lambda line: line.startswith("  "), lines[start + 1:]))


def apt_state(host) -> str:
    """What dpkg holds and the apt sources: equal before and after means nothing was changed."""
    return host.sh("md5sum /var/lib/dpkg/status; ls -l --time-style=+%s /etc/apt/sources.list.d /etc/apt/keyrings 2>&1; "
                   "ls /opt 2>&1").stdout


@pytest.mark.timeout(1500)
def test_two_bare_hosts_are_made_ready_by_one_command_then_train_together(lab, tmp_path, capsys, digits, trainer_image,
                                                                          engine_template):
    b0, b1 = lab.hosts[:2]
    inv = inventory(lab, tmp_path, [b0, b1], image=trainer_image, base_image="tf-offline-base:cpu",
                    dataset_source=str(digits), defaults={"data_dir": "/srv/digits"},
                    train={"dataset": {"kind": "image_folder", "train_dir": "/data", "image_size": [16, 16]},
                           "candidates": ["small_cnn"], "epochs": 2, "join_timeout_s": 180})
    before = [apt_state(h) for h in (b0, b1)]
    code, out, err = cli(capsys, "bootstrap", "-i", str(inv))
    assert code == 0, out + err
    assert plan_lines(out, "b0") == [
        "b0: Debian GNU/Linux 12 (bookworm), amd64: 4 step(s)",
        "  1. install docker.io, docker-compose (compose v2, from Debian trixie: Debian 12 packages none) — no Docker "
        "Engine yet (bootstrap.docker: distro)",
        "  2. enable Docker at boot and start it",
        "  3. add admin to the docker group — so it may use Docker without sudo; tfcompose then logs in again",
        "  4. make /opt/tfcompose, /srv/digits (owned by admin) — `up` writes there"], out
    assert "nothing was changed; `tfcompose bootstrap --yes` takes the steps above on b0, b1" in out
    assert [apt_state(h) for h in (b0, b1)] == before               # the plan alone changes nothing

    code, out, err = cli(capsys, "bootstrap", "-i", str(inv), "--yes")
    assert code == 0, out + err
    for host in (b0, b1):
        assert f"{host.name}: ready in " in out, out
        assert host.docker_ok() and host.installed("docker.io") and host.installed("docker-compose")
        assert host.sh("su admin -c 'docker compose version --short'").stdout.startswith("2.")
        assert host.sh("stat -c %U /opt/tfcompose /srv/digits").stdout.split() == ["admin", "admin"]
        # The engines bootstrap installed get the trainer image as the lab's engines do (shipping
        # it whole into empty engines is test_cluster's and the relay lab's to check): the engine
        # restarted with its data root replaced, and the user's access through the group checked again.
        host.preload(engine_template)
        assert host.docker_ok()

    runs = tmp_path / "runs"
    code, out, err = cli(capsys, "up", "-i", str(inv), "--wait", "--runs", str(runs))
    assert code == 0, out + err
    # the image there already, or only its code layer shipped (when this checkout's differs from the template's)
    assert all(re.search(rf"^{host}: image \((present, 0 B|shipped 1/\d+ layers, [\d,]+ B)\)$", out, re.M)
               for host in ("b0", "b1")), out
    name = yaml.safe_load(inv.read_text())["cluster"]
    doc = json.loads((runs / name / "latest" / "results.json").read_text())
    assert doc["workers"] == 2 and doc["candidates"][0]["candidate"] == "small_cnn"
    logs = {p.stem: p.read_text() for p in (runs / name / "latest" / "logs").iterdir()}
    assert all(f"[worker:{i}] small_cnn epoch 2/2" in logs[f"b{i}"] for i in range(2)), logs

    marks = [host.sh("stat -c %Y /var/log/tfcompose-bootstrap/run.log; md5sum /var/lib/dpkg/status").stdout
             for host in (b0, b1)]
    started = time.monotonic()
    code, out, err = cli(capsys, "bootstrap", "-i", str(inv), "--yes")
    assert code == 0, out + err
    assert "b0: Debian GNU/Linux 12 (bookworm), amd64: nothing to do (Docker 20.10" in out, out
    assert "b1: Debian GNU/Linux 12 (bookworm), amd64: nothing to do (Docker 20.10" in out, out
    assert time.monotonic() - started < 30
    assert [host.sh("stat -c %Y /var/log/tfcompose-bootstrap/run.log; md5sum /var/lib/dpkg/status").stdout
            for host in (b0, b1)] == marks                          # the second run changed nothing
    code, out, err = cli(capsys, "down", "-i", str(inv))
    assert code == 0, out + err


def test_hosts_with_no_route_are_made_ready_from_one_bundle_sent_from_here_to_both(lab, tmp_path, capsys):
    b2, b4 = lab.hosts[2], lab.hosts[4]
    cut_off = b2.sh("timeout 20 apt-get -q update 2>&1; ip route 2>/dev/null; true").stdout
    assert "Failed to fetch" in cut_off or "unreachable" in cut_off.lower() or "Temporary failure" in cut_off, cut_off
    inv = inventory(lab, tmp_path, [b2, b4], bootstrap={"offline": True,
                                                        "resolver_images": {"debian-12": resolver_image()}})
    code, out, err = cli(capsys, "bootstrap", "-i", str(inv), "--yes")
    assert code == 0, out + err
    assert "b2: ready in " in out and "b4: ready in " in out and " .deb file(s), " in out, out
    bundles = re.findall(r"  offline: (\d+) \.deb file\(s\), ([\d.,]+) MB; sent ([\d.,]+) MB \(0 held already\)", out)
    assert len(bundles) == 2 and bundles[0] == bundles[1] and bundles[0][1] == bundles[0][2], out   # each sent it whole
    for host in (b2, b4):
        assert host.docker_ok() and host.installed("docker.io") and host.installed("docker-compose")
    code, out, err = cli(capsys, "bootstrap", "-i", str(inv), "--yes")
    assert code == 0 and "b2: Debian GNU/Linux 12 (bookworm), amd64: nothing to do" in out, out + err
    assert "b4: Debian GNU/Linux 12 (bookworm), amd64: nothing to do" in out, out + err


# --- the faults: one clear line per host, exit 1, the host no worse than before ----------------------

def test_an_unsupported_os_is_refused_naming_it(lab, tmp_path, capsys):
    b3 = lab.hosts[3]
    release = b3.root / "etc/os-release"
    kept = release.read_text()
    release.unlink()
    release.write_text('PRETTY_NAME="Debian GNU/Linux 11 (bullseye)"\nNAME="Debian GNU/Linux"\nVERSION_ID="11"\nID=debian\n')
    try:
        inv = inventory(lab, tmp_path, [b3])
        before = apt_state(b3)
        code, out, err = cli(capsys, "bootstrap", "-i", str(inv), "--yes")
    finally:
        release.write_text(kept)
    assert code == 1, out + err
    assert ("b3: refused: runs Debian GNU/Linux 11 (bullseye) (debian 11); tfcompose bootstrap supports Debian 12 "
            "and Ubuntu 22.04 and 24.04") in out
    assert "bootstrap: 1 of 1 host(s) not ready (b3 refused)" in err and apt_state(b3) == before


def broken_package(tmp_path: Path) -> Path:
    """A package whose postinst fails: installing it leaves dpkg half-configured."""
    pkg = tmp_path / "tfc-broken"
    (pkg / "DEBIAN").mkdir(parents=True)
    (pkg / "DEBIAN" / "control").write_text("Package: tfc-broken\nVersion: 1.0\nArchitecture: all\n"
                                            "Maintainer: tfcompose tests <t@example.invalid>\nDescription: fails to configure\n")
    (pkg / "DEBIAN" / "postinst").write_text("#!/bin/sh\necho 'tfc-broken: configure fails on purpose' >&2\nexit 1\n")
    (pkg / "DEBIAN" / "postinst").chmod(0o755)
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(pkg), str(tmp_path / "tfc-broken.deb")], check=True,
                   capture_output=True)
    return tmp_path / "tfc-broken.deb"


def test_a_half_configured_dpkg_of_someone_else_is_refused_and_left_alone(lab, tmp_path, capsys):
    b3 = lab.hosts[3]
    shutil.copy(broken_package(tmp_path), b3.root / "tmp" / "tfc-broken.deb")
    b3.sh("dpkg -i /tmp/tfc-broken.deb >/dev/null 2>&1; true")
    assert b3.sh("dpkg-query -W -f='${db:Status-Abbrev}' tfc-broken").stdout.startswith("iF")
    try:
        inv = inventory(lab, tmp_path, [b3])
        before = apt_state(b3)
        code, out, err = cli(capsys, "bootstrap", "-i", str(inv), "--yes")
        assert code == 1, out + err
        assert ("b3: refused: dpkg has unfinished work tfcompose did not start: tfc-broken (half-configured). Finish it "
                "first (on the host: `sudo dpkg --configure -a`, then `sudo apt-get -f install`)") in out
        assert apt_state(b3) == before and not b3.installed(NOT_THERE)
    finally:
        b3.sh("dpkg --remove --force-remove-reinstreq tfc-broken >/dev/null 2>&1; true")


def test_a_full_disk_is_refused_before_anything_changes(lab, tmp_path, capsys, bare_tree):
    b3 = lab.hosts[3]
    size_mb = bare_tree.stat().st_size // (1 << 20) + 90        # the tree and some 80 MB: too little to install
    lab.fresh(b3, root_size_mb=size_mb)
    lab.known_hosts()
    try:
        inv = inventory(lab, tmp_path, [b3])
        before = apt_state(b3)
        code, out, err = cli(capsys, "bootstrap", "-i", str(inv), "--yes")
        assert code == 1, out + err
        line = next(line for line in out.splitlines() if line.startswith("b3: refused: only "))
        assert " MB free at /usr (packages unpack); installing needs about 1,024 MB" in line and "nothing was changed" in line
        assert apt_state(b3) == before and not b3.installed(NOT_THERE)
    finally:
        lab.fresh(b3)
        lab.known_hosts()


def hold_apt_lock(host, seconds: int) -> subprocess.Popen:
    """A process on the host holding dpkg's frontend lock (as unattended-upgrades does at first boot)."""
    script = ("import fcntl, os, time\nfd = os.open('/var/lib/dpkg/lock-frontend', os.O_RDWR | os.O_CREAT)\n"
              f"fcntl.lockf(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep({seconds})\n")
    proc = subprocess.Popen(["nsenter", "-t", str(host.pid), "-m", "-u", "-n", "-r", "-w", "python3", "-c", script],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_an_apt_lock_held_too_long_fails_naming_its_holder_and_installs_nothing(lab, tmp_path, capsys):
    b3 = lab.hosts[3]
    holder = hold_apt_lock(b3, 120)
    try:
        inv = inventory(lab, tmp_path, [b3], bootstrap={"apt_lock_wait_s": 4})
        code, out, err = cli(capsys, "bootstrap", "-i", str(inv))
        assert code == 0 and f"  waits for apt's lock if it is still held: python3 (pid {holder.pid}) holds " \
                              "/var/lib/dpkg/lock-frontend" in out, out + err
        code, out, err = cli(capsys, "bootstrap", "-i", str(inv), "--yes")
        assert code == 1, out + err
        assert (f"b3: failed: apt's lock is still held after 4 s: python3 (pid {holder.pid}) holds "
                "/var/lib/dpkg/lock-frontend") in out, out
        assert not b3.installed(NOT_THERE)
        assert not list((b3.root / "etc/apt/sources.list.d").glob("tfcompose-*"))
    finally:
        holder.kill()
        holder.wait()


def test_dockers_repository_needs_its_key_which_this_machine_cannot_fetch_and_nothing_changes(lab, tmp_path, capsys):
    b3 = lab.hosts[3]
    inv = inventory(lab, tmp_path, [b3], bootstrap={"docker": "docker"})
    code, out, err = cli(capsys, "bootstrap", "-i", str(inv))
    assert code == 0 and "  1. add Docker's apt repository — its key checked against the published fingerprint" in out, out
    assert ("install docker-ce, docker-ce-cli, containerd.io, docker-buildx-plugin, docker-compose-plugin (Docker's "
            "repository)") in out
    before = apt_state(b3)
    code, out, err = cli(capsys, "bootstrap", "-i", str(inv), "--yes")
    assert code == 1 and "b3: failed: cannot get docker's signing key on this machine (" in out, out + err
    assert apt_state(b3) == before and not b3.installed(NOT_THERE)


def cli_process(*args: str, stdin: str = "") -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "launcher", *args], cwd=REPO, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=os.environ.copy(),
                            start_new_session=True)     # no terminal: getpass reads the password from stdin
    proc.stdin.write(stdin)
    proc.stdin.close()
    proc.stdin = None           # given once: communicate() must not flush it again
    return proc


def test_sudo_with_a_password_then_a_link_lost_mid_install_and_the_next_run_goes_on(lab, tmp_path, capsys):
    b0, b3 = lab.hosts[0], lab.hosts[3]
    lab.set_password(b3, PASSWORD)
    inv = inventory(lab, tmp_path, [b3])
    code, out, err = cli(capsys, "bootstrap", "-i", str(inv), "--yes")
    assert code == 1, out + err
    line = next(line for line in out.splitlines() if line.startswith("b3: refused: "))
    assert ("sudo asks admin for a password. Either let admin use sudo without one there (`sudo visudo -f "
            "/etc/sudoers.d/tfcompose` with the line `admin ALL=(ALL) NOPASSWD: ALL`), or run `tfcompose bootstrap "
            "--ask-become-pass`, which asks for it once; nothing was changed") in line
    # What b0 downloaded, b3's apt finds in its cache (checked against the indexes it fetches itself).
    for deb in (b0.root / "var/cache/apt/archives").glob("*.deb"):
        shutil.copy(deb, b3.root / "var/cache/apt/archives" / deb.name)
    proc = cli_process("bootstrap", "-i", str(inv), "--yes", "--ask-become-pass", stdin=PASSWORD + "\n")
    seen = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        seen.append(line)
        if "Unpacking" in line or "Setting up" in line or not line:
            break
    assert any("installing" in line for line in seen), "".join(seen)
    lab.cut(b3)                                   # the cable is pulled, and the laptop gives up
    proc.kill()
    proc.wait()
    status = b3.root / "var/log/tfcompose-bootstrap/status"
    for _ in range(300):                          # the installation goes on, on the host
        if status.exists():
            break
        time.sleep(1)
    lab.mend(b3)
    assert status.read_text().strip() == "0", (b3.root / "var/log/tfcompose-bootstrap/run.log").read_text()[-3000:]
    again = cli_process("bootstrap", "-i", str(inv), "--yes", "--ask-become-pass", stdin=PASSWORD + "\n")
    said, _ = again.communicate(timeout=300)
    assert again.returncode == 0, said
    assert "b3: Debian GNU/Linux 12 (bookworm), amd64: nothing to do" in said or "b3: ready in" in said, said
    assert b3.docker_ok() and b3.installed("docker.io")
    everything = "".join(seen) + said + b3.sh("cat /var/log/tfcompose-bootstrap/*.log /home/admin/.cache/tfcompose/bootstrap/plan; "
                                              "ps -eo args").stdout
    assert PASSWORD not in everything


NVIDIA_SMI = {
    "works": "#!/bin/sh\n# the rig's stand-in (no GPU here): a driver that works\n"
             "echo '535.129.03, NVIDIA A100-SXM4-40GB'; echo '535.129.03, NVIDIA A100-SXM4-40GB'\n",
    "too old": "#!/bin/sh\n# the rig's stand-in: a driver CUDA 12 cannot use\necho '470.82.01, Tesla T4'\n",
    "not loaded": "#!/bin/sh\n# the rig's stand-in: installed, its module not loaded\n"
                  "echo \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\"; exit 9\n"}


def test_gpu_hosts_get_the_toolkit_only_with_a_working_driver_and_the_exact_fix_otherwise(lab, tmp_path, capsys):
    b1 = lab.hosts[1]
    inv = inventory(lab, tmp_path, [b1], defaults={"gpus": "all"})
    try:
        b1.write("/usr/local/bin/nvidia-smi", NVIDIA_SMI["works"], 0o755)
        code, out, err = cli(capsys, "bootstrap", "-i", str(inv))
        assert code == 0, out + err
        steps = [line.split(". ", 1)[1] for line in plan_lines(out, "b1")[1:] if ". " in line]
        assert steps[0] == "add NVIDIA's apt repository — its key checked against the published fingerprint", out
        assert "install nvidia-container-toolkit (NVIDIA's repository) — GPUs in containers" in steps
        assert steps[-2:] == ["give Docker the nvidia runtime (nvidia-ctk runtime configure --runtime=docker) and restart it",
                              "check that a container sees the GPUs — nvidia-smi lists 2"], out
        b1.write("/usr/local/bin/nvidia-smi", NVIDIA_SMI["too old"], 0o755)
        code, out, err = cli(capsys, "bootstrap", "-i", str(inv))
        assert "  left to you: the NVIDIA driver 470.82.1 is older than 525.60.13" in out and "1 step" not in out, out
        b1.write("/usr/local/bin/nvidia-smi", NVIDIA_SMI["not loaded"], 0o755)
        b1.sh("echo '*** System restart required ***' > /run/reboot-required")     # /run: the host's own tmpfs
        code, out, err = cli(capsys, "bootstrap", "-i", str(inv))
        assert code == 1, out + err           # the plan says the host will not be ready: exit 1
        assert ("  left to you: the NVIDIA driver is installed but not loaded (nvidia-smi: NVIDIA-SMI has failed because "
                "it couldn't communicate with the NVIDIA driver.); a reboot is pending: reboot the host (`sudo reboot`), "
                "then run tfcompose bootstrap again") in out, out
        assert "bootstrap: 1 of 1 host(s) not ready (b1 blocked)" in err
    finally:
        (b1.root / "usr/local/bin/nvidia-smi").unlink(missing_ok=True)
        b1.sh("rm -f /run/reboot-required")
