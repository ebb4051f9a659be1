"""results.json: its one owner. The trainer writes it (`results_doc`), the launcher merges the
hosts' documents of a parallel search (`merge_parallel`), the report reads it (`load`).

Schema 1: {schema, mode, best, candidates[], workers, replicas, restarts, class_names, images,
started, finished, tensorflow}; each candidate has at least the keys in CANDIDATE_KEYS, and its
`history` is a CSV path relative to the run folder.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from trainer.errors import BadInput

SCHEMA = 1
CANDIDATE_KEYS = {"candidate": str, "val_accuracy": (int, float), "val_loss": (int, float),
                  "train_seconds": (int, float), "images_per_second": (int, float), "params": int, "epochs": int}


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


def results_doc(state, workers: int, replicas: int, data, started, mode: str, precision: str = "float32") -> dict:
    """results.json: schema 1. `restarts` counts how often the search was resumed."""
    import datetime as dt
    import tensorflow as tf
    best = max(state.done, key=lambda r: r["val_accuracy"])
    return {
        "schema": SCHEMA,
        "best": {"candidate": best["candidate"], "val_accuracy": best["val_accuracy"]},
        "candidates": state.done,
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
        bad = [k for k, kind in CANDIDATE_KEYS.items() if not isinstance(record, dict) or not isinstance(record.get(k), kind)
               or isinstance(record.get(k), bool)]
        if bad:
            raise ResultsError(f"{where}: candidates[{i}].{bad[0]}: Received "
                               f"{record.get(bad[0]) if isinstance(record, dict) else record!r}. Expected a {CANDIDATE_KEYS[bad[0]]}.")
        history = record.get("history", "")
        if not isinstance(history, str) or history.startswith("/") or ".." in history.split("/"):
            raise ResultsError(f"{where}: candidates[{i}].history: Received {history!r}. Expected a path inside the run folder.")


def merge_parallel(docs: dict[str, dict], order: list[str], placement: dict[str, list[str]]) -> dict:
    """One document from every host's own (search.mode parallel): trials in placement order,
    each naming its host, the best over all of them."""
    records = [dict(r, host=h, history=f"hosts/{h}/{r['history']}" if r.get("history") else "")
               for h, d in docs.items() for r in d["candidates"]]
    rank = {name: i for i, name in enumerate(order)}
    records.sort(key=lambda r: rank.get(r["candidate"], len(rank)))
    best = max(records, key=lambda r: r["val_accuracy"])
    first = next(iter(docs.values()))
    return {**first, "mode": "parallel", "candidates": records, "workers": len(docs),
            "replicas": sum(d.get("replicas", 1) for d in docs.values()),
            "best": {"candidate": best["candidate"], "val_accuracy": best["val_accuracy"], "host": best["host"]},
            "placement": placement, "restarts": max(d.get("restarts", 0) for d in docs.values()),
            "started": min(str(d.get("started", "")) for d in docs.values()),
            "finished": max(str(d.get("finished", "")) for d in docs.values())}


def write_json_atomic(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def leaderboard(records: list[dict]) -> str:
    """A plain-text table, best first (rich is not assumed inside the TensorFlow image)."""
    header = ["rank", "candidate", "val_acc", "val_loss", "train_s", "img/s", "params"]
    rows = [[str(i), r["candidate"], f"{r['val_accuracy']:.4f}", f"{r['val_loss']:.4f}",
             f"{r['train_seconds']:.1f}", f"{r['images_per_second']:.0f}", f"{r['params']:,}"]
            for i, r in enumerate(sorted(records, key=lambda r: -r["val_accuracy"]), start=1)]
    widths = [max(len(row[c]) for row in [header, *rows]) for c in range(len(header))]
    line = lambda row: "  ".join(cell.ljust(w) if c < 2 else cell.rjust(w) for c, (cell, w) in enumerate(zip(row, widths)))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])
