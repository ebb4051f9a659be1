"""Jump hosts against real OpenSSH servers on this machine (tests/support/sshd.py): every host's
session goes through one bastion session (or a chain of two, or the ssh config's ProxyCommand),
a bastion's key is checked like a host's, the hop that failed is named, and Ctrl-C calls the
hosts' work off while the clean-up after it still runs through the same bastion. (Hosts that
really cannot be reached directly, with Docker, on a lab LAN: test_jump_lab.py.)"""
from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
import uuid

import pytest

from launcher.errors import CalledOff
from launcher.inventory.load import load_cluster
from launcher.ssh.group import Group
from support.cluster import cli
from support.common import free_ports
from support.sshd import write_inventory

pytestmark = pytest.mark.integration


def clients_of(port: int) -> list[str]:
    """The processes of this machine with an established TCP connection to `port`."""
    out = subprocess.run(["ss", "-Htnp", "state", "established", f"( dport = :{port} )"], capture_output=True,
                         text=True, check=True).stdout
    return re.findall(r'users:\(\("([^"]+)"', out)


@pytest.fixture
def bastion(sshd_farm):
    return sshd_farm.start("gate", *free_ports(2))


@pytest.fixture
def hosts(sshd_farm):
    made = [sshd_farm.start(f"h{i}", *free_ports(2)) for i in range(3)]
    sshd_farm.known_hosts()
    return made


def inventory(farm, tmp_path, hosts, **ssh):
    return write_inventory(farm, tmp_path / f"{uuid.uuid4().hex[:6]}.yaml", "t", hosts, ssh=ssh)


def test_every_host_goes_through_one_bastion_session_that_ends_with_the_command(sshd_farm, bastion, hosts, tmp_path):
    cluster = load_cluster(inventory(sshd_farm, tmp_path, hosts, proxy_jump=f"127.0.0.1:{bastion.port}"))
    with Group(cluster) as group:
        said = group.run("hello", lambda h, c: c.run(["echo", h.name]).stdout).raise_if_failed().succeeded
        assert said == {"h0": "h0\n", "h1": "h1\n", "h2": "h2\n"}
        assert clients_of(bastion.port) == ["python"]                        # one session to the bastion
        assert all(clients_of(h.port) == ["sshd"] for h in hosts)            # the hosts hear the bastion, not us
    assert clients_of(bastion.port) == []


def test_a_chain_of_two_bastions_from_the_ssh_configs_proxyjump_lines(sshd_farm, bastion, hosts, tmp_path):
    inner = sshd_farm.start("inner", *free_ports(2))
    sshd_farm.known_hosts()
    config = tmp_path / "ssh_config"
    config.write_text(f"Host inner\n  HostName 127.0.0.1\n  Port {inner.port}\n  ProxyJump gate\n"
                      f"Host gate\n  HostName 127.0.0.1\n  Port {bastion.port}\n  IdentityFile {sshd_farm.user_key}\n")
    cluster = load_cluster(inventory(sshd_farm, tmp_path, hosts[:2], proxy_jump="inner", config_file=str(config)))
    assert [b.name for b in cluster.hosts[0].jumps] == ["gate", "inner"]
    with Group(cluster) as group:
        group.run("hello", lambda h, c: c.run(["true"])).raise_if_failed()
        assert (clients_of(bastion.port), clients_of(inner.port), clients_of(hosts[0].port)) == \
            (["python"], ["sshd"], ["sshd"])


def test_the_hop_that_failed_is_named(sshd_farm, bastion, hosts, tmp_path, capsys):
    closed, also_closed = free_ports(2)
    inv = inventory(sshd_farm, tmp_path, hosts[:1], proxy_jump=f"127.0.0.1:{closed}", connect_timeout_s=1)
    code, out, err = cli(capsys, "preflight", "-i", str(inv))
    assert code == 1 and f"h0: cannot reach bastion {sshd_farm.user}@127.0.0.1:{closed} (hop 1 of 2): connection " \
                         "refused" in err, err
    inv = inventory(sshd_farm, tmp_path, hosts[:1], proxy_jump=f"127.0.0.1:{bastion.port},127.0.0.1:{closed}",
                    connect_timeout_s=1)
    code, out, err = cli(capsys, "preflight", "-i", str(inv))
    assert code == 1 and f"h0: bastion {sshd_farm.user}@127.0.0.1:{bastion.port} reached, but bastion " \
                         f"{sshd_farm.user}@127.0.0.1:{closed} (hop 2 of 3) did not answer through it" in err, err
    cluster = load_cluster(inventory(sshd_farm, tmp_path, hosts[:1], proxy_jump=f"127.0.0.1:{bastion.port}",
                                     connect_timeout_s=1))
    gone = cluster.hosts[0].__class__(**{**vars(cluster.hosts[0]), "ssh_port": also_closed})   # no sshd there
    with Group(cluster.__class__(cluster.path, cluster.spec, (gone,), known_hosts=cluster.known_hosts)) as group:
        failed = group.run("hello", lambda h, c: c.run(["true"])).failed["h0"]
    assert str(failed) == (f"h0: bastion {sshd_farm.user}@127.0.0.1:{bastion.port} reached, but h0 (127.0.0.1:"
                           f"{also_closed}, hop 2 of 2) did not answer through it: the bastion's connection to it "
                           "failed (nothing listening there, a firewall, or no route from the bastion)")


