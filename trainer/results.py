"""results.json: its one owner. The trainer writes it (`results_doc`: on the chief, which in a
parallel search knows every host's trials through its queue), the report reads it (`load`), and
the one rule for the best trial (`ranked`, `best`) is here for every reader.

Schema 1: {schema, mode, best, candidates[], workers, replicas, restarts, class_names, images,
started, finished, tensorflow}; each candidate has at least the keys in CANDIDATE_KEYS, and its
`history` is a CSV path relative to the run folder.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from trainer.errors import BadInput

SCHEMA = 1
NUMBER, TEXT = (int, float), str
CANDIDATE_KEYS = {"candidate": TEXT, "val_accuracy": NUMBER, "val_loss": NUMBER, "train_seconds": NUMBER,
                  "images_per_second": NUMBER, "params": int, "epochs": int}
# Top-level keys a reader uses, when present: (type, what is expected, a check of the value).
OPTIONAL_KEYS = {"workers": (int, "an integer ≥ 1", lambda v: v >= 1), "replicas": (int, "an integer ≥ 1", lambda v: v >= 1),
                 "restarts": (int, "an integer ≥ 0", lambda v: v >= 0), "mode": (str, "'sync' or 'parallel'",
                 lambda v: v in ("sync", "parallel")), "started": (str, "a time", lambda v: len(v) <= 64),
                 "finished": (str, "a time", lambda v: len(v) <= 64), "precision": (str, "a precision name", lambda v: len(v) <= 64),
                 "class_names": (list, "a list of names", lambda v: all(isinstance(n, str) for n in v)),
                 "images": (dict, "a mapping of counts", lambda v: all(isinstance(n, int) for n in v.values()))}
EXPECTED = {TEXT: "text", NUMBER: "a number", int: "an integer"}
STATES = ("complete", "pruned", "retried", "failed", "running", "waiting")
# A trial's keys a reader uses, when present (a search a study drove writes them).
OPTIONAL_RECORD_KEYS = {
    "state": (str, f"one of {', '.join(STATES)}", lambda v: v in STATES),
    "curve": (list, "a list of numbers", lambda v: len(v) <= 100_000 and all(_number(x) for x in v)),
    "hyperparameters": (dict, "a mapping of values", lambda v: all(isinstance(k, str) and (_number(x) or isinstance(x, str))
                                                                  for k, x in v.items())),
    "host": (str, "a host name", lambda v: len(v) <= 64),
    # The trial's wall clock (UTC unix seconds, the clock of the host that trained it), and what the
    # launcher's telemetry measured over it (added at collect: launcher/telemetry/assemble.py).
    "started_at": (NUMBER, "a time in UTC unix seconds", lambda v: _real(v) and 0 <= v <= 1e11),
    "ended_at": (NUMBER, "a time in UTC unix seconds", lambda v: _real(v) and 0 <= v <= 1e11),
    "gpu_hours": (NUMBER, "GPU-hours ≥ 0", lambda v: _real(v) and 0 <= v <= 1e9),
    "gpu_utilization": (NUMBER, "a percentage 0–100", lambda v: _real(v) and 0 <= v <= 100),
    "energy_wh": (NUMBER, "watt-hours ≥ 0", lambda v: _real(v) and 0 <= v <= 1e12),
    "cpu_hours": (NUMBER, "CPU core-hours ≥ 0", lambda v: _real(v) and 0 <= v <= 1e9),
    "telemetry_coverage": (NUMBER, "a share 0–1", lambda v: _real(v) and 0 <= v <= 1),
}
SEARCH_KEYS = {"sampler": str, "pruner": str, "trials": int, "reduction_factor": int, "min_epochs": int,
               "max_epochs": int, "rungs": list, "hosts": list, "lost": dict}


def _number(value) -> bool:
    return _real(value)


def _search_ok(search) -> bool:
    return isinstance(search, dict) and all(isinstance(search[k], t) and not isinstance(search[k], bool)
                                            for k, t in SEARCH_KEYS.items() if k in search) \
        and all(isinstance(r, int) for r in search.get("rungs", [])) \
        and all(isinstance(h, str) and isinstance(v, list) and all(isinstance(n, str) for n in v)
                for h, v in search.get("lost", {}).items())


# Trials trained to the end come first, then pruned ones (real models, stopped behind), then the
# rest (lost, failed: figures of a model nobody kept).
TIERS = {"complete": 0, "pruned": 1}


def rank_key(record: dict) -> tuple:
    """The one rule for the best trial: a complete trial before a pruned one before any other; then
    highest val_accuracy, then lowest val_loss; a trial whose figures are not numbers (NaN: it
    diverged) ranks last of its tier. Sorting is stable: ties keep trial order."""
    acc, loss = record["val_accuracy"], record["val_loss"]
    return (TIERS.get(record.get("state", "complete"), 2), -acc if math.isfinite(acc) else math.inf,
            loss if math.isfinite(loss) else math.inf)


def score(val_accuracy: float, val_loss: float) -> float:
    """rank_key as one number, for the search's study (its pruner and sampler see one figure per
    epoch): the accuracy, less a tie-break far below any accuracy step (1e-12 per unit of loss,
    capped at 1000), so two trials at the same accuracy (at chance after a first epoch, say) are
    told apart by their loss as the leaderboard does. NaN when the accuracy is not a number."""
    if not math.isfinite(val_accuracy):
        return math.nan
    loss = min(val_loss, 1000.0) if math.isfinite(val_loss) else 1000.0
    return val_accuracy - 1e-12 * max(loss, 0.0)


def ranked(records: list[dict]) -> list[dict]:
    return sorted(records, key=rank_key)


def best(records: list[dict]) -> dict:
    return ranked(records)[0]


def better(record: dict, than) -> bool:
    """Whether `record` ranks above `than` (None: there is nothing yet)."""
    return than is None or rank_key(record) < rank_key(than)


class ResultsError(BadInput):
    """A results.json that is not one tfcompose wrote."""


def safe_name(candidate: str) -> str:
    """A file name for a candidate: `pkg.mod:build` → `pkg.mod_build`."""
    return re.sub(r"[^A-Za-z0-9_.@=,-]", "_", candidate)


@contextmanager
def write_dir(results_dir: Path, chief: bool) -> Iterator[Path]:
    """The chief writes into the real folder; every other worker into a temp dir it then removes.

    All workers must run the same saving code (the variables' all-reduce needs them all),
    but only the chief's files are kept.
    """
    if chief:
        results_dir.mkdir(parents=True, exist_ok=True)
        yield results_dir
        return
    temp = Path(tempfile.mkdtemp(prefix="tfcompose-worker-"))
    try:
        yield temp
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def results_doc(state, workers: int, replicas: int, data, started, mode: str, precision: str = "float32",
                records: list | None = None, search: dict | None = None) -> dict:
    """results.json: schema 1. `restarts` counts how often the search was resumed. A search a
    study drove gives every trial's record (`records`, each with its `state`) and its settings
    (`search`: sampler, pruner, rungs, the hosts lost)."""
    import datetime as dt
    import tensorflow as tf
    records = records if records is not None else state.done
    top = best(records)
    extra = {"search": search} if search is not None else {}
    return {
        "schema": SCHEMA,
        "best": {"candidate": top["candidate"], "val_accuracy": top["val_accuracy"],
                 **({"host": top["host"]} if top.get("host") else {})},
        "candidates": records, **extra,
        "workers": workers, "replicas": replicas,
        "restarts": state.starts - 1,
        "mode": mode,
        "precision": precision,
        "class_names": data.class_names,
        "images": {"train": data.train_count, "val": data.val_count},
        "skipped_images": {"count": len(data.skipped), "files": data.skipped[:100]},
        "started": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "tensorflow": tf.__version__,
    }


def load(folder: Path) -> dict:
    """A run folder's results.json, checked: every reader gets the keys it relies on."""
    path = Path(folder) / "results.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except RecursionError:
        raise ResultsError(f"{path}: Received JSON nested too deep. Expected a tfcompose results.json.") from None
    except (OSError, ValueError) as exc:
        raise ResultsError(f"{path}: cannot read results ({exc}). Expected a run folder from `tfcompose collect` "
                           "or the simulation's runs/local.") from None
    check(doc, str(path))
    return doc


def check(doc, where: str) -> None:
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("candidates"), list) \
            or not doc["candidates"]:
        raise ResultsError(f"{where}: Received no candidates. Expected a tfcompose results.json (schema {SCHEMA}).")
    for i, record in enumerate(doc["candidates"]):
        check_record(record, f"{where}: candidates[{i}]")
    if "search" in doc and not _search_ok(doc["search"]):
        raise ResultsError(f"{where}: search: Received {_shown(doc['search'])}. Expected the search's settings "
                           "(sampler, pruner, trials, rungs, the hosts lost).")
    for key, (kind, expected, fits) in OPTIONAL_KEYS.items():
        value = doc.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool) or not fits(value)):
            raise ResultsError(f"{where}: {key}: Received {_shown(value)}. Expected {expected}.")


