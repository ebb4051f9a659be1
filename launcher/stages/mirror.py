"""Mirror: an elastic sync run's chief state kept on a second host (the inventory's `elastic:`).

At each epoch's end the chief's trainer writes a snapshot of what only it holds (the study, the
history, the best model: trainer/train/mirror.py) into its backup folder. While `up --wait`
follows the run, each look reads the snapshot's manifest; a new one is relayed to the next host
through this machine (tar out of the chief, into `chief-mirror/` there, replaced whole), so that
losing the chief's host re-forms the run around that host with nothing learned lost beyond the
open epoch. What the hosts say is bounded: the manifest to 64 KB, a relay to MIRROR_MAX bytes, read
whole before any is sent (a snapshot replaced while it was read fails the chief's tar: nothing is
sent, and the next look tries again).
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Optional

from launcher.errors import summary
from launcher.inventory.model import Host
from launcher.plan import Plan

MANIFEST_MAX = 64 << 10
MIRROR_MAX = 512 << 20       # held in memory for a moment: the chief's tar must end well before any of it is sent
SNAPSHOT, RECEIVED, MANIFEST = "chief-state", "chief-mirror", "manifest.json"     # trainer/train/mirror.py's names
# Extract into a folder of its own, then put it in place of the last one: a relay cut short
# leaves the last whole mirror where it was.
EXTRACT = ('set -e; d=$1; rm -rf "$d/$2.tmp"; mkdir -p "$d/$2.tmp"; '
           'tar -x --no-same-owner --no-same-permissions -C "$d/$2.tmp" -f -; [ -d "$d/$2.tmp/$3" ]; '
           'rm -rf "$d/$2.old"; if [ -e "$d/$2" ]; then mv "$d/$2" "$d/$2.old"; fi; '
           'mv "$d/$2.tmp/$3" "$d/$2"; rm -rf "$d/$2.tmp" "$d/$2.old"')


@dataclass
class Mirror:
    """The last relay: to which host, of which snapshot; what relays cost so far; why they stopped."""

    target: str = ""
    said: Optional[dict] = None
    relays: int = 0
    bytes: int = 0
    seconds: float = 0.0
    broken: str = ""

    def holds(self, host: str) -> bool:
        """Whether `host` holds a whole mirror of the chief's state."""
        return self.relays > 0 and self.target == host


def backup_folder(plan: Plan, host: Host) -> str:
    """The host's own backup folder (the trainer's, keyed by host name)."""
    return f"{plan.run_dir(host)}/backup/{host.name}"


def manifest(text: str) -> Optional[dict]:
    """A snapshot's manifest as the chief wrote it (host, trial, epoch), or None."""
    try:
        said = json.loads(text)
    except (ValueError, RecursionError):
        return None
    ok = isinstance(said, dict) and isinstance(said.get("trial"), str) and isinstance(said.get("epoch"), int) \
        and isinstance(said.get("host"), str)
    return {k: said[k] for k in ("host", "trial", "epoch")} if ok else None


def relay(group, plan: Plan, mirror: Mirror) -> None:
    """The chief's newest snapshot to the next host, when there is a new one."""
    hosts = plan.cluster.hosts
    if plan.elastic is None or len(hosts) < 2 or mirror.broken:
        return
    chief, target = hosts[0], hosts[1]
    try:
        said = manifest(group.conn(chief).run(["cat", f"{backup_folder(plan, chief)}/{SNAPSHOT}/{MANIFEST}"],
                                              check=False, limit=MANIFEST_MAX).stdout)
        if said is None or (said == mirror.said and mirror.target == target.name):
            return
        started = time.monotonic()
        sent = copy(group, plan, chief, target)
    except Exception as exc:           # noqa: BLE001  (the next look tries again; the run goes on)
        group.reporter.warn(chief.name, f"the chief's state was not mirrored to {target.name} ({summary(exc)}); "
                                        "trying again at the next look")
        return
    if sent is None:
        mirror.broken = f"the chief's state is larger than {MIRROR_MAX >> 20} MiB"
        group.reporter.warn(chief.name, f"{mirror.broken}: not mirrored; losing {chief.name} stops the run")
        return
    mirror.target, mirror.said = target.name, said
    mirror.relays, mirror.bytes, mirror.seconds = mirror.relays + 1, mirror.bytes + sent, \
        mirror.seconds + time.monotonic() - started


def copy(group, plan: Plan, chief: Host, target: Host) -> Optional[int]:
    """The snapshot out of the chief and into the target's backup folder; bytes sent (None: too large)."""
    return carry(group, chief, ["tar", "-C", backup_folder(plan, chief), "-cf", "-", SNAPSHOT],
                 target, [backup_folder(plan, target), RECEIVED, SNAPSHOT])


def hand_backups(group, plan: Plan, source: Host, target: Host) -> Optional[int]:
    """A host's backups (every open trial's saves, its finished list, its history; not the chief's
    state snapshot nor a mirror it holds) become another's own, in place of the older ones it kept
    (a host taken back, or behind when a run resumes: stages/backups.py); bytes sent (None: too large)."""
    mine = source.name
    return carry(group, source, ["tar", "-C", f"{plan.run_dir(source)}/backup", "--exclude", f"{mine}/{SNAPSHOT}",
                                 "--exclude", f"{mine}/{RECEIVED}", "-cf", "-", mine],
                 target, [f"{plan.run_dir(target)}/backup", target.name, mine])


def carry(group, source: Host, tar: list[str], target: Host, extract: list[str]) -> Optional[int]:
    """A tar made on `source`, read whole here (at most MIRROR_MAX bytes), unpacked on `target` by
    EXTRACT (folder, name it takes there, name inside the tar); bytes sent (None: too large)."""
    chunks, size, full = [], [0], threading.Event()

    def take(chunk: bytes) -> None:
        size[0] += len(chunk)
        if size[0] > MIRROR_MAX:
            full.set()
        else:
            chunks.append(chunk)
    group.conn(source).stream(tar, on_output=take, stop=full)
    if full.is_set():
        return None
    group.conn(target).run(["sh", "-c", EXTRACT, "sh", *extract], stdin=b"".join(chunks))
    return size[0]
