"""What the tracker holds for a run, from what the run wrote (pure: no MLflow, no network).

- the search: one parent run, its params the inventory's `train:` settings and search space
  (dotted names: `search.learning_rate`), its tags the cluster, the run id and the hosts;
- each trial: one child run, named after the trial (`small_cnn#004`, `small_cnn@lr=0.01,bs=16`),
  printable, and found again by its key (`tfcompose.trial`: its name, or `name (2)` for the second
  trial of a results.json that names two alike, so two trials are never one run),
  its params the trial's values, one step per epoch (loss, accuracy, val_loss, val_accuracy),
  its state as a tag (`tfcompose.state`: complete, pruned, failed, retried) and a run status.

Epoch figures are written as the trainer's history CSV writes them (6 significant digits), live
from the progress files and later from the CSV alike, so a metric's history equals results.json's.

Times are the trials' own (the clock of the host that trained them), not the launcher's: a child
run starts at its trial's `started_at` and ends at its `ended_at` (results.json), and each epoch's
figures are stamped with that epoch's end (the history CSV's `ended_at`, live the progress file's),
so MLflow's durations and time axis are the training's.
"""
from __future__ import annotations

import getpass
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from launcher.report.epochs import history
from launcher.text import one_line, printable

PREFIX = "tfcompose."
EPOCH_METRICS = ("loss", "accuracy", "val_loss", "val_accuracy")
STEP_KEY = "val_accuracy"          # an epoch is on the tracker when this metric has its step
# Launcher-written fields, and paths inside the containers: not settings of the search.
NOT_PARAMS = {"search.queue", "search.hosts", "results_dir", "backup_dir", "allreduce.link_mbit_s"}
STATUS = {"complete": "FINISHED", "pruned": "FINISHED", "retried": "KILLED", "failed": "FAILED"}
MAX_PARAM = 6000                   # MLflow's longest param value
MAX_TAG = 5000
MAX_NAME = 250                     # a run name MLflow shows
MAX_KEY = 250                      # MLflow's longest param key


@dataclass(frozen=True)
class Epoch:
    trial: str
    step: int
    metrics: dict                   # name → float (NaN where the trainer had none)
    host: str = ""
    at: Optional[float] = None      # when the epoch ended (UTC unix seconds), if the trainer said
    started: Optional[float] = None     # when its trial started, if the trainer said (live only)


LATEST = 4e9                        # a time past 2096 is no time a trainer wrote


def seconds(value) -> Optional[float]:
    """A time as the trainer writes it (UTC unix seconds), or None for anything else."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and 0 < value < LATEST else None


def millis(value: Optional[float]) -> Optional[int]:
    """Seconds as MLflow's milliseconds (None stays None)."""
    return None if value is None else int(round(value * 1000))


def trial_times(record: dict) -> tuple[Optional[float], Optional[float]]:
    """The trial's own start and end (results.json's started_at, ended_at), each if usable; an end
    before its start is no end."""
    start, end = seconds(record.get("started_at")), seconds(record.get("ended_at"))
    return start, end if end is not None and (start is None or end >= start) else None


def search_times(doc: dict) -> tuple[Optional[float], Optional[float]]:
    """The search's start and end from results.json's `started` and `finished` (ISO 8601)."""
    import datetime as dt
    out = []
    for key in ("started", "finished"):
        try:
            when = dt.datetime.fromisoformat(str(doc.get(key, "")))
            out.append(seconds((when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)).timestamp()))
        except (ValueError, OverflowError, OSError):
            out.append(None)
    return out[0], out[1]


def figure(value) -> float:
    """A figure as the history CSV keeps it: 6 significant digits; NaN for what is not a number."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return math.nan
    return float(f"{value:.6g}") if math.isfinite(value) else math.nan


# --- the search ---------------------------------------------------------------------------------

def flatten(doc, prefix: str = "") -> dict[str, str]:
    """A nested settings document as MLflow params: dotted names; lists and ranges as compact JSON."""
    out: dict[str, str] = {}
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value and not _is_range(value):
            out.update(flatten(value, name + "."))
        elif value is not None and value != {} and name not in NOT_PARAMS:
            text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
            out[name] = text[:MAX_PARAM]
    return out


def _is_range(value: dict) -> bool:
    return set(value) <= {"uniform", "log_uniform", "integer", "log_integer"} and len(value) == 1


def search_params(train_settings: dict, hosts: list[str], mode: str) -> dict[str, str]:
    return {**flatten(train_settings), "hosts": str(len(hosts)), "mode": mode}


def search_tags(cluster: str, run_id: str, hosts: list[str], image: str = "") -> dict[str, str]:
    tags = {f"{PREFIX}kind": "search", f"{PREFIX}cluster": cluster, f"{PREFIX}run_id": run_id,
            f"{PREFIX}hosts": ",".join(hosts)[:MAX_TAG], "mlflow.source.name": "tfcompose",
            "mlflow.user": _user()}
    return {**tags, **({f"{PREFIX}image": image} if image else {})}


def search_name(cluster: str, run_id: str) -> str:
    return f"{cluster} {run_id}"


def settings_from_results(doc: dict) -> dict:
    """What results.json says of a run's settings, for a run tracked without its inventory."""
    keep = {k: doc[k] for k in ("mode", "precision", "workers", "replicas") if k in doc}
    search = {k: v for k, v in doc.get("search", {}).items() if k not in ("hosts", "lost")}
    return {**keep, **({"search": search} if search else {})}


