"""The Reporter: how the stages tell what they are doing (a host's stage, a warning, training
progress, bytes sent); the CLI decides how it looks (view.RichReporter). Here: the protocol, a
reporter that says nothing and one that records (tests), and the adapters from bytes done to calls
(at most about once a second)."""
from __future__ import annotations

import threading
import time
from typing import Callable, Protocol

from launcher.text import clock


class Reporter(Protocol):
    def stage(self, host: str, stage: str, detail: str = "") -> None: ...
    def warn(self, host: str | None, message: str) -> None: ...
    def progress(self, host: str, progress, restarts: int = 0) -> None: ...   # a trainer/spec/progress.Progress
    def search(self, whole) -> None: ...     # a parallel search's trainer/spec/progress.SearchProgress
    def transfer(self, host: str, what: str, done: int, total: int, elapsed_s: float) -> None: ...
    # Work on this machine that the hosts wait for (saving the image and splitting it into layers).
    def local(self, what: str, done: int, total: int, elapsed_s: float) -> None: ...
    def telemetry(self, host: str, line: str) -> None: ...      # the host's hardware now, as one line


# No ETA until the rate is known well enough: the first bytes of a transfer come after its
# set-up (an SSH channel, `docker load` starting), so an early rate is far too low (a 1.5 GB
# image at its first KB gave "ETA 359:49:26").
ETA_AFTER_S = 3.0
ETA_AFTER_FRACTION = 0.02
RATE_AFTER_S = 1.0


def rate_detail(done: int, total: int, elapsed_s: float) -> str:
    """`120.0 of 1,500.0 MB, 45.2 MB/s, ETA 0:00:31` (the ETA once the rate is known well enough);
    at the end, `1,500.0 MB in 0:00:33, 45.2 MB/s`."""
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    speed = f", {rate / 1e6:.1f} MB/s" if elapsed_s >= RATE_AFTER_S else ""     # a rate over a moment means nothing
    if total and done >= total:
        return f"{done / 1e6:,.1f} MB in {clock(elapsed_s)}{speed}"
    known = rate > 0 and elapsed_s >= ETA_AFTER_S and done >= ETA_AFTER_FRACTION * total
    eta = f", ETA {clock(max(total - done, 0) / rate)}" if known else ""
    return f"{done / 1e6:,.1f} of {max(total, done) / 1e6:,.1f} MB{speed}{eta}"


def transfer_detail(what: str, done: int, total: int, elapsed_s: float) -> str:
    """`sending image: 120.0 of 1,500.0 MB, 45.2 MB/s, ETA 0:00:31`."""
    return f"sending {what}: {rate_detail(done, total, elapsed_s)}"


class NullReporter:
    def stage(self, host: str, stage: str, detail: str = "") -> None:
        pass

    def warn(self, host: str | None, message: str) -> None:
        pass

    def progress(self, host: str, progress, restarts: int = 0) -> None:
        pass

    def search(self, whole) -> None:
        pass

    def transfer(self, host: str, what: str, done: int, total: int, elapsed_s: float) -> None:
        pass

    def local(self, what: str, done: int, total: int, elapsed_s: float) -> None:
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

    def search(self, whole) -> None:
        with self._lock:
            self.events.append(("all", "search", f"{whole.done}/{whole.budget}"))

    def transfer(self, host: str, what: str, done: int, total: int, elapsed_s: float) -> None:
        with self._lock:
            self.events.append((host, "transfer", f"{what} {done}/{total}"))

    def local(self, what: str, done: int, total: int, elapsed_s: float) -> None:
        with self._lock:
            self.events.append(("", "local", f"{what} {done}/{total}"))

    def telemetry(self, host: str, line: str) -> None:
        with self._lock:
            self.events.append((host, "telemetry", line))

    def stages(self, host: str) -> list[str]:
        return [s for h, s, _ in self.events if h == host]


def transfer_reporter(reporter, host: str, what: str) -> Callable[[int, int], None]:
    """Bytes sent → the host's stage detail (rate and ETA), at most about once a second. The clock
    starts with the first bytes: what comes before them (the image saved and split here, minutes
    on a first `up`) is no part of the rate (counted in, it made the first ETA hours long)."""
    start, last = [None], [0.0]

    def on_bytes(done: int, total: int) -> None:
        now = time.monotonic()
        start[0] = now if start[0] is None else start[0]
        if now - last[0] >= 1.0:
            last[0] = now
            reporter.transfer(host, what, done, total, now - start[0])
    return on_bytes


def local_reporter(reporter, what: str) -> Callable[[int, int], None]:
    """Bytes worked through on this machine → `reporter.local`, at most about once a second, and
    the end (done ≥ total) once, so the work is seen to end."""
    start, last, ended = time.monotonic(), [0.0], [False]

    def on_bytes(done: int, total: int) -> None:
        now = time.monotonic()
        end = done >= total
        if (now - last[0] >= 1.0 and not end) or (end and not ended[0]):
            last[0], ended[0] = now, end
            reporter.local(what, done, total, now - start)
    return on_bytes
