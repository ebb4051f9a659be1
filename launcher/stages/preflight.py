"""Preflight: every host checked at once before anything is pushed or started.

`judge` is the policy (pure, unit-tested): facts from one host's probe → problems that block
the start, and warnings. Every failure of every host is reported together (PreflightError).
`check_cluster` adds the rules across hosts (cluster_rules); `run` is `tfcompose preflight`:
those, then the links matrix and the hand-copied datasets when they can be checked already.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional

from launcher import docker_commands as dc
from launcher.dataset import sync
from launcher.errors import PreflightError, RemoteError
from launcher.host_facts import HostFacts
from launcher.host_facts import parse as parse_facts
from launcher.image.on_host import remote_image_id
from launcher.inventory.model import Cluster, Host
from launcher.plan import Plan, complete, expect_gpus, make
from launcher.ssh.group import Group
from launcher.stages import cluster_rules, links
from launcher.text import one_line

MIN_FREE_GB = 2
CLOCK_WARN_S = 1.0


@dataclass(frozen=True)
class HostReady:
    """A host that passed: its facts (docker compose version, free space…) and any warnings."""

    host: str
    facts: HostFacts
    warnings: list = field(default_factory=list)


def preflight(group: Group, plan: Plan) -> dict[str, HostReady]:
    """Every host's facts; raises PreflightError naming every host that is not ready."""
    name, reporter = group.cluster.name, group.reporter

    def one(host: Host, conn) -> HostReady:
        if not getattr(conn, "connected", False):     # `up` connected already (its lease stage): said once
            reporter.stage(host.name, "connect")
        conn.client  # noqa: B018  (connect now, so SSH problems are reported as such)
        reporter.stage(host.name, "preflight")
        ready = check_host(host, conn, name, peer_of(group.cluster, host), synced=bool(group.cluster.spec.dataset_source),
                           port=plan.listen_port(host))
        for warning in ready.warnings:
            reporter.warn(host.name, warning)
        return ready

    return group.run("preflight", one).raise_if_failed(PreflightError).succeeded


def check_cluster(group: Group, plan: Plan) -> tuple[dict[str, HostFacts], cluster_rules.Findings]:
    """Preflight every host, then the rules across hosts (cluster_rules): every host's facts and
    what they mean for the plan (NICs, GPU counts); the warnings are reported."""
    facts = {host: ready.facts for host, ready in preflight(group, plan).items()}
    found = cluster_rules.decide(plan, facts)
    for host, warning in found.warnings:
        group.reporter.warn(host, warning)
    return facts, found


@dataclass(frozen=True)
class Readiness:
    """What `tfcompose preflight` found: the plan as the hosts make it, every host's facts, the
    links matrix (None until the image is on every host) and the hand-copied datasets (None when
    `up` will copy them, or there are none)."""
    plan: Plan
    facts: dict
    links: Optional[links.Matrix] = None
    datasets: Optional[dict] = None


def run(cluster: Cluster, reporter=None, parallel: Optional[int] = None) -> Readiness:
    with Group(cluster, reporter, parallel) as group:
        base = make(cluster)
        facts, found = check_cluster(group, base)
        plan = complete(base, found.nics, found.gpu_overrides)
        return Readiness(plan, facts, links_if_possible(group, plan, facts), datasets_if_needed(group, plan))


def links_if_possible(group: Group, plan: Plan, facts: dict[str, HostFacts]) -> Optional[links.Matrix]:
    """The host-to-host matrix (links.py) when every host already has the image, else None."""
    if not links.needed(plan, facts):
        return None
    have = group.run("links", lambda h, c: remote_image_id(c, plan.container_image))
    if have.failed or not all(have.succeeded.values()):
        return None
    return links.check(group, plan)


def datasets_if_needed(group: Group, plan: Plan) -> Optional[dict]:
    """Hand-copied datasets must agree now (DatasetMismatch names host and files); with
    dataset_source, `up` makes them agree, so there is nothing to refuse yet (None)."""
    if plan.cluster.dataset_source or not sync.needed(plan.cluster):
        return None
    return sync.provide(group, plan, None)


def peer_of(cluster, host: Host) -> str:
    """The host this one talks to first (its route tells which NIC carries the cluster's traffic)."""
    others = [h for h in cluster.hosts if h.name != host.name]
    return others[0].address if others else ""


