"""Dataset: every host trains on the same files, checked before anything trains.

- sync (opt-in, `dataset_source:` in the inventory): each host's data_dir becomes an exact copy of
  a folder on this machine. Manifests (path, size, SHA-256; dataset_digest.py) on both sides say
  what differs; only missing or changed files travel, each under a temporary name renamed once
  complete; files that are not in the source are removed, inside that data_dir only, and only
  from a data_dir that tfcompose made (its marker file) or that was empty.
- verify (always, unless the dataset is synthetic): every host's manifest, and the hosts must
  agree (with the source, when there is one). MultiWorkerMirroredStrategy with DATA sharding
  otherwise trains without a word on whatever each host happens to hold.
"""
from __future__ import annotations

import json
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from launcher import docker_commands as dc
from launcher.dataset import claims, digest as dd
from launcher.errors import BadAnswer, TfcError
from launcher.files import CHUNK
from launcher.inventory.model import Cluster, Host
from launcher.plan import Plan
from launcher.reporter import transfer_reporter
from launcher.ssh.group import Group
from launcher.ssh.transfer import counted

MANIFEST_TIMEOUT_S = 6 * 3600   # the first hash of a large dataset reads every byte once
MANIFEST_MAX_BYTES = 64 << 20   # a manifest of ~400,000 files; a host answering more is not answering
SHOWN = 5                       # differing files named per host


class DatasetMismatch(TfcError):
    """Hosts hold different datasets: nothing was started."""


@dataclass(frozen=True)
class DatasetOutcome:
    files: int
    files_sent: int = 0
    bytes_sent: int = 0
    files_removed: int = 0
    digest: str = ""

    def summary(self) -> str:
        moved = f", sent {self.files_sent} ({self.bytes_sent:,} B), removed {self.files_removed}" \
            if self.files_sent or self.files_removed else ", nothing to send"
        return f"{self.files} files, digest {self.digest[:12]}{moved}"


def needed(cluster: Cluster) -> bool:
    """Verification runs whenever the hosts read a dataset folder (not for a synthetic one)."""
    if cluster.spec.train is not None and cluster.spec.train.dataset.kind == "synthetic":
        return False
    return any(h.data_dir for h in cluster.hosts)


# --- on the hosts ----------------------------------------------------------------------------------
def host_manifest(conn, plan: Plan, host: Host) -> dict:
    script = Path(dd.__file__).read_text()
    # Hashing says something every few seconds (digest.Heartbeat): a host silent for a command
    # timeout is stuck, however long the first hash of a large dataset may take in all.
    result = conn.run(dc.dataset_manifest(host.data_dir, f"{host.bundle_dir}/dataset-cache.json",
                                          plan.container_image, script), timeout=MANIFEST_TIMEOUT_S,
                      idle_timeout=conn.command_timeout, limit=MANIFEST_MAX_BYTES)
    try:
        doc = json.loads(result.stdout)
    except (ValueError, RecursionError):
        doc = None
    if not dd.valid(doc) or not all(safe_relative(n) for key in ("files", "other", "empty_dirs", "unreadable")
                                    for n in doc[key]):
        raise BadAnswer(host.name, "dataset manifest", reason="answered with something that is not a manifest "
                        "of relative paths inside data_dir")
    return doc


def safe_relative(name) -> bool:
    """A path a host may name: relative, inside its folder, printable (it reaches the terminal)."""
    return isinstance(name, str) and 0 < len(name) <= 4096 and not name.startswith("/") \
        and ".." not in name.split("/") and not any(ord(c) < 32 or ord(c) == 127 for c in name)


