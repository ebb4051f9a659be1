"""Leases: `up` takes a lease on every host before it does anything else there, so that several
people sharing boxes never start on the same GPUs or ports; `up --queue` waits its turn for them.

Where: one folder per host that every user of the box sees, whatever their account or workdir:
`lease_dir` (default /var/tmp/tfcompose-leases: /var/tmp is on every Linux, shared by all users
and kept across reboots, where /tmp may be private or emptied). On a box several accounts use it
is root's with mode 1777, as /tmp is: everyone writes there, and the sticky bit lets nobody remove
or replace another's file (the first `up` makes it so when it runs as root, else makes it the
user's alone). The host checks that nobody but root and the user can remove or rename what is in
the folder or above it, and refuses it otherwise, naming the fix; a folder that cannot be made or
written is refused too: going on without a lease would break the promise to the others.

What: one small JSON file per host and cluster (files.py), written beside and renamed. The
launcher decides (rules.py, pure); the host only reads, locks and writes (host.sh):

    session  the launcher holds a lock on a file of its own there for as long as its SSH connection
             lives (Connection.hold): however the launcher ends, the lock goes with it, so a lease
             or ticket is known to have a launcher behind it without any clock
    look     every lease, ticket and tombstone, and which sessions are alive; then, if some lease's
             session is over, every tfcompose container's state on the host's engine
    change   under the folder's flock: the files are still what `look` saw (a fingerprint), or
             nothing is written and the host is looked at again. So two launchers at once cannot
             both take the same GPUs: check and write are one step on the host.

All or nothing across hosts: when one host refuses or changed under us, what this `up` wrote on the
others is written back as it was. A lease is given back by `down`, by `up --wait` once the run is
collected (whether it finished or failed), and by an `up` that failed before starting anything.
Without `--wait`, nobody is there when the run ends: the lease stays until `down`, and once every
container has exited it is stale, so `up --break-lease` of another cluster may take it.

`--break-lease` belongs to `up` only: breaking is never needed but to take what stands in the way,
and `down` gives back its own cluster's lease without a flag. A stale lease of another user cannot
be removed (the sticky bit), so breaking writes a tombstone beside it; a live lease is never broken.

The host's side of these commands is on_host.py's; what `status` shows of a host's leases, status.py's.

Leases are an agreement between tfcompose users, not a lock against a hostile one (anyone in the
`docker` group is root on the host): what a lease file says is still checked before it is used or
printed, as any answer from a host is.
"""
from __future__ import annotations

import getpass
import itertools
import random
import re
import secrets
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Iterator, Optional

from launcher import interrupts
from launcher.errors import TfcError, summary
from launcher.inventory.model import Host
from launcher.plan import Plan
from launcher.ssh.group import Group
from launcher.leases import files as files, rules as rules
from launcher.leases.files import Needs, Ticket
from launcher.leases.look import Folder, fingerprint
from launcher.leases.on_host import change, crowded_lines, look, open_session, release_host

POLL_S = 2.0          # between two looks of a queued `up`
ATTEMPTS = 5          # a plain `up` whose hosts keep changing under it gives up after this many


class LeasesRefused(TfcError):
    """Another cluster holds what this `up` needs on some hosts: nothing was started (exit 1)."""

    def __init__(self, blocked: dict[str, list[rules.Blocker]], now: dict[str, int], hosts: int):
        lines = [f"leases refused on {len(blocked)} of {hosts} host(s); nothing was started "
                 "(`up --queue` waits for them):"]
        for host, found in blocked.items():      # hosts sharing one folder see the same holder twice
            lines += [f"  {host}: {text}" for text in dict.fromkeys(b.text(now[host]) for b in found)]
        super().__init__("\n".join(lines))


def needs(plan: Plan, host: Host) -> Needs:
    """What the cluster takes on this host: the GPUs the inventory gives it (before `gpus_per_host:
    min` may give it fewer: never less than it will use) and the port its container listens on."""
    port = plan.listen_port(host)
    return Needs(plan.cluster.name, host.name, files.gpus_of(host.gpus), frozenset([port] if port else []))


def launcher_name() -> str:
    """`user@machine` this launcher runs on, as lease files allow it (a person reads it)."""
    return re.sub(r"[^A-Za-z0-9_.@:-]", "-", f"{getpass.getuser()}@{socket.gethostname()}")[:120]


