"""Preflight across hosts: what each host's facts mean for the cluster as a whole (pure rules).

- NIC: without `nic` in the inventory, each host uses the interface that routes to its peers
  (`ip route get <peer>`), rendered as NCCL_SOCKET_IFNAME; a loopback, docker or virtual-bridge
  interface there is warned about (horovod#2568, #700: NCCL on docker0 or lo).
- Replicas: MultiWorkerMirroredStrategy needs the same number of replicas on every host
  ("Collective Op has group_size 8 … but that group has size 4", tensorflow#47203). In sync mode
  hosts that would differ are refused, naming each host's count; `gpus_per_host: min` gives every
  host the smallest count instead. Parallel mode trains each host alone: no rule.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from launcher.errors import TfcError
from launcher.host_facts import HostFacts
from launcher.inventory.model import Host
from launcher.plan import Plan

VIRTUAL_NIC = re.compile(r"^(lo|docker\d*|br-.*|virbr\d*|veth.*|cni\d*|flannel.*|cali.*|vxlan.*|podman\d*|lxcbr\d*)$")


class ClusterNotReady(TfcError):
    """The hosts are each ready, but not ready to train together."""


def route_interface(route: str) -> Optional[str]:
    """The `dev` of one line of `ip -o route get` output."""
    match = re.search(r"\bdev\s+(\S+)", route)
    return match.group(1) if match else None


def choose_nics(plan: Plan, facts: dict[str, HostFacts]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """host → interface for hosts without `nic`, and (host, warning) pairs."""
    chosen, warnings = {}, []
    for host in plan.cluster.hosts:
        if host.nic:
            continue
        route = facts[host.name].route if host.name in facts else ""
        nic = route_interface(route)
        if nic is None:
            continue
        chosen[host.name] = nic
        to_self = route.startswith("local ") or nic == "lo" and _all_loopback(plan)
        if VIRTUAL_NIC.match(nic) and not to_self:
            warnings.append((host.name, f"the route to its peers leaves by {nic}, a loopback or virtual interface; "
                                        "NCCL traffic will not reach the other hosts that way: set `nic` for this host"))
    return chosen, warnings


def _all_loopback(plan: Plan) -> bool:
    return all(h.address in ("127.0.0.1", "::1", "localhost") for h in plan.cluster.hosts)


def replicas(gpus: Any, gpu_count: int) -> int:
    """How many replicas a host's container gives the trainer."""
    if gpus == 0:
        return 1
    if gpus == "all":
        return max(gpu_count, 1)
    return len(gpus) if isinstance(gpus, list) else int(gpus)


def equal_replicas(plan: Plan, facts: dict[str, HostFacts]) -> dict[str, Any]:
    """GPU overrides that make every host train with as many replicas (or ClusterNotReady)."""
    if plan.parallel or len(plan.cluster.hosts) < 2:
        return {}
    counts = {h.name: replicas(h.gpus, _count(facts, h)) for h in plan.cluster.hosts}
    if len(set(counts.values())) == 1:
        return {}
    listed = ", ".join(f"{h} {n}" for h, n in counts.items())
    if plan.cluster.spec.gpus_per_host != "min":
        raise ClusterNotReady(f"the hosts would train with different numbers of replicas ({listed}); "
                              "MultiWorkerMirroredStrategy needs the same number on every host. Set each host's "
                              "`gpus` to the same count, or `gpus_per_host: min` to use the smallest everywhere.")
    smallest = min(counts.values())
    return {h.name: _first(h.gpus, smallest) for h in plan.cluster.hosts if counts[h.name] != smallest}


def _count(facts: dict[str, HostFacts], host: Host) -> int:
    return facts[host.name].gpu_count if host.name in facts else 0


def _first(gpus: Any, n: int) -> Any:
    return gpus[:n] if isinstance(gpus, list) else n


@dataclass(frozen=True)
class Findings:
    """What the hosts' facts mean for the plan (plan.complete takes them) and what to warn about."""
    nics: dict[str, str] = field(default_factory=dict)
    gpu_overrides: dict[str, Any] = field(default_factory=dict)
    warnings: list[tuple[str, str]] = field(default_factory=list)


def decide(plan: Plan, facts: dict[str, HostFacts]) -> Findings:
    """NICs and equal replica counts from every host's preflight facts (or ClusterNotReady)."""
    nics, warnings = choose_nics(plan, facts)
    return Findings(nics, equal_replicas(plan, facts), warnings)
