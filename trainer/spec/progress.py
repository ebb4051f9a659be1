"""Where the training is, for the launcher's live view. The one owner of two files, each rewritten
atomically in the run's results folder and read by the launcher over the SSH connection it holds:

- `progress-<task>.json` (`Progress`, written by each worker's `Tracker` after every epoch): the
  trial and epoch this worker is at, its pace and last figures. `scope` says what its trial count
  means: `search` (every worker trains every trial: trial i of the search's n) or `host` (a parallel
  search: this host's own i-th trial; the search's total is the chief's to say).
- `search-progress.json` (`SearchProgress`, written by the chief's trial queue every few seconds in a
  parallel search, whatever the chief's own training is doing): how many trials are done, pruned,
  failed, running and left, the best so far, and per host its trial, epoch and pace.

The ETA is decided here, from those documents alone: the epochs left in the trials under way, plus
the trials left × the epochs a trial is expected to train (fewer than all when a pruner stops most),
at the pace each host has shown.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Optional

SCHEMA = 2
MAX_BYTES = 16384
SEARCH_FILE = "search-progress.json"
SEARCH_MAX_BYTES = 65536
MAX_HOSTS = 256
RECENT = 20       # the last epochs, so that a reader polling every few seconds misses none


def file_name(task: str) -> str:
    return f"progress-{task.replace(':', '-')}.json"


@dataclass(frozen=True)
class Progress:
    task: str
    trial_index: int            # 1-based
    trials: int                 # scope `search`: the search's trials; `host`: 0 (the chief's to say)
    trial: str
    epoch: int                  # epochs finished in this trial
    epochs: int
    seconds_per_epoch: float    # mean over the epochs this process finished
    images_per_second: float
    loss: float
    accuracy: float
    val_loss: float
    val_accuracy: float
    restarts: int
    updated: float              # time.time() on the worker
    done: bool = False
    schema: int = SCHEMA
    # the last RECENT epochs: [trial_index, trial, epoch, epochs, loss, accuracy, val_loss, val_accuracy, img/s]
    recent: list = field(default_factory=list)
    # the chief of a sync search a study drives: Study.counts() and the epochs a trial is expected to train
    search: dict = field(default_factory=dict)
    scope: str = "search"
    # beside each of `recent`: [when that epoch ended, when its trial started] (UTC unix seconds, the
    # worker's clock), for a tracker's times; a document from before it has none
    epoch_times: list = field(default_factory=list)

    @property
    def fraction(self) -> float:
        """How much is done: of the whole search (scope `search`), or of this host's trial (`host`)."""
        if self.scope == "host":
            return min(1.0, self.epoch / max(self.epochs, 1))
        total = max(self.trials * self.epochs, 1)
        return min(1.0, ((self.trial_index - 1) * self.epochs + self.epoch) / total)

    def eta_seconds(self, trial_index: Optional[int] = None, epoch: Optional[int] = None) -> Optional[float]:
        """From the epochs done (by default, up to now): the epochs left in this trial, plus the trials
        left × the epochs one is expected to train, × seconds per epoch. None in a parallel search
        (its ETA is the search's: SearchProgress) or before a first epoch."""
        if self.done and trial_index is None:
            return 0.0
        if self.scope == "host" or not self.seconds_per_epoch > 0:
            return None
        trial_index = self.trial_index if trial_index is None else trial_index
        epoch = self.epoch if epoch is None else epoch
        if self.search:
            left_trials = self.search["left"]
            expected = self.search.get("expected_epochs") or self.epochs
        else:
            left_trials, expected = self.trials - trial_index, self.epochs
        return max((self.epochs - epoch) + left_trials * expected, 0) * self.seconds_per_epoch


def parse(text: str) -> Optional[Progress]:
    """A progress document, or None when it is not one the trainer writes (hosts are untrusted)."""
    if len(text) > MAX_BYTES:
        return None
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            return None
        values = {f.name: doc[f.name] if f.name not in OPTIONAL else doc.get(f.name, OPTIONAL[f.name])
                  for f in fields(Progress)}
        if not all(_typed(values[f.name], f.type) for f in fields(Progress)):
            return None
        if not all(_epoch_entry(e) for e in values["recent"]) or not _search_summary(values["search"]) \
                or values["scope"] not in ("search", "host") or not _epoch_times(values["epoch_times"], values["recent"]):
            return None
        return Progress(**values)
    except (ValueError, KeyError, TypeError, RecursionError):
        return None


