"""The chief's own state, kept on a second host in an elastic run (the inventory's `elastic:`).

Every worker backs up the model and optimizer (backup.py); what only the chief holds is the
search's state: the study (study.db), the trials' history CSVs and the best model so far. At each
epoch's end the chief writes a consistent snapshot of them into its backup folder (`chief-state/`:
the study copied with SQLite's backup API, never as a raw file; files that did not change since
the last snapshot linked, not copied), and the launcher relays it to the next host
(launcher/stages/mirror.py) as `chief-mirror/`. When the chief's host is lost, that host becomes the
chief of the next generation and, before anything trains, adopts the mirror and its own copy of
the history (in an elastic run every worker keeps one: the figures are the same on all), so the
model resumes from the newest backup with every epoch's row; the study may lack the pruning reports
of the epochs after the last mirror.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Optional


SNAPSHOT = "chief-state"        # the chief's, in its own backup folder
RECEIVED = "chief-mirror"       # the launcher's relay of another host's snapshot
MANIFEST = "manifest.json"
STUDY = "study.db"
RESULTS = ("history", "best_model.keras", "saved_model")      # under results_dir


def snapshot(backups: Path, results: Path, said: dict) -> Path:
    """<backups>/chief-state/ replaced whole: built beside it, then renamed into place."""
    final, tmp = backups / SNAPSHOT, backups / f"{SNAPSHOT}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if (backups / STUDY).is_file():
        with closing(sqlite3.connect(backups / STUDY)) as source, closing(sqlite3.connect(tmp / STUDY)) as copy:
            source.backup(copy)
    for name in RESULTS:
        _mirror(results / name, final / "results" / name, tmp / "results" / name)
    (tmp / MANIFEST).write_text(json.dumps({**said, "at": round(time.time(), 3)}))
    old = backups / f"{SNAPSHOT}.old"
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def _mirror(source: Path, before: Path, target: Path) -> None:
    """`source` (a file or a folder) into `target`; a file unchanged since the last snapshot is linked
    to it (the best model is rewritten only when a trial beats it)."""
    if source.is_dir():
        for path in source.rglob("*"):
            if path.is_file():
                _mirror(path, before / path.relative_to(source), target / path.relative_to(source))
        return
    if not source.is_file():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    same = before.is_file() and (before.stat().st_size, before.stat().st_mtime_ns) == \
        (source.stat().st_size, source.stat().st_mtime_ns)
    if same:
        os.link(before, target)
    else:
        shutil.copy2(source, target)


def adopt(backups: Path, results: Path, host: str) -> Optional[dict]:
    """A new chief takes the mirrored state of the chief it replaces (once: the mirror is renamed
    after); what it says of itself (host, trial, epoch), or None when there is none to take."""
    received = backups / RECEIVED
    try:
        said = json.loads((received / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(said, dict) or said.get("host") == host:
        return None
    if (received / STUDY).is_file():
        os.replace(received / STUDY, backups / STUDY)
    for name in RESULTS:
        _take(received / "results" / name, results / name)
    _take(backups / "history", results / "history")     # its own rows: every epoch, also those after the mirror
    shutil.rmtree(backups / f"{RECEIVED}.adopted", ignore_errors=True)
    received.rename(backups / f"{RECEIVED}.adopted")
    return said


def _take(source: Path, target: Path) -> None:
    if source.is_dir():
        if target.is_symlink() or target.is_file():
            target.unlink()
        target.mkdir(parents=True, exist_ok=True)
        for path in source.iterdir():
            _take(path, target / path.name)
    elif source.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(source, target)         # the backups and the results are different mounts
