"""Jump hosts: the bastions a command's connections go through (ProxyJump), each opened once, on
first use, shared by every host behind it, and closed, last hop first, when the command ends.

A host behind bastions b1, b2 is reached as OpenSSH reaches it: an SSH session to b1, a
`direct-tcpip` channel through it to b2 and a session over that channel, then a channel through
b2 to the host, over which the host's own session runs (connection.py). Each bastion's host key
is checked like a host's (the same known_hosts and host_key_policy). A failure names its hop:
`cannot reach bastion jump@10.0.0.1:22 (hop 1 of 2): …`, or `bastion jump@10.0.0.1:22 reached,
but h1 (10.0.0.12:22, hop 2 of 2) did not answer through it: …`. A bastion that failed fails
every host behind it at once, with the same reason, rather than each host waiting out its own
attempts. Every step is bounded by the connect timeout; called off (`cancel`), no new step begins.
"""
from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, TypeVar

import paramiko

from launcher.errors import CalledOff, ConnectError, HostKeyError, KeyFileError, RemoteError
from launcher.inventory.model import Bastion, Host
from launcher.ssh import host_keys, proxy
from launcher.ssh.explain import PASSPHRASE_ENV, private_key, why

T = TypeVar("T")
KEEPALIVE_S = 15
LOCK_POLL_S = 0.1        # how often a host waiting for another to open a bastion checks `cancel`
TRANSIENT = (socket.timeout, TimeoutError, ConnectionError, OSError, paramiko.SSHException, EOFError)
# paramiko keeps the code of a channel the bastion would not open, not the bastion's own words.
REFUSALS = {1: "the bastion refuses to forward to it (administratively prohibited: is AllowTcpForwarding off?)",
            2: "the bastion's connection to it failed (nothing listening there, a firewall, or no route "
               "from the bastion)",
            3: "the bastion does not forward TCP", 4: "the bastion is out of resources"}
Reason = Callable[[int], str]     # the number of hops to the host → the words


def hops(host: Host) -> int:
    """The hops to the host: its bastions, and the host itself."""
    return len(host.jumps) + 1


def channel_why(exc: BaseException, timeout: float) -> str:
    """Why a channel through a bastion did not open."""
    if isinstance(exc, paramiko.ChannelException):
        return REFUSALS.get(exc.code, f"refused (code {exc.code}: {exc.text})")
    if isinstance(exc, paramiko.SSHException) and "Timeout opening channel" in str(exc):
        return f"no answer within {timeout:g} s"
    return why(exc)


def keyscan_via(bastions: tuple[Bastion, ...]) -> Optional[str]:
    """The ssh command that runs `ssh-keyscan` on the last of `bastions` (how to see the key of
    a host this machine cannot scan itself), or None without bastions."""
    if not bastions:
        return None
    *before, last = bastions
    jump = f"-J {','.join(b.target for b in before)} " if before else ""
    port = f"-p {last.port} " if last.port != 22 else ""
    return f"ssh {jump}{port}{last.user}@{last.address}"


class HopFailed(Exception):
    """A hop that failed, said again to every host behind it (each with its own name and count)."""

    def __init__(self, kind: type[RemoteError], reason: Reason):
        super().__init__()
        self.kind, self.reason = kind, reason

    def error(self, host: Host) -> RemoteError:
        return self.kind(host.name, reason=self.reason(hops(host)))


@dataclass
class _Hop:
    lock: threading.Lock = field(default_factory=threading.Lock)
    client: Optional[paramiko.SSHClient] = None
    stream: Optional[proxy.Stream] = None
    failed: Optional[HopFailed] = None