ENTRY = (int, str, int, int, float, float, float, float, float)
OPTIONAL = {"epoch_times": []}       # fields a document written before them lacks


def _epoch_times(times, recent: list) -> bool:
    """Empty, or one [ended, started] pair of times for each of `recent`."""
    return times == [] or (len(times) == len(recent) and all(
        isinstance(t, list) and len(t) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                    and _sane(v) and v >= 0 for v in t) for t in times))
LARGEST = 1e12      # no count, time or rate the trainer writes comes near it
KINDS = {"str": str, "int": int, "float": (int, float), "bool": bool, "list": list, "dict": dict}


def _typed(value, kind: str) -> bool:
    want = KINDS[kind]
    return isinstance(value, want) and (kind == "bool" or not isinstance(value, bool)) and _sane(value)


def _sane(value) -> bool:
    """A number the trainer could have written: finite and of a sane size; text of a sane length."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return math.isfinite(value) and abs(value) <= LARGEST
    return not isinstance(value, str) or len(value) <= 300


SUMMARY = {"done": int, "pruned": int, "running": int, "left": int, "best": str, "best_val_accuracy": (int, float)}
SUMMARY_OPTIONAL = {"failed": int, "epochs_per_trial": (int, float), "expected_epochs": (int, float)}


def _search_summary(doc: dict) -> bool:
    if not doc:
        return True
    if not set(SUMMARY) <= set(doc) <= set(SUMMARY) | set(SUMMARY_OPTIONAL):
        return False
    kinds = {**SUMMARY, **SUMMARY_OPTIONAL}
    return all(isinstance(doc[k], kinds[k]) and not isinstance(doc[k], bool) and _sane(doc[k]) and
               (not isinstance(doc[k], (int, float)) or doc[k] >= -1) for k in doc)


def _epoch_entry(entry) -> bool:
    return (isinstance(entry, list) and len(entry) == len(ENTRY)
            and all(isinstance(v, (int, float) if k is float else k) and not isinstance(v, bool) and _sane(v)
                    for v, k in zip(entry, ENTRY)))


# --- the whole search (parallel mode): written by the chief's queue ---------------------------------
HOST_ENTRY = {"trial": str, "epoch": int, "epochs": int, "state": str, "seconds_per_epoch": (int, float),
              "trials": int, "silent_s": (int, float)}
HOST_STATES = ("training", "waiting", "lost", "quarantined", "done")


@dataclass(frozen=True)
class SearchProgress:
    done: int
    pruned: int
    failed: int
    running: int
    left: int
    best: str
    best_val_accuracy: float
    budget: int
    max_epochs: int
    expected_epochs: float      # the epochs a trial still to come is expected to train
    hosts: dict                 # host → HOST_ENTRY
    finished: bool
    note: str                   # why the search ended early, if it did
    updated: float              # time.time() on the chief
    schema: int = 1

    @classmethod
    def of(cls, counts: dict, budget: int, max_epochs: int, expected_epochs: float, hosts: dict, finished: bool,
           note: str = "") -> "SearchProgress":
        return cls(counts["done"], counts["pruned"], counts.get("failed", 0), counts["running"], counts["left"],
                   counts["best"], float(counts["best_val_accuracy"]), budget, max_epochs, float(expected_epochs),
                   hosts, finished, note[:300], time.time())

    def summary(self) -> dict:
        """The counts as a sync search's chief gives them (Progress.search)."""
        return {"done": self.done, "pruned": self.pruned, "failed": self.failed, "running": self.running,
                "left": self.left, "best": self.best, "best_val_accuracy": self.best_val_accuracy,
                "expected_epochs": self.expected_epochs}

    def _rates(self) -> dict[str, float]:
        return {h: 1.0 / e["seconds_per_epoch"] for h, e in self.hosts.items()
                if e["state"] == "training" and e["seconds_per_epoch"] > 0}

    def eta_seconds(self) -> Optional[float]:
        """The epochs left in the trials under way and in the trials left (each expected to train
        `expected_epochs`), over the epochs per second every training host manages together."""
        if self.finished:
            return 0.0
        rates = self._rates()
        if not rates:
            return None
        under_way = sum(max(e["epochs"] - e["epoch"], 0) for h, e in self.hosts.items() if h in rates)
        return (under_way + self.left * self.expected_epochs) / sum(rates.values())

    def host_eta_seconds(self, host: str) -> Optional[float]:
        """When `host` should be done: its trial's epochs left, plus its share of the trials left
        (shared in proportion to each host's pace), at its own pace."""
        rates, entry = self._rates(), self.hosts.get(host)
        if self.finished:
            return 0.0
        if host not in rates or entry is None:
            return None
        share = rates[host] / sum(rates.values())
        return (max(entry["epochs"] - entry["epoch"], 0) + share * self.left * self.expected_epochs) * entry["seconds_per_epoch"]


