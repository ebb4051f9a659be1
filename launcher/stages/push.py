"""Push: each host's rendered bundle into <workdir>/<cluster>/, each file atomically and private
(the folder itself is claimed first, before the stages that write into it).

Nothing is sent to a host that already has this exact bundle (its hash is kept beside it).
"""
from __future__ import annotations

import hashlib
import json
from typing import Optional

from launcher.inventory.model import Host
from launcher.runs import KEY_FILE, queue_keys
from launcher.ssh.group import Group

HASH_FILE = ".tfcompose-bundle"
# Marks a folder as tfcompose's own: `down --purge` removes nothing that lacks it.
MARKER_FILE = ".tfcompose-cluster"


def claim(group: Group, plan) -> None:
    """Each host's <workdir>/<cluster>/ made (private, with the run's runs/<run>/results/ and
    backup/) and marked as tfcompose's own, before the stages that write into it (image relay,
    dataset cache) run."""
    group.run("push", lambda h, c: claim_host(h, c, plan.run)).raise_if_failed()


def place_keys(group: Group, plan) -> None:
    """The run's queue key on each host of a parallel search (runs/<run>/queue.key, mode 600): never
    part of a rendered bundle, written only where it is not there already."""
    if not plan.parallel:
        return
    keys = queue_keys(plan.cluster, plan.run)

    def one(host: Host, conn) -> None:
        path = f"{plan.run_dir(host)}/{KEY_FILE}"
        if conn.run(["cat", path], check=False).stdout != keys[host.name]:
            conn.put_text(keys[host.name], path)
    group.run("push", one).raise_if_failed()


def push(group: Group, bundles: dict[str, dict[str, str]],
         identities: Optional[dict[str, dict[str, str]]] = None) -> dict[str, int]:
    """Bytes sent per host (0 where the bundle was already there). `identities`: the bundles that
    say whether a host already has this one (default: the bundles themselves); `up` leaves the
    measured link out of them, so a host keeps the figure its run was started with."""
    identities = identities or bundles
    return group.staged("push", lambda h, c: push_host(h, c, bundles[h.name], identities[h.name])).succeeded


def bundle_hash(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def claim_host(host: Host, conn, run: str) -> None:
    conn.run(["sh", "-c", 'mkdir -p "$1/runs/$4/results" "$1/runs/$4/backup" && chmod 700 "$1" && '
              '{ [ -e "$1/$2" ] || printf "%s\\n" "$3" > "$1/$2"; }', "sh", host.bundle_dir, MARKER_FILE,
              marker_text(host), run])


def push_host(host: Host, conn, files: dict[str, str], identity: Optional[dict[str, str]] = None) -> int:
    """Into the folder `claim` made."""
    digest, root = bundle_hash(identity or files), host.bundle_dir
    current = conn.run(["cat", f"{root}/{HASH_FILE}"], check=False).stdout.strip()
    if current == digest:
        return 0
    sent = sum(conn.put_text(text, f"{root}/{name}") for name, text in files.items())
    conn.put_text(digest + "\n", f"{root}/{HASH_FILE}")
    return sent


def marker_text(host: Host) -> str:
    return f"tfcompose cluster folder {host.bundle_dir}"
