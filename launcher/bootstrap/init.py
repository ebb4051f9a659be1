"""`tfcompose init HOST…`: ask each host what it is, read-only, with the probe `tfcompose bootstrap`
runs (facts.py), and write a starter inventory from the answers (starter.py decides and words it).

The hosts are reached as any inventory's are: paramiko with your keys, agent and ~/.ssh/config,
host keys checked against known_hosts (strict unless --accept-new). Nothing is changed on a host.
A file that exists is never overwritten: refused before any host is contacted, and the new file is
linked into place only if the name is still free, once it is whole and `validate` takes it.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from launcher.bootstrap import commands, facts as facts_mod, starter
from launcher.errors import BadInput, RemoteError, TfcError
from launcher.inventory.load import load_cluster
from launcher.ssh.group import Group

WORKDIR = "/opt/tfcompose"          # the inventory's default: the probe says whether it exists there


@dataclass(frozen=True)
class SshOptions:
    user: Optional[str] = None
    identity_file: Optional[Path] = None
    known_hosts: Optional[Path] = None
    accept_new: bool = False

    def written(self) -> dict:
        """What the starter inventory keeps of them (a new key recorded, its policy goes back to strict)."""
        return {k: str(v) for k, v in (("user", self.user), ("identity_file", self.identity_file),
                                       ("known_hosts", self.known_hosts)) if v}


@dataclass
class Written:
    path: Path
    hosts: list = field(default_factory=list)      # (name, address, Facts)


def refuse_existing(output: Path) -> None:
    if output.exists() or output.is_symlink():
        raise BadInput(f"{output}: Received a file that exists. Expected a new file's name: tfcompose init never "
                       "overwrites one (-o another.yaml).")


def init(hosts: list[str], output: Path, cluster: str, ssh: SshOptions, schema: str, command: str,
         reporter=None, parallel: Optional[int] = None) -> Written:
    refuse_existing(output)
    try:
        targets = [starter.parse_target(text) for text in hosts]
    except ValueError as exc:
        raise BadInput(f"HOST: {exc}.") from None
    with tempfile.TemporaryDirectory() as tmp:
        reach = load_cluster(_reach_inventory(Path(tmp), targets, cluster, ssh))
        with Group(reach, reporter, parallel) as group:
            found = group.run("init", lambda host, conn: _probe(host, conn, reach)).raise_if_failed().succeeded
    seen = [starter.Seen(t, found[h.name]) for t, h in zip(targets, _in_given_order(reach))]
    text = starter.inventory_text(seen, cluster, schema, ssh.written(), command)
    _place(output, text)
    return Written(output, list(zip(starter.names(seen), [t.address for t in targets], [s.facts for s in seen])))


def _reach_inventory(folder: Path, targets: list, cluster: str, ssh: SshOptions) -> Path:
    """An inventory that only reaches the hosts (h0, h1… in the order given), as `validate` reads one."""
    import yaml
    settings = {**ssh.written(), **({"host_key_policy": "accept-new"} if ssh.accept_new else {})}
    doc = {"cluster": cluster, "ssh": settings,
           "hosts": [{"name": f"h{i}", "address": t.address, "tf_port": 2222 + i, **({"ssh_user": t.user} if t.user else {}),
                      **({"ssh_port": t.port} if t.port else {})} for i, t in enumerate(targets)]}
    path = folder / "reach.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _in_given_order(cluster) -> list:
    return sorted(cluster.hosts, key=lambda h: int(h.name[1:]))


def _probe(host, conn, cluster) -> facts_mod.Facts:
    peers = [h.address for h in _in_given_order(cluster) if h.name != host.name]
    result = conn.run(commands.probe(WORKDIR, "", peers[0] if peers else ""), check=False, limit=facts_mod.ANSWER_LIMIT)
    found = facts_mod.parse(result.stdout)
    if not found.complete:
        raise RemoteError(host.name, reason=f"its answer to the probe ended early (exit status {result.status})")
    return found


def _place(output: Path, text: str) -> None:
    """The file whole and valid under a temporary name beside it, then linked to its name only if
    that is still free (a file made there meanwhile is not replaced)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        try:
            load_cluster(tmp)
        except BadInput as exc:     # a starter `validate` refuses is this command's bug, never the user's file
            raise TfcError(f"the starter inventory would not validate ({exc}); nothing was written") from None
        try:
            os.link(tmp, output)
        except FileExistsError:
            refuse_existing(output)
    finally:
        tmp.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
