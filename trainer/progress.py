"""progress-<task>.json: where one worker is in the search, rewritten atomically after every
epoch. Its one owner: the trainer writes it (`Tracker`), the launcher reads it (`parse`, `eta`) at
every poll of `up --wait` and `watch`, over the SSH connection it already holds.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Optional

SCHEMA = 1
MAX_BYTES = 16384
RECENT = 20       # the last epochs, so that a reader polling every few seconds misses none


def file_name(task: str) -> str:
    return f"progress-{task.replace(':', '-')}.json"


@dataclass(frozen=True)
class Progress:
    task: str
    trial_index: int            # 1-based
    trials: int
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
    # the chief of a search a study drives: {done, pruned, running, left, best, best_val_accuracy}
    search: dict = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        """How much of the whole search is done (every trial counted as `epochs` epochs)."""
        total = max(self.trials * self.epochs, 1)
        return min(1.0, ((self.trial_index - 1) * self.epochs + self.epoch) / total)

    def eta_seconds(self, trial_index: Optional[int] = None, epoch: Optional[int] = None) -> Optional[float]:
        """From the epochs done (by default, up to now): the epochs left in this and the later
        trials × seconds per epoch (early stopping can only make it shorter)."""
        if self.done and trial_index is None:
            return 0.0
        if not self.seconds_per_epoch > 0:
            return None
        trial_index = self.trial_index if trial_index is None else trial_index
        epoch = self.epoch if epoch is None else epoch
        left = (self.epochs - epoch) + (self.trials - trial_index) * self.epochs
        return max(left, 0) * self.seconds_per_epoch


def parse(text: str) -> Optional[Progress]:
    """A progress document, or None when it is not one the trainer writes (hosts are untrusted)."""
    if len(text) > MAX_BYTES:
        return None
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            return None
        values = {f.name: doc[f.name] if f.name != "search" else doc.get("search", {}) for f in fields(Progress)}
        kinds = {f.name: f.type for f in fields(Progress)}
        for name, value in values.items():
            want = {"str": str, "int": int, "float": (int, float), "bool": bool, "list": list, "dict": dict}[kinds[name]]
            if not isinstance(value, want) or (kinds[name] != "bool" and isinstance(value, bool)) \
                    or not _sane(value):
                return None
        if not all(_epoch_entry(e) for e in values["recent"]) or not _search_summary(values["search"]):
            return None
        return Progress(**values)
    except (ValueError, KeyError, TypeError, RecursionError):
        return None


ENTRY = (int, str, int, int, float, float, float, float, float)
LARGEST = 1e12      # no count, time or rate the trainer writes comes near it


def _sane(value) -> bool:
    """A number the trainer could have written: finite and of a sane size; text of a sane length."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return math.isfinite(value) and abs(value) <= LARGEST
    return not isinstance(value, str) or len(value) <= 300


SUMMARY = {"done": int, "pruned": int, "running": int, "left": int, "best": str, "best_val_accuracy": (int, float)}


def _search_summary(doc: dict) -> bool:
    return not doc or (set(doc) == set(SUMMARY) and all(isinstance(doc[k], t) and not isinstance(doc[k], bool)
                                                        and _sane(doc[k]) for k, t in SUMMARY.items()))


def _epoch_entry(entry) -> bool:
    return (isinstance(entry, list) and len(entry) == len(ENTRY)
            and all(isinstance(v, (int, float) if k is float else k) and not isinstance(v, bool) and _sane(v)
                    for v, k in zip(entry, ENTRY)))


class Tracker:
    """The trainer's side: counts trials and epochs over the whole search, writes after each epoch."""

    def __init__(self, folder: Path, task: str, trials: int, restarts: int):
        self.path = Path(folder) / file_name(task)
        self.task, self.trials, self.restarts = task, trials, restarts
        self.epoch_seconds: list[float] = []
        self.recent: list[list] = []
        self.search: dict = {}       # the chief's view of a search a study drives (Study.counts)

    def epoch_done(self, trial_index: int, trial: str, epoch: int, epochs: int, seconds: float,
                   images_per_second: float, logs: dict) -> None:
        self.epoch_seconds.append(seconds)
        clean = {k: (v if math.isfinite(v) else -1.0) for k, v in logs.items()}
        metrics = [clean["loss"], clean["accuracy"], clean["val_loss"], clean["val_accuracy"]]
        self.recent = (self.recent + [[trial_index, trial, epoch, epochs, *metrics, round(images_per_second, 1)]])[-RECENT:]
        self._write(Progress(self.task, trial_index, self.trials, trial, epoch, epochs,
                             sum(self.epoch_seconds) / len(self.epoch_seconds), round(images_per_second, 1),
                             *metrics, self.restarts, time.time(), recent=self.recent, search=self.search))

    def finished(self) -> None:
        if self.path.exists():
            current = parse(self.path.read_text())
            if current:
                self._write(Progress(**{**asdict(current), "done": True, "updated": time.time(),
                                        "search": self.search or current.search}))

    def _write(self, progress: Progress) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(self.path.name + ".tmp")
            tmp.write_text(json.dumps(asdict(progress), separators=(",", ":")))
            os.replace(tmp, self.path)
        except OSError:
            pass  # progress is a courtesy: a full or read-only disk must not stop training