def check_record(record, where: str) -> None:
    """One trial's record as results.json holds it (also what a host sends the chief's queue)."""
    bad = [k for k, kind in CANDIDATE_KEYS.items() if not isinstance(record, dict) or not isinstance(record.get(k), kind)
           or isinstance(record.get(k), bool) or (kind is NUMBER and not _real(record[k]))]
    if bad:
        got = record.get(bad[0]) if isinstance(record, dict) else record
        raise ResultsError(f"{where}.{bad[0]}: Received {_shown(got)}. Expected {EXPECTED[CANDIDATE_KEYS[bad[0]]]}.")
    for key, (kind, expected, fits) in OPTIONAL_RECORD_KEYS.items():
        value = record.get(key)
        if value is not None and (not isinstance(value, kind) or not fits(value)):
            raise ResultsError(f"{where}.{key}: Received {_shown(value)}. Expected {expected}.")
    history = record.get("history", "")
    if not isinstance(history, str) or history.startswith("/") or ".." in history.split("/"):
        raise ResultsError(f"{where}.history: Received {_shown(history)}. Expected a path inside the run folder.")


# What a host of a parallel search may tell the chief about a trial it trained: each figure's
# check. Everything else in the record the chief knows itself (the trial's name and values, its
# host, whether the pruner stopped it), so a host cannot write it.
HOST_FIGURES = {
    "val_accuracy": lambda v: _real(v) and (math.isnan(v) or 0 <= v <= 1),
    "val_loss": lambda v: _real(v) and (math.isnan(v) or v >= 0),
    "train_seconds": lambda v: _real(v) and 0 <= v <= 1e9,
    "images_per_second": lambda v: _real(v) and 0 <= v <= 1e12,
    "params": lambda v: _whole(v, 1e12), "epochs": lambda v: _whole(v, 100_000), "epochs_run": lambda v: _whole(v, 100_000),
    "resumed_from_epoch": lambda v: _whole(v, 100_000), "start": lambda v: _whole(v, 1_000_000),
    "stopped_early": lambda v: isinstance(v, bool),
    "started_at": lambda v: _real(v) and 0 <= v <= 1e11, "ended_at": lambda v: _real(v) and 0 <= v <= 1e11,
    "curve": lambda v: isinstance(v, list) and len(v) <= 100_000 and all(_real(x) and (math.isnan(x) or 0 <= x <= 1) for x in v),
}


