"""study.db, the file (was in study.py): the Optuna study opened in it, resumed only when it was
made for the same search (its fingerprint) and else made anew, each step on it guarded so that a file that is not a study is one clear error with
the fix (`StudyDamaged`) instead of a traceback, and a consistent copy of it written out."""
from __future__ import annotations

import json
import threading
from pathlib import Path

from trainer.search.samplers import pruner, sampler
from trainer.search.study_records import SPACE
from trainer.spec.config import TrainConfig
from trainer.spec.errors import ClusterError

FILE = "study.db"
# What a search's figures depend on: a study made for other values is not resumed.
SEARCHED = ("candidates", "epochs", "learning_rate", "batch_per_replica", "seed", "dataset", "weights", "precision")
TRANSPORT = {"mode", "queue", "port", "lost_after_s", "hosts", "addresses", "key_file"}


class StudyDamaged(ClusterError):
    """study.db cannot be read: the search cannot resume from it."""


def fingerprint(cfg: TrainConfig) -> str:
    import hashlib
    doc = cfg.model_dump(mode="json", include=set(SEARCHED))
    doc["search"] = cfg.search.model_dump(mode="json", exclude=TRANSPORT)
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def resume_or_start(path: Path, cfg: TrainConfig, seed: int, log):
    """The study in `path`, resumed if it was made for this search, else a new one (`log` says so)."""
    study = open_study(path, cfg, seed)
    if study.user_attrs.get(SPACE, fingerprint(cfg)) != fingerprint(cfg):
        log(f"the search changed since {path} was written: a new study")
        study = open_study(path, cfg, seed, fresh=True)
    guarded(path, lambda: study.set_user_attr(SPACE, fingerprint(cfg)))
    return study


def open_study(path: Path, cfg: TrainConfig, seed: int, fresh: bool = False):
    """The study in `path` (made if new; `fresh`: the file removed first)."""
    import optuna
    if fresh:
        path.unlink(missing_ok=True)
    storage = f"sqlite:///{path}"
    return guarded(path, lambda: optuna.create_study(
        study_name="tfcompose", storage=optuna.storages.RDBStorage(storage, engine_kwargs={"connect_args": {"timeout": 60}}),
        direction="maximize", sampler=sampler(cfg, seed), pruner=pruner(cfg), load_if_exists=True))


def guarded(path: Path, step):
    """A step on study.db; a file that is not a study a clear error with the fix, not a traceback."""
    try:
        return step()
    except Exception as exc:        # noqa: BLE001  (sqlalchemy's and sqlite's errors have no common base we import)
        if type(exc).__module__.split(".")[0] not in ("sqlalchemy", "sqlite3", "optuna", "alembic"):
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise StudyDamaged(f"{path}: the search's study cannot be read ({type(exc).__name__}: {first}), so this "
                           "run cannot resume its search. Start it over with `tfcompose up --new-run` (this run's "
                           "folders, the damaged study among them, stay on the hosts), or put back a good copy of "
                           f"{FILE}.") from None


def copy_out(source_path: Path, path: Path, lock: threading.RLock) -> None:
    """A consistent copy of the study at `path` (written beside it, then renamed), taken under `lock`."""
    import contextlib
    import os
    import sqlite3
    tmp = path.with_name(path.name + ".tmp")
    # closing(): a connection's own `with` ends a transaction, not the connection (one per copy was left open)
    with lock, contextlib.closing(sqlite3.connect(source_path)) as source, \
            contextlib.closing(sqlite3.connect(tmp)) as copy:
        source.backup(copy)
    os.replace(tmp, path)
