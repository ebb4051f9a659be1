"""Relayed ship: the launcher sends an image's layers once, to the first host of a chain, and each
host loads what it receives while passing it on to the next (a pipelined chain, as in Kraken's and
Dragonfly's peer-to-peer distribution). The launcher's uplink carries the image once, whatever
the number of hosts; each host's own link carries it in once and out once.

Trust, hop by hop (A passes to B):
- A logs into B with a key made for this `up` and this hop only. On B it is allowed only from A's
  address (`from=`), only to run this hop's script (a forced command, with `restrict`: no shell,
  no forwarding, no pty), and it is removed when the ship ends, also when it fails; `down` removes
  what a crashed `up` left (the lines carry the cluster's marker).
- A checks B's host key against the key the launcher itself verified (a known_hosts file with that
  one line, StrictHostKeyChecking=yes): host keys are checked between hosts too.
- What arrives is loaded by `docker load`, which checks every layer against the config's diff
  IDs; the caller then checks the image ID (the config's digest) on each host. A host the chain
  did not serve gets the image from the launcher directly (image.py).

The private keys are written only into the sending host's relay folder (mode 600) and never
appear in a command line, a log or a result.
"""
from __future__ import annotations

import ipaddress
import secrets
import shlex
import json
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

from launcher.errors import RemoteError, summary
from launcher.inventory.model import Host
from launcher.ssh.host_keys import known_hosts_name

MARKER = "tfcompose-relay"
FOLDER_MARKER = ".tfcompose-relay"    # in each relay folder: `<cluster> <token>`; down removes only those
HOST_SCRIPT = Path(__file__).with_name("relay_host.sh")
CHECK_SCRIPT = Path(__file__).with_name("hop_check.py")
MIN_LACKING = {"auto": 3, "on": 2}    # hosts lacking layers before a chain is worth its set-up
SSH_OPTIONS = ("-T", "-F", "/dev/null", "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
               "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "GlobalKnownHostsFile=/dev/null",
               "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3")


# --- policy (pure) ------------------------------------------------------------------------------
def chain_for(setting: str, lacking: list[str]) -> list[str]:
    """The hosts that receive through a chain, in order; [] to ship to each directly."""
    least = MIN_LACKING.get(setting)
    return list(lacking) if least is not None and len(lacking) >= least else []


def marker(cluster: str, token: str = "") -> str:
    """The comment on every key line a relay adds: `down` finds the cluster's lines by it."""
    return f"{MARKER}:{cluster}:{token}"


def from_pattern(address: str, resolve: Callable[[str], list[str]] | None = None) -> str:
    """`from=` for a key used by the host at `address`: the address itself if it is an IP, else
    every address the name resolves to here."""
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        pass
    found = (resolve or _resolve)(address)
    return ",".join(dict.fromkeys(found)) or address


def _resolve(name: str) -> list[str]:
    try:
        return [info[4][0] for info in socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)]
    except OSError:
        return []


# --- what goes on the hosts -----------------------------------------------------------------------
@dataclass(frozen=True)
class Hop:
    """The relay's part on one host: its folder, and the host after it (if any)."""
    host: Host
    folder: str
    after: Optional[Host] = None
    before: Optional[Host] = None


def plan_hops(hosts: list[Host], token: str) -> list[Hop]:
    return [Hop(h, relay_folder(h, token), hosts[i + 1] if i + 1 < len(hosts) else None,
                hosts[i - 1] if i else None) for i, h in enumerate(hosts)]


def relay_folder(host: Host, token: str) -> str:
    return f"{host.bundle_dir}/.relay-{token}"


def new_token() -> str:
    return secrets.token_hex(6)


@dataclass(frozen=True)
class KeyPair:
    public: str                                  # `ssh-ed25519 AAAA…`
    private: str = field(repr=False)             # OpenSSH private key text: never printed


def make_key() -> KeyPair:
    from cryptography.hazmat.primitives import serialization as s
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(s.Encoding.PEM, s.PrivateFormat.OpenSSH, s.NoEncryption()).decode()
    public = key.public_key().public_bytes(s.Encoding.OpenSSH, s.PublicFormat.OpenSSH).decode()
    return KeyPair(public, private)


def authorized_line(key: KeyPair, hop: Hop, cluster: str, token: str) -> str:
    """The line that lets the host before `hop` run `hop`'s script, and nothing else, from its address."""
    command = shlex.join(["sh", f"{hop.folder}/hop.sh"]).replace("\\", "\\\\").replace('"', '\\"')
    source = from_pattern(hop.before.address)
    return f'command="{command}",from="{source}",restrict {key.public} {marker(cluster, token)}'


