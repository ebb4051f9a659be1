"""An installation on a host followed to its end (was in stage.py): the host's install log read as
it grows, a bounded piece at a time, each step and each wait said, apt's progress at most every
PROGRESS_S; its end read from its status file, and its failure a RemoteError with the end of the log.
"""
from __future__ import annotations

import collections
import time
from typing import Optional

from launcher.bootstrap import commands, facts as facts_mod
from launcher.errors import RemoteError
from launcher.inventory.model import Host
from launcher.text import one_line, printable

POLL_S = 1.0
LOOK_TIMEOUT_S = 60.0
PROGRESS_S = 5.0            # apt's progress (Unpacking, Setting up) is said at most this often
KEEP_LINES = 12             # the end of the host's install log kept for an error


def follow(conn, host: Host, timeout_s: float, reporter) -> None:
    """Read the host's installation log as it grows, saying each step, until it ends; its failure
    as a RemoteError with the end of the log."""
    offset, deadline, failure = 0, time.monotonic() + timeout_s, ""
    tail: collections.deque[str] = collections.deque(maxlen=KEEP_LINES)
    said = {"at": 0.0}          # when apt's progress was last said (at most every PROGRESS_S)
    while True:
        status, alive, size, text = _look(conn, offset)
        offset = min(size, offset + commands.LOG_READ)
        for line in text.splitlines():
            failure = _said(host.name, line, reporter, tail, said) or failure
        if status is not None and offset >= size:
            break
        if status is None and not alive:
            raise RemoteError(host.name, reason="the installation on the host stopped before it finished (killed, or the "
                              "host restarted); run tfcompose bootstrap again to go on", stderr="\n".join(tail))
        if time.monotonic() > deadline:
            raise RemoteError(host.name, reason=f"still installing after {timeout_s:.0f} s; it goes on on the host "
                              f"({facts_mod.STATE_DIR}/run.log): run tfcompose bootstrap again to follow it")
        if not text:
            conn.cancel.wait(POLL_S)
            conn.check_cancel()
    if status != 0:
        raise RemoteError(host.name, reason=failure or f"the installation ended with status {status}",
                          stderr="" if failure else "\n".join(tail))


def _look(conn, offset: int) -> tuple[Optional[int], bool, int, str]:
    answer = conn.run(commands.look(offset), timeout=LOOK_TIMEOUT_S, limit=commands.LOG_READ + 4096).stdout
    head, _, text = answer.partition("---\n")
    values = dict(line.split("=", 1) for line in head.splitlines() if "=" in line)
    status = int(values["status"]) if values.get("status", "").isdigit() else None
    size = int(values["size"]) if values.get("size", "").isdigit() else 0
    return status, values.get("alive") == "yes", size, text


def _said(host: str, line: str, reporter, tail, said: dict) -> str:
    """One line of the install log: a step or a wait is reported; a failure is returned."""
    line = printable(line).strip()
    if line.startswith("TFC-STEP "):
        kind, _, what = line[9:].partition(" ")
        reporter.stage(host, "installing" if kind == "install" else kind, what[:200])
    elif line.startswith("TFC-WAIT "):
        reporter.stage(host, "waiting", line[9:][:200])
    elif line.startswith("TFC-FAIL "):
        return one_line(line[9:], 400)
    elif line.startswith(("Unpacking ", "Setting up ")):
        if time.monotonic() - said["at"] >= PROGRESS_S:
            said["at"] = time.monotonic()
            reporter.stage(host, "installing", line[:120])
        tail.append(line)
    elif line and not line.startswith("TFC-"):
        tail.append(line[:300])
    return ""
