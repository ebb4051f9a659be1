"""Preflight across hosts: the NIC each host uses, equal replica counts, the links matrix."""
from __future__ import annotations

import pytest
from launcher import plan as plan_mod
from launcher.stages import cluster_rules
from launcher.stages.cluster_rules import ClusterNotReady
from support.builders import cluster, host, host_facts


ROUTES = [
    ("10.0.0.2 dev eth0 src 10.0.0.1 uid 1000 \\    cache ", "eth0"),
    ("10.0.0.2 via 10.0.0.254 dev enp3s0f0 src 10.0.0.1 uid 0 \\    cache ", "enp3s0f0"),
    ("local 127.0.0.1 dev lo table local src 127.0.0.1 uid 0 \\    cache <local> ", "lo"),
    ("fe80::2 from :: dev ib0 proto kernel src fe80::1 metric 256 pref medium", "ib0"),
    ("RTNETLINK answers: Network is unreachable", None),
    ("", None),
]


@pytest.mark.parametrize("route, nic", ROUTES)
def test_the_interface_is_read_from_ip_route_get(route, nic):
    assert cluster_rules.route_interface(route) == nic


def test_each_host_without_nic_gets_its_route_and_virtual_ones_are_warned_about():
    plan = plan_mod.make(cluster(3))
    facts = {"h0": host_facts(route="10.0.0.2 dev eth0 src 10.0.0.1"), "h1": host_facts(route="10.0.0.1 dev docker0 src 172.17.0.1"),
             "h2": host_facts(route="")}
    nics, warnings = cluster_rules.choose_nics(plan, facts)
    assert nics == {"h0": "eth0", "h1": "docker0"}
    assert [h for h, _ in warnings] == ["h1"] and "set `nic`" in warnings[0][1]


def decided(plan, facts):
    """The plan as `up` completes it with what the rules decided."""
    found = cluster_rules.decide(plan, facts)
    return plan_mod.complete(plan, found.nics, found.gpu_overrides)


def test_an_inventory_nic_wins_and_is_not_probed():
    c = cluster(2)
    c = type(c)(c.path, c.spec, (host("h0", 0, nic="ib0"), c.hosts[1]))
    nics, _ = cluster_rules.choose_nics(plan_mod.make(c), {"h0": host_facts(route="x dev eth0"), "h1": host_facts(route="x dev eth1")})
    assert nics == {"h1": "eth1"}
    adjusted = decided(plan_mod.make(c), {"h0": host_facts(route="x dev eth0"), "h1": host_facts(route="x dev eth1")})
    assert adjusted.nic(c.hosts[0]) == "ib0" and adjusted.nic(c.hosts[1]) == "eth1"


@pytest.mark.parametrize("gpus, count, expected", [(0, 8, 1), ("all", 4, 4), ("all", 0, 1), (2, 8, 2), ([0, 3], 8, 2)])
def test_replicas_per_host(gpus, count, expected):
    assert cluster_rules.replicas(gpus, count) == expected


def gpu_cluster(gpus: list, **spec):
    c = cluster(len(gpus), **spec)
    return type(c)(c.path, c.spec, tuple(host(f"h{i}", i, gpus=g) for i, g in enumerate(gpus)))


def test_sync_mode_refuses_different_replica_counts_naming_each_host():
    plan = plan_mod.make(gpu_cluster(["all", "all"]))
    with pytest.raises(ClusterNotReady, match="h0 8, h1 4"):
        cluster_rules.equal_replicas(plan, {"h0": host_facts(gpu_count="8"), "h1": host_facts(gpu_count="4")})
    assert cluster_rules.equal_replicas(plan, {"h0": host_facts(gpu_count="4"), "h1": host_facts(gpu_count="4")}) == {}


def test_parallel_mode_has_no_replica_rule():
    plan = plan_mod.make(gpu_cluster(["all", "all"], train={"search": {"mode": "parallel"},
                                                            "candidates": ["small_cnn", "deep_cnn"]}))
    assert cluster_rules.equal_replicas(plan, {"h0": host_facts(gpu_count="8"), "h1": host_facts(gpu_count="4")}) == {}


def test_gpus_per_host_min_gives_every_host_the_smallest_count():
    plan = plan_mod.make(gpu_cluster(["all", [0, 1, 2, 3], 2], gpus_per_host="min"))
    facts = {"h0": host_facts(gpu_count="8"), "h1": host_facts(gpu_count="8"), "h2": host_facts(gpu_count="8")}
    assert cluster_rules.equal_replicas(plan, facts) == {"h0": 2, "h1": [0, 1]}
    adjusted = decided(plan, facts)
    from launcher.stages import render
    env = {h.name: render.host_service(adjusted, h).environment["TFC_EXPECT_GPUS"] for h in adjusted.cluster.hosts}
    assert env == {"h0": "2", "h1": "0,1", "h2": "2"}
