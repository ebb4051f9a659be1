"""Logs: a host's container output (stdout and stderr), or every host's at once, line by line,
each line with its host (`logs --all`), following until the chief's container ends."""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from launcher import docker_commands as dc
from launcher.inventory.model import Cluster, Host
from launcher.ssh.group import Group, connect
from launcher.containers import newest_container


FOLLOW_GRACE_S = 5.0  # how long other hosts' logs are still followed after the chief's container ended
MAX_LINE = 64 << 10   # a longer line (a log with no newline at all) is handed on in pieces of this


def logs(cluster: Cluster, host_name: Optional[str], follow: bool, emit: Callable[[str, str], None],
         since: Optional[str] = None, tail: Optional[int] = None) -> None:
    """One host's log (the chief's by default), line by line to `emit(host, line)`."""
    host = cluster.host(host_name) if host_name else cluster.chief
    with connect(cluster, host) as conn:
        command = dc.container_logs(newest_container(conn, cluster.name, host.name)["Id"][:12], tail, follow, since)
        lines = Lines(host.name, emit)
        try:
            # Following has no end of its own (the chief may train for days, silent for hours): no
            # bound there; without --follow the command must end like any other.
            conn.stream(command, on_output=lines.feed, **({"idle_timeout": None} if follow else {}))
        finally:
            lines.close()


class Lines:
    """Bytes from a stream, handed on as whole lines (the last, unfinished one kept back; one
    longer than MAX_LINE handed on in pieces). Each byte is copied once: a log that never ends
    its line costs no more than one that does."""

    def __init__(self, host: str, emit: Callable[[str, str], None]):
        self.host, self.emit = host, emit
        self.pending: list[bytes] = []
        self.size = 0

    def feed(self, chunk: bytes) -> None:
        *done, chunk = chunk.split(b"\n")
        for i, line in enumerate(done):
            self._emit(b"".join(self.pending) + line if i == 0 else line)
            self.pending, self.size = [], 0
        if chunk:
            self.pending.append(chunk)
            self.size += len(chunk)
            if self.size >= MAX_LINE:
                self.close()

    def close(self) -> None:
        if self.pending:
            self._emit(b"".join(self.pending))
            self.pending, self.size = [], 0

    def _emit(self, line: bytes) -> None:
        self.emit(self.host, line.decode("utf-8", "replace").rstrip("\r"))


class AfterGrace:
    """Set once `event` has been set for `grace` seconds: a worker's container usually ends a moment
    after the chief's, and its last lines must still come through before following stops."""

    def __init__(self, event: threading.Event, grace: float):
        self.event, self.grace, self.since = event, grace, None

    def is_set(self) -> bool:
        if not self.event.is_set():
            return False
        self.since = self.since or time.monotonic()
        return time.monotonic() - self.since >= self.grace


def logs_all(cluster: Cluster, follow: bool, emit: Callable[[str, str], None], since: Optional[str] = None,
             tail: Optional[int] = None) -> dict[str, BaseException]:
    """Every host's log at once; following ends when the chief's container does. A host that
    cannot give its log is returned (host → error), the others are shown."""
    chief_done, lock = threading.Event(), threading.Lock()

    def locked(host: str, line: str) -> None:
        with lock:
            emit(host, line)

    def one(host: Host, conn) -> None:
        lines = Lines(host.name, locked)
        try:
            conn.stream(dc.container_logs(newest_container(conn, cluster.name, host.name)["Id"][:12], tail, follow, since),
                        on_output=lines.feed, idle_timeout=None if follow else conn.command_timeout,
                        stop=None if host.chief or not follow else AfterGrace(chief_done, FOLLOW_GRACE_S))
        finally:
            lines.close()
            if host.chief:
                chief_done.set()

    with Group(cluster) as group:
        return group.run("logs", one).failed
