"""One trial's record (its entry in results.json's `candidates`): one typed value from the host
that trained the trial to the file. results.py owns the document; this module owns the entry.

- built once where the trial ran (trainer/train/trial.py), and extended with `dataclasses.replace`
  as the search learns more of it: its start, curve, number and values (trainer/search/trial_loop.py),
  its state (trainer/search/study.py);
- checked once where it reaches the chief across the network (`from_json`: results_check's
  RECORD_KEYS, so the same one-line ResultsError words as a results.json's check);
- turned into JSON by `to_json` alone: for study.db, the backup's search state and results.json.

A key may be absent, which is not the same as null, and readers (and the golden files) tell them
apart: a complete trial of a study says `pruned_at_epoch: null` where a grid's trial has no such
key; a non-chief's `confusion_matrix` is null, a retried trial's is missing. A field left at
ABSENT is a key the JSON does not have. No TensorFlow or Optuna here (the launcher imports spec).
"""
from __future__ import annotations

import copy
import enum
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Union

from trainer.spec.results import safe_name
from trainer.spec.results_check import check_record

if TYPE_CHECKING:
    from trainer.spec.trials import Trial


class Absent(enum.Enum):
    """The value of a field whose key the record does not have (None is a value some keys take)."""
    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = Absent.ABSENT


@dataclass(frozen=True, kw_only=True)
class TrialRecord:
    """A trial's record. The fields are results.json's keys, in the order the file lists them; each
    key's check (type, range, required) is results_check.RECORD_KEYS's, applied by `from_json`."""
    candidate: str                                              # the trial's name
    architecture: Union[str, Absent] = ABSENT                   # the candidate (its model's name)
    learning_rate: Union[float, Absent] = ABSENT
    batch_per_replica: Union[int, Absent] = ABSENT
    val_accuracy: float
    val_loss: float
    train_seconds: float
    images_per_second: float
    epochs: int
    epochs_run: Union[int, Absent] = ABSENT
    resumed_from_epoch: Union[int, Absent] = ABSENT
    stopped_early: Union[bool, Absent] = ABSENT
    params: int
    history: Union[str, Absent] = ABSENT                        # the CSV's path inside the run folder
    started_at: Union[float, Absent] = ABSENT
    ended_at: Union[float, Absent] = ABSENT
    allreduce: Union[dict, Absent] = ABSENT                     # only when `allreduce:` is configured
    confusion_matrix: Union[list, None, Absent] = ABSENT        # None: a worker that keeps no files
    curve: Union[list, Absent] = ABSENT
    start: Union[int, Absent] = ABSENT
    trial: Union[int, Absent] = ABSENT                          # the study's trial number
    host: Union[str, Absent] = ABSENT
    hyperparameters: Union[dict, Absent] = ABSENT
    state: Union[str, Absent] = ABSENT                          # a grid's trial has none (complete)
    pruned_at_epoch: Union[int, None, Absent] = ABSENT          # None: a study's trial not pruned
    retry_of: Union[int, Absent] = ABSENT
    retried_as: Union[str, Absent] = ABSENT
    why: Union[str, Absent] = ABSENT
    # The launcher's telemetry over the trial: added at collect to the JSON (launcher/telemetry/assemble.py).
    gpu_hours: Union[float, Absent] = ABSENT
    gpu_utilization: Union[float, Absent] = ABSENT
    energy_wh: Union[float, Absent] = ABSENT
    cpu_hours: Union[float, Absent] = ABSENT
    telemetry_coverage: Union[float, Absent] = ABSENT
    # Keys this version does not know (a later version's), kept as they came: a record read and
    # written back loses none.
    unknown: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        """The record as results.json holds it: every key it has, in order. A copy: the document
        may be changed (a path prefixed, figures added) without changing the record."""
        doc = {key: getattr(self, key) for key in KEYS if getattr(self, key) is not ABSENT}
        return copy.deepcopy({**doc, **self.unknown})

    @classmethod
    def from_json(cls, doc, where: str) -> "TrialRecord":
        """A record as results.json, study.db or the chief's queue holds it, checked (a ResultsError
        names the first key that is not what its readers expect, as results.json's check says it)."""
        check_record(doc, where)
        doc = copy.deepcopy(doc)
        return cls(**{k: v for k, v in doc.items() if k in KEYS}, unknown={k: v for k, v in doc.items() if k not in KEYS})


KEYS = tuple(f.name for f in fields(TrialRecord) if f.name != "unknown")


def history_path(name: str) -> str:
    """A trial's history CSV, relative to the run folder (the chief writes it)."""
    return f"history/{safe_name(name)}.csv"


def chief_knows(trial: "Trial", host: str = "") -> dict:
    """The keys of a trial's record that the chief knows without its host (its name, values, number
    and history file; the host it gave the trial to): a host's figures never set them."""
    values = {"learning_rate": trial.learning_rate, "batch_per_replica": trial.batch_per_replica, **trial.hyperparameters}
    return {"candidate": trial.name, "architecture": trial.candidate, "learning_rate": trial.learning_rate,
            "batch_per_replica": trial.batch_per_replica, "trial": trial.number, **({"host": host} if host else {}),
            "hyperparameters": values, "history": history_path(trial.name)}


def of_host(trial: "Trial", figures: dict, host: str, where: str) -> TrialRecord:
    """On the chief: a trial's record from what it knows and the figures `host` sent (already
    checked by results_check.host_figures), checked whole as results.json will hold it."""
    return TrialRecord.from_json({**figures, **chief_knows(trial, host)}, where)

