"""The bootstrap probe's parser: a real answer read right, and whatever a hostile host answers
bounded, printable and typed (never an exception)."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from launcher.bootstrap import facts
from launcher.bootstrap.facts import Facts, parse

BARE_DEBIAN = """os_id=debian
os_version=12
os_codename=bookworm
os_name=Debian GNU/Linux 12 (bookworm)
arch=amd64
foreign_archs=
user=admin
uid=1000
home=/home/admin
groups=admin
groups_db=admin
sudo=ok
docker_cli=
dockerd=
docker_user=no
compose=
docker_active=
docker_enabled=
pkg=ca-certificates 20230311 ii 
pkg=docker-ce  un 
apt_lists=0
source822=Types: deb
source822=URIs: http://deb.debian.org/debian
source822=Suites: bookworm bookworm-updates
source822=--
source822=Types: deb
source822=URIs: http://deb.debian.org/debian-security
source822=Suites: bookworm-security
source822=--
reboot=no
reboot_pkgs=
kernel=6.1.0-18-amd64
gpu_pci=0
nvidia_smi=missing
nvidia_module=absent
nvidia_ctk=
dkms_nvidia=
secure_boot=efivar 
free_docker=41000000
free_apt=41000000
free_usr=41000000
free_home=41000000
workdir=absent
data_dir=none
end=probe
"""


def answer(**values: str) -> str:
    """The bare Debian answer with some keys' values replaced (or added)."""
    lines = [line for line in BARE_DEBIAN.splitlines() if line.split("=", 1)[0] not in values and line != "end=probe"]
    return "\n".join(lines + [f"{k}={v}" for k, v in values.items()] + ["end=probe"]) + "\n"


def test_a_bare_debian_12_reads_as_such():
    f = parse(BARE_DEBIAN)
    assert f.complete and f.release == "debian-12" and f.arch == "amd64" and f.os_codename == "bookworm"
    assert f.user == "admin" and f.uid == 1000 and f.home == "/home/admin" and f.sudo == "ok"
    assert not f.docker_user and not f.dockerd and f.engine_version == "" and f.compose == ""
    assert f.installed("ca-certificates") and not f.installed("docker-ce") and not f.installed("docker.io")
    assert f.mirror == "http://deb.debian.org/debian"
    assert f.repositories == ("http://deb.debian.org/debian", "http://deb.debian.org/debian-security")
    assert f.free_kb == {"docker": 41000000, "apt": 41000000, "usr": 41000000, "home": 41000000}
    assert f.folders == {"workdir": "absent", "data_dir": "none"} and f.secure_boot is None and f.gpus == ()


def test_a_gpu_host_with_docker_reads_its_driver_runtimes_and_locks():
    f = parse(BARE_DEBIAN + "docker_user=ok\nend=probe\n")
    assert f.docker_user is False            # the first value of a key counts, not a later one
    g = parse(answer(docker_user="ok", compose="v2.24.6", docker_info="24.0.7|/srv/docker|io.containerd.runc.v2,nvidia,runc,",
                     nvidia_smi="ok", apt_lock="812 unattended-upgr /var/lib/dpkg/lock-frontend",
                     dpkg_broken="docker.io iF", running="4242")
              .replace("end=probe", "nvidia_said=535.129.03, NVIDIA A100-SXM4-40GB\nnvidia_said=470.82.01, NVIDIA T4\nend=probe"))
    assert g.engine_version == "24.0.7" and g.docker_root == "/srv/docker" and "nvidia" in g.runtimes
    assert [x.name for x in g.gpus] == ["NVIDIA A100-SXM4-40GB", "NVIDIA T4"] and g.driver == (470, 82, 1)
    assert str(g.apt_locks[0]) == "unattended-upgr (pid 812) holds /var/lib/dpkg/lock-frontend"
    assert g.dpkg_broken == (("docker.io", "iF"),) and g.running_pid == 4242


def test_sudo_that_wants_a_password_is_told_from_sudo_that_is_denied():
    assert parse("sudo=refused\nsudo_said=sudo: a password is required\n").sudo == "password"
    assert parse("sudo=refused\nsudo_said=admin is not in the sudoers file.\n").sudo == "denied"
    assert parse("sudo=maybe\n").sudo == "unknown" and parse("sudo=root\n").sudo == "root"


