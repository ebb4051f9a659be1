"""The wait loop's reporter while telemetry runs (was in session.py): `Observer` passes everything
on to the user's reporter unchanged and keeps what it learns of each host (its container's state,
its trial and epoch), so that each sample says whether its host was training, and in which trial."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Optional

STARTUP_S = 120.0         # a `run:` program (no progress file) counts as training after this long running


@dataclass
class HostState:
    stage: str = ""
    running_since: Optional[float] = None
    trial: int = 0
    epoch: int = 0
    done: bool = False
    progress_seen: bool = False


class Observer:
    """The wait loop's reporter while telemetry runs: passes everything on, keeps what it learns."""

    def __init__(self, inner, clock=time.monotonic):
        self.inner, self.clock = inner, clock
        self.hosts: dict[str, HostState] = {}
        self._lock = threading.Lock()

    def stage(self, host: str, stage: str, detail: str = "") -> None:
        with self._lock:
            state = self.hosts.setdefault(host, HostState())
            if stage == "running" and state.stage != "running":
                state.running_since = self.clock()
            state.stage = stage
        self.inner.stage(host, stage, detail)

    def progress(self, host: str, progress, restarts: int = 0) -> None:
        with self._lock:
            state = self.hosts.setdefault(host, HostState())
            state.trial, state.epoch, state.done, state.progress_seen = \
                progress.trial_index, progress.epoch, progress.done, True
        self.inner.progress(host, progress, restarts)

    def warn(self, host, message: str) -> None:
        self.inner.warn(host, message)

    def transfer(self, host: str, what: str, done: int, total: int, elapsed_s: float) -> None:
        self.inner.transfer(host, what, done, total, elapsed_s)

    def telemetry(self, host: str, line: str) -> None:
        shown = getattr(self.inner, "telemetry", None)
        if shown is not None:
            shown(host, line)

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def doing(self, host: str, run_program: bool) -> tuple[bool, int, int]:
        """(training, trial, epoch) of the host as last reported."""
        with self._lock:
            state = self.hosts.get(host, HostState())
            running = state.stage == "running"
            if run_program:
                since = state.running_since
                return running and since is not None and self.clock() - since >= STARTUP_S, 0, 0
            return running and state.progress_seen and not state.done, state.trial, state.epoch
