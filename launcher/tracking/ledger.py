"""tracking.json in a run folder: where the run was tracked and what is there (its one owner).

Written by collect and `tfcompose track`; read by `tfcompose track` (the tracker, the experiment
and the search run's params of a run tracked before, when no inventory is given: a run collected
while the tracker was down is sent later as the inventory would have sent it) and by the CLI's
closing line. It holds no
secret: the tracker's URI is kept as `secrets.shown` says it.
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Optional

from launcher import runfiles
from launcher.text import scrub

FILE = "tracking.json"
SCHEMA = 1
MAX_BYTES = 1 << 20


@dataclass
class Ledger:
    tracker: str                       # the URI as shown (no user part, no query)
    experiment: str
    experiment_id: str = ""
    search_run: str = ""               # the parent run's id
    trials: dict = field(default_factory=dict)      # trial → its run's id
    model_id: str = ""
    registered_as: str = ""
    version: str = ""
    complete: bool = False             # everything of the run is on the tracker
    pending: str = ""                  # why not (the tracker's error, or no results yet)
    note: str = ""                     # what was sent otherwise than asked (no model in MLflow's format)
    search_params: dict = field(default_factory=dict)   # the search run's params as the inventory gave them
    updated: str = ""
    schema: int = SCHEMA

    def write(self, run_dir: Path) -> Path:
        """Written whole, every text scrubbed of the secrets this process knows (launcher/text.py)."""
        self.updated = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        return runfiles.write_bytes(Path(run_dir), FILE, scrub(json.dumps(asdict(self), indent=2) + "\n").encode())

    def url(self) -> str:
        """The search in MLflow's UI (http trackers only)."""
        if not self.tracker.startswith(("http://", "https://")) or not (self.experiment_id and self.search_run):
            return ""
        return f"{self.tracker.rstrip('/')}/#/experiments/{self.experiment_id}/runs/{self.search_run}"


def read(run_dir: Path) -> Optional[Ledger]:
    """The run's ledger, or None when there is none or it is not one tfcompose wrote (a link, a
    FIFO, a device: never followed, never waited on)."""
    try:
        doc = json.loads(runfiles.read_text(Path(run_dir), FILE, MAX_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return None
    kinds = {f.name: f.type for f in fields(Ledger)}
    want = {"str": str, "bool": bool, "int": int, "dict": dict}
    values = {k: doc.get(k) for k in kinds if k in doc}
    if not all(isinstance(v, want[kinds[k]]) for k, v in values.items()) or "tracker" not in values \
            or "experiment" not in values:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in values.get("trials", {}).items()):
        return None
    if not _params(values.get("search_params", {})):
        values["search_params"] = {}        # not what send wrote: the run's params come from results.json then
    return Ledger(**values)


def _params(params: dict) -> bool:
    """MLflow params as it takes them: a key of ≤ 250 characters, a value of ≤ 6000."""
    return all(isinstance(k, str) and isinstance(v, str) and 0 < len(k) <= 250 and len(v) <= 6000
               for k, v in params.items())


def summary(run_dir: Path) -> Optional[str]:
    """One line on where the run is tracked, or why it is not all there yet."""
    ledger = read(run_dir)
    if ledger is None:
        return None
    if ledger.complete:
        where = ledger.url() or f"{ledger.tracker}, experiment {ledger.experiment!r}"
        model = f"; best model registered as {ledger.registered_as} version {ledger.version}" if ledger.version else ""
        note = f" ({ledger.note})" if ledger.note else ""
        return f"tracked in MLflow: {len(ledger.trials)} trial run(s) under {where}{model}{note}"
    return (f"not all sent to MLflow at {ledger.tracker} ({ledger.pending}); "
            f"`tfcompose track {run_dir}` sends the rest")
