"""SSH transport: one `Connection` per host with run/put/get, opened lazily (after fabric).

Host keys are verified: `strict` needs the key in known_hosts already; `accept-new` records an
unknown key once and still refuses a changed one. Nothing is ever silently auto-added.
"""
from __future__ import annotations

import os
import shlex
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import paramiko

from launcher.errors import ConnectError, HostKeyError, RemoteError
from launcher.inventory import Cluster, Host

PASSPHRASE_ENV = "TFC_SSH_PASSPHRASE"  # a key's passphrase comes from here, never from a file
KEEPALIVE_S = 15
_known_hosts_lock = threading.Lock()


@dataclass(frozen=True)
class Result:
    status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.status == 0


def quote_command(command: str | Sequence[str]) -> str:
    """Every remote command goes through here: an argv list is joined with shlex.quote."""
    return command if isinstance(command, str) else shlex.join(str(part) for part in command)


def known_hosts_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


class _StrictPolicy(paramiko.MissingHostKeyPolicy):
    """Refuse unknown keys, telling the user how to check and record one."""

    def __init__(self, known_hosts: Path, port: int):
        self.known_hosts, self.port = known_hosts, port

    def missing_host_key(self, client, hostname, key):
        host = hostname.split("]")[0].lstrip("[") if hostname.startswith("[") else hostname
        scan = f"ssh-keyscan -p {self.port} {host}" if self.port != 22 else f"ssh-keyscan {host}"
        raise HostKeyError(hostname, reason=(
            f"host key {key.get_name()} {key.fingerprint} is not in {self.known_hosts}; refused "
            f"(ssh.host_key_policy: strict). Check the fingerprint on the host "
            f"(ssh-keygen -lf /etc/ssh/ssh_host_{key.get_name().replace('ssh-', '')}_key.pub), then record it: "
            f"{scan} >> {self.known_hosts} — or set ssh.host_key_policy: accept-new to record unknown keys on first use."))


class _AcceptNewPolicy(paramiko.MissingHostKeyPolicy):
    """Record an unknown key in known_hosts (a changed key still fails: paramiko raises BadHostKey)."""

    def __init__(self, known_hosts: Path):
        self.known_hosts = known_hosts

    def missing_host_key(self, client, hostname, key):
        with _known_hosts_lock:
            self.known_hosts.parent.mkdir(parents=True, exist_ok=True)
            with self.known_hosts.open("a") as fh:
                fh.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)


