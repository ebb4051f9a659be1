"""The wait loop's looks at the hosts: each host's container (status.host_status) and, for the
trainer, its newest progress document, read on a thread of that host's own. A round waits for the
hosts only so long: one that stops answering (a cable pulled, a host frozen) holds up neither the
others' looks nor what the loop decides for them, and the time since each host last answered is
kept, so that silence is measured, not guessed from one command's timeout.

A host's look still under way from an earlier round is not asked again (one thread per host at
most) nor waited for: it ends by its own bound (`timeout_s`), and its answer counts from the round
that finds it. So while a host is silent the loop goes on at its own pace.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from launcher import docker_commands as dc
from launcher.inventory.model import Host
from launcher.plan import Plan
from launcher.stages.status import HostStatus, host_status, unreachable
from trainer.spec.progress import Progress, SearchProgress, parse, parse_search

WAIT_S = 10.0       # the longest a round waits for a host before it goes on without its answer


@dataclass(frozen=True)
class Look:
    status: HostStatus
    progress: Optional[Progress] = None
    search: Optional[SearchProgress] = None       # the chief's, in a parallel search
    answered: bool = False                        # the host answered this look (its state is fresh)


def host_progress(conn, plan: Plan, host: Host, timeout: Optional[float] = None
                  ) -> tuple[Optional[Progress], Optional[SearchProgress]]:
    """The newest progress document in the host's results folder, and on the chief of a parallel
    search the queue's search document (hosts are untrusted: each parsed, or None)."""
    kw = {} if timeout is None else {"timeout": timeout}
    out = conn.run(dc.read_progress_files(f"{plan.run_dir(host)}/results"), check=False, **kw).stdout
    mine, _, search = out.partition("#search\n")
    found = [p for p in (parse(line) for line in mine.splitlines() if line.strip()) if p]
    return (max(found, key=lambda p: p.updated) if found else None,
            parse_search(search.strip()) if search.strip() and host.chief and plan.parallel else None)


def look_at(plan: Plan, host: Host, conn, timeout: float) -> Look:
    """One host, once: its container's state, and the trainer's progress when it runs the trainer."""
    trainer = plan.cluster.spec.run is None
    status = host_status(host, conn, plan.cluster.name, with_line=not trainer, timeout=timeout)
    progress, search = host_progress(conn, plan, host, timeout) if trainer else (None, None)
    return Look(status, progress, search, answered=True)


class Looks:
    """Rounds of looks at every host of the group, each host on its own thread."""

    def __init__(self, group, plan: Plan, timeout_s: float, wait_s: float = WAIT_S,
                 look: Callable[[Plan, Host, object, float], Look] = look_at, clock=time.monotonic):
        self.group, self.plan, self.timeout_s, self.wait_s = group, plan, timeout_s, wait_s
        self._look, self._clock = look, clock
        self._lock = threading.Lock()
        self._flight: dict[str, threading.Thread] = {}
        self._ended: dict[str, Look] = {}
        self.answered_at: dict[str, float] = {}     # host → when its last look answered (clock())

    def round(self) -> dict[str, Look]:
        """Every host's look, in inventory order: a fresh answer, or (not answering, or not within
        wait_s) `unreachable` saying for how long it has been silent."""
        hosts = self.group.cluster.hosts
        started = [t for t in (self._start(host) for host in hosts) if t is not None]
        deadline = self._clock() + self.wait_s
        for thread in started:
            thread.join(max(0.0, deadline - self._clock()))
        with self._lock:
            ended, self._ended = self._ended, {}
        return {h.name: ended.get(h.name) or self._silent(h.name) for h in hosts}

    def silent_for(self, host: str, since: float) -> float:
        """Seconds since the host last answered (since `since` if it never did)."""
        return self._clock() - self.answered_at.get(host, since)

    def _start(self, host: Host) -> Optional[threading.Thread]:
        """A new look at the host, unless one is still under way (then None)."""
        running = self._flight.get(host.name)
        if running is not None and running.is_alive():
            return None
        thread = threading.Thread(target=self._one, args=(host,), name=f"tfcompose-look-{host.name}", daemon=True)
        self._flight[host.name] = thread
        thread.start()
        return thread

    def _one(self, host: Host) -> None:
        try:
            found = self._look(self.plan, host, self.group.conn(host), self.timeout_s)
        except Exception as exc:  # noqa: BLE001  (a host's failure is its state: unreachable, or unknown)
            found = Look(unreachable(host.name, exc))
        with self._lock:
            if found.answered:
                self.answered_at[host.name] = self._clock()
            self._ended[host.name] = found

    def _silent(self, host: str) -> Look:
        since = self.answered_at.get(host)
        said = f"no answer for {self._clock() - since:.0f} s" if since is not None else "no answer yet"
        return Look(HostStatus(host, "unreachable", error=said))
