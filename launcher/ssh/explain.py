"""What a failed SSH connection means, in words the user can act on."""
from __future__ import annotations

import socket

import paramiko

from launcher.ssh import host_keys
from launcher.errors import ConnectError, RemoteError

PASSPHRASE_ENV = "TFC_SSH_PASSPHRASE"  # a key's passphrase comes from here, never from a file


def why(exc: BaseException) -> str:
    """The socket's own reason ('connection refused', 'timed out'), not paramiko's wrapper."""
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        reasons = {(e.strerror or str(e)).lower() for e in exc.errors.values()}
        return ", ".join(sorted(reasons))
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "no answer within the timeout"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def explain(h, exc: BaseException, known_hosts) -> RemoteError:
    """The error to show for a connection that failed (h: the Host)."""
    target = f"{h.ssh_user}@{h.address}:{h.ssh_port}"
    if isinstance(exc, paramiko.BadHostKeyException):
        return host_keys.changed(h, exc, known_hosts)
    if isinstance(exc, paramiko.PasswordRequiredException):
        return ConnectError(h.name, reason=f"ssh {target}: the private key is encrypted; "
                                           f"give its passphrase in the environment variable {PASSPHRASE_ENV}")
    if isinstance(exc, paramiko.AuthenticationException):
        return ConnectError(h.name, reason=f"ssh {target}: authentication failed ({exc}); check ssh.user and identity_file")
    return ConnectError(h.name, reason=f"ssh {target}: cannot connect ({why(exc)})")