def test_hostile_values_become_unknown_not_commands_or_escapes():
    f = parse("os_id=debian; rm -rf /\nos_version=12\x1b[31m\narch=amd64\x07\nuser=$(id)\nuid=-1\nhome=/home/a b\n"
              "os_name=\x1b]52;c;aGVsbG8=\x07Evil\u202eOS\ngpu_pci=99999999999999999999\n"
              "pkg=docker.io 1.0;reboot ii\npkg=../../etc 1 ii\napt_lock=1 evil /etc/shadow\n"
              "free_usr=12e9\nworkdir=owned\nend=probe\n")
    assert f.os_id == "unknown" and f.arch == "amd64" and f.user == "unknown"     # escapes and BEL dropped, the rest judged
    assert f.os_version == "12" and f.release is None
    assert f.uid is None and f.home == "" and f.release is None and f.gpu_pci == 0
    assert "\x1b" not in f.os_name and "\u202e" not in f.os_name and "\x07" not in f.os_name
    assert f.packages == {} and f.apt_locks == () and f.free_kb["usr"] is None and f.folders["workdir"] == "unknown"


def test_an_answer_cut_short_is_not_complete_and_a_huge_one_is_read_only_to_its_bound():
    assert not parse(BARE_DEBIAN.replace("end=probe\n", "")).complete
    flood = "pkg=docker.io 1 ii \n" * 100_000 + "end=probe\n"
    f = parse(flood)
    assert not f.complete and len(f.packages) == 1          # past ANSWER_LIMIT nothing more is read
    long = parse("os_name=" + "A" * 1_000_000 + "\n")
    assert len(long.os_name) <= facts.VALUE_LIMIT


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(facts.KEYS) + ["x", "", "pkg "]), st.text(max_size=80)), max_size=60))
def test_any_answer_parses_into_typed_printable_facts(pairs):
    f = parse("\n".join(f"{k}={v}" for k, v in pairs))
    assert isinstance(f, Facts)
    assert f.uid is None or isinstance(f.uid, int)
    assert all(isinstance(v, (int, type(None))) for v in f.free_kb.values())
    for text in (f.os_name, f.sudo_said, f.nvidia_said, f.reboot_packages, f.nvidia_ctk, f.mirror):
        assert len(text) <= facts.VALUE_LIMIT and not any(ord(c) < 32 and c not in "\t" for c in text)
    assert f.release in (None, "debian-12", "ubuntu-22.04", "ubuntu-24.04")
    assert f.driver is None or all(isinstance(n, int) for n in f.driver)


def test_the_gpus_memory_the_nics_and_the_route_init_asks_for():
    found = facts.parse("hostname=gpu-a\nnvidia_smi=ok\nnvidia_said=550.54.15, NVIDIA L4, 23034 MiB\n"
                        "nvidia_said=470.82.01, NVIDIA T4\n"           # an older answer, without memory
                        "nic=eth0 up 10000 10.0.0.5/24\nnic=lo unknown - 127.0.0.1/8\nnic=wlan0 down -1 -\n"
                        "route=10.0.0.6 dev eth0 src 10.0.0.5 uid 1000\nend=probe\n")
    assert [(g.name, g.memory_mib) for g in found.gpus] == [("NVIDIA L4", 23034), ("NVIDIA T4", None)]
    assert [(n.name, n.state, n.speed_mbit, n.address) for n in found.nics] == [
        ("eth0", "up", 10000, "10.0.0.5/24"), ("lo", "unknown", None, "127.0.0.1/8"), ("wlan0", "down", None, "")]
    assert found.route_nic == "eth0" and found.hostname == "gpu-a"


def test_nics_and_routes_a_host_made_up_are_dropped():
    found = facts.parse("hostname=a b\nnic=eth0;reboot up 1000 -\nnic=\x1b[31meth0 up 1000 -\nnic=eth0 up 99999999 1.2.3.4/8\n"
                        "nic=" + "x" * 40 + " up 1 -\nroute=1.2.3.4 dev $(reboot)\nend=probe\n" + "nic=e1 up 1 -\n" * 40)
    assert found.hostname == "" and found.route_nic == ""
    names = [n.name for n in found.nics]
    assert len(names) <= 32 and all(facts.NIC_NAME.match(n) and "\x1b" not in n for n in names)
    assert "eth0;reboot" not in names and "x" * 40 not in names and names.count("e1") >= 20
    assert [n.speed_mbit for n in found.nics if n.address == "1.2.3.4/8"] == [None]    # 99999999 Mbit/s is no speed