def check_host(host: Host, conn, cluster: str, peer: str = "", synced: bool = False,
               port: Optional[int] = None) -> HostReady:
    """One host's facts and what they mean; `port`: the one its container will listen on."""
    sent = time.time()
    result = conn.run(dc.host_probe(host.workdir, host.data_dir or "", port or "", cluster, host.name, peer),
                      check=False)
    facts = parse_facts(result.stdout)
    received = time.time()
    if not facts.complete:
        # A probe cut short is not a host whose workdir is not writable (what its missing facts
        # once read as): say where it stopped.
        told = [key for key in facts.said if key != "end"]
        raise RemoteError(host.name, reason=f"the preflight probe stopped (exit status {result.status}) after "
                          f"{', '.join(told[-3:]) or 'nothing'}: {one_line(result.stderr, 200) or 'no message'}")
    problems, warnings = judge(host, facts, midpoint=(sent + received) / 2, synced=synced, port=port,
                               window=(received - sent) / 2)
    if problems:
        raise RemoteError(host.name, reason="not ready: " + "; ".join(problems))
    return HostReady(host.name, facts, warnings)


def judge(host: Host, facts: HostFacts, midpoint: float, synced: bool = False,
          port: Optional[int] = -1, window: float = 0.0) -> tuple[list[str], list[str]]:
    """Problems (block the start) and warnings from one host's preflight facts. synced: `up` fills
    data_dir from dataset_source, so it need not exist yet; port: the one it will listen on
    (default its tf_port; None: none)."""
    port = host.tf_port if port == -1 else port
    problems, warnings = [], []
    if not facts.docker_ok:
        problems.append(f"`docker info` fails for this user ({facts.docker or 'no answer'}); `tfcompose bootstrap` "
                        "installs Docker, starts it and adds you to the docker group")
    if compose_major(facts.compose) < 2:
        problems.append(f"docker compose v2 is needed (found: {facts.compose}); `tfcompose bootstrap` "
                        "installs it")
    problems += gpu_problems(host, facts)
    if port and facts.port_busy and not facts.own_running:
        what = "tf_port" if port == host.tf_port else "the study port (search.port)"
        problems.append(f"{what} {port} is already in use")
    if facts.workdir != "ok":
        said = one_line(facts.workdir or "no answer", 200)
        # Another account's folder, or none the user may make: what `tfcompose bootstrap` fixes.
        fix = "; `tfcompose bootstrap` makes it yours when it is absent" if "ermission denied" in said else ""
        problems.append(f"workdir {host.workdir} is not writable ({said}{fix})")
    if facts.bundle == "foreign":
        problems.append(f"{host.bundle_dir} exists and was not made by tfcompose (no marker file); "
                        "choose another workdir or cluster name")
    if facts.free_kb is not None and facts.free_kb < MIN_FREE_GB * 1024 * 1024:
        problems.append(f"only {facts.free_kb // 1024} MB free in {host.workdir} (need {MIN_FREE_GB} GB)")
    if host.data_dir and facts.data_dir != "ok" and not synced:
        problems.append(f"data_dir {host.data_dir} does not exist")
    offset = clock_offset(facts.clock, midpoint, window)
    if offset is not None and abs(offset) > CLOCK_WARN_S:
        warnings.append(f"clock is {offset:+.1f} s off this machine's (timeouts and logs may mislead; run NTP)")
    return problems, warnings


def compose_major(version: str) -> int:
    head = version.split(".")[0].lstrip("v")
    return int(head) if head.isdigit() else 0


def gpu_problems(host: Host, facts: HostFacts) -> list[str]:
    if host.gpus == 0:
        return []
    problems = []
    if "nvidia" not in facts.runtimes:
        problems.append("gpus requested but Docker has no nvidia runtime (`tfcompose bootstrap` installs the NVIDIA "
                        "Container Toolkit and configures it)")
    count = facts.gpu_count
    need = 1 if host.gpus == "all" else (max(host.gpus) + 1 if isinstance(host.gpus, list) else host.gpus)
    if count < need:
        problems.append(f"gpus {expect_gpus(host.gpus)} requested but nvidia-smi lists {count} GPU(s)")
    return problems


def clock_offset(remote: Optional[float], midpoint: float, window: float = 0.0) -> Optional[float]:
    """How far the host's clock is off ours: its reading was taken while the probe ran (midpoint ±
    window), so only what lies beyond that window is surely off (a slow probe is not a wrong clock)."""
    if remote is None:
        return None
    off = remote - midpoint
    return 0.0 if abs(off) <= window else off - window if off > 0 else off + window
