"""A trial's history file (`history/<trial>.csv`, one row per epoch, written by the trainer's chief)
read from a run folder on this machine: each row checked as the trainer writes it, what is left out
said. Read by the report's pictures, by `runs`/`compare` and by the MLflow mapping; no matplotlib
here, so a reader that only needs the rows does not load it.
"""
from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from launcher import runfiles
from launcher.text import one_line
from trainer.spec import results_check

MAX_HISTORY = 64 << 20         # a history CSV of 100,000 epochs, with room
ACCURACIES = ("accuracy", "val_accuracy")


def history(folder: Path, record: dict) -> list[dict]:
    """The trial's per-epoch rows, each checked (read_history)."""
    return read_history(folder, record)[0]


def read_history(folder: Path, record: dict) -> tuple[list[dict], str]:
    """The trial's per-epoch rows as the trainer writes them (an epoch 1–100,000, accuracies 0–1
    or NaN; a row that is not is left out), and a note on what was left out ("" when nothing).
    The file is read as the run folder's files are (runfiles: no link, no FIFO, bounded)."""
    rel = record.get("history")
    if not rel:
        return [], ""
    try:
        text = runfiles.read_text(Path(folder), rel, MAX_HISTORY)
    except FileNotFoundError:
        return [], ""
    except runfiles.RunFileError as exc:        # named from the run folder: report.md is in it
        return [], exc.line.replace(f"{folder}/", "")
    except (OSError, ValueError) as exc:
        return [], f"{rel}: not read ({exc})"
    try:
        found = list(csv.DictReader(io.StringIO(text)))
    except csv.Error as exc:
        return [], f"{rel}: not a CSV ({exc})"
    rows = [row for row in found if not row_problem(row)]
    wrong = [problem for row in found if (problem := row_problem(row))]
    note = f"{rel}: {len(wrong)} of {len(found)} row(s) left out ({wrong[0]})" if wrong else ""
    return rows, one_line(note, 300)


def row_problem(row: dict) -> str:
    """Why a history row is not one the trainer writes ("" when it is)."""
    try:
        epoch = int(row.get("epoch") or "")
    except ValueError:
        return f"epoch {str(row.get('epoch'))[:20]!r} is not a whole number"
    if not 1 <= epoch <= results_check.MAX_EPOCHS:
        return f"epoch {epoch} is not 1–{results_check.MAX_EPOCHS:,}"
    for key in ACCURACIES:
        try:
            value = float(row.get(key) or "")
        except ValueError:
            return f"{key} {str(row.get(key))[:20]!r} is not a number"
        if not (math.isnan(value) or 0 <= value <= 1):
            return f"{key} {value:g} is not an accuracy 0–1"
    return ""
