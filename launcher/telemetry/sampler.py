"""One host's sampler as the session keeps it (was in session.py): its Held command, its parser
and its fortunes: why it ended, whether it is started again (at most RESTARTS times, each wait
twice the last) or left for good (a flood, or too many restarts), and its parser's notes, each
passed on once."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from launcher.errors import summary
from launcher.ssh.tunnel import Held
from launcher.telemetry.parse import Flood, HostStream
from launcher.text import one_line

RESTARTS = 5
RESTART_AFTER_S = 5.0     # then doubled at each restart
Warn = Callable[[str, str], None]


@dataclass
class Sampler:
    """One host's sampler: its Held command, its parser and its fortunes."""
    host: str
    stream: HostStream
    held: Optional[Held] = None
    restarts: int = 0
    restart_at: Optional[float] = None
    stopped: str = ""              # why it will not be started again
    told_garbage: bool = False
    last_heard: float = 0.0
    tag: str = ""                  # the command's tag on the host (connection.new_tag), to end it there

    def ended(self, why: str, clock: Callable[[], float], warn: Warn) -> None:
        """Its command ended (`why`): started again after a wait, or, after a flood or RESTARTS restarts, left."""
        error = self.held.error if self.held else None
        self.held = None
        if isinstance(error, Flood):
            self.stopped = why
            warn(self.host, f"telemetry stopped: the host {why}, which no sampler does; "
                            "no more figures from it in this run")
            return
        if self.restarts >= RESTARTS:
            self.stopped = why
            warn(self.host, f"telemetry stopped after {RESTARTS} restarts: {why}")
            return
        self.restarts += 1
        self.restart_at = clock() + RESTART_AFTER_S * 2 ** (self.restarts - 1)
        warn(self.host, f"telemetry: the sampler stopped ({why}); starting it again")

    def pass_notes(self, warn: Warn) -> None:
        """What its parser noted, passed on; what is not a sample, said once."""
        stream = self.stream
        while stream.notes:
            warn(self.host, "telemetry: " + stream.notes.pop(0))
        if stream.garbage and not self.told_garbage:
            self.told_garbage = True
            warn(self.host, f"telemetry: ignored what is not a sample (first: {stream.first_garbage!r})")


def why_ended(held: Held) -> str:
    """Why a sampler's command ended, in a few words: its error, or its exit status and last words."""
    if held.error is not None:
        return summary(held.error) if not isinstance(held.error, Flood) else str(held.error)
    said = one_line(held.stderr.decode("utf-8", "replace")[-300:], 200)
    return f"it ended (exit {held.status})" + (f": {said}" if said else "")
