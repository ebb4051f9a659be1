"""What the chief writes: results.json, history CSVs, and the leaderboard it prints."""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

SCHEMA = 1


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


def results_doc(state, workers: int, replicas: int, data, started) -> dict:
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
        "mode": "sync",
        "class_names": data.class_names,
        "images": {"train": data.train_count, "val": data.val_count},
        "started": started.isoformat(timespec="seconds"),
        "finished": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "tensorflow": tf.__version__,
    }


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