def trial_record(trial, figures: dict, host: str = "") -> dict:
    """A trial's record as results.json holds it, made in one place for every search a study drives:
    what the chief knows of the trial (its name, values, history file) and the figures its host
    reported (checked by `host_figures` when they crossed the network). The study adds its state."""
    values = {"learning_rate": trial.learning_rate, "batch_per_replica": trial.batch_per_replica, **trial.hyperparameters}
    return {"candidate": trial.name, "architecture": trial.candidate, "learning_rate": trial.learning_rate,
            "batch_per_replica": trial.batch_per_replica, **figures, "trial": trial.number,
            **({"host": host} if host else {}), "hyperparameters": values,
            "history": f"history/{safe_name(trial.name)}.csv"}


def host_figures(sent, classes: int, where: str) -> dict:
    """The figures a host sent for its trial, checked (a ResultsError names the first that is not
    what it should be); its confusion matrix when it is classes × classes counts."""
    if not isinstance(sent, dict):
        raise ResultsError(f"{where}: Received {_shown(sent)}. Expected a trial's figures.")
    out = {}
    for key, fits in HOST_FIGURES.items():
        if key not in sent:
            continue
        if not fits(sent[key]):
            raise ResultsError(f"{where}.{key}: Received {_shown(sent[key])}. Expected {key.replace('_', ' ')} as a trainer writes it.")
        out[key] = sent[key]
    matrix = sent.get("confusion_matrix")
    if matrix is not None:
        if not (isinstance(matrix, list) and len(matrix) == classes and all(
                isinstance(row, list) and len(row) == classes and all(_whole(n, 1e12) for n in row) for row in matrix)):
            raise ResultsError(f"{where}.confusion_matrix: Received {_shown(matrix)}. Expected {classes} × {classes} counts.")
        out["confusion_matrix"] = matrix
    return out


def _real(value) -> bool:
    return isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**53)


def _whole(value, limit: float) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= limit


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def write_json_atomic(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def leaderboard(records: list[dict]) -> str:
    """A plain-text table, best first (rich is not assumed inside the TensorFlow image)."""
    header = ["rank", "candidate", "val_acc", "val_loss", "train_s", "img/s", "params"]
    rows = [[str(i), r["candidate"], f"{r['val_accuracy']:.4f}", f"{r['val_loss']:.4f}",
             f"{r['train_seconds']:.1f}", f"{r['images_per_second']:.0f}", f"{r['params']:,}"]
            for i, r in enumerate(ranked(records), start=1)]
    widths = [max(len(row[c]) for row in [header, *rows]) for c in range(len(header))]
    line = lambda row: "  ".join(cell.ljust(w) if c < 2 else cell.rjust(w) for c, (cell, w) in enumerate(zip(row, widths)))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])