def queue_key(folders) -> str:
    """A place in the queue, the same on every host: the latest of the hosts' clocks (ms) when they
    were first looked at, then a nonce. The hosts' clocks, not this machine's: a launcher whose
    clock is an hour slow must not come before those who asked earlier. The latest, so that one
    host's slow clock cannot put a cluster first either (only all of its hosts' could)."""
    clocks = [f.clock_ms for f in folders if 0 < f.clock_ms < 10 ** 13]
    ms = max(clocks) if clocks else int(time.time() * 1000)      # no host told its time: this machine's
    return f"{ms:013d}-{secrets.token_hex(4)}"


# --- taking every host --------------------------------------------------------------------------------
@dataclass
class Round:
    """One host looked at: its folder, who asks there, and what the rules decided."""

    folder: Folder
    taker: rules.Taker
    decision: rules.Decision


@dataclass
class Held:
    """What this `up` holds: the round that took each host (its lease, the one it replaced)."""

    rounds: dict[str, Round]
    starting: bool = False

    @contextmanager
    def start(self) -> Iterator[None]:
        """From here containers may start: an interrupt now leaves the leases to them."""
        self.starting = True
        yield


def assess(group: Group, plan: Plan, sessions: dict, key: Optional[str], launcher: str,
           break_stale: bool) -> tuple[str, dict[str, Round]]:
    """Every host looked at, then decided (pure); the queue key made from the first look."""
    seen = group.run("lease", look).raise_if_failed().succeeded
    refuse_crowded(group, seen)
    key = key or queue_key(folder for folder, _ in seen.values())
    rounds = {}
    for host in group.cluster.hosts:
        folder, containers = seen[host.name]
        taker = rules.Taker(folder.uid, folder.user, launcher, sessions[host.name], key)
        rounds[host.name] = Round(folder, taker, rules.decide(needs(plan, host), taker, folder, containers, break_stale,
                                                              secrets.token_hex(8)))
    return key, rounds


class FolderCrowded(TfcError):
    """A lease folder holds more files than `look` lists: none was listed, so the host is refused."""


def refuse_crowded(group: Group, seen: dict[str, tuple[Folder, Optional[dict]]]) -> None:
    lines = [line for host in group.cluster.hosts for line in crowded_lines(host, seen[host.name][0])]
    if lines:
        raise FolderCrowded("leases refused; nothing was started:\n  " + "\n  ".join(lines))


def commit(group: Group, rounds: dict[str, Round]) -> bool:
    """Write every host's changes, each only if its files are still what was looked at; what was
    written is written back if any host changed (False) or failed (raised)."""
    ours = tuple(sorted({name for r in rounds.values() for _, name, _ in r.decision.changes}))

    def one(host: Host, conn) -> bool:
        r = rounds[host.name]
        return change(host, conn, r.decision.changes, fingerprint(r.folder, set(ours)), ours)

    result = group.run("lease", one)
    if result.ok and all(result.succeeded.values()):
        return True
    if give_back(group, Held(rounds), [h for h in group.cluster.hosts if result.succeeded.get(h.name)]):
        raise KeyboardInterrupt         # pressed while what was written was written back
    result.raise_if_failed()
    return False


def take(group: Group, plan: Plan, queue: bool = False, break_stale: bool = False, poll_s: float = POLL_S) -> Held:
    """Every host's lease, or LeasesRefused naming who holds what (with `queue`: wait for them, in
    the order the waiters asked). Nothing is left behind on an error or Ctrl-C: no ticket, no lease."""
    sessions = group.run("lease", lambda h, c: open_session(h, c, group.reporter)).raise_if_failed().succeeded
    key, launcher, tickets = None, launcher_name(), {}
    warned: set = set()
    got: Optional[Held] = None
    try:
        for attempt in itertools.count(1):
            key, rounds = assess(group, plan, sessions, key, launcher, break_stale)
            _warn_unreadable(group, rounds, warned)
            blocked = {h: r.decision.blockers for h, r in rounds.items() if r.decision.blockers}
            if not blocked:
                if commit(group, rounds):
                    got = Held(rounds)
                    return got
                if not queue and attempt >= ATTEMPTS:
                    raise TfcError("leases: the lease folders kept changing under this `up` (other tfcompose "
                                   "runs taking and giving back); nothing was started: try again, or use `--queue`")
                time.sleep(random.uniform(0.1, 0.6))
                continue
            if not queue:
                raise LeasesRefused(blocked, {h: r.folder.now for h, r in rounds.items()}, len(rounds))
            if not tickets:
                # Named before they are written: an interrupt while they are written leaves none.
                tickets = {h.name: files.ticket_file(key, h.name) for h in group.cluster.hosts}
                write_tickets(group, plan, rounds, key, launcher)
            _report_waiting(group, blocked)
            time.sleep(poll_s)
    finally:
        if tickets:
            _clear_queue(group, tickets, got)


