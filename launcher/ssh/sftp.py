"""A connection's SFTP channel opened, bounded (was in connection.py): the channel, the
subsystem and the server's first answer each within the connect timeout (paramiko's own
open_sftp waits for ever on a server that never speaks), then every read within the command
timeout; a failure is a RemoteError that says what to try."""
from __future__ import annotations

import socket
import threading

import paramiko

from launcher.errors import RemoteError
from launcher.ssh.explain import why


def open_sftp(transport: paramiko.Transport, host_name: str, bound: float, command_timeout: float) -> paramiko.SFTPClient:
    """SFTP over a new channel of `transport`: opened within `bound` s, then reads bounded by `command_timeout`."""
    try:
        channel = transport.open_session(timeout=bound)
        channel.settimeout(bound)
        _start_subsystem(channel, bound)
        sftp = paramiko.SFTPClient(channel)          # reads the server's version: bounded by the channel
    except (socket.timeout, TimeoutError):
        raise RemoteError(host_name, reason=f"the SFTP server did not answer within {bound:g} s (is its sftp "
                          "subsystem working? `sftp` to the host tells)") from None
    except (paramiko.SSHException, OSError, EOFError) as exc:
        raise RemoteError(host_name, reason=f"SFTP failed to start: {why(exc)}") from None
    channel.settimeout(command_timeout)
    return sftp


def _start_subsystem(channel: paramiko.Channel, bound: float) -> None:
    """invoke_subsystem("sftp") on a thread of its own: paramiko waits for the answer without a bound."""
    started = threading.Event()
    failed: list[BaseException] = []

    def start() -> None:
        try:
            channel.invoke_subsystem("sftp")
        except BaseException as exc:  # noqa: BLE001 (handed to the caller)
            failed.append(exc)
        finally:
            started.set()
    threading.Thread(target=start, name="tfcompose-sftp-start", daemon=True).start()
    if not started.wait(bound):
        channel.close()
        raise socket.timeout()
    if failed:
        raise failed[0]