def test_a_bastion_with_an_unknown_key_is_refused_under_strict_and_recorded_once_under_accept_new(
        sshd_farm, bastion, hosts, tmp_path, capsys):
    known = sshd_farm.known_hosts(hosts)                      # the hosts' keys, not the bastion's
    inv = inventory(sshd_farm, tmp_path, hosts[:1], proxy_jump=f"127.0.0.1:{bastion.port}")
    code, out, err = cli(capsys, "preflight", "-i", str(inv))
    assert code == 2, err
    assert f"h0: bastion {sshd_farm.user}@127.0.0.1:{bastion.port} (hop 1 of 2): host key ssh-ed25519 SHA256:" in err
    assert f"is not in {known}; refused (ssh.host_key_policy: strict)" in err
    assert f"ssh-keyscan -p {bastion.port} 127.0.0.1 >> {known}" in err
    cluster = load_cluster(inventory(sshd_farm, tmp_path, hosts[:2], proxy_jump=f"127.0.0.1:{bastion.port}",
                                     host_key_policy="accept-new"))
    for _ in range(2):
        with Group(cluster) as group:
            group.run("hello", lambda h, c: c.run(["true"])).raise_if_failed()
    assert known.read_text().count(f"[127.0.0.1]:{bastion.port} ") == 1


def test_a_changed_bastion_key_is_refused_even_with_accept_new(sshd_farm, bastion, hosts, tmp_path, capsys):
    known = sshd_farm.known_hosts()
    other = hosts[2].known_hosts_line().split()[1:]
    known.write_text(known.read_text().replace(" ".join(bastion.public_host_key()), " ".join(other)))
    inv = inventory(sshd_farm, tmp_path, hosts[:1], proxy_jump=f"127.0.0.1:{bastion.port}", host_key_policy="accept-new")
    code, out, err = cli(capsys, "preflight", "-i", str(inv))
    assert code == 2 and f"h0: bastion {sshd_farm.user}@127.0.0.1:{bastion.port} (hop 1 of 2): host key for " \
                         f"[127.0.0.1]:{bastion.port} CHANGED" in err, err


def test_an_unknown_host_behind_the_bastion_is_refused_and_told_how_to_scan_it_from_there(
        sshd_farm, bastion, hosts, tmp_path, capsys):
    known = sshd_farm.known_hosts([bastion])
    inv = inventory(sshd_farm, tmp_path, hosts[:1], proxy_jump=f"127.0.0.1:{bastion.port}")
    code, out, err = cli(capsys, "preflight", "-i", str(inv))
    assert code == 2 and "h0: host key ssh-ed25519" in err, err
    assert f"record it: ssh -p {bastion.port} {sshd_farm.user}@127.0.0.1 ssh-keyscan -p {hosts[0].port} 127.0.0.1 " \
           f">> {known}" in err


def test_the_ssh_configs_proxycommand_carries_the_session_and_ends_with_it(sshd_farm, bastion, hosts, tmp_path):
    mark = f"tfc-proxy-{uuid.uuid4().hex[:8]}"                # finds the command among this machine's processes
    command = (f"ssh -F /dev/null -i {sshd_farm.user_key} -o BatchMode=yes -o StrictHostKeyChecking=yes "
               f"-o UserKnownHostsFile={sshd_farm.root / 'known_hosts'} -o SetEnv=MARK={mark} "
               f"-p {bastion.port} -W %h:%p {sshd_farm.user}@127.0.0.1")
    config = tmp_path / "ssh_config"
    config.write_text(f"Host far\n  HostName 127.0.0.1\n  Port {hosts[0].port}\n  ProxyCommand {command}\n")
    inv = write_inventory(sshd_farm, tmp_path / "inv.yaml", "t", [], ssh={"config_file": str(config)},
                          extra_hosts=[{"name": "far", "address": "far"}])
    cluster = load_cluster(inv)
    assert cluster.hosts[0].proxy_command and not cluster.hosts[0].jumps
    with Group(cluster) as group:
        group.run("hello", lambda h, c: c.run(["true"])).raise_if_failed()
        assert mark in subprocess.run(["pgrep", "-af", mark], capture_output=True, text=True).stdout
        assert clients_of(hosts[0].port) == ["sshd"]
    time.sleep(0.5)
    assert mark not in subprocess.run(["pgrep", "-af", mark], capture_output=True, text=True).stdout


def test_ctrl_c_calls_off_work_behind_the_bastion_and_the_clean_up_runs_through_it(sshd_farm, bastion, hosts, tmp_path):
    # h0 is in a short step, h1 in an upload that would never end, both through the bastion, when
    # Ctrl-C comes: the step ends, the upload is called off, and the clean-up after it (as the
    # relay's key removal) still runs through the same bastion session; it is closed at the end.
    cluster = load_cluster(inventory(sshd_farm, tmp_path, hosts[:2], proxy_jump=f"127.0.0.1:{bastion.port}"))
    streaming, outcome = threading.Event(), {}

    def endless():
        while True:
            streaming.set()
            yield b"x" * 65536

    def step(host, conn):
        if host.name == "h1":
            with pytest.raises(CalledOff):
                conn.stream(["sh", "-c", "cat > /dev/null"], on_output=lambda _: None, stdin_chunks=endless())
            outcome["h1"] = "called off"
            return
        streaming.wait(30)
        threading.Timer(0.3, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()
        conn.run(["sh", "-c", 'sleep 1; mkdir "$1"', "sh", str(hosts[0].workdir / "first")])
        outcome["h0"] = "step done"

    started = time.monotonic()
    with Group(cluster) as group:
        with pytest.raises(KeyboardInterrupt):
            group.run("step", step)
        assert time.monotonic() - started < 20
        assert outcome == {"h0": "step done", "h1": "called off"}
        assert group.run("clean-up", lambda h, c: c.run(["echo", "clean"]).stdout).succeeded == \
            {"h0": "clean\n", "h1": "clean\n"}
    assert clients_of(bastion.port) == []
