"""Host keys: known_hosts read with OpenSSH's markers honoured, unknown keys refused (strict) or
recorded once (accept-new), changed and revoked keys always refused."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Optional

import paramiko

from launcher.errors import HostKeyError

_known_hosts_lock = threading.Lock()


class KnownHosts:
    """The keys of a known_hosts file; `@revoked` lines are kept aside and refused on sight,
    `@cert-authority` lines (which paramiko cannot check) are left out, a broken line is skipped."""

    def __init__(self, path: Path, keys: paramiko.HostKeys, revoked: set[str]):
        self.path, self.keys, self.revoked = path, keys, revoked

    @classmethod
    def read(cls, path: Path, host: str) -> "KnownHosts":
        keys, revoked = paramiko.HostKeys(), set()
        if not path.is_file():
            return cls(path, keys, revoked)
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            raise HostKeyError(host, reason=f"cannot read {path} ({exc.strerror or exc})") from None
        for line in lines:
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            if fields[0] == "@revoked" and len(fields) >= 4:
                revoked.add(fields[3])
            elif not fields[0].startswith("@"):
                _add(keys, line)
        return cls(path, keys, revoked)

    def install(self, client: paramiko.SSHClient, policy: str, port: int, via: Optional[str] = None) -> None:
        """The keys and the policy for a client; `via`: the ssh command that runs a command on the
        bastion before the server (its key can be scanned only from there)."""
        for name, entries in self.keys.items():
            for keytype, key in entries.items():
                client.get_host_keys().add(name, keytype, key)
        client.set_missing_host_key_policy(
            AcceptNewPolicy(self.path) if policy == "accept-new" else StrictPolicy(self.path, port, via))

    def refuse_revoked(self, host: str, key: paramiko.PKey) -> None:
        if key.get_base64() in self.revoked:
            raise HostKeyError(host, reason=f"host key {key.get_name()} {key.fingerprint} is marked @revoked in "
                                            f"{self.path}; refused")


def _add(keys: paramiko.HostKeys, line: str) -> None:
    try:
        entry = paramiko.hostkeys.HostKeyEntry.from_line(line)
    except Exception:  # paramiko raises several kinds for a malformed line; OpenSSH skips it too
        return
    if entry is not None:
        for name in entry.hostnames:
            keys.add(name, entry.key.get_name(), entry.key)


def changed(host: str, address: str, port: int, exc: paramiko.BadHostKeyException, known_hosts: Path) -> HostKeyError:
    name = known_hosts_name(address, port)
    return HostKeyError(host, reason=(
        f"host key for {name} CHANGED (now {exc.key.fingerprint}, known_hosts has "
        f"{exc.expected_key.fingerprint}); refused: this could be a man-in-the-middle. If the host was "
        f"reinstalled, remove the old key with: ssh-keygen -R '{name}' -f {known_hosts}"))


def known_hosts_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


class StrictPolicy(paramiko.MissingHostKeyPolicy):
    """Refuse unknown keys, telling the user how to check and record one."""

    def __init__(self, known_hosts: Path, port: int, via: Optional[str] = None):
        self.known_hosts, self.port, self.via = known_hosts, port, via

    def missing_host_key(self, client, hostname, key):
        host = hostname.split("]")[0].lstrip("[") if hostname.startswith("[") else hostname
        scan = f"ssh-keyscan -p {self.port} {host}" if self.port != 22 else f"ssh-keyscan {host}"
        scan = f"{self.via} {scan}" if self.via else scan   # behind a bastion: scanned from there
        raise HostKeyError(hostname, reason=(
            f"host key {key.get_name()} {key.fingerprint} is not in {self.known_hosts}; refused "
            f"(ssh.host_key_policy: strict). Check the fingerprint on the host "
            f"(ssh-keygen -lf /etc/ssh/ssh_host_{key.get_name().replace('ssh-', '')}_key.pub), then record it: "
            f"{scan} >> {self.known_hosts} — or set ssh.host_key_policy: accept-new to record unknown keys on first use."))


class AcceptNewPolicy(paramiko.MissingHostKeyPolicy):
    """Record an unknown key in known_hosts (a changed key still fails: paramiko raises BadHostKey)."""

    def __init__(self, known_hosts: Path):
        self.known_hosts = known_hosts

    def missing_host_key(self, client, hostname, key):
        with _known_hosts_lock:
            self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
            with self.known_hosts.open("a") as fh:
                fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)