def parse_search(text: str) -> Optional[SearchProgress]:
    """A search-progress document, or None when it is not one the chief's queue writes."""
    if len(text) > SEARCH_MAX_BYTES:
        return None
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("schema") != 1:
            return None
        values = {f.name: doc[f.name] for f in fields(SearchProgress)}
        if not all(_typed(values[f.name], f.type) for f in fields(SearchProgress)):
            return None
        if any(values[k] < 0 for k in ("done", "pruned", "failed", "running", "left", "budget", "max_epochs",
                                       "expected_epochs")):
            return None
        hosts = values["hosts"]
        if len(hosts) > MAX_HOSTS or not all(isinstance(h, str) and len(h) <= 64 and _host_entry(e)
                                             for h, e in hosts.items()):
            return None
        return SearchProgress(**values)
    except (ValueError, KeyError, TypeError, RecursionError):
        return None


def _host_entry(entry) -> bool:
    return (isinstance(entry, dict) and set(entry) == set(HOST_ENTRY) and entry["state"] in HOST_STATES
            and all(isinstance(entry[k], t) and not isinstance(entry[k], bool) and _sane(entry[k])
                    and (not isinstance(entry[k], (int, float)) or entry[k] >= 0) for k, t in HOST_ENTRY.items()))


def write_search(path: Path, progress: SearchProgress) -> None:
    _write(Path(path), asdict(progress))


def _write(path: Path, doc: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(doc, separators=(",", ":")))
        os.replace(tmp, path)
    except OSError:
        pass  # progress is a courtesy: a full or read-only disk must not stop training


class Tracker:
    """The trainer's side: counts trials and epochs, writes after each epoch. `trials` 0: a host of
    a parallel search, counting its own trials (scope `host`)."""

    def __init__(self, folder: Path, task: str, trials: int, restarts: int):
        self.path = Path(folder) / file_name(task)
        self.task, self.trials, self.restarts = task, trials, restarts
        self.scope = "search" if trials else "host"
        self.epoch_seconds: list[float] = []
        self.recent: list[list] = []
        self.times: list[list] = []  # beside `recent`: [epoch ended, trial started]
        self.search: dict = {}       # the chief's view of a sync search a study drives (Study.counts)

    def epoch_done(self, trial_index: int, trial: str, epoch: int, epochs: int, seconds: float,
                   images_per_second: float, logs: dict, times: Optional[tuple[float, float]] = None) -> None:
        """`times`: when the epoch ended and when its trial started (UTC unix seconds; default now, now)."""
        self.epoch_seconds.append(seconds)
        clean = {k: (v if math.isfinite(v) else -1.0) for k, v in logs.items()}
        metrics = [clean["loss"], clean["accuracy"], clean["val_loss"], clean["val_accuracy"]]
        self.recent = (self.recent + [[trial_index, trial, epoch, epochs, *metrics, round(images_per_second, 1)]])[-RECENT:]
        now = time.time()
        self.times = (self.times + [list(times or (now, now))])[-RECENT:]
        _write(self.path, asdict(Progress(self.task, trial_index, self.trials, trial, epoch, epochs,
                                          sum(self.epoch_seconds) / len(self.epoch_seconds), round(images_per_second, 1),
                                          *metrics, self.restarts, now, recent=self.recent, search=self.search,
                                          scope=self.scope, epoch_times=self.times)))

    def finished(self) -> None:
        if self.path.exists():
            current = parse(self.path.read_text())
            if current:
                _write(self.path, asdict(Progress(**{**asdict(current), "done": True, "updated": time.time(),
                                                     "search": self.search or current.search})))
