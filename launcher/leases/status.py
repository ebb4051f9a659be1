"""The leases on a host as `status` shows them (was in take.py): every lease in the host's folder,
its own cluster's and others', live or stale (or broken, and by whom), the `up --queue`s still
waiting there, and the files ignored."""
from __future__ import annotations

from dataclasses import dataclass, field

from launcher.inventory.model import Host
from launcher.leases import rules as rules
from launcher.leases.on_host import crowded_lines, look


@dataclass
class LeaseView:
    """A lease as `status` shows it."""

    cluster: str
    host: str
    owner: str
    run: str
    launcher: str
    since: str
    gpus: str
    ports: str
    state: str
    live: bool
    own: bool


@dataclass
class HostLeases:
    leases: list = field(default_factory=list)       # LeaseView
    waiting: list = field(default_factory=list)      # `up --queue`s still waiting there, oldest first
    notes: list = field(default_factory=list)        # files ignored, and why


def host_leases(host: Host, conn, cluster: str) -> HostLeases:
    """Every lease in the host's folder (own and others'), live or stale, newest last."""
    folder, containers = look(host, conn)
    found = HostLeases(notes=[f"ignored {u.file} (owner {u.owner}): {u.why}" for u in folder.unreadable]
                       + [line.split(": ", 1)[1] for line in crowded_lines(host, folder)])
    found.waiting = [f"{t.owner}'s cluster {t.cluster} (from {t.launcher}, asked at {rules.when_text(t.since)})"
                     for t in sorted(folder.tickets, key=lambda t: t.key) if folder.alive(t.session)]
    broken = {stone.lease: stone for stone in folder.tombstones}
    for lease in sorted(folder.leases, key=lambda held: held.since):
        state = rules.lease_state(lease, folder, containers)
        why = state.why if lease.id not in broken or state.live else \
            f"broken by {broken[lease.id].by} at {rules.when_text(broken[lease.id].at)}"
        found.leases.append(LeaseView(lease.cluster, lease.host, lease.owner, lease.run, lease.launcher,
                                      rules.when_text(lease.since, folder.now), lease.gpus.text(),
                                      ",".join(map(str, sorted(lease.ports))) or "none",
                                      ("live: " if state.live else "") + why, state.live,
                                      lease.cluster == cluster and lease.uid == folder.uid))
    return found
