"""`tfcompose init` through the real thing: sshd hosts on this machine (one with a stand-in
nvidia-smi of two GPUs on its PATH) and a bare Debian 12 host with nothing but OpenSSH. The file it
writes begins with the schema line, validates, and says what each host is; an existing file is
refused before any host is asked; host keys are checked as everywhere."""
from __future__ import annotations

import os

import pytest
import yaml

from launcher.cli import main
from support import nvidia_smi
from support.common import free_ports, require

pytestmark = pytest.mark.integration


def init(tmp_path, *args: str) -> int:
    return main(["init", *args])


@pytest.fixture
def two_hosts(sshd_farm, tmp_path):
    bin_dir = tmp_path / "gpu-bin"
    nvidia_smi.install(bin_dir, gpus=2)
    ports = free_ports(4)
    plain = sshd_farm.start("plain", ports[0], ports[1])
    gpu = sshd_farm.start("gpu", ports[2], ports[3], env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    return sshd_farm, plain, gpu


def ssh_args(farm, known_hosts=None):
    return ["--user", farm.user, "--identity-file", str(farm.user_key),
            "--known-hosts", str(known_hosts or farm.root / "known_hosts")]


def test_a_starter_inventory_from_two_sshd_hosts_validates_and_says_what_each_is(two_hosts, tmp_path, capsys,
                                                                                 monkeypatch):
    farm, plain, gpu = two_hosts
    farm.known_hosts()
    monkeypatch.setenv("HOME", str(tmp_path))          # no ~/.ssh/config of the machine's in the way
    out = tmp_path / "inv" / "inventory.yaml"
    code = init(tmp_path, f"127.0.0.1:{plain.port}", f"127.0.0.1:{gpu.port}", "-o", str(out), "--cluster", "first",
                *ssh_args(farm))
    said = capsys.readouterr()
    assert code == 0, said.err
    text = out.read_text()
    first = text.splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=") and first.endswith("inventory.schema.json")
    assert os.path.isfile(first.split("=", 1)[1])
    doc = yaml.safe_load(text)
    plain_entry, gpu_entry = doc["hosts"]
    assert plain_entry["gpus"] == 0 and gpu_entry["gpus"] == 2
    assert gpu_entry.get("chief") is True and "chief" not in plain_entry       # the link ties (loopback): the GPUs decide
    assert "2× Stand-in GPU" in text and "16 GiB" in text
    assert "bootstrap:" not in text                     # this machine's Docker answers the farm's user
    assert "loopback or virtual interface" in text and "nic:" not in text.replace("`nic`", "")
    assert doc["train"]["search"]["mode"] == "parallel"   # 0 and 2 GPUs: sync would need equal replica counts
    assert f"wrote {out}" in said.out
    assert main(["validate", "-i", str(out)]) == 0
    print(text)                 # what a user gets (the test's output shows it)


def test_a_file_that_exists_is_refused_before_any_host_is_asked(tmp_path, capsys):
    out = tmp_path / "inventory.yaml"
    out.write_text("mine\n")
    port = free_ports(1)[0]                 # nothing listens there: asking it would fail another way
    assert init(tmp_path, f"127.0.0.1:{port}", "-o", str(out)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "exists" in err[0] and "never overwrites" in err[0]
    assert out.read_text() == "mine\n"


def test_an_unknown_host_key_is_refused_and_nothing_is_written_unless_accept_new(two_hosts, tmp_path, capsys,
                                                                                 monkeypatch):
    farm, plain, _ = two_hosts
    monkeypatch.setenv("HOME", str(tmp_path))
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    out = tmp_path / "inventory.yaml"
    assert init(tmp_path, f"127.0.0.1:{plain.port}", "-o", str(out), *ssh_args(farm, empty)) == 2
    assert "ssh-keyscan" in capsys.readouterr().err and not out.exists()
    assert init(tmp_path, f"127.0.0.1:{plain.port}", "-o", str(out), "--accept-new", *ssh_args(farm, empty)) == 0
    assert str(plain.port) in empty.read_text() and out.is_file()
    assert "host_key_policy" not in out.read_text()     # recorded once; the inventory stays strict


@pytest.fixture(scope="module")
def bare_host():
    from support.bare import BareLab, available, make_tree
    ok, why = available()
    require(ok, why)
    lab = BareLab(make_tree(), tag=f"bi{os.getpid() % 1000}", subnet="10.213.6").up([False])
    yield lab
    lab.down()


def test_a_bare_debian_host_gets_a_bootstrap_hint_and_the_file_validates(bare_host, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    host = bare_host.hosts[0]
    out = tmp_path / "inventory.yaml"
    code = init(tmp_path, f"admin@{host.address}", "-o", str(out), "--identity-file", str(bare_host.key),
                "--known-hosts", str(bare_host.known_hosts()))
    said = capsys.readouterr()
    assert code == 0, said.err
    text = out.read_text()
    assert "Debian GNU/Linux 12 (bookworm)" in text and "no Docker: `tfcompose bootstrap` installs it" in text
    assert "\nbootstrap:\n" in text and yaml.safe_load(text)["hosts"][0]["name"] == host.name
    assert main(["validate", "-i", str(out)]) == 0
    assert not host.installed("docker.io") and host.sh("test ! -e /opt/tfcompose", check=False).returncode == 0
