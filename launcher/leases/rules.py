"""Who may take what on a shared host: the rules of leases and of the queue (pure; take.py reads
the facts from the hosts and acts on what these functions decide).

- Two clusters clash on a host when their GPU sets overlap (`all` overlaps any GPU; a CPU-only
  host's empty set overlaps nothing), when they listen on a common port, or when they have the
  same name and different owners (their compose projects and container labels would be one).
- A lease is live while the `up` that holds it is at work (its session is locked) or while a
  container of its cluster on that host runs (or restarts, or is paused). Otherwise it is stale:
  its containers are gone, or they have all exited (a run without `--wait` that ended). When the
  host's Docker does not answer, a lease whose session is over is taken as live: what cannot be
  seen is never broken.
- A live lease that clashes refuses the host. A stale one refuses it too, unless it was broken
  (a tombstone names it) or this `up` breaks it (`--break-lease`); a tombstone never frees a lease
  that is live again.
- The queue: an older ticket (an `up --queue` that asked earlier, whose launcher is still there)
  that clashes comes first, for a plain `up` too, so runs start in the order they asked. A ticket
  is ordered by its key (the launcher's clock when it first asked, then a nonce): the same key on
  every host, so two waiters are in the same order everywhere and never wait for each other.
- The same cluster (same name, same owner) renews its own lease; only another `up` of it still at
  work (another live session) makes it wait.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Optional

from launcher.leases.files import (Lease, Needs, Ticket, Tombstone, lease_file, lease_text, tombstone_file,
                                   tombstone_text)
from launcher.leases.look import Folder
from launcher.text import clock

LIVE = ("running", "restarting", "paused")


@dataclass(frozen=True)
class State:
    live: bool
    why: str


def container_state(status: str) -> str:
    """`docker ps`'s Status column (`Up 3 minutes (Paused)`, `Exited (0) 2 hours ago`) as one word."""
    status = status.strip()
    if status.startswith("Up"):
        return "paused" if "(Paused)" in status else "running"
    for word in ("Restarting", "Exited", "Created", "Dead", "Removal"):
        if status.startswith(word):
            return word.lower()
    return "unknown"


_NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,38}[a-z0-9])?$")


def parse_containers(text: str, limit: int = 4096) -> dict[tuple[str, str], list[str]]:
    """`cluster|host|status` lines (docker_commands.tfcompose_containers) into (cluster, host) →
    states; a line whose labels are not names tfcompose writes is skipped."""
    found: dict[tuple[str, str], list[str]] = {}
    for line in text.splitlines()[:limit]:
        parts = line.split("|")
        if len(parts) == 3 and _NAME.match(parts[0]) and _NAME.match(parts[1]):
            found.setdefault((parts[0], parts[1]), []).append(container_state(parts[2]))
    return found


def lease_state(lease: Lease, folder: Folder, containers: Optional[dict]) -> State:
    """Live or stale, and why (containers: None when the host's Docker did not answer)."""
    if folder.alive(lease.session):
        return State(True, "its `up` is at work")
    if containers is None:
        return State(True, "taken as live: Docker did not answer")
    states = containers.get((lease.cluster, lease.host), [])
    if any(s in LIVE for s in states):
        return State(True, "its containers run")
    if states:
        return State(False, "stale: its run has ended (its containers exited)")
    return State(False, "stale: its containers are gone")


def clash(mine: Needs, theirs: Needs, same_owner: bool) -> str:
    """What two clusters would both take on one host, as a person reads it ("" when nothing)."""
    parts = []
    if mine.cluster == theirs.cluster and not same_owner:
        parts.append(f"the cluster name {mine.cluster}")
    if mine.gpus.overlaps(theirs.gpus):
        parts.append(f"GPUs {mine.gpus.common(theirs.gpus)}")
    ports = sorted(mine.ports & theirs.ports)
    if ports:
        parts.append(("ports " if len(ports) > 1 else "port ") + ", ".join(map(str, ports)))
    return " and ".join(parts)


@dataclass(frozen=True)
class Taker:
    """Who asks on one host: the SSH user there (uid), this launcher, its session on the host, its
    place in the queue (a plain `up` asks now), and the run it starts (once known)."""

    uid: int
    user: str
    launcher: str
    session: str
    key: str
    run: str = ""


