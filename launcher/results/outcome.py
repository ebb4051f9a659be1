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

from launcher.files import write_atomic
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
    write_atomic(run_dir / FILE, (json.dumps(asdict(made), indent=2) + "\n").encode())
    return made


def read(run_dir: Path) -> Optional[Outcome]:
    """The run's outcome, or None (none written, or not one tfcompose writes)."""
    path = Path(run_dir) / FILE
    try:
        if path.is_symlink() or path.stat().st_size > MAX_BYTES:
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
        made = Outcome(**{k: doc[k] for k in ("cluster", "run", "state", "message", "collected", "schema")})
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    texts = (made.cluster, made.run, made.message, made.collected)
    if made.schema != 1 or made.state not in STATES or not all(isinstance(t, str) for t in texts):
        return None
    return made
