"""The Reporter: how the stages tell what they are doing (a host's stage, a warning, training
progress, bytes sent, the hardware's telemetry); the CLI decides how it looks (view.RichReporter).
Here: the protocol, a reporter that says nothing and one that records (tests), and the bytes-sent
adapter."""
from __future__ import annotations

import threading
import time
from typing import Callable, Protocol

from launcher.text import clock


class Reporter(Protocol):
    def stage(self, host: str, stage: str, detail: str = "") -> None: ...
    def warn(self, host: str | None, message: str) -> None: ...
    def progress(self, host: str, progress, restarts: int = 0) -> None: ...   # a trainer/progress.Progress
    def transfer(self, host: str, what: str, done: int, total: int, elapsed_s: float) -> None: ...
    def telemetry(self, host: str, line: str) -> None: ...      # the host's hardware now, as one line


def transfer_detail(what: str, done: int, total: int, elapsed_s: float) -> str:
    """`sending image: 120.0 of 1,500.0 MB, 45.2 MB/s, ETA 0:00:31`."""
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    left = max(total - done, 0) / rate if rate > 0 else None
    eta = "" if left is None else f", ETA {clock(left)}"
    return f"sending {what}: {done / 1e6:,.1f} of {max(total, done) / 1e6:,.1f} MB, {rate / 1e6:.1f} MB/s{eta}"


class NullReporter:
    def stage(self, host: str, stage: str, detail: str = "") -> None:
        pass

    def warn(self, host: str | None, message: str) -> None:
        pass

    def progress(self, host: str, progress, restarts: int = 0) -> None:
        pass

    def transfer(self, host: str, what: str, done: int, total: int, elapsed_s: float) -> None:
        pass

    def telemetry(self, host: str, line: str) -> None:
        pass


class RecordingReporter:
    """Keeps every call: for tests, and for the CLI's end-of-run summary."""

    def __init__(self):
        self.events: list[tuple[str, str, str]] = []
        self.warnings: list[tuple[str | None, str]] = []
        self._lock = threading.Lock()

    def stage(self, host: str, stage: str, detail: str = "") -> None:
        with self._lock:
            self.events.append((host, stage, detail))

    def warn(self, host: str | None, message: str) -> None:
        with self._lock:
            self.warnings.append((host, message))

    def progress(self, host: str, progress, restarts: int = 0) -> None:
        with self._lock:
            self.events.append((host, "progress", f"{progress.trial_index}/{progress.epoch}"))

    def transfer(self, host: str, what: str, done: int, total: int, elapsed_s: float) -> None:
        with self._lock:
            self.events.append((host, "transfer", f"{what} {done}/{total}"))

    def telemetry(self, host: str, line: str) -> None:
        with self._lock:
            self.events.append((host, "telemetry", line))

    def stages(self, host: str) -> list[str]:
        return [s for h, s, _ in self.events if h == host]


def transfer_reporter(reporter, host: str, what: str) -> Callable[[int, int], None]:
    """Bytes sent → the host's stage detail (rate and ETA), at most about once a second."""
    start, last = time.monotonic(), [0.0]

    def on_bytes(done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 1.0:
            last[0] = now
            reporter.transfer(host, what, done, total, now - start)
    return on_bytes
