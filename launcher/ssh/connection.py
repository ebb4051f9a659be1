"""SSH transport: one `Connection` per host with run/stream, opened lazily (after fabric's
connection.py); file transfers live in transfer.py, opening the session in session.py, the SFTP
channel in sftp.py, and pumping a command's channel in channel.py.

Every command is bounded: it runs under the host's `timeout` (so nothing is left running there
when the bound passes) and the launcher stops reading a moment later.

Work can be called off (`cancel`, an Event the Group sets when the launcher is interrupted): a
connection then refuses new commands and transfers, and a stream in flight ends at its next chunk
either way (also while the host's window is full); a command `run` has already sent gets
CANCEL_GRACE_S to end by itself first, so a short step (a mkdir, a key written) is either done or
not begun when the clean-up after it runs. Commands called on the main thread run on a helper
thread (fan_out's): Ctrl-C is raised on the main thread, and raised inside paramiko it can leave
one of its locks held (between an `acquire()` and its `try`), hanging the clean-up after it.

Host keys are verified: `strict` needs the key in known_hosts already; `accept-new` records an
unknown key once and still refuses a changed one. Nothing is ever silently auto-added.

A host behind bastions is reached through a channel jump.py opens (one session per bastion,
shared by the hosts behind it: the Group's `Bastions`); a host with a ProxyCommand, through that
command (proxy.py). Either way the host's own session, key check and bounds are the same.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

import paramiko

from launcher.errors import BadAnswer, CalledOff, RemoteError
from launcher.inventory.model import Host
from launcher.ssh import proxy, session, transfer
from launcher.ssh.base import (DEFAULT, KILL_AFTER_S, MAX_ANSWER, Result, TooLong, bounded, bounded_sink, new_tag,  # noqa: F401
                               quote_command)
from launcher.ssh.channel import STDERR_KEPT, drain, send_all
from launcher.ssh.explain import why
from launcher.ssh.fanout import fan_out
from launcher.ssh.jump import Bastions
from launcher.ssh.sftp import open_sftp

HOLD_BEAT_S = 5.0            # a held command hears from us this often (the lease session gives up after 30 s: leases/host.sh)
COMMAND_TIMEOUT_S = 120.0     # a remote command taking longer is wedged (ssh.command_timeout_s's default)
TIMEOUT_STATUS = 124        # what `timeout` exits with when the bound passed
CANCEL_GRACE_S = 2.0        # a command already sent when its work is called off may end by itself
# Paramiko logs a failed handshake's traceback from its own thread; with no handler Python would
# print it on stderr. Failures reach the user as our one-line errors instead.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
logging.getLogger("paramiko").propagate = False


class Connection:
    """SSH to one host. Opens on first use; `with Connection(...) as c:` closes it."""

    def __init__(self, host: Host, known_hosts: Path, policy: str = "strict", connect_timeout: float = 10.0,
                 retries: int = 2, backoff: float = 1.0, command_timeout: float = COMMAND_TIMEOUT_S,
                 cancel: Optional[threading.Event] = None, jumps: Optional[Bastions] = None):
        """`jumps`: the bastions shared with other connections (a Group's); without it, a host
        behind bastions gets its own, closed with this connection."""
        self.host, self.known_hosts, self.policy = host, Path(known_hosts), policy
        self.cancel = cancel or threading.Event()
        self.command_timeout = command_timeout
        self.connect_timeout, self.retries, self.backoff = connect_timeout, retries, backoff
        self._own_jumps = jumps is None and bool(host.jumps)
        self.jumps = Bastions(known_hosts, policy, connect_timeout, retries, backoff, self.cancel) \
            if self._own_jumps else jumps
        self._client: Optional[paramiko.SSHClient] = None
        self._sftp: Optional[paramiko.SFTPClient] = None
        self._carrier: Optional[proxy.Stream] = None
        self._held: list[paramiko.Channel] = []     # commands held open (`hold`) until close
        self._beating: Optional[threading.Thread] = None
        self.bytes_sent = 0

    # --- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> "Connection":
        return self

    @property
    def connected(self) -> bool:
        """Whether the SSH session is open already (a stage that would say "connect" need not)."""
        return self._client is not None

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for closable in (*self._held, self._sftp, self._client, self._carrier):
            if closable is not None:
                closable.close()
        self._sftp = self._client = self._carrier = None
        self._held = []
        if self._own_jumps:
            self.jumps.close()

    def check_cancel(self, *_) -> None:
        """Raise CalledOff if this host's work was called off (also an SFTP progress callback)."""
        if self.cancel.is_set():
            raise CalledOff(self.host.name)

    @property
    def client(self) -> paramiko.SSHClient:
        self.check_cancel()
        if self._client is not None and not self._alive():
            self.close()            # its session ended (the host rebooted, a link dropped): connect again
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _alive(self) -> bool:
        transport = self._client.get_transport() if self._client is not None else None
        return transport is not None and transport.is_active()

    def _connect(self) -> paramiko.SSHClient:
        client, self._carrier = session.connect(self)     # the carrier: what the session runs over, ended with it
        return client

    # --- commands ------------------------------------------------------------------------------
    def run(self, command: str | Sequence[str], check: bool = True, timeout: Optional[float] = DEFAULT,
            stdin: bytes | None = None, limit: int = MAX_ANSWER, idle_timeout: Optional[float] = None) -> Result:
        """Run and wait; a command still running after `timeout` s (default: ssh.command_timeout_s),
        or silent for `idle_timeout` s, is ended on the host; an answer longer than `limit` bytes
        is a BadAnswer (a host's answer is never read into memory unbounded)."""
        return self._off_the_main_thread(lambda: self._run(command, check, timeout, stdin, limit, idle_timeout))

    def stream(self, command: str | Sequence[str], on_output: Callable[[bytes], None],
               stdin_chunks=None, check: bool = True, timeout: Optional[float] = None,
               idle_timeout: Optional[float] = DEFAULT, stop=None) -> Result:
        """Run with stdout streamed to `on_output` (and stdin chunks streamed in). Bounded by
        `timeout` in all and by `idle_timeout` without a byte moving either way; ended early (status
        0) when the event `stop` is set."""
        return self._off_the_main_thread(
            lambda: self._stream(command, on_output, stdin_chunks, check, timeout, idle_timeout, stop))

    def _off_the_main_thread(self, work: Callable[[], Result]) -> Result:
        if threading.current_thread() is not threading.main_thread():
            return work()
        done = fan_out([self.host], "ssh", lambda _: work(), cancel=self.cancel)   # Ctrl-C calls it off
        if done.failed:
            raise done.failed[self.host.name]
        return done.succeeded[self.host.name]

    def _run(self, command, check: bool, timeout: Optional[float], stdin: bytes | None, limit: int,
             idle_timeout: Optional[float]) -> Result:
        timeout = self.command_timeout if timeout is DEFAULT else timeout
        deadline = None if timeout is None else time.monotonic() + timeout + KILL_AFTER_S + 2
        tag = new_tag()
        try:
            channel = self.client.get_transport().open_session(timeout=self.connect_timeout)
            channel.settimeout(None if timeout is None else timeout + KILL_AFTER_S + 2)
            channel.exec_command(bounded(command, timeout, tag))
            if stdin is not None:
                send_all(channel, stdin, timeout and timeout + KILL_AFTER_S + 2, self.check_cancel)
            channel.shutdown_write()
            out, err = bytearray(), bytearray()
            status = drain(channel, bounded_sink(out, limit), err, deadline, self.cancel, self.host.name, idle_timeout,
                           grace=CANCEL_GRACE_S)
        except TooLong:
            channel.close()
            self.end_command(tag)
            raise BadAnswer(self.host.name, command, reason=f"answered more than {limit:,} bytes, which is not "
                            "an answer to what tfcompose asked") from None
        except (socket.timeout, TimeoutError) as exc:
            self.end_command(tag)
            idle = f"or silent for {idle_timeout:g} s " if idle_timeout else ""
            raise RemoteError(self.host.name, command, reason=f"timed out after {timeout:g} s {idle}(ended on the host)"
                              if timeout is not None else f"silent for {idle_timeout:g} s (ended on the host)") from exc
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise RemoteError(self.host.name, command, reason=f"SSH failed: {why(exc)}") from exc
        result = Result(status, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
        if status == TIMEOUT_STATUS and timeout is not None:
            raise RemoteError(self.host.name, command, reason=f"timed out after {timeout:g} s (ended on the host)")
        if check and status != 0:
            raise RemoteError(self.host.name, command, status, result.stderr)
        return result

    def _stream(self, command, on_output: Callable[[bytes], None], stdin_chunks, check: bool,
                timeout: Optional[float], idle_timeout: Optional[float], stop) -> Result:
        idle_timeout = self.command_timeout if idle_timeout is DEFAULT else idle_timeout
        deadline = None if timeout is None else time.monotonic() + timeout + KILL_AFTER_S + 2
        tag = new_tag() if idle_timeout is not None or timeout is not None else None
        try:
            channel = self.client.get_transport().open_session(timeout=self.connect_timeout)
            channel.settimeout(idle_timeout)
            channel.exec_command(bounded(command, timeout, tag))
            err = bytearray()
            try:
                for chunk in stdin_chunks or ():
                    send_all(channel, chunk, idle_timeout, self.check_cancel)
                    self.bytes_sent += len(chunk)
                channel.shutdown_write()
                status = drain(channel, on_output, err, deadline, self.cancel, self.host.name, idle_timeout, stop)
            finally:
                channel.close()
        except (socket.timeout, TimeoutError) as exc:
            self.end_command(tag)
            raise RemoteError(self.host.name, command, reason="stopped answering (no data moved for "
                              f"{idle_timeout:g} s, or over {timeout} s in all)") from exc
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise RemoteError(self.host.name, command, reason=f"SSH failed: {why(exc)}") from exc
        stderr = err.decode("utf-8", "replace")
        if status == TIMEOUT_STATUS and timeout is not None:
            raise RemoteError(self.host.name, command, reason=f"timed out after {timeout:g} s (ended on the host)")
        if check and status != 0:
            raise RemoteError(self.host.name, command, status, stderr)
        return Result(status, "", stderr)

    def hold(self, command: str | Sequence[str], ready: str) -> paramiko.Channel:
        """Start a command that lives as long as this connection (or until the channel returned is
        closed): its stdin stays open and hears a `.` every HOLD_BEAT_S, so a host-side reader
        ends when the connection does, however the launcher ends (closed, killed), and when the
        beat stops (cut off: sshd may not notice for hours). Returns once the command printed the
        line `ready` (within the command timeout); one that ends or says anything else is a RemoteError."""
        channel = self._off_the_main_thread(lambda: self._hold(command, ready))
        if self._beating is None:
            self._beating = threading.Thread(target=self._beat, name=f"tfcompose-beat-{self.host.name}", daemon=True)
            self._beating.start()
        return channel

    def _beat(self) -> None:
        """A `.` to every held command's stdin, every HOLD_BEAT_S, while any is held."""
        while not self.cancel.wait(HOLD_BEAT_S) and self._held:
            for channel in list(self._held):
                try:
                    channel.sendall(b".")
                except (OSError, EOFError, paramiko.SSHException, socket.timeout):
                    pass        # the host or the link is gone: the command there ends by the silence
        self._beating = None

    def _hold(self, command, ready: str) -> paramiko.Channel:
        try:
            channel = self.client.get_transport().open_session(timeout=self.connect_timeout)
            channel.settimeout(self.command_timeout)
            channel.exec_command(quote_command(command))   # no `timeout`: it lives as long as we do
            said = bytearray()
            while b"\n" not in said and len(said) < 4096:
                self.check_cancel()
                chunk = channel.recv(256)
                if not chunk:
                    break
                said.extend(chunk)
        except (socket.timeout, TimeoutError) as exc:
            raise RemoteError(self.host.name, command, reason=f"did not answer within {self.command_timeout:g} s") from exc
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise RemoteError(self.host.name, command, reason=f"SSH failed: {why(exc)}") from exc
        if said.decode("utf-8", "replace").strip() != ready:
            channel.status_event.wait(5)          # what it said on stderr arrives before its status
            err = bytearray()
            while channel.recv_stderr_ready() and len(err) < STDERR_KEPT:
                err.extend(channel.recv_stderr(65536))
            status = channel.recv_exit_status() if channel.exit_status_ready() else None
            channel.close()
            raise RemoteError(self.host.name, command, status, err.decode("utf-8", "replace"),
                              reason=None if status is not None else "did not say it was ready")
        channel.settimeout(None)
        self._held.append(channel)      # kept: paramiko closes a channel nobody refers to
        return channel

    def end_command(self, tag: Optional[str]) -> None:
        """End, on the host, a command of ours that outlived our wait for it (its `timeout` and
        all it started: TERM to the process group, KILL two seconds later). Best effort."""
        if tag is None or self._client is None:
            return
        # The pattern `[t]fcompose-cmd-…` finds the tag, never this script's own command line.
        script = ('pids=$(pgrep -f "$1"); [ -n "$pids" ] || exit 0; '
                  'for p in $pids; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; done; '
                  'sleep 2; for p in $pids; do kill -KILL -- "-$p" 2>/dev/null; done; true')
        try:
            channel = self._client.get_transport().open_session(timeout=self.connect_timeout)
            channel.exec_command(quote_command(["sh", "-c", script, "sh", f"[{tag[0]}]{tag[1:]}"]))
            channel.status_event.wait(KILL_AFTER_S + 5)
            channel.close()
        except (paramiko.SSHException, OSError, EOFError, AttributeError):
            pass

    # --- files (transfer.py) -------------------------------------------------------------------
    @property
    def sftp(self) -> paramiko.SFTPClient:
        """The SFTP channel, opened once: the channel, the subsystem and the server's first answer
        each within the connect timeout, then every read within the command timeout (paramiko's
        own open_sftp waits for ever on a server that never speaks)."""
        self.check_cancel()
        if self._sftp is None:
            self._sftp = open_sftp(self.client.get_transport(), self.host.name, self.connect_timeout,
                                   self.command_timeout)
        return self._sftp

    def sftp_lost(self, what: str) -> RemoteError:
        """A transfer whose SFTP server went silent: the channel given up (the next one opens anew)."""
        if self._sftp is not None:
            self._sftp.close()
            self._sftp = None
        return RemoteError(self.host.name, reason=f"the SFTP server stopped answering while {what} (nothing for "
                           f"{self.command_timeout:g} s)")

    def put_text(self, text: str, remote: str, mode: int = 0o600) -> int:
        return transfer.put_text(self, text, remote, mode)

    def get(self, remote: str, local: str | Path) -> Path:
        return transfer.get_file(self, remote, Path(local))

    def get_tree(self, remote: str, local: str | Path):
        return transfer.get_tree(self, remote, Path(local))
