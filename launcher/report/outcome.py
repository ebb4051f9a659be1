"""outcome.json: how a collected run ended, in its own folder beside what it produced — its one
owner (collect writes it, `runs`, the report and `compare` read it). A run that failed says so,
with why, whether or not it left a results.json; a resumed run that then finishes overwrites it.

{"schema": 1, "cluster", "run", "state": finished | failed | running | unknown, "message", "collected"}
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from launcher import runfiles
from launcher.text import printable

FILE = "outcome.json"
STATES = ("finished", "failed", "running", "unknown")
MAX_BYTES = 65536


@dataclass(frozen=True)
class Outcome:
    cluster: str
    run: str
    state: str
    message: str
    collected: str
    schema: int = 1

    @property
    def failed(self) -> bool:
        return self.state == "failed"


def write(run_dir: Path, cluster: str, run: str, state: str, message: str = "") -> Outcome:
    made = Outcome(cluster, run, state if state in STATES else "unknown", printable(message)[:4000],
                   dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))
    run_dir.mkdir(parents=True, exist_ok=True)
    runfiles.write_bytes(run_dir, FILE, (json.dumps(asdict(made), indent=2) + "\n").encode())
    return made


def read(run_dir: Path) -> Optional[Outcome]:
    """The run's outcome, or None (none written, or not one tfcompose writes: a link, a FIFO…)."""
    try:
        return check(runfiles.read_text(Path(run_dir), FILE, MAX_BYTES))
    except (OSError, ValueError):
        return None


def damage(run_dir: Path) -> str:
    """Why outcome.json is not one tfcompose wrote ("" when it is, or there is none)."""
    path = Path(run_dir) / FILE
    try:
        if runfiles.found(Path(run_dir), FILE) is None:
            return ""
        made = check(runfiles.read_text(Path(run_dir), FILE, MAX_BYTES))
    except runfiles.RunFileError as exc:
        return exc.line
    except (OSError, ValueError) as exc:
        return f"{path}: cannot read it ({exc})"
    return "" if made is not None else f"{path}: Received a document tfcompose does not write. Expected its outcome.json."


def check(text: str) -> Optional[Outcome]:
    """outcome.json's text as an Outcome, or None when it is not one tfcompose writes."""
    try:
        doc = json.loads(text)
        made = Outcome(**{k: doc[k] for k in ("cluster", "run", "state", "message", "collected", "schema")})
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    texts = (made.cluster, made.run, made.message, made.collected)
    if made.schema != 1 or made.state not in STATES or not all(isinstance(t, str) for t in texts):
        return None
    return made