def differences(reference: dict, copy: dict) -> list[str]:
    """What a copy lacks, holds extra or holds changed, against the reference: first ones first."""
    ref, got = reference["files"], copy["files"]
    lines = [f"missing {rel}" for rel in sorted(set(ref) - set(got))]
    lines += [f"changed {rel}" for rel in sorted(set(ref) & set(got)) if ref[rel] != got[rel]]
    lines += [f"extra {rel}" for rel in sorted(set(got) - set(ref))]
    lines += [f"not a file {rel}" for rel in copy["other"]] + [f"unreadable {rel}" for rel in copy["unreadable"]]
    lines += [f"empty folder {rel}" for rel in copy["empty_dirs"] if rel not in reference["empty_dirs"]]
    return lines


def judge(manifests: dict[str, dict], reference: dict, reference_name: str) -> list[str]:
    """One line per host whose copy differs from the reference, naming its first differences."""
    lines = []
    for host, doc in manifests.items():
        if doc.get("missing"):
            lines.append(f"{host}: data_dir does not exist")
        elif dd.digest(doc) != dd.digest(reference):
            diff = differences(reference, doc)
            lines.append(f"{host}: {len(diff)} difference(s) from {reference_name}: " + ", ".join(diff[:SHOWN])
                         + (", …" if len(diff) > SHOWN else ""))
    return lines


def plan_sync(source: dict, copy: dict) -> tuple[list[str], list[str]]:
    """(files to send, paths to remove) that make the copy equal to the source; the folders this
    leaves empty (or that were) go afterwards (the source holds no empty folder: validate refuses it)."""
    send = sorted(rel for rel, entry in source["files"].items() if copy["files"].get(rel) != entry)
    return send, sorted((set(copy["files"]) - set(source["files"])) | set(copy["other"]))


def sync_host(conn, host: Host, root: Path, source: dict, copy: dict, on_bytes: Callable[[int, int], None]) -> tuple[int, int, int]:
    """Make one host's data_dir (already tfcompose's) equal to the source: (files sent, bytes
    sent, paths removed)."""
    conn.run(dc.dataset_clear_parts(host.data_dir))
    send, remove = plan_sync(source, copy)
    if remove:
        conn.stream(dc.dataset_remove(host.data_dir), on_output=lambda _: None, stdin_chunks=[_lines(remove)])
    before = conn.bytes_sent
    if send:
        total = sum(source["files"][rel][0] for rel in send)
        conn.stream(dc.dataset_extract(host.data_dir), on_output=lambda _: None,
                    stdin_chunks=counted(conn, tar_stream(root, send, source), total, on_bytes),
                    timeout=MANIFEST_TIMEOUT_S)
        conn.stream(dc.dataset_rename(host.data_dir), on_output=lambda _: None, stdin_chunks=[_lines(send)])
    conn.run(dc.dataset_prune(host.data_dir))
    return len(send), conn.bytes_sent - before, len(remove)


def _lines(paths: list[str]) -> bytes:
    return "".join(p + "\n" for p in paths).encode()


def tar_stream(root: Path, paths: list[str], source: dict) -> Iterator[bytes]:
    """A tar of the files, each under its temporary name (renamed on the host once all arrived)."""
    for rel in paths:
        size = source["files"][rel][0]
        info = tarfile.TarInfo(rel + dd.PART)
        info.size, info.mode, info.mtime = size, 0o644, int(time.time())
        yield info.tobuf(format=tarfile.GNU_FORMAT)
        left = size
        with (root / rel).open("rb") as fh:
            while left > 0:
                chunk = fh.read(min(CHUNK, left))
                if not chunk:
                    raise TfcError(f"{root / rel} shrank while it was being sent; run `tfcompose up` again")
                left -= len(chunk)
                yield chunk
        yield b"\0" * (-size % 512)
    yield b"\0" * 1024