class Bastions:
    """The bastions of one command's connections (see the module's doc)."""

    def __init__(self, known_hosts: Path, policy: str = "strict", connect_timeout: float = 10.0, retries: int = 2,
                 backoff: float = 1.0, cancel: Optional[threading.Event] = None):
        self.known_hosts, self.policy, self.connect_timeout = Path(known_hosts), policy, connect_timeout
        self.retries, self.backoff = retries, backoff
        self.cancel = cancel or threading.Event()
        self._lock = threading.Lock()
        self._hops: dict[tuple[Bastion, ...], _Hop] = {}

    def __enter__(self) -> "Bastions":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Every bastion session, the last hops first (a later hop runs inside an earlier one)."""
        with self._lock:
            opened = sorted(self._hops.items(), key=lambda item: -len(item[0]))
            self._hops = {}
        for _, hop in opened:
            for closable in (hop.client, hop.stream):
                if closable is not None:
                    closable.close()

    def reach(self, host: Host) -> proxy.Stream:
        """A channel to the host's SSH port through its bastions (the host's session runs over it)."""
        transport = self._session(host, len(host.jumps)).get_transport()
        last, target = host.jumps[-1], f"{host.address}:{host.ssh_port}"

        def silent(exc: BaseException) -> HopFailed:
            return HopFailed(ConnectError, lambda n: f"bastion {last.target} reached, but {host.name} ({target}, "
                                                     f"hop {n} of {n}) did not answer through it: "
                                                     f"{channel_why(exc, self.connect_timeout)}")
        try:
            return proxy.Stream(self._attempts(host, lambda: transport.open_channel(
                "direct-tcpip", (host.address, host.ssh_port), ("127.0.0.1", 0), timeout=self.connect_timeout), silent))
        except HopFailed as failed:
            raise failed.error(host) from None

    # --- one bastion, opened once ---------------------------------------------------------------
    def _session(self, host: Host, k: int) -> paramiko.SSHClient:
        """The session to host.jumps[k - 1] (through the ones before it), opened on first use."""
        chain = host.jumps[:k]
        with self._lock:
            hop = self._hops.setdefault(chain, _Hop())
        while not hop.lock.acquire(timeout=LOCK_POLL_S):     # another host is opening it
            self._check_cancel(host)
        try:
            if hop.failed is not None:
                raise hop.failed.error(host)
            transport = hop.client.get_transport() if hop.client is not None else None
            if transport is None or not transport.is_active():
                try:
                    hop.client, hop.stream = self._open(host, k)
                except HopFailed as failed:
                    hop.failed = failed
                    raise failed.error(host) from None
            return hop.client
        finally:
            hop.lock.release()

    def _open(self, host: Host, k: int) -> tuple[paramiko.SSHClient, proxy.Stream]:
        bastion = host.jumps[k - 1]
        if k == 1:
            def unreachable(exc: BaseException) -> HopFailed:
                return HopFailed(ConnectError, lambda n: f"cannot reach bastion {bastion.target} (hop 1 of {n}): {why(exc)}")
            return self._attempts(host, lambda: self._login(host, k, self._first_stream(bastion)), unreachable)
        before, earlier = self._session(host, k - 1).get_transport(), host.jumps[k - 2]

        def silent(exc: BaseException) -> HopFailed:
            return HopFailed(ConnectError, lambda n: f"bastion {earlier.target} reached, but bastion {bastion.target} "
                                                     f"(hop {k} of {n}) did not answer through it: "
                                                     f"{channel_why(exc, self.connect_timeout)}")
        return self._attempts(host, lambda: self._login(host, k, proxy.Stream(before.open_channel(
            "direct-tcpip", (bastion.address, bastion.port), ("127.0.0.1", 0), timeout=self.connect_timeout))), silent)

    def _first_stream(self, bastion: Bastion) -> proxy.Stream:
        if bastion.proxy_command:
            return proxy.command(bastion.proxy_command, self.connect_timeout)
        return proxy.tcp(bastion.address, bastion.port, self.connect_timeout)

    def _login(self, host: Host, k: int, stream: proxy.Stream) -> tuple[paramiko.SSHClient, proxy.Stream]:
        """An SSH session to host.jumps[k - 1] over `stream`, its host key checked like a host's."""
        bastion = host.jumps[k - 1]
        where: Reason = lambda n: f"bastion {bastion.target} (hop {k} of {n})"
        client = paramiko.SSHClient()
        try:
            silent = proxy.silent(stream, self.connect_timeout)
            if silent:
                hint = stream.said() or f"is an SSH server listening on port {bastion.port}?"
                raise HopFailed(ConnectError, lambda n: f"{where(n)}: {silent} ({hint})")
            known = host_keys.KnownHosts.read(self.known_hosts, host.name)
            known.install(client, self.policy, bastion.port, via=keyscan_via(host.jumps[:k - 1]))
            client.connect(bastion.address, port=bastion.port, username=bastion.user, pkey=self._key(bastion, where),
                           sock=stream.sock, timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
                           auth_timeout=self.connect_timeout, allow_agent=True,
                           look_for_keys=bastion.identity_file is None)
            known.refuse_revoked(host.name, client.get_transport().get_remote_server_key())
        except BaseException as exc:
            client.close()
            stream.close()
            raise _said(exc, bastion, where, self.known_hosts) from None
        client.get_transport().set_keepalive(KEEPALIVE_S)
        return client, stream

    @staticmethod
    def _key(bastion: Bastion, where: Reason):
        try:
            return private_key(bastion)
        except KeyFileError as exc:
            reason = exc.reason         # kept: `exc` is gone once the except block ends
            raise HopFailed(KeyFileError, lambda n: f"{where(n)}: {reason}") from None

    def _attempts(self, host: Host, step: Callable[[], T], failed: Callable[[BaseException], HopFailed]) -> T:
        """`step`, tried again (with backoff) on what may pass; HopFailed once it will not."""
        attempt = 0
        while True:
            self._check_cancel(host)
            try:
                return step()
            except TRANSIENT as exc:
                if attempt >= self.retries:
                    raise failed(exc) from None
            except (ValueError, TypeError, IndexError) as exc:  # paramiko on a malformed answer
                raise failed(exc) from None
            attempt += 1
            self.cancel.wait(self.backoff * 2 ** (attempt - 1))

    def _check_cancel(self, host: Host) -> None:
        if self.cancel.is_set():
            raise CalledOff(host.name)


def _said(exc: BaseException, bastion: Bastion, where: Reason, known_hosts: Path) -> BaseException:
    """What a failed login to a bastion means: said at once (a refused key, a failed login), or
    left to `_attempts` to try again (the connection broke)."""
    if isinstance(exc, HostKeyError):
        return HopFailed(HostKeyError, lambda n: f"{where(n)}: {exc.reason}")
    if isinstance(exc, paramiko.BadHostKeyException):
        changed = host_keys.changed(bastion.name, bastion.address, bastion.port, exc, known_hosts)
        return HopFailed(HostKeyError, lambda n: f"{where(n)}: {changed.reason}")
    if isinstance(exc, paramiko.PasswordRequiredException):
        return HopFailed(KeyFileError, lambda n: f"{where(n)}: the private key is encrypted; give its passphrase "
                                                 f"in the environment variable {PASSPHRASE_ENV}")
    if isinstance(exc, paramiko.AuthenticationException):
        return HopFailed(ConnectError, lambda n: (
            f"{where(n)}: authentication failed ({exc}); check the bastion's user (from proxy_jump, else the ssh "
            f"config's User for {bastion.name}, else yours) and key (the ssh config's IdentityFile for "
            f"{bastion.name}, else ssh.identity_file, else your SSH agent)"))
    return exc
