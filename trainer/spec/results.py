"""results.json: its one owner. The trainer writes it (`results_doc`: on the chief, which in a
parallel search knows every host's trials through its queue), every reader takes it through
`parse` (the launcher by launcher/runfiles.py's `load_results`), and
the one rule for the best trial (`ranked`, `best`) is here for every reader.

Schema 1: {schema, mode, best, candidates[], workers, replicas, restarts, class_names, images,
started, finished, tensorflow}; each candidate has at least the required keys of RECORD_KEYS, and
its `history` is a CSV path relative to the run folder; the trainer makes each candidate as one
TrialRecord's JSON (trial_record.py). `check` (results_check.py) covers every key any reader uses
(its type, its range, numbers finite but where NaN says "no figure"), so readers trust a checked
document as it is.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import re
import secrets
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

# ResultsError is re-exported: the launcher's readers and the tests catch results.ResultsError.
from trainer.spec.results_check import SCHEMA, ResultsError, check  # noqa: F401

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
                records: list | None = None, search: dict | None = None, elastic: dict | None = None) -> dict:
    """results.json: schema 1. `restarts` counts how often the search was resumed. A search a
    study drove gives every trial's record (`records`, each with its `state`) and its settings
    (`search`: sampler, pruner, rungs, the hosts lost)."""
    import datetime as dt
    import tensorflow as tf
    records = records if records is not None else state.done
    top = best(records)
    extra = {**({"search": search} if search is not None else {}), **({"elastic": elastic} if elastic else {})}
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


def parse(text: str, where: str) -> dict:
    """A results.json's text, checked: every reader gets the keys it relies on, of the types and
    in the ranges it expects (the launcher reads the file through launcher/runfiles.py)."""
    try:
        doc = json.loads(text)
    except RecursionError:
        raise ResultsError(f"{where}: Received JSON nested too deep. Expected a tfcompose results.json.") from None
    except ValueError as exc:
        raise ResultsError(f"{where}: cannot read results ({exc}). Expected a run folder from `tfcompose collect` "
                           "or the simulation's runs/local.") from None
    check(doc, where)
    return doc


def dumps(doc: dict) -> str:
    """results.json's text (NaN as JSON's readers of Python take it, as the trainer always wrote it)."""
    return json.dumps(doc, indent=2, sort_keys=False) + "\n"


def write_json_atomic(path: Path, doc: dict) -> None:
    """The trainer's own write (inside its container): a fresh name in the same folder, made
    exclusively and never through a link, 0666 less the umask, then renamed over results.json."""
    path = Path(path)
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
            break
        except FileExistsError:
            continue
    else:
        raise FileExistsError(f"{path}: no fresh temporary name")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(dumps(doc))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def leaderboard(records: list[dict]) -> str:
    """A plain-text table, best first (rich is not assumed inside the TensorFlow image)."""
    header = ["rank", "candidate", "val_acc", "val_loss", "train_s", "img/s", "params"]
    rows = [[str(i), r["candidate"], f"{r['val_accuracy']:.4f}", f"{r['val_loss']:.4f}",
             f"{r['train_seconds']:.1f}", f"{r['images_per_second']:.0f}", f"{r['params']:,}"]
            for i, r in enumerate(ranked(records), start=1)]
    widths = [max(len(row[c]) for row in [header, *rows]) for c in range(len(header))]
    line = lambda row: "  ".join(cell.ljust(w) if c < 2 else cell.rjust(w) for c, (cell, w) in enumerate(zip(row, widths)))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])
