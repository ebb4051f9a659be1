"""SSH transport: one `Connection` per host with run/stream, opened lazily (after fabric's
connection.py); file transfers live in transfer.py.

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

from launcher.errors import BadAnswer, CalledOff, ConnectError, HostKeyError, RemoteError
from launcher.inventory.model import Host
from launcher.ssh import host_keys, proxy, transfer
from launcher.ssh.base import (DEFAULT, KILL_AFTER_S, MAX_ANSWER, Result, TooLong, bounded, bounded_sink, new_tag,  # noqa: F401
                               quote_command)
from launcher.ssh.explain import explain, private_key, route, why
from launcher.ssh.fanout import fan_out
from launcher.ssh.jump import Bastions, keyscan_via

KEEPALIVE_S = 15
HOLD_BEAT_S = 5.0            # a held command hears from us this often (the lease session gives up after 30 s: leases/host.sh)
COMMAND_TIMEOUT_S = 120.0     # a remote command taking longer is wedged (ssh.command_timeout_s's default)
TIMEOUT_STATUS = 124        # what `timeout` exits with when the bound passed
SEND_POLL_S = 0.1           # how often a send waiting for the host's window checks `cancel`
SEND_SLICE = 1 << 16        # bytes handed to paramiko at a time (it sends at most a packet)
CANCEL_GRACE_S = 2.0        # a command already sent when its work is called off may end by itself
STDERR_KEPT = 64 << 10      # the end of a command's stderr is kept, for the message
EOF_AFTER_EXIT_S = 5.0      # after the exit status, how long the rest of the output (then EOF) may take
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
        attempt = 0
        while True:
            try:
                return self._connect_once()
            except HostKeyError as exc:  # raised by our policy with the key's name; name the host
                raise HostKeyError(self.host.name, reason=exc.reason) from None
            except (socket.timeout, TimeoutError, ConnectionError, OSError, paramiko.SSHException, EOFError) as exc:
                if isinstance(exc, (paramiko.AuthenticationException, paramiko.BadHostKeyException)) \
                        or attempt >= self.retries:
                    raise explain(self.host, exc, self.known_hosts) from None
            except (ValueError, TypeError, IndexError) as exc:  # paramiko on a malformed key file or answer
                raise explain(self.host, exc, self.known_hosts) from None
            attempt += 1
            self.cancel.wait(self.backoff * 2 ** (attempt - 1))
            self.check_cancel()

    def _connect_once(self) -> paramiko.SSHClient:
        key = private_key(self.host)       # a key file that is no key fails here, once, naming the file
        client = paramiko.SSHClient()
        known = host_keys.KnownHosts.read(self.known_hosts, self.host.name)
        known.install(client, self.policy, self.host.ssh_port, via=keyscan_via(self.host.jumps))
        h = self.host
        stream = self._open_stream()
        try:
            client.connect(h.address, port=h.ssh_port, username=h.ssh_user, pkey=key, sock=stream.sock,
                           timeout=self.connect_timeout, banner_timeout=self.connect_timeout,
                           auth_timeout=self.connect_timeout, allow_agent=True, look_for_keys=h.identity_file is None)
        except Exception:
            client.close()
            stream.close()
            raise
        transport = client.get_transport()
        try:
            known.refuse_revoked(self.host.name, transport.get_remote_server_key())
        except HostKeyError:
            client.close()
            stream.close()
            raise
        transport.set_keepalive(KEEPALIVE_S)
        self._carrier = stream          # what the session runs over: ended with it
        return client

    def _open_stream(self) -> proxy.Stream:
        """What the session runs over (TCP, a channel through the bastions, or the ProxyCommand),
        once the server has begun to speak: a port where nothing answers with an SSH banner is
        said as such (and not retried), not as paramiko's `No existing session`."""
        h = self.host
        if h.jumps:
            stream = self.jumps.reach(h)          # a failed hop is named there
        elif h.proxy_command:
            stream = proxy.command(h.proxy_command, self.connect_timeout)
        else:
            stream = proxy.tcp(h.address, h.ssh_port, self.connect_timeout)
        try:
            silent = proxy.silent(stream, self.connect_timeout)
        except OSError:
            stream.close()
            raise
        if silent:
            said = stream.said()
            stream.close()
            hint = said or f"is an SSH server listening on port {h.ssh_port}?"
            raise ConnectError(h.name, reason=f"ssh {h.ssh_user}@{h.address}:{h.ssh_port}{route(h)}: {silent} ({hint})")
        return stream

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
                self._send_all(channel, stdin, timeout and timeout + KILL_AFTER_S + 2)
            channel.shutdown_write()
            out, err = bytearray(), bytearray()
            status = self._drain(channel, bounded_sink(out, limit), err, deadline, idle_timeout, grace=CANCEL_GRACE_S)
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
                    self._send_all(channel, chunk, idle_timeout)
                    self.bytes_sent += len(chunk)
                channel.shutdown_write()
                status = self._drain(channel, on_output, err, deadline, idle_timeout, stop)
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

    def _send_all(self, channel, data: bytes, idle_timeout: Optional[float]) -> None:
        """channel.sendall that hears `cancel` while the host's window stays full (sendall would
        wait out the whole idle timeout); socket.timeout after `idle_timeout` without progress."""
        channel.settimeout(SEND_POLL_S)
        offset, last = 0, time.monotonic()
        try:
            while offset < len(data):
                self.check_cancel()
                try:
                    offset += channel.send(data[offset:offset + SEND_SLICE])
                    last = time.monotonic()
                except socket.timeout:
                    if idle_timeout is not None and time.monotonic() - last > idle_timeout:
                        raise
        finally:
            channel.settimeout(idle_timeout)

    def _drain(self, channel, on_output, err: bytearray, deadline: Optional[float],
               idle_timeout: Optional[float] = None, stop=None, grace: float = 0.0) -> int:
        """Read stdout and stderr until the command exits; socket.timeout past a bound; CalledOff
        once the work is called off and the command has not ended within `grace` seconds."""
        last = time.monotonic()
        called_off: Optional[float] = None
        exited: Optional[float] = None
        while True:
            if stop is not None and stop.is_set():
                return 0
            if self.cancel.is_set() and exited is None:      # (a command that has ended is read to its end)
                called_off = called_off or time.monotonic()
                if time.monotonic() - called_off >= grace:
                    channel.close()
                    raise CalledOff(self.host.name)
            moved = False
            if channel.recv_ready():
                on_output(channel.recv(65536))
                moved = True
            if channel.recv_stderr_ready():
                err.extend(channel.recv_stderr(65536))
                del err[:-STDERR_KEPT]
                moved = True
            if not moved and channel.exit_status_ready() and not channel.recv_ready() \
                    and not channel.recv_stderr_ready():
                # sshd sends the exit status when it reaps the command, which may be before it has
                # sent the last of what the command wrote (seen under load: a probe's answer cut
                # after its first lines read as "workdir … is not writable"): whole once EOF came.
                exited = exited or time.monotonic()
                if channel.eof_received or channel.closed or time.monotonic() - exited > EOF_AFTER_EXIT_S:
                    # What came with the EOF, after the look above found the buffers empty, is read too.
                    self._drain_buffers(channel, on_output, err)
                    return channel.recv_exit_status()
            now = time.monotonic()
            last = now if moved else last
            if (deadline is not None and now > deadline) or (idle_timeout is not None and now - last > idle_timeout):
                channel.close()
                raise socket.timeout()
            if not moved:
                channel.status_event.wait(0.02)

    @staticmethod
    def _drain_buffers(channel, on_output, err: bytearray) -> None:
        """Whatever the channel holds already (nothing more will come: EOF, or the wait is over)."""
        while channel.recv_ready():
            on_output(channel.recv(65536))
        while channel.recv_stderr_ready():
            err.extend(channel.recv_stderr(65536))
            del err[:-STDERR_KEPT]

    # --- files (transfer.py) -------------------------------------------------------------------
    @property
    def sftp(self) -> paramiko.SFTPClient:
        """The SFTP channel, opened once: the channel, the subsystem and the server's first answer
        each within the connect timeout, then every read within the command timeout (paramiko's
        own open_sftp waits for ever on a server that never speaks)."""
        self.check_cancel()
        if self._sftp is None:
            self._sftp = self._open_sftp()
        return self._sftp

    def _open_sftp(self) -> paramiko.SFTPClient:
        bound = self.connect_timeout
        try:
            channel = self.client.get_transport().open_session(timeout=bound)
            channel.settimeout(bound)
            started = threading.Event()
            failed: list[BaseException] = []

            def start() -> None:           # paramiko waits for the subsystem's answer without a bound
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
            sftp = paramiko.SFTPClient(channel)          # reads the server's version: bounded by the channel
        except (socket.timeout, TimeoutError):
            raise RemoteError(self.host.name, reason=f"the SFTP server did not answer within {bound:g} s (is its sftp "
                              "subsystem working? `sftp` to the host tells)") from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise RemoteError(self.host.name, reason=f"SFTP failed to start: {why(exc)}") from None
        channel.settimeout(self.command_timeout)
        return sftp

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
