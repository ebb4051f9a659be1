"""What a failed SSH connection means, in words the user can act on."""
from __future__ import annotations

import os
import socket

import paramiko

from launcher.ssh import host_keys
from launcher.errors import ConnectError, KeyFileError, RemoteError

PASSPHRASE_ENV = "TFC_SSH_PASSPHRASE"  # a key's passphrase comes from here, never from a file


def why(exc: BaseException) -> str:
    """The socket's own reason ('connection refused', 'timed out'), not paramiko's wrapper."""
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        reasons = {(e.strerror or str(e)).lower() for e in exc.errors.values()}
        return ", ".join(sorted(reasons))
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "no answer within the timeout"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def route(h) -> str:
    """How the host is reached, when not directly: said after its address in every message."""
    if h.jumps:
        return f" (through bastion {h.jumps[-1].target})"
    return " (through its ProxyCommand)" if h.proxy_command else ""


def explain(h, exc: BaseException, known_hosts) -> RemoteError:
    """The error to show for a connection that failed (h: the Host)."""
    target = f"{h.ssh_user}@{h.address}:{h.ssh_port}{route(h)}"
    if isinstance(exc, paramiko.BadHostKeyException):
        return host_keys.changed(h.name, h.address, h.ssh_port, exc, known_hosts)
    if isinstance(exc, paramiko.PasswordRequiredException):
        return ConnectError(h.name, reason=f"ssh {target}: the private key is encrypted; "
                                           f"give its passphrase in the environment variable {PASSPHRASE_ENV}")
    if isinstance(exc, paramiko.AuthenticationException):
        return ConnectError(h.name, reason=f"ssh {target}: authentication failed ({exc}); check ssh.user and identity_file")
    return ConnectError(h.name, reason=f"ssh {target}: cannot connect ({why(exc)})")


def private_key(h):
    """The host's identity_file as a key, or None without one; a file that is not a key, or a
    passphrase that does not open it, is said as such, naming the file (exit 2: yours to fix)."""
    path = h.identity_file
    if path is None:
        return None
    passphrase = os.environ.get(PASSPHRASE_ENV) or None
    try:
        return paramiko.PKey.from_path(path, passphrase.encode() if passphrase else None)
    except (paramiko.SSHException, ValueError, TypeError, UnicodeDecodeError, OSError) as exc:
        if not passphrase and _encrypted(path):
            raise KeyFileError(h.name, reason=f"the private key {path} is encrypted; give its passphrase in the "
                                              f"environment variable {PASSPHRASE_ENV}") from None
        if passphrase and _encrypted(path):
            raise KeyFileError(h.name, reason=f"the passphrase in {PASSPHRASE_ENV} does not open the private key "
                                              f"{path} (a wrong passphrase?)") from None
        why_not = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not a private key paramiko reads"
        raise KeyFileError(h.name, reason=f"identity_file {path}: {why_not} (expected an OpenSSH or PEM private "
                                          "key: Ed25519, ECDSA or RSA)") from None


def _encrypted(path) -> bool:
    """Whether the file is a key that needs a passphrase (paramiko says so in several ways)."""
    try:
        paramiko.PKey.from_path(path)
    except paramiko.PasswordRequiredException:
        return True
    except TypeError as exc:                # cryptography: "Key is password-protected, but …"
        return "password" in str(exc)
    except Exception:  # noqa: BLE001  (any other failure: not an encrypted key we can tell)
        return False
    return False