def provide(group: Group, plan: Plan, source: Optional[dict]) -> dict[str, DatasetOutcome]:
    """Sync (with a source), then verify every host's copy; raises DatasetMismatch naming hosts and
    files. Nothing is changed on any host until every host's data_dir has been looked at and
    found fit to fill."""
    hosts = [h for h in plan.cluster.hosts if h.data_dir]
    if not hosts:
        return {}
    looked = group.staged("dataset", lambda h, c: look_at(c, plan, h, source is not None), hosts).succeeded
    moved = sync_all(group, plan, source, looked) if source is not None else {}

    def verify(host: Host, conn) -> tuple[DatasetOutcome, dict]:
        copy = host_manifest(conn, plan, host) if host.name in moved else looked[host.name][0]
        outcome = DatasetOutcome(len(copy["files"]), *moved.get(host.name, (0, 0, 0)), digest=dd.digest(copy))
        group.reporter.stage(host.name, "dataset", outcome.summary())
        return outcome, copy

    results = group.staged("dataset", verify, hosts).succeeded
    manifests = {name: copy for name, (_, copy) in results.items()}
    reference, name = (source, "dataset_source") if source is not None else (manifests[hosts[0].name], hosts[0].name)
    problems = judge(manifests, reference, name)
    if problems:
        raise DatasetMismatch("the hosts' datasets differ; nothing was started:\n  " + "\n  ".join(problems))
    return {name: outcome for name, (outcome, _) in results.items()}


def look_at(conn, plan: Plan, host: Host, owner: bool) -> tuple[dict, dict]:
    """(the data_dir's manifest, what kind of folder it is): read only."""
    look = claims.parse_look(conn.run(dc.dataset_look(host.data_dir)).stdout) if owner else {}
    return host_manifest(conn, plan, host), look


def sync_all(group: Group, plan: Plan, source: dict, looked: dict) -> dict[str, tuple[int, int, int]]:
    """Every host's data_dir a copy of the source: refused everywhere unless every host's may be
    filled; fresh folders claimed one host at a time (two hosts may share one folder); then each
    folder synced once, in parallel."""
    cluster, record = plan.cluster, claims.Claims()
    hosts = [h for h in cluster.hosts if h.name in looked]
    owners = {h.name: claims.ownership(cluster.name, h, looked[h.name][1], record.get(claims.folder_key(cluster.name, h)))
              for h in hosts}
    refused = [claims.refusal(h, owners[h.name][1]) for h in hosts if owners[h.name][0] not in (claims.FRESH, claims.OURS)]
    if refused:
        raise DatasetMismatch("dataset_source cannot fill every host's data_dir; nothing was changed on any host:\n  "
                              + "\n  ".join(refused))
    identity = claim_fresh(group, plan, [h for h in hosts if owners[h.name][0] == claims.FRESH], record)
    identity.update({h.name: ours_identity(looked[h.name][1]) for h in hosts if owners[h.name][0] == claims.OURS})
    first = {}                                  # one folder (claim, inode) → the host that syncs it
    for host in hosts:
        first.setdefault(identity[host.name], host)
    root = cluster.dataset_source
    synced = group.staged("dataset", lambda h, c: sync_host(c, h, root, source, looked[h.name][0],
                                                              transfer_reporter(group.reporter, h.name, "dataset")),
                          list(first.values())).succeeded
    return {h.name: synced.get(h.name, (0, 0, 0)) for h in hosts}


def claim_fresh(group: Group, plan: Plan, hosts: list[Host], record: claims.Claims) -> dict[str, tuple[str, int]]:
    """Claim each absent or empty data_dir, one host after the other: a host sharing its folder
    with one claimed a moment ago finds that host's marker there (same claim, same inode)."""
    claim, found = claims.new_claim(), {}
    for host in hosts:
        marker = claims.marker_text(plan.cluster.name, host.data_dir, claim)
        inode = group.conn(host).run(dc.dataset_claim(host.data_dir, marker)).stdout.strip()
        if not inode.isdigit():
            raise BadAnswer(host.name, "dataset claim", reason=f"answered {inode[:40]!r}, not the marker's inode")
        record.record(claims.folder_key(plan.cluster.name, host), claims.Claim(claim, int(inode)))
        found[host.name] = (claim, int(inode))
    return found


def ours_identity(look: dict) -> tuple[str, int]:
    return json.loads(look["marker"])["claim"], int(look["inode"])
