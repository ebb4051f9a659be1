"""A trial's history file (`history/<trial>.csv`, one row per epoch, written by the chief) read
back on the trainer's side: its validation curve. No TensorFlow here (the unit tests read it)."""
from __future__ import annotations

import csv
import math
from pathlib import Path


def curve_of(results_dir: Path, record: dict, check_logs: list[dict]) -> list[float]:
    """The trial's val_accuracy per epoch: from its history file, which keeps the epochs before
    a restart, else (a worker that keeps no files) the epochs this process saw."""
    try:
        with (Path(results_dir) / record["history"]).open(newline="") as fh:
            return [float(row["val_accuracy"]) for row in csv.DictReader(fh)]
    except (OSError, KeyError, ValueError, TypeError):
        return [float(logs.get("val_accuracy", math.nan)) for logs in check_logs]