def _clear_queue(group: Group, tickets: dict[str, str], got: Optional[Held]) -> None:
    """This `up`'s tickets removed, however many times Ctrl-C is pressed meanwhile. Pressed after
    the leases were taken (`got`), they are given back and the interrupt raised; otherwise what is
    under way already (an interrupt, a refusal) goes on as it is."""
    with interrupts.held() as pressed:
        remove_tickets(group, tickets)
        if pressed and got is not None:
            give_back(group, got)
    if pressed and got is not None:
        raise KeyboardInterrupt


def write_tickets(group: Group, plan: Plan, rounds: dict[str, Round], key: str, launcher: str) -> dict[str, str]:
    """This `up`'s place in every host's queue (one key for all: the same order everywhere)."""
    def one(host: Host, conn) -> str:
        r, n = rounds[host.name], needs(plan, host)
        ticket = Ticket(key, n.cluster, n.host, r.taker.user, launcher, r.taker.session, r.folder.now, n.gpus, n.ports)
        change(host, conn, [("write", files.ticket_file(key, host.name), files.ticket_text(ticket))])
        return files.ticket_file(key, host.name)
    return group.run("queue", one).raise_if_failed().succeeded


def remove_tickets(group: Group, tickets: dict[str, str]) -> None:
    """Best effort: a ticket left behind is dead once this launcher's sessions end anyway."""
    hosts = [h for h in group.cluster.hosts if h.name in tickets]
    result = group.run("queue", lambda h, c: change(h, c, [("remove", tickets[h.name], "")]), hosts)
    for host, exc in result.failed.items():
        group.reporter.warn(host, f"could not remove this `up`'s place in the queue ({summary(exc)}); "
                                  "it counts for nothing once this launcher has ended")


def _report_waiting(group: Group, blocked: dict[str, list[rules.Blocker]]) -> None:
    for host in group.cluster.hosts:
        if host.name in blocked:
            group.reporter.stage(host.name, "queued", rules.waiting_line(blocked[host.name]))
        else:
            group.reporter.stage(host.name, "queued", "free here; waiting for the other hosts")


def _warn_unreadable(group: Group, rounds: dict[str, Round], warned: set) -> None:
    for host, r in rounds.items():
        for bad in r.folder.unreadable:
            if (host, bad.file) not in warned:
                warned.add((host, bad.file))
                group.reporter.warn(host, f"ignored {bad.file} in the lease folder (owner {bad.owner}): {bad.why}")


# --- after taking ---------------------------------------------------------------------------------
def name_run(group: Group, held: Held, run_id: str) -> None:
    """The run id, once the plan is complete, into every lease (an unchanged run keeps its `since`)."""
    def one(host: Host, conn) -> None:
        d = held.rounds[host.name].decision
        before = d.previous
        since = before.since if before is not None and before.run == run_id else d.lease.since
        d.lease = replace(d.lease, run=run_id, since=since)
        change(host, conn, [("write", d.lease.file, files.lease_text(d.lease))])
    group.run("lease", one).raise_if_failed()


def give_back(group: Group, held: Held, hosts=None) -> bool:
    """Write back what the leases were before this `up` (its own cluster's previous lease, or
    none): best effort, a host that cannot be reached is warned about. Ctrl-C meanwhile is held
    (interrupts.py): cut short, it would leave a lease nobody holds in the others' way. Returns
    whether Ctrl-C was pressed meanwhile."""
    def one(host: Host, conn) -> None:
        d = held.rounds[host.name].decision
        undo = [("write", d.previous.file, d.previous.text)] if d.previous else [("remove", d.lease.file, "")]
        change(host, conn, undo)
    with interrupts.held() as pressed:
        result = group.run("lease", one, hosts)
    for host, exc in result.failed.items():
        group.reporter.warn(host, f"could not give its lease back ({summary(exc)}); `tfcompose down` does")
    return bool(pressed)


@contextmanager
def taken(group: Group, plan: Plan, queue: bool = False, break_stale: bool = False) -> Iterator[Held]:
    """The leases for the length of the block; given back if it fails before containers may have
    started (an interrupt once they may have leaves the leases to them: `down` gives them back)."""
    held = take(group, plan, queue, break_stale)
    try:
        yield held
    except BaseException as exc:
        if not (held.starting and isinstance(exc, KeyboardInterrupt)):
            give_back(group, held)
        raise


def release(group: Group, hosts=None):
    """This cluster's leases given back (`down`, and `up --wait` once its run has ended)."""
    name = group.cluster.name
    return group.run("release", lambda h, c: release_host(h, c, name), hosts)
