"""Push: each host's rendered bundle into <workdir>/<cluster>/, each file atomically and private.

Nothing is sent to a host that already has this exact bundle (its hash is kept beside it).
"""
from __future__ import annotations

import hashlib
import json

from launcher.ssh.group import Group
from launcher.inventory.model import Host

HASH_FILE = ".tfcompose-bundle"
# Marks a folder as tfcompose's own: `down --purge` removes nothing that lacks it.
MARKER_FILE = ".tfcompose-cluster"


def push(group: Group, bundles: dict[str, dict[str, str]]) -> dict[str, int]:
    """Bytes sent per host (0 where the bundle was already there)."""
    return group.staged("push", lambda h, c: push_host(h, c, bundles[h.name])).succeeded


def bundle_hash(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def push_host(host: Host, conn, files: dict[str, str]) -> int:
    digest, root = bundle_hash(files), host.bundle_dir
    conn.run(["sh", "-c", 'mkdir -p "$1/results" "$1/backup" && chmod 700 "$1" && '
              '{ [ -e "$1/$2" ] || printf "%s\\n" "$3" > "$1/$2"; }', "sh", root, MARKER_FILE, marker_text(host)])
    current = conn.run(["cat", f"{root}/{HASH_FILE}"], check=False).stdout.strip()
    if current == digest:
        return 0
    sent = sum(conn.put_text(text, f"{root}/{name}") for name, text in files.items())
    conn.put_text(digest + "\n", f"{root}/{HASH_FILE}")
    return sent


def marker_text(host: Host) -> str:
    return f"tfcompose cluster folder {host.bundle_dir}"
