"""What an SSH session runs over (a `Stream`): a TCP connection, the ssh config's ProxyCommand,
or a channel through a bastion (jump.py); and the wait for the server's first words on it, so a
port where no SSH server answers is said as such, not as paramiko's `No existing session`.

A ProxyCommand runs as OpenSSH runs it (`sh -c 'exec …'`, tokens already expanded by paramiko's
config reader), with its stdin and stdout one end of a socket pair; paramiko gets the other end,
an ordinary socket. So every read and write has the same timeouts as over TCP (paramiko's own
ProxyCommand writes to a pipe without a bound: a stalled command would hang the launcher past
every timeout and Ctrl-C). It runs in a session of its own, so the terminal's Ctrl-C, which the
launcher turns into an orderly clean-up over the same connections, does not end it first; it is
ended with the connection.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from typing import Optional

SAID_KEPT = 2048          # bytes of a ProxyCommand's stderr kept for the message
SAID_WAIT_S = 0.2         # for a ProxyCommand's exit status, once it has stopped talking
END_GRACE_S = 1.0         # a ProxyCommand told to end (TERM) gets this long before KILL


class Stream:
    """The socket (or channel) a session runs over, and what else must end with it."""

    def __init__(self, sock, process: Optional[subprocess.Popen] = None, errors=None, program: str = ""):
        self.sock, self.process, self.errors, self.program = sock, process, errors, program

    def close(self) -> None:
        self.sock.close()
        if self.process is not None:
            _end(self.process)
            self.errors.close()

    def said(self) -> str:
        """A ProxyCommand's last words (the end of its stderr and its exit status), else ''."""
        if self.process is None:
            return ""
        self.errors.seek(0, os.SEEK_END)
        self.errors.seek(max(0, self.errors.tell() - SAID_KEPT))
        text = self.errors.read().decode("utf-8", "replace").strip()
        try:
            status = self.process.wait(SAID_WAIT_S)      # a command that closed its end is ending
        except subprocess.TimeoutExpired:
            status = None
        ended = f"exited with status {status}" if status is not None else "still running"
        return f"ProxyCommand {self.program} {ended}" + (f": {text.splitlines()[-1]}" if text else "")


def tcp(address: str, port: int, timeout: float) -> Stream:
    sock = socket.create_connection((address, port), timeout=timeout)
    # Without it, Nagle's algorithm and delayed ACKs hold every short command's reply for
    # ~40 ms (measured: 82 → 36 ms per command on loopback); OpenSSH sets it too.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return Stream(sock)


def command(line: str, timeout: float) -> Stream:
    """The ProxyCommand `line` running, talking over a socket (see the module's doc)."""
    ours, theirs = socket.socketpair()
    errors = tempfile.TemporaryFile()
    try:
        process = subprocess.Popen(["/bin/sh", "-c", f"exec {line}"], stdin=theirs, stdout=theirs, stderr=errors,
                                   start_new_session=True, close_fds=True)
    except OSError:
        ours.close()
        errors.close()
        raise
    finally:
        theirs.close()
    ours.settimeout(timeout)
    return Stream(ours, process, errors, program=line.split()[0] if line.split() else "")


def silent(stream: Stream, timeout: float) -> Optional[str]:
    """None once the server has begun to speak; else why it has not (waits up to `timeout`)."""
    if isinstance(stream.sock, socket.socket):
        try:
            said = stream.sock.recv(4, socket.MSG_PEEK)
        except socket.timeout:
            return f"no SSH banner within {timeout:g} s"
        return None if said else "closed before saying anything"
    channel, end = stream.sock, time.monotonic() + timeout      # a channel through a bastion
    while not channel.recv_ready():
        if channel.closed or channel.eof_received:
            return "closed before saying anything"
        if time.monotonic() > end:
            return f"no SSH banner within {timeout:g} s"
        time.sleep(0.01)
    return None


def _end(process: subprocess.Popen) -> None:
    """TERM to the command's process group, KILL if it has not ended a moment later."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            process.wait(END_GRACE_S)
            return
        except subprocess.TimeoutExpired:
            continue