@dataclass(frozen=True)
class Blocker:
    """Why a host cannot be taken now: who holds (or waits for) what we need, since when."""

    kind: str            # live | stale | queued | busy (another `up` of this very cluster)
    owner: str
    cluster: str
    run: str
    launcher: str
    since: int
    what: str
    why: str = ""

    def who(self) -> str:
        detail = (f"run {self.run}, " if self.run else "") + f"from {self.launcher}"
        return f"{self.owner}'s cluster {self.cluster} ({detail})"

    def text(self, now: Optional[int] = None) -> str:
        """One line; `now` (the host's clock) adds how long ago (left out of a line that must not
        change at every look, such as the queue's progress line)."""
        when = when_text(self.since, now)
        if self.kind == "queued":
            return f"{self.who()} asked first, at {when}, for {self.what}"
        if self.kind == "busy":
            return f"another `up` of this cluster, from {self.launcher}, is at work since {when}"
        if self.kind == "stale":
            return f"held by {self.who()} since {when} for {self.what}; {self.why} (`up --break-lease` takes it)"
        return f"in use by {self.who()} since {when}: {self.what}"


def when_text(since: int, now: Optional[int] = None) -> str:
    """`2026-05-01 10:02:11 (0:05:00 ago)`: this machine's local time; the age by the host's clock."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))
    return f"{stamp} ({clock(now - since)} ago)" if now is not None and now >= since else stamp


@dataclass
class Decision:
    """One host: what stands in the way, or the changes that take it (and the lease they write)."""

    blockers: list[Blocker] = field(default_factory=list)
    changes: list[tuple[str, str, str]] = field(default_factory=list)   # (write|remove, file, text)
    lease: Optional[Lease] = None
    previous: Optional[Lease] = None        # this cluster's own lease it replaces

    @property
    def free(self) -> bool:
        return not self.blockers


def _blocker(kind: str, held, what: str, why: str = "") -> Blocker:
    return Blocker(kind, held.owner, held.cluster, getattr(held, "run", ""), held.launcher, held.since, what, why)


def decide(needs: Needs, taker: Taker, folder: Folder, containers: Optional[dict], break_stale: bool,
           lease_id: str) -> Decision:
    """May `taker` take `needs` on this host now, and with which changes to its lease folder?"""
    decision = Decision()
    broken = {stone.lease for stone in folder.tombstones}
    for lease in folder.leases:
        own = lease.cluster == needs.cluster and lease.uid == taker.uid
        if own and lease.host == needs.host:
            decision.previous = lease
            if lease.session != taker.session and folder.alive(lease.session):
                decision.blockers.append(_blocker("busy", lease, ""))
            continue
        what = clash(needs, lease.needs(), same_owner=lease.uid == taker.uid)
        if own or not what:
            continue                    # this cluster's other host on the same machine, or no clash
        state = lease_state(lease, folder, containers)
        if state.live:
            decision.blockers.append(_blocker("live", lease, what, state.why))
        elif break_stale and lease.id not in broken:
            decision.changes.append(("write", tombstone_file(lease.id, taker.uid), tombstone_text(
                Tombstone(lease.id, taker.user, taker.launcher, folder.now))))
        elif lease.id not in broken:
            decision.blockers.append(_blocker("stale", lease, what, state.why))
    if not (decision.previous and lease_state(decision.previous, folder, containers).live):
        decision.blockers += [_blocker("queued", t, what) for t, what in ahead(needs, taker, folder)]
    if decision.free:
        _take(decision, needs, taker, folder, lease_id)
    return decision


def ahead(needs: Needs, taker: Taker, folder: Folder) -> list[tuple[Ticket, str]]:
    """The tickets that come before this taker's and want what it wants (a ticket whose launcher
    is gone, its session dead, is no longer in the queue)."""
    found = []
    for ticket in sorted(folder.tickets, key=lambda t: t.key):
        if ticket.key >= taker.key or not folder.alive(ticket.session):
            continue
        what = clash(needs, ticket.needs(), same_owner=ticket.uid == taker.uid)
        if what:
            found.append((ticket, what))
    return found


def _take(decision: Decision, needs: Needs, taker: Taker, folder: Folder, lease_id: str) -> None:
    """The lease written, and what of this user's is left over: tombstones of leases that are no
    more, tickets whose launcher is gone."""
    lease = Lease(lease_id, needs.cluster, needs.host, taker.run, taker.user, taker.launcher, taker.session,
                  folder.now, needs.gpus, needs.ports, uid=taker.uid, owner=taker.user,
                  file=lease_file(needs.cluster, needs.host, taker.uid))
    decision.lease = lease
    decision.changes.append(("write", lease.file, lease_text(lease)))
    ids = {held.id for held in folder.leases}
    decision.changes += [("remove", s.file, "") for s in folder.tombstones if s.uid == taker.uid and s.lease not in ids]
    decision.changes += [("remove", t.file, "") for t in folder.tickets
                         if t.uid == taker.uid and not folder.alive(t.session)]


def waiting_line(blockers: list[Blocker]) -> str:
    """What a queued host waits for: the first that stands in the way (and how many more); the
    same words at every look until that changes, so that off a terminal it is printed once."""
    first = blockers[0].text()
    return f"waiting: {first}" + (f" (and {len(blockers) - 1} more)" if len(blockers) > 1 else "")
