"""Work tied to one SSH connection (after paramiko's demos/forward.py): `Held`, a command on the
host that lives only while the launcher holds it, and `Forward`, a local port whose connections
are each carried over a `direct-tcpip` channel to a port on the host's loopback.

Both run on threads of their own, never on the main thread: Ctrl-C is raised there, and raised
inside paramiko it can leave one of its locks held (connection.py). Every wait is bounded.
"""
from __future__ import annotations

import select
import socket
import threading
import time
from typing import Callable, Optional, Sequence

import paramiko

from launcher.errors import RemoteError
from launcher.ssh.base import quote_command
from launcher.ssh.channel import STDERR_KEPT
from launcher.ssh.explain import why
from launcher.ssh.fanout import fan_out

HEARTBEAT = b"."        # what a held command reads on its stdin while it is held
POLL_S = 0.05           # how often a held command's channel, or a forwarded pair, is looked at
OPEN_TIMEOUT_S = 10.0   # a channel the host has not opened by then is refused
CHUNK = 1 << 15


class Held:
    """`command` on the host, fed HEARTBEAT on its stdin every `every` seconds until `release`,
    which closes its stdin; its stdout goes to `on_output` as it comes (`last_heard`: when). The
    command is written to end when its stdin closes or stays silent (so it also ends when this
    process or its network goes, with nobody to release it)."""

    def __init__(self, conn, command: str | Sequence[str], every: float, on_output: Callable[[bytes], None]):
        self.conn, self.command, self.every, self.on_output = conn, command, every, on_output
        self.released = threading.Event()
        self.aborted = threading.Event()       # `abort`: end now, whatever the command does
        self.ended = threading.Event()
        self.status: Optional[int] = None
        self.error: Optional[BaseException] = None
        self.stderr = bytearray()
        self.last_heard = time.monotonic()      # when the command last said anything
        self._thread = threading.Thread(target=self._hold, name="tfcompose-held", daemon=True)

    def start(self) -> "Held":
        self._thread.start()
        return self

    def release(self, grace: float) -> bool:
        """Close the command's stdin and wait up to `grace` s for it to end; True once it has."""
        self.released.set()
        deadline = time.monotonic() + grace
        while not self.ended.wait(0.2):        # in short waits: Ctrl-C is heard
            if time.monotonic() > deadline:
                return False
        return True

    def abort(self) -> None:
        """End without waiting for the command: its channel is closed at the next poll (a host that
        went silent, or sends what it should not); the host's sshd then ends the session."""
        self.aborted.set()

    def _hold(self) -> None:
        try:
            self.status = self._run()
        except BaseException as exc:           # read by the caller once `ended` is set
            self.error = RemoteError(self.conn.host.name, self.command, reason=f"SSH failed: {why(exc)}") \
                if isinstance(exc, (paramiko.SSHException, OSError, EOFError)) else exc
        finally:
            self.ended.set()

    def _run(self) -> Optional[int]:
        channel = self.conn.client.get_transport().open_session(timeout=OPEN_TIMEOUT_S)
        try:
            channel.exec_command(quote_command(self.command))
            next_beat, stdin_open = 0.0, True
            while not self.aborted.is_set():
                if stdin_open and self.released.is_set():
                    channel.shutdown_write()
                    stdin_open = False
                if stdin_open and time.monotonic() >= next_beat and not channel.exit_status_ready():
                    channel.sendall(HEARTBEAT)      # (not to a command that has ended: its words are still to read)
                    next_beat = time.monotonic() + self.every
                if channel.recv_ready():
                    self.last_heard = time.monotonic()
                    self.on_output(channel.recv(CHUNK))
                elif channel.recv_stderr_ready():
                    self.last_heard = time.monotonic()
                    self.stderr.extend(channel.recv_stderr(CHUNK))
                    del self.stderr[:-STDERR_KEPT]
                elif channel.exit_status_ready():
                    return channel.recv_exit_status()
                else:
                    channel.status_event.wait(POLL_S)
            return None
        finally:
            channel.close()


class Forward:
    """Connections to `listener` (a listening socket on this machine), each carried to
    `remote_port` on the host's loopback over a direct-tcpip channel, until `close`."""

    def __init__(self, conn, listener: socket.socket, remote_port: int, remote_host: str = "127.0.0.1"):
        self.conn, self.listener, self.remote = conn, listener, (remote_host, remote_port)
        self.stopped = threading.Event()
        self.failures: list[str] = []           # why a connection could not be carried (the last few)
        self._open: set = set()                 # sockets and channels in use, closed by `close`
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def check(self) -> None:
        """Open one channel to the remote port and close it: RemoteError when the host's sshd will
        not carry it (AllowTcpForwarding no) or nothing listens there. Off the main thread."""
        done = fan_out([self.conn.host], "forward", lambda _: self._open_channel(("127.0.0.1", 0)).close(),
                       cancel=self.conn.cancel)
        if done.failed:
            raise done.failed[self.conn.host.name]

    def start(self) -> "Forward":
        self._spawn(self._accept)
        return self

    def close(self, grace: float = 2.0) -> None:
        """Stop accepting, end every carried connection, and wait (bounded) for their threads."""
        self.stopped.set()
        with self._lock:
            for end in list(self._open):
                if isinstance(end, socket.socket):
                    try:                        # wakes a thread blocked sending to it; close() alone may not
                        end.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                end.close()
        deadline = time.monotonic() + grace
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, name="tfcompose-forward", daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _accept(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stopped.is_set():
            try:
                sock, peer = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:                     # the listener was closed
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._spawn(self._carry, sock, peer)

    def _open_channel(self, peer) -> paramiko.Channel:
        try:
            return self.conn.client.get_transport().open_channel("direct-tcpip", self.remote, peer,
                                                                 timeout=OPEN_TIMEOUT_S)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise RemoteError(self.conn.host.name, reason=f"its SSH server would not carry a connection to "
                              f"{self.remote[0]}:{self.remote[1]} there: {why(exc)} (port forwarding must be "
                              "allowed: AllowTcpForwarding in its sshd_config)") from None

    def _carry(self, sock: socket.socket, peer) -> None:
        try:
            channel = self._open_channel(peer[:2])
        except RemoteError as exc:
            self.failures = [*self.failures[-4:], exc.reason]
            sock.close()
            return
        with self._lock:
            self._open.update((sock, channel))
        try:
            pump(sock, channel, self.stopped)
        except (OSError, paramiko.SSHException, EOFError):
            pass                                # one browser connection ended badly: the others go on
        finally:
            with self._lock:
                self._open.difference_update((sock, channel))
            channel.close()
            sock.close()


def pump(sock: socket.socket, channel, stopped: threading.Event) -> None:
    """Bytes both ways until both sides have ended (each end's EOF passed on to the other)."""
    from_sock, from_channel = True, True
    while (from_sock or from_channel) and not stopped.is_set():
        readable, _, _ = select.select([s for s, on in ((sock, from_sock), (channel, from_channel)) if on], [], [], 0.2)
        if sock in readable:
            data = sock.recv(CHUNK)
            if data:
                channel.sendall(data)
            else:
                from_sock = False
                channel.shutdown_write()
        if channel in readable:
            data = channel.recv(CHUNK)
            if data:
                sock.sendall(data)
            else:
                from_channel = False
                sock.shutdown(socket.SHUT_WR)
