"""Status: each host's container of the cluster, as Docker reports it.

What a host says (container JSON, labels, log lines) is data to check: a label or field that is
not what tfcompose writes makes that host's state `unknown` with the reason, never a traceback.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Optional

from launcher import docker_commands as dc
from launcher.containers import containers, newest, run_label, timeout_kw
from launcher.errors import BadAnswer, summary
from launcher.inventory.model import Cluster, Host
from launcher.leases import status as leases
from launcher.plan import make
from launcher.ssh.group import Group
from launcher.telemetry import live, once
from launcher.text import printable
from trainer.spec.runner_lines import failure_of

PROGRESS_MARKERS = (" epoch ", " done: ", "best: ", "cluster ready", "tfcompose trainer:", "joining a cluster",
                    "importing TensorFlow", "first training step done")


@dataclass
class HostStatus:
    host: str
    state: str                 # running, exited, restarting, absent, unreachable, unknown, ...
    exit_code: Optional[int] = None
    restarts: int = 0
    uptime_s: Optional[float] = None
    run: str = ""
    last_line: str = ""
    container: str = ""
    error: str = ""
    finished_at: str = ""      # Docker's FinishedAt (ISO 8601), to find who failed first
    tail_line: str = ""        # the last line of output, whatever it says (for `run:` programs)
    error_line: str = ""       # the program's own error line, when the image's runner said one (trainer/runner.py)
    leases: list = field(default_factory=list)   # `status` only: every lease on the host (leases.LeaseView)
    waiting: list = field(default_factory=list)  # `up --queue`s waiting there, oldest first
    lease_notes: list = field(default_factory=list)   # what of the lease folder was ignored, or why it was not read
    hardware: Optional[dict] = None   # `status` only: its GPUs, CPU, memory and network now (telemetry/live.py)
    hardware_line: str = ""           # the same as one line, or why there is none


def host_status(host: Host, conn, cluster: str, with_line: bool = True, timeout: Optional[float] = None) -> HostStatus:
    found = containers(conn, cluster, host.name, timeout)
    if not found:
        return HostStatus(host.name, "absent")
    top = newest(found)
    st = top["State"]
    exit_code = st.get("ExitCode") if isinstance(st.get("ExitCode"), int) else None
    restarts = top.get("RestartCount") if isinstance(top.get("RestartCount"), int) else 0
    status = HostStatus(host.name, printable(str(st.get("Status", "unknown")))[:20], exit_code, restarts, _uptime(st),
                        run_label(top), container=top["Id"][:12], finished_at=str(st.get("FinishedAt", "")))
    if with_line:
        tail = conn.run(dc.container_logs(status.container, tail=60), check=False, **timeout_kw(timeout)).stdout
        lines = [printable(line).strip() for line in tail.splitlines() if line.strip()]
        status.last_line = next((line for line in reversed(lines) if any(m in line for m in PROGRESS_MARKERS)), "")
        status.tail_line = lines[-1][:200] if lines else ""
        status.error_line = program_error(lines)
    return status


def program_error(lines: list[str]) -> str:
    """The program's own error line from the runner's last word on it in a log, or ""."""
    return next((found for line in reversed(lines) if (found := failure_of(line))), "")[:300]


def _uptime(state: dict) -> Optional[float]:
    if state.get("Status") != "running":
        return None
    try:
        started = dt.datetime.fromisoformat(str(state["StartedAt"])[:26].rstrip("Z") + "+00:00")
    except (KeyError, ValueError):
        return None
    return (dt.datetime.now(dt.timezone.utc) - started).total_seconds()


def unreachable(host: str, exc: BaseException) -> HostStatus:
    """A host whose status could not be read: `unknown` when it answered nonsense, else `unreachable`."""
    why = summary(exc)
    return HostStatus(host, "unknown" if isinstance(exc, BadAnswer) else "unreachable", error=why)


def statuses(group: Group, with_line: bool = True) -> list[HostStatus]:
    """Every host's status in inventory order; a host that does not answer is `unreachable`."""
    name = group.cluster.name
    result = group.run("status", lambda h, c: host_status(h, c, name, with_line))
    return [result.succeeded[h] if h in result.succeeded else unreachable(h, result.failed[h]) for h in result.hosts]


def status(cluster: Cluster, reporter=None, parallel: Optional[int] = None) -> list[HostStatus]:
    """Every host's container, and the leases in its lease folder (this cluster's and others')."""
    with Group(cluster, reporter, parallel) as group:
        states = statuses(group)
        add_leases(group, states)
        add_hardware(group, states)
        return states


def add_hardware(group: Group, states: list[HostStatus]) -> None:
    """Each reachable host's hardware now (telemetry/once.py), unless the inventory turns telemetry off."""
    if not group.cluster.spec.telemetry.enabled:
        return
    answered = [h for h in group.cluster.hosts if h.name in {st.host for st in states if st.state != "unreachable"}]
    found = once.snapshot(group, make(group.cluster), answered)
    for st in states:
        if st.host not in found:
            continue
        reading = found[st.host]
        if isinstance(reading, BaseException):
            st.hardware_line = f"not measured: {summary(reading)}"
            continue
        sample, note = reading
        line = live.host_line(sample) if sample else "nothing measured"
        st.hardware, st.hardware_line = live.as_json(sample), line + (f"; {note}" if note else "")


def add_leases(group: Group, states: list[HostStatus]) -> None:
    """Each reachable host's leases into its status (a host that did not answer is not asked again)."""
    answered = {st.host for st in states if st.state != "unreachable"}
    found = group.run("leases", lambda h, c: leases.host_leases(h, c, group.cluster.name),
                      [h for h in group.cluster.hosts if h.name in answered])
    for st in states:
        if st.host in found.succeeded:
            here = found.succeeded[st.host]
            st.leases, st.waiting, st.lease_notes = [asdict(v) for v in here.leases], here.waiting, here.notes
        elif st.host in found.failed:
            st.lease_notes = [f"leases not read: {summary(found.failed[st.host])}"]
