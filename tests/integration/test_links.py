"""Host-to-host preflight through a real network: hosts in namespaces of their own, one of them
with a firewall that drops the TensorFlow port; links shaped to a known rate."""
from __future__ import annotations

import os
import re
import uuid

import pytest

from support.common import require
from support.netns import Lan, available
from support.sshd import write_inventory
from support.cluster import cli, labelled

pytestmark = pytest.mark.integration
TF_PORT = 23456


@pytest.fixture
def lan():
    require(available(), "network namespaces need root and iproute2")
    net = Lan(f"{os.getpid() % 10000}").up(2)
    yield net
    net.down()


def test_a_closed_link_stops_up_naming_both_hosts_and_an_open_one_shows_in_the_matrix(
        lan, sshd_farm, tmp_path, capsys, trainer_image):  # noqa: F811
    hosts = [sshd_farm.start(f"h{i}", 22, TF_PORT, address=lan.address(i), netns=ns) for i, ns in enumerate(lan.hosts)]
    sshd_farm.known_hosts()
    name = f"l{uuid.uuid4().hex[:8]}"
    inv = write_inventory(sshd_farm, tmp_path / "inv.yaml", name, hosts, image=trainer_image,
                          train={"dataset": {"kind": "synthetic"}, "epochs": 1})
    lan.block(1, TF_PORT)
    code, out, err = cli(capsys, "up", "-i", str(inv))
    assert code == 1, out + err
    assert f"h0 cannot reach h1 at {lan.address(1)}:{TF_PORT} (timed out)" in err
    assert f"iptables -I INPUT -p tcp -s {lan.address(0)} --dport {TF_PORT} -j ACCEPT" in err
    assert "h1 cannot reach h0" not in err
    assert labelled(name) == []  # nothing started anywhere

    lan.unblock(1, TF_PORT)
    code, out, err = cli(capsys, "preflight", "-i", str(inv))
    assert code == 0, out + err
    matrix = out[out.index("links between hosts"):]
    assert "CLOSED" not in matrix and matrix.count(" Mbit/s") == 2   # open, and measured
    assert "nic eth0" in out  # the interface that routes to the peer, inside each namespace


@pytest.fixture
def slow_lan():
    require(available(), "network namespaces need root and iproute2")
    net = Lan(f"ar{os.getpid() % 1000}", subnet="10.213.40").up(2)
    net.shape("50mbit")
    yield net
    net.down()


def test_preflight_measures_each_links_throughput_on_the_tf_port(slow_lan, sshd_farm, tmp_path, capsys, trainer_image):
    hosts = [sshd_farm.start(f"h{i}", 22, TF_PORT, address=slow_lan.address(i), netns=ns)
             for i, ns in enumerate(slow_lan.hosts)]
    sshd_farm.known_hosts()
    inv = write_inventory(sshd_farm, tmp_path / "inv.yaml", f"l{uuid.uuid4().hex[:8]}", hosts, image=trainer_image,
                          train={"dataset": {"kind": "synthetic"}, "epochs": 1, "allreduce": "auto"})
    code, out, err = cli(capsys, "preflight", "-i", str(inv))
    assert code == 0, out + err
    matrix = out[out.index("links between hosts"):]
    rates = [float(r.replace(",", "")) for r in re.findall(r"([\d,.]+) Mbit/s", matrix)]
    assert len(rates) == 2 and all(30 <= r <= 52 for r in rates), matrix     # both ways, each at 50 Mbit/s