def hop_script(hop: Hop) -> str:
    """Load the gzip stream on stdin — only what hop_check.py lets through, so only this `up`'s
    image; with a host after this one, pass the stream on while loading. `tee -p` keeps loading
    here if the next hop breaks; the next hop's status is kept for the launcher (next.status,
    next.log); an archive the check refused fails the hop (status 3)."""
    load = 'gunzip -c | { python3 "$d/check.py" "$d/expect.json"; echo $? > "$d/check.status"; } | docker load'
    lines = ["#!/bin/sh", f"d={shlex.quote(hop.folder)}", 'rm -f "$d/check.status"']
    if hop.after is None:
        lines += ["# tfcompose relay: the last hop", load, "rc=$?"]
    else:
        nxt = hop.after
        ssh = shlex.join(["ssh", *SSH_OPTIONS, "-p", str(nxt.ssh_port)])
        target = shlex.quote(f"{nxt.ssh_user}@{nxt.address}")
        lines += [f"# tfcompose relay: load here and pass on to {nxt.name}",
                  'rm -f "$d/fwd" && mkfifo "$d/fwd" || exit 97',
                  f'{ssh} -i "$d/key" -o UserKnownHostsFile="$d/known_hosts" {target} < "$d/fwd" > "$d/next.log" 2>&1 &',
                  "fwd=$!", f'tee -p "$d/fwd" | {load}', "rc=$?", 'wait "$fwd"; echo $? > "$d/next.status"']
    return "\n".join(lines + ['[ "$(cat "$d/check.status" 2>/dev/null)" = 0 ] || exit 3', "exit $rc", ""])


def host_command(what: str, *args: str) -> list[str]:
    """One of relay_host.sh's commands (add-key, remove-keys, clean), the script sent as text."""
    return ["sh", "-c", HOST_SCRIPT.read_text(), "sh", what, *args]


def authorize_command(line: str) -> list[str]:
    """Add a line to the SSH user's authorized_keys without ever losing one; refused (status 3)
    where it could not be removed again."""
    return host_command("add-key", line)


def revoke_commands(cluster: str, token: str, parent: str) -> list[list[str]]:
    """Remove this cluster's relay key lines (of one `up` with a token, else of any) without ever
    losing another line, then end and remove the cluster's relay folders under `parent`."""
    return [host_command("remove-keys", marker(cluster, token)),
            host_command("clean", parent, f".relay-{token}", cluster)]


def hop_report_command(folder: str) -> list[str]:
    """How the hop after this host went: its exit status, then the last lines of its ssh output."""
    return ["sh", "-c", 'cat "$1/next.status" 2>/dev/null || echo none; tail -n 3 "$1/next.log" 2>/dev/null; true',
            "sh", folder]


# --- running a chain -----------------------------------------------------------------------------
@dataclass
class ChainResult:
    """Who the chain reached: `reached` hosts ran their hop (their image is still to be checked);
    `broken` maps each host the chain did not reach to why."""
    reached: list[str] = field(default_factory=list)
    broken: dict[str, str] = field(default_factory=dict)
    not_removed: dict[str, str] = field(default_factory=dict)   # hosts whose relay key could not be removed


def set_up(conn, hop: Hop, key_in: Optional[KeyPair], key_out: Optional[KeyPair], next_host_key: str,
           cluster: str, token: str, expect: dict) -> None:
    """Put the hop's folder on its host (marked as this cluster's), its script, the check of what
    it may load, the key to the next host and that host's known key; and, for the key of the host
    before it, the restricted authorized_keys line."""
    conn.run(["sh", "-c", 'command -v python3 >/dev/null || { echo "no python3: the relay checks what it '
              'loads with it" >&2; exit 1; }; umask 077 && mkdir -p "$1" && printf "%s %s\\n" "$2" "$3" > "$1/$4"',
              "sh", hop.folder, cluster, token, FOLDER_MARKER])
    conn.put_text(hop_script(hop), f"{hop.folder}/hop.sh", mode=0o700)
    conn.put_text(CHECK_SCRIPT.read_text(), f"{hop.folder}/check.py")
    conn.put_text(json.dumps(expect), f"{hop.folder}/expect.json")
    if hop.after is not None and key_out is not None:
        conn.put_text(key_out.private, f"{hop.folder}/key", mode=0o600)
        conn.put_text(next_host_key, f"{hop.folder}/known_hosts", mode=0o600)
    if hop.before is not None and key_in is not None:
        conn.run(authorize_command(authorized_line(key_in, hop, cluster, token)))


def known_key_line(host: Host, key) -> str:
    """The known_hosts line for `host` with the key the launcher verified when it connected."""
    return f"{known_hosts_name(host.address, host.ssh_port)} {key.get_name()} {key.get_base64()}\n"