def _why(exc: BaseException) -> str:
    """The socket's own reason ('connection refused', 'timed out'), not paramiko's wrapper."""
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        reasons = {(e.strerror or str(e)).lower() for e in exc.errors.values()}
        return ", ".join(sorted(reasons))
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "no answer within the timeout"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class Connection:
    """SSH to one host. Opens on first use; `with Connection(...) as c:` closes it."""

    def __init__(self, host: Host, known_hosts: Path, policy: str = "strict", connect_timeout: float = 10.0,
                 retries: int = 2, backoff: float = 1.0):
        self.host, self.known_hosts, self.policy = host, Path(known_hosts), policy
        self.connect_timeout, self.retries, self.backoff = connect_timeout, retries, backoff
        self._client: Optional[paramiko.SSHClient] = None
        self._sftp: Optional[paramiko.SFTPClient] = None
        self.bytes_sent = 0

    @classmethod
    def for_host(cls, cluster: Cluster, host: Host) -> "Connection":
        ssh = cluster.spec.ssh
        known = Path(os.path.expanduser(ssh.known_hosts))
        known = known if known.is_absolute() else (cluster.path.resolve().parent / known)
        return cls(host, known, ssh.host_key_policy, ssh.connect_timeout_s)

    # --- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for closable in (self._sftp, self._client):
            if closable is not None:
                closable.close()
        self._sftp = self._client = None

    @property
    def client(self) -> paramiko.SSHClient:
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _connect(self) -> paramiko.SSHClient:
        attempt = 0
        while True:
            try:
                return self._connect_once()
            except HostKeyError as exc:  # raised by our policy with the key's name; name the host
                raise HostKeyError(self.host.name, reason=exc.reason) from None
            except (socket.timeout, TimeoutError, ConnectionError, OSError, paramiko.SSHException) as exc:
                if isinstance(exc, (paramiko.AuthenticationException, paramiko.BadHostKeyException)) \
                        or attempt >= self.retries:
                    raise self._explain(exc) from None
            attempt += 1
            time.sleep(self.backoff * 2 ** (attempt - 1))

    def _connect_once(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        if self.known_hosts.is_file():
            client.load_host_keys(str(self.known_hosts))
        client.set_missing_host_key_policy(
            _AcceptNewPolicy(self.known_hosts) if self.policy == "accept-new" else _StrictPolicy(self.known_hosts, self.host.ssh_port))
        h = self.host
        try:
            client.connect(h.address, port=h.ssh_port, username=h.ssh_user,
                           key_filename=str(h.identity_file) if h.identity_file else None,
                           passphrase=os.environ.get(PASSPHRASE_ENV) or None,
                           timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
                           auth_timeout=self.connect_timeout, allow_agent=True, look_for_keys=h.identity_file is None)
        except Exception:
            client.close()
            raise
        transport = client.get_transport()
        transport.set_keepalive(KEEPALIVE_S)
        if isinstance(transport.sock, socket.socket):  # not through a ProxyCommand
            # Without it, Nagle's algorithm and delayed ACKs hold every short command's reply for
            # ~40 ms (measured: 82 → 36 ms per command on loopback); OpenSSH sets it too.
            transport.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return client

    def _explain(self, exc: BaseException) -> RemoteError:
        h, target = self.host, f"{self.host.ssh_user}@{self.host.address}:{self.host.ssh_port}"
        if isinstance(exc, paramiko.BadHostKeyException):
            name = known_hosts_name(h.address, h.ssh_port)
            return HostKeyError(h.name, reason=(
                f"host key for {name} CHANGED (now {exc.key.fingerprint}, known_hosts has "
                f"{exc.expected_key.fingerprint}); refused: this could be a man-in-the-middle. If the host was "
                f"reinstalled, remove the old key with: ssh-keygen -R '{name}' -f {self.known_hosts}"))
        if isinstance(exc, paramiko.PasswordRequiredException):
            return ConnectError(h.name, reason=f"ssh {target}: the private key is encrypted; "
                                               f"give its passphrase in the environment variable {PASSPHRASE_ENV}")
        if isinstance(exc, paramiko.AuthenticationException):
            return ConnectError(h.name, reason=f"ssh {target}: authentication failed ({exc}); check ssh.user and identity_file")
        return ConnectError(h.name, reason=f"ssh {target}: cannot connect ({_why(exc)})")

    # --- commands ------------------------------------------------------------------------------
    def run(self, command: str | Sequence[str], check: bool = True, timeout: float | None = None,
            stdin: bytes | None = None) -> Result:
        cmd = quote_command(command)
        try:
            stdin_f, stdout_f, stderr_f = self.client.exec_command(cmd, timeout=timeout)
            if stdin is not None:
                stdin_f.write(stdin)
                stdin_f.channel.shutdown_write()
            out = stdout_f.read().decode("utf-8", "replace")
            err = stderr_f.read().decode("utf-8", "replace")
            status = stdout_f.channel.recv_exit_status()
        except (socket.timeout, TimeoutError) as exc:
            raise RemoteError(self.host.name, cmd, reason=f"timed out after {timeout} s") from exc
        except (paramiko.SSHException, OSError) as exc:
            raise RemoteError(self.host.name, cmd, reason=f"SSH failed: {exc}") from exc
        if check and status != 0:
            raise RemoteError(self.host.name, cmd, status, err)
        return Result(status, out, err)

    def stream(self, command: str | Sequence[str], on_output: Callable[[bytes], None],
               stdin_chunks=None, check: bool = True) -> Result:
        """Run with stdout streamed to `on_output` (and optional stdin chunks streamed in)."""
        cmd = quote_command(command)
        channel = self.client.get_transport().open_session()
        channel.exec_command(cmd)
        err = bytearray()
        try:
            if stdin_chunks is not None:
                for chunk in stdin_chunks:
                    channel.sendall(chunk)
                    self.bytes_sent += len(chunk)
                channel.shutdown_write()
            while True:
                if channel.recv_ready():
                    on_output(channel.recv(65536))
                elif channel.recv_stderr_ready():
                    err += channel.recv_stderr(65536)
                elif channel.exit_status_ready() and not channel.recv_ready() and not channel.recv_stderr_ready():
                    break
                else:
                    time.sleep(0.05)
            status = channel.recv_exit_status()
        finally:
            channel.close()
        if check and status != 0:
            raise RemoteError(self.host.name, cmd, status, err.decode("utf-8", "replace"))
        return Result(status, "", err.decode("utf-8", "replace"))

    # --- files ----------------------------------------------------------------------------------
    @property
    def sftp(self) -> paramiko.SFTPClient:
        if self._sftp is None:
            self._sftp = self.client.open_sftp()
        return self._sftp

    def put_text(self, text: str, remote: str) -> int:
        """Write a file atomically: to a temp name, then rename over the target."""
        data = text.encode()
        tmp = f"{remote}.tfc-tmp"
        with self.sftp.open(tmp, "wb") as fh:
            fh.write(data)
        self.sftp.posix_rename(tmp, remote)
        self.bytes_sent += len(data)
        return len(data)

    def put(self, local: str | Path, remote: str) -> None:
        tmp = f"{remote}.tfc-tmp"
        self.sftp.put(str(local), tmp)
        self.sftp.posix_rename(tmp, remote)
        self.bytes_sent += Path(local).stat().st_size

    def get(self, remote: str, local: str | Path) -> None:
        Path(local).parent.mkdir(parents=True, exist_ok=True)
        self.sftp.get(remote, str(local))

    def get_tree(self, remote: str, local: Path) -> list[Path]:
        """Copy a remote folder recursively; returns the local files written."""
        import stat as stat_mod
        written = []
        for entry in self.sftp.listdir_attr(remote):
            src, dst = f"{remote}/{entry.filename}", local / entry.filename
            if stat_mod.S_ISDIR(entry.st_mode):
                written += self.get_tree(src, dst)
            elif stat_mod.S_ISREG(entry.st_mode):
                self.get(src, dst)
                written.append(dst)
        return written
