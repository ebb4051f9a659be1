"""Logs: a host's container output (stdout and stderr), or every host's at once, line by line,
each line with its host (`logs --all`), following until the chief's container ends."""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from launcher import docker_commands as dc
from launcher.inventory.model import Cluster, Host
from launcher.ssh.group import Group, connect
from launcher.stages.status import newest_container


def logs(cluster: Cluster, host_name: Optional[str], follow: bool, write: Callable[[bytes], None],
         since: Optional[str] = None, tail: Optional[int] = None) -> None:
    host = cluster.host(host_name) if host_name else cluster.chief
    with connect(cluster, host) as conn:
        command = dc.container_logs(newest_container(conn, cluster.name, host.name)["Id"][:12], tail, follow, since)
        # Following has no end of its own (the chief may train for days, silent for hours): no
        # bound there; without --follow the command must end like any other.
        conn.stream(command, on_output=write, **({"idle_timeout": None} if follow else {}))

FOLLOW_GRACE_S = 5.0  # how long other hosts' logs are still followed after the chief's container ended


class Lines:
    """Bytes from a stream, handed on as whole lines (the last, unfinished one kept back)."""

    def __init__(self, host: str, emit: Callable[[str, str], None]):
        self.host, self.emit, self.rest = host, emit, b""

    def feed(self, chunk: bytes) -> None:
        *done, self.rest = (self.rest + chunk).split(b"\n")
        for line in done:
            self.emit(self.host, line.decode("utf-8", "replace").rstrip("\r"))

    def close(self) -> None:
        if self.rest:
            self.emit(self.host, self.rest.decode("utf-8", "replace"))
            self.rest = b""


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