def send(conn, first: Hop, chunks: Iterator[bytes], timeout: Optional[float] = None):
    """Stream the archive into the first host's hop; returns when the whole chain has ended."""
    return conn.stream(["sh", f"{first.folder}/hop.sh"], on_output=lambda _: None, stdin_chunks=chunks,
                       check=False, timeout=timeout)


def why_broken(report: str) -> Optional[str]:
    """From hop_report_command's answer: None when the next hop ran to its end, else the reason."""
    lines = report.strip().splitlines()
    if lines and lines[0].strip() == "0":
        return None
    detail = " ".join(line.strip() for line in lines[1:] if line.strip())[-200:]
    status = lines[0].strip() if lines else "none"
    return (f"the hop ended with status {status}" if status != "none" else "the hop did not run") + \
        (f": {detail}" if detail else "")


def run_chain(group, hosts: list[Host], chunks: Iterator[bytes], cluster: str, expect: dict) -> ChainResult:
    """Set the chain up on `hosts`, stream `chunks` (an archive `expect` describes, see
    layers.Parts.expectation) into its first host, and take it all down again (keys, folders,
    anything still running), whatever happens in between."""
    token, result = new_token(), ChainResult()
    hops = plan_hops(hosts, token)
    keys = [make_key() for _ in hops[1:]]                  # keys[i]: from hops[i] to hops[i + 1]
    try:
        # The keys the launcher verified; read here, once, before the hosts are set up in parallel.
        known = {h.name: known_key_line(h, group.conn(h).client.get_transport().get_remote_server_key())
                 for h in hosts[1:]}
        prepared = group.run("image", lambda h, c: _prepare(c, hops, keys, known, h, cluster, token, expect), hosts)
        if prepared.failed:
            name, exc = next(iter(prepared.failed.items()))
            reason = f"setting the relay up on {name} failed: {summary(exc)}"
            result.broken = {h.name: reason for h in hosts}
            return result
        result.reached.append(hosts[0].name)
        try:
            sent = send(group.conn(hosts[0]), hops[0], chunks)
            if sent.status != 0:
                result.broken[hosts[0].name] = f"loading failed with status {sent.status}"
        except RemoteError as exc:      # the hosts are checked one by one afterwards all the same
            result.broken[hosts[0].name] = summary(exc)
        _follow_hops(group, hops, result)
        return result
    finally:
        removed = group.run("image", lambda h, c: revoke(c, h, cluster, token), hosts)
        result.not_removed = {name: summary(exc) for name, exc in removed.failed.items()}


def revoke(conn, host: Host, cluster: str, token: str = "") -> None:
    """This cluster's relay keys and folders gone from one host (of one `up`, or of any); a key
    that could not be removed is an error saying why (the file itself is left as it was)."""
    keys, folders = revoke_commands(cluster, token, host.bundle_dir)
    left = conn.run(keys, check=False)
    conn.run(folders)
    if left.status != 0 or left.stdout.strip() != "0":
        raise RemoteError(host.name, reason="the relay's key is still in ~/.ssh/authorized_keys"
                          + (f" ({left.stderr.strip().splitlines()[-1]})" if left.stderr.strip() else ""))


def _prepare(conn, hops: list[Hop], keys: list[KeyPair], known: dict[str, str], host: Host, cluster: str,
             token: str, expect: dict) -> None:
    i = next(i for i, hop in enumerate(hops) if hop.host.name == host.name)
    revoke(conn, host, cluster)         # what a crashed `up` may have left
    after = hops[i].after
    set_up(conn, hops[i], keys[i - 1] if i else None, keys[i] if after else None,
           known[after.name] if after else "", cluster, token, expect)


def _follow_hops(group, hops: list[Hop], result: ChainResult) -> None:
    """Walk the chain: each host's report says whether the next host's hop ran."""
    reports = group.run("image", lambda h, c: c.run(hop_report_command(_folder(hops, h))).stdout,
                        [hop.host for hop in hops if hop.after is not None])
    for hop in hops[:-1]:
        nxt = hop.after.name
        if hop.host.name not in result.reached:
            result.broken[nxt] = f"the relay stopped before {hop.host.name}"
            continue
        report = reports.succeeded.get(hop.host.name)
        reason = why_broken(report) if report is not None else f"no report from {hop.host.name}"
        if reason is None or not reason.startswith(("the hop did not run", "the hop ended with status 255")):
            result.reached.append(nxt)
        if reason is not None:
            result.broken[nxt] = f"{hop.host.name} → {nxt}: {reason}"


def _folder(hops: list[Hop], host: Host) -> str:
    return next(hop.folder for hop in hops if hop.host.name == host.name)
