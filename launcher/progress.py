"""Progress reporting: core modules call a Reporter; the CLI decides how it looks."""
from __future__ import annotations

import threading
from typing import Protocol


class Reporter(Protocol):
    def stage(self, host: str, stage: str, detail: str = "") -> None: ...
    def warn(self, host: str | None, message: str) -> None: ...
    def progress(self, host: str, progress, restarts: int = 0) -> None: ...   # a trainer/progress.Progress


class NullReporter:
    def stage(self, host: str, stage: str, detail: str = "") -> None:
        pass

    def warn(self, host: str | None, message: str) -> None:
        pass

    def progress(self, host: str, progress, restarts: int = 0) -> None:
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

    def stages(self, host: str) -> list[str]:
        return [s for h, s, _ in self.events if h == host]
