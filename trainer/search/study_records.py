"""What the study keeps of each trial, read out (was in study.py): the attributes tfcompose sets
on a trial in study.db (`tfc:…`), results.json's record of a trial (the one its host sent, or, for
a trial that never finished, what the study knows of it) and the live view's counts."""
from __future__ import annotations

import json
import math

from trainer.spec import space
from trainer.spec.config import TrainConfig

NAME, RECORD, HOST, RETRY_OF, PRUNED_AT = "tfc:name", "tfc:record", "tfc:host", "tfc:retry_of", "tfc:pruned_at"
SEQ, DUPLICATE, NOT_ON = "tfc:seq", "tfc:duplicate_of", "tfc:not_on"
UNUSED = "tfc:never_handed_out"     # drawn as the chief stopped, before any host was given it
SPACE, EXHAUSTED, STOPPED = "tfc:space", "tfc:exhausted", "tfc:stopped"


def counts(trials: list, left: int) -> dict:
    """Where the search is, for the live view: trials done, pruned, failed, running, left (`left`
    of the budget and the retries, and those waiting), the best so far, and the epochs an ended
    trial trained on average (pruning makes it fewer)."""
    states = [t.state.name for t in trials]
    finished = [t for t in trials if t.state.name == "COMPLETE"]
    best = max(finished, key=lambda t: t.value) if finished else None
    ended = [len(t.intermediate_values) for t in trials if t.state.name in ("COMPLETE", "PRUNED")]
    return {"done": states.count("COMPLETE"), "pruned": states.count("PRUNED"),
            "failed": sum(1 for t in trials if json.loads(t.user_attrs.get(RECORD, "{}")).get("state") == "failed"),
            "running": states.count("RUNNING"), "left": left + states.count("WAITING"),
            "best": best.user_attrs.get(NAME, "") if best else "",
            "best_val_accuracy": json.loads(best.user_attrs[RECORD])["val_accuracy"] if best else -1.0,
            "epochs_per_trial": round(sum(ended) / len(ended), 2) if ended else 0.0}


def record_of(frozen, trial_of, cfg: TrainConfig) -> dict:
    """results.json's record of one trial: the record its host sent, or for a trial that never
    finished (its host lost), what the study knows of it (`trial_of`: the trial it was handed out as)."""
    # JSON, not a TrialRecord: for a trial that never finished the study keeps only part of one
    # (study.py's `_end`: its state, why, its retry), laid over what it knows here.
    sent = json.loads(frozen.user_attrs.get(RECORD, "{}"))
    record = sent if sent.get("state") in ("complete", "pruned") else {**_unfinished(frozen, trial_of, cfg), **sent}
    return {**record, "trial": frozen.number, "host": frozen.user_attrs.get(HOST, record.get("host", "")),
            **({"retry_of": frozen.user_attrs[RETRY_OF]} if RETRY_OF in frozen.user_attrs else {})}


def _unfinished(frozen, trial_of, cfg: TrainConfig) -> dict:
    # the scores reported per epoch: accuracies to within their loss tie-break (< 1e-9)
    curve = [round(float(frozen.intermediate_values[e]), 6) for e in sorted(frozen.intermediate_values)]
    trial = _values_of(frozen, trial_of)
    return {"candidate": frozen.user_attrs.get(NAME, f"trial {frozen.number}"),
            "architecture": trial.candidate if trial else "",
            **({"learning_rate": trial.learning_rate, "batch_per_replica": trial.batch_per_replica} if trial else {}),
            "val_accuracy": curve[-1] if curve else math.nan,
            "val_loss": math.nan, "train_seconds": 0.0, "images_per_second": 0.0, "params": 0,
            "epochs": space.max_epochs(cfg), "epochs_run": len(curve), "curve": curve,
            "state": {"FAIL": "failed", "RUNNING": "running", "WAITING": "waiting"}.get(frozen.state.name, "failed"),
            "hyperparameters": ({"learning_rate": trial.learning_rate, "batch_per_replica": trial.batch_per_replica,
                                 **trial.hyperparameters} if trial else {}),
            **_times(frozen)}


def _values_of(frozen, trial_of):
    """The trial as handed out, or None for one whose values were never all drawn (a chief killed
    mid-draw, in a study.db kept from before such trials were dropped, trainer/search/study.py)."""
    try:
        return trial_of(frozen) if "candidate" in frozen.params else None
    except KeyError:
        return None


def _times(frozen) -> dict:
    """A trial that never sent its figures (its host lost, its builder refused): from when it was
    handed out to when the study ended it (Optuna's own record, this machine's clock), as UTC unix
    seconds like a finished trial's started_at and ended_at."""
    out = {}
    for key, when in (("started_at", frozen.datetime_start), ("ended_at", frozen.datetime_complete)):
        if when is not None:
            out[key] = round(when.timestamp(), 3)       # Optuna's datetimes are naive local times
    return out
