"""One command's channel pumped, bounded (was in connection.py): its stdin sent while the work
can still be called off (`send_all`), and its stdout and stderr read until the command exits
(`drain`), past the exit status to the EOF that follows it, never longer than the bounds."""
from __future__ import annotations

import socket
import threading
import time
from typing import Callable, Optional

from launcher.errors import CalledOff

SEND_POLL_S = 0.1           # how often a send waiting for the host's window checks `cancel`
SEND_SLICE = 1 << 16        # bytes handed to paramiko at a time (it sends at most a packet)
STDERR_KEPT = 64 << 10      # the end of a command's stderr is kept, for the message
EOF_AFTER_EXIT_S = 5.0      # after the exit status, how long the rest of the output (then EOF) may take


def send_all(channel, data: bytes, idle_timeout: Optional[float], check_cancel: Callable[[], None]) -> None:
    """channel.sendall that hears `cancel` while the host's window stays full (sendall would
    wait out the whole idle timeout); socket.timeout after `idle_timeout` without progress."""
    channel.settimeout(SEND_POLL_S)
    offset, last = 0, time.monotonic()
    try:
        while offset < len(data):
            check_cancel()
            try:
                offset += channel.send(data[offset:offset + SEND_SLICE])
                last = time.monotonic()
            except socket.timeout:
                if idle_timeout is not None and time.monotonic() - last > idle_timeout:
                    raise
    finally:
        channel.settimeout(idle_timeout)


class _CallOff:
    """When the work is called off: the command gets `grace` seconds to end by itself."""

    def __init__(self, cancel: threading.Event, host_name: str, grace: float):
        self.cancel, self.host_name, self.grace = cancel, host_name, grace
        self.since: Optional[float] = None

    def check(self, channel) -> None:
        if self.cancel.is_set():
            self.since = self.since or time.monotonic()
            if time.monotonic() - self.since >= self.grace:
                channel.close()
                raise CalledOff(self.host_name)


def drain(channel, on_output, err: bytearray, deadline: Optional[float], cancel: threading.Event, host_name: str,
          idle_timeout: Optional[float] = None, stop=None, grace: float = 0.0) -> int:
    """Read stdout and stderr until the command exits; socket.timeout past a bound; CalledOff
    once the work is called off and the command has not ended within `grace` seconds."""
    last = time.monotonic()
    call_off = _CallOff(cancel, host_name, grace)
    exited: Optional[float] = None
    while True:
        if stop is not None and stop.is_set():
            return 0
        if exited is None:                      # (a command that has ended is read to its end)
            call_off.check(channel)
        moved = _read_ready(channel, on_output, err)
        if not moved and channel.exit_status_ready() and not channel.recv_ready() \
                and not channel.recv_stderr_ready():
            # sshd sends the exit status when it reaps the command, which may be before it has
            # sent the last of what the command wrote (seen under load: a probe's answer cut
            # after its first lines read as "workdir … is not writable"): whole once EOF came.
            exited = exited or time.monotonic()
            if channel.eof_received or channel.closed or time.monotonic() - exited > EOF_AFTER_EXIT_S:
                # What came with the EOF, after the look above found the buffers empty, is read too.
                drain_buffers(channel, on_output, err)
                return channel.recv_exit_status()
        now = time.monotonic()
        last = now if moved else last
        if (deadline is not None and now > deadline) or (idle_timeout is not None and now - last > idle_timeout):
            channel.close()
            raise socket.timeout()
        if not moved:
            channel.status_event.wait(0.02)


def _read_ready(channel, on_output, err: bytearray) -> bool:
    """One look at each stream: what is there already is read (whether anything moved)."""
    moved = False
    if channel.recv_ready():
        on_output(channel.recv(65536))
        moved = True
    if channel.recv_stderr_ready():
        err.extend(channel.recv_stderr(65536))
        del err[:-STDERR_KEPT]
        moved = True
    return moved


def drain_buffers(channel, on_output, err: bytearray) -> None:
    """Whatever the channel holds already (nothing more will come: EOF, or the wait is over)."""
    while channel.recv_ready():
        on_output(channel.recv(65536))
    while channel.recv_stderr_ready():
        err.extend(channel.recv_stderr(65536))
        del err[:-STDERR_KEPT]