def search_summary(doc: dict) -> tuple[dict[str, float], dict[str, str]]:
    """The parent's own figures and tags once the run has results: the best trial and its accuracy."""
    best = doc["best"]
    return ({"best_val_accuracy": figure(best["val_accuracy"]), "trials": float(len(doc["candidates"]))},
            {f"{PREFIX}best_trial": run_name(str(best["candidate"]))})


# --- a trial ------------------------------------------------------------------------------------

def run_name(trial: str) -> str:
    """A trial's name as MLflow shows it: one printable line (no escape sequence reaches its UI)."""
    return one_line(trial, MAX_NAME) or "(no printable name)"


def trial_keys(records: list[dict]) -> list[str]:
    """Each trial's identity on the tracker, in the order of `records`: its printable name, the
    second (third…) trial of one name `name (2)`: two trials are two runs whatever they are called,
    and a trial sent again (live, then at collect, then by `track`) finds its own run."""
    seen: dict[str, int] = {}
    keys = []
    for record in records:
        name = run_name(str(record["candidate"]))
        seen[name] = seen.get(name, 0) + 1
        keys.append(name if seen[name] == 1 else f"{name} ({seen[name]})")
    return keys


def param_key(name: str) -> str:
    """A searched value's name as MLflow takes a param key (letters, digits, `_-. /`)."""
    return re.sub(r"[^\w\-. /]", "_", printable(str(name)), flags=re.ASCII)[:MAX_KEY] or "_"


def trial_params(record: dict) -> dict[str, str]:
    """The trial's values: its architecture, learning rate, batch and each searched value."""
    values = {"architecture": record.get("architecture", record["candidate"].split("@")[0].split("#")[0]),
              "learning_rate": record.get("learning_rate"), "batch_per_replica": record.get("batch_per_replica"),
              "epochs": record.get("epochs")}
    values.update(record.get("hyperparameters") or {})
    return {param_key(k): printable(str(v))[:MAX_PARAM] for k, v in values.items() if v is not None}


def trial_tags(record: dict, best: Optional[str], hosts: list[str], key: Optional[str] = None) -> dict[str, str]:
    """The trial's tags; `key` its identity (trial_keys; its printable name by default)."""
    state = record.get("state", "complete")
    tags = {f"{PREFIX}trial": key or run_name(str(record["candidate"])), f"{PREFIX}state": state,
            **({f"{PREFIX}host": record.get("host") or ",".join(hosts)} if record.get("host") or hosts else {})}
    if record.get("pruned_at_epoch") is not None:
        tags[f"{PREFIX}pruned_at_epoch"] = str(record["pruned_at_epoch"])
    for said in ("retried_as", "why"):
        if isinstance(record.get(said), str):
            tags[f"{PREFIX}{said}"] = one_line(record[said], 500)
    if best is not None:         # the best trial's key (two trials of one name are not both the best)
        tags[f"{PREFIX}best"] = "true" if tags[f"{PREFIX}trial"] == best else "false"
    return tags


def trial_status(record: dict) -> str:
    return STATUS.get(record.get("state", "complete"), "FAILED")


def trial_summary(record: dict) -> dict[str, float]:
    """The figures the leaderboard ranks by (the trial's final evaluation, best weights restored)."""
    out = {"final_val_accuracy": record["val_accuracy"], "final_val_loss": record["val_loss"],
           "train_seconds": record["train_seconds"], "images_per_second": record["images_per_second"],
           "params_count": record["params"]}
    if isinstance(record.get("epochs_run"), int):
        out["epochs_run"] = record["epochs_run"]
    return {k: figure(v) for k, v in out.items()}


def trial_epochs(record: dict, rows: list[dict]) -> list[Epoch]:
    """Every epoch of the trial: its history CSV rows (`rows`, each epoch at its end when the CSV
    says), else its curve (val_accuracy only, at the trial's end)."""
    name = record["candidate"]
    if rows:
        return [Epoch(name, int(row["epoch"]), {k: figure(row.get(k)) for k in EPOCH_METRICS},
                      at=seconds(row.get("ended_at"))) for row in rows]
    end = trial_times(record)[1]
    return [Epoch(name, i, {STEP_KEY: figure(v)}, at=end) for i, v in enumerate(record.get("curve") or [], start=1)]


# --- live: a progress document ------------------------------------------------------------------

NOT_FINITE = -1.0     # trainer/spec/progress.py writes this for a figure that was not a number


def progress_epochs(progress, host: str) -> list[Epoch]:
    """The epochs a progress document lists (its last few, trainer/spec/progress.py's `recent`), each with
    its end and its trial's start when the document says (`epoch_times`)."""
    out = []
    times = progress.epoch_times or [(None, None)] * len(progress.recent)
    for (_index, trial, epoch, _epochs, loss, acc, val_loss, val_acc, _ips), (ended, began) in zip(progress.recent, times):
        values = dict(zip(EPOCH_METRICS, (loss, acc, val_loss, val_acc)))
        out.append(Epoch(run_name(str(trial)), epoch,
                         {k: math.nan if v == NOT_FINITE else figure(v) for k, v in values.items()}, host,
                         at=seconds(ended), started=seconds(began)))
    return out


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 (no user name: no tag value)
        return "unknown"


def history_rows(folder: Path, record: dict) -> list[dict]:
    """The trial's history CSV rows (the report's reader: it checks them)."""
    return history(folder, record)
