"""Which data_dirs are tfcompose's to fill: the sync deletes files that are not in the source only
inside those. Owner of the marker's format and of the record this machine keeps.

A folder is claimed when it is absent or empty: the sync writes its marker (`.tfcompose-dataset`,
naming the cluster, the data_dir and a random claim id) and this machine records the claim and the
marker file's inode under the cluster and data_dir (`$XDG_STATE_HOME/tfcompose/datasets.json`).
Later a folder is ours only if its marker still says so *and* is the very file recorded: a marker
copied along with a folder (`cp -a`, rsync) is a new file with another inode, one in a foreign
folder reached through a symlinked data_dir was never recorded, and a data_dir that is itself a
link is never filled. Hosts sharing one folder (NFS, or two hosts on one machine) see the same
file, so one claim serves them all. A folder claimed from another machine, or after the record
was lost, must be emptied first.
"""
from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from launcher.dataset.digest import MARKER
from launcher.files import state_root, write_atomic
from launcher.text import one_line
from launcher.inventory.model import Host

FRESH, OURS = "fresh", "ours"


@dataclass(frozen=True)
class Claim:
    claim: str
    inode: int


def marker_text(cluster: str, data_dir: str, claim: str) -> str:
    return json.dumps({"tfcompose": "dataset", "cluster": cluster, "data_dir": data_dir, "claim": claim},
                      sort_keys=True, separators=(",", ":"))


def new_claim() -> str:
    return secrets.token_hex(8)


def folder_key(cluster: str, host: Host) -> str:
    return f"{cluster}|{host.data_dir}"


class Claims:
    """The record of the folders this machine claimed (thread-safe; written atomically)."""

    def __init__(self, path: Optional[Path] = None):
        self.path = path or state_root() / "datasets.json"
        self._lock = threading.Lock()
        try:
            doc = json.loads(self.path.read_text())
            self._entries = {k: {Claim(str(c), int(i)) for c, i in v} for k, v in doc.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self._entries = {}      # unreadable: nothing is ours, so nothing is deleted

    def get(self, key: str) -> frozenset:
        return frozenset(self._entries.get(key, ()))

    def record(self, key: str, claim: Claim) -> None:
        with self._lock:
            self._entries.setdefault(key, set()).add(claim)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            doc = {k: sorted([c.claim, c.inode] for c in v) for k, v in sorted(self._entries.items())}
            write_atomic(self.path, json.dumps(doc, indent=1).encode(), mode=0o600)


def parse_look(text: str) -> dict:
    """`docker_commands.dataset_look`'s answer: kind, and for a marked folder its marker and inode."""
    facts = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {"kind": facts.get("kind", ""), "marker": facts.get("marker", ""), "inode": facts.get("inode", ""),
            "why": facts.get("why", "")}


def ownership(cluster: str, host: Host, look: dict, recorded: frozenset) -> tuple[str, str]:
    """(FRESH | OURS | "foreign", why): may the sync fill this host's data_dir? Pure."""
    kind, where = look["kind"], f"data_dir {host.data_dir}"
    if kind in ("absent", "empty"):
        return FRESH, ""
    if kind == "unreadable":
        return "foreign", (f"{where}: its {MARKER} could not be read ({one_line(look.get('why') or 'no reason given', 120)}); "
                           "run `up` again once it can")
    if kind == "symlink":
        return "foreign", f"{where} is a symbolic link: tfcompose fills only a folder of its own, not what a link points to"
    if kind != "marked":
        return "foreign", (f"{where} is not a folder" if kind == "notdir" else
                           f"{where} holds files tfcompose did not put there (no {MARKER})")
    try:
        marker = json.loads(look["marker"])
        same = (marker["cluster"], marker["data_dir"]) == (cluster, host.data_dir)
        claim = Claim(str(marker["claim"]), int(look["inode"]))
    except (ValueError, KeyError, TypeError):
        return "foreign", f"{where} carries a {MARKER} that tfcompose did not write"
    if not same:
        return "foreign", f"{where} carries the {MARKER} of another cluster or folder (copied along with its files?)"
    if claim not in recorded:
        return "foreign", (f"{where} carries a {MARKER} this machine did not write there (copied from another folder, "
                           "or filled from another machine)")
    return OURS, ""


def refusal(host: Host, why: str) -> str:
    return f"{host.name}: {why}; nothing there was changed. Empty it, or point data_dir at a folder of its own"
