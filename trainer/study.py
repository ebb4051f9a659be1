"""The study: which trials run, what they reached, which are stopped early. Owner of study.db.

Optuna does the searching: its samplers (a grid's points enqueued one by one as they are due,
RandomSampler, TPESampler),
its pruners (SuccessiveHalvingPruner = ASHA, HyperbandPruner) and its storage: SQLite beside the
chief's backups while the search runs, so a restarted chief resumes it (and a search whose space
changed meanwhile starts over), copied to the results folder when it ends, and gone with the
backups, so the next run starts a study of its own. One process only ever opens it:
the chief, which in sync mode decides for every worker (search.py sends its decisions round with
a collective) and in parallel mode serves the other hosts (queue.py).

Trial numbers are Optuna's; a trial's name is a grid point's (`small_cnn@lr=0.01,bs=16`) or
`<candidate>#<number>`; a retry after a lost host is `<name>~r<k>`.
"""
from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Optional

from trainer import results, space
from trainer.space import rungs  # noqa: F401  (where the study's pruner judges: the report draws them)
from trainer.config import Range, TrainConfig
from trainer.trials import Trial

FILE = "study.db"
NAME, RECORD, HOST, RETRY_OF, PRUNED_AT = "tfc:name", "tfc:record", "tfc:host", "tfc:retry_of", "tfc:pruned_at"
SPACE = "tfc:space"
# A trial whose host was lost goes to another host at most this often: a trial that takes every
# host it lands on down with it (it fills the GPU, say) must not go round the cluster for ever.
MAX_RETRIES = 2
# What a search's figures depend on: a study made for other values is not resumed.
SEARCHED = ("candidates", "epochs", "learning_rate", "batch_per_replica", "seed", "dataset", "weights", "precision")
TRANSPORT = {"mode", "queue", "port", "lost_after_s", "only", "hosts"}


def fingerprint(cfg: TrainConfig) -> str:
    import hashlib
    doc = cfg.model_dump(mode="json", include=set(SEARCHED))
    doc["search"] = cfg.search.model_dump(mode="json", exclude=TRANSPORT)
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def sampler(cfg: TrainConfig, seed: int):
    import optuna
    if cfg.search.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    return optuna.samplers.RandomSampler(seed=seed)   # a grid's points are enqueued: each is asked in order


def pruner(cfg: TrainConfig):
    import optuna
    search = cfg.search
    if search.pruner == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=search.min_epochs,
                                                      reduction_factor=search.reduction_factor)
    if search.pruner == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=search.min_epochs, max_resource=space.max_epochs(cfg),
                                              reduction_factor=search.reduction_factor)
    return optuna.pruners.NopPruner()


class Study:
    """The search's trials, thread-safe (the chief's own loop and the queue's server share it)."""

    def __init__(self, cfg: TrainConfig, folder: Path, log=lambda line: None):
        import optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.cfg, self.lock, self.path = cfg, threading.RLock(), folder / FILE
        folder.mkdir(parents=True, exist_ok=True)
        self.study = self._open()
        if self.study.user_attrs.get(SPACE, fingerprint(cfg)) != fingerprint(cfg):
            log(f"the search changed since {self.path} was written: a new study")
            self.study = self._open(fresh=True)
        self.study.set_user_attr(SPACE, fingerprint(cfg))
        self.budget = cfg.search.trials or (space.grid_size(cfg) if cfg.search.sampler == "grid" else 0)
        self._grid = space.grid(cfg)[:self.budget] if cfg.search.sampler == "grid" else []
        self._handles: dict[int, object] = {}

    def _open(self, fresh: bool = False):
        import optuna
        if fresh:
            self.path.unlink(missing_ok=True)
        seed = self.cfg.search.seed if self.cfg.search.seed is not None else self.cfg.seed
        storage = optuna.storages.RDBStorage(f"sqlite:///{self.path}", engine_kwargs={"connect_args": {"timeout": 60}})
        return optuna.create_study(study_name="tfcompose", storage=storage, direction="maximize",
                                   sampler=sampler(self.cfg, seed), pruner=pruner(self.cfg), load_if_exists=True)

    def export(self, path: Path) -> None:
        """A consistent copy of the study at `path` (written beside it, then renamed), for
        optuna-dashboard or a notebook after the run."""
        import os
        import sqlite3
        tmp = path.with_name(path.name + ".tmp")
        with self.lock, sqlite3.connect(self.path) as source, sqlite3.connect(tmp) as copy:
            source.backup(copy)
        os.replace(tmp, path)

    # --- asking --------------------------------------------------------------------------------
    def resume_or_next(self, host: str = "") -> Optional[Trial]:
        """The trial `host` was running when it stopped (resumed from its backup), else the next."""
        with self.lock:
            mine = [t for t in self._running() if t.user_attrs.get(HOST, "") == host]
            if mine:
                return self._trial_of(mine[0])
            return self.next(host)

    def next(self, host: str = "") -> Optional[Trial]:
        """The next trial to train, or None while none is due (the budget used, no retry waiting)."""
        import optuna
        with self.lock:
            waiting = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
            asked = self._asked()
            if not waiting and asked >= self.budget:
                return None
            if not waiting and self._grid:      # a grid point is queued only when it is due: a retry goes first
                point = self._grid[asked]
                self.study.enqueue_trial(self._params(point["candidate"], point["values"]), user_attrs={NAME: point["name"]})
            handle = self.study.ask()
            candidate = handle.suggest_categorical("candidate", list(self.cfg.candidates))
            values = {d.name: self._suggest(handle, candidate, d) for d in space.dimensions(self.cfg, candidate)}
            name = handle.user_attrs.get(NAME) or f"{candidate}#{handle.number + 1:03d}"
            handle.set_user_attr(NAME, name)
            handle.set_user_attr(HOST, host)
            self._handles[handle.number] = handle
            return Trial.of(name, candidate, values, number=handle.number)

    def _asked(self) -> int:
        """Trials drawn from the budget (a retry of a lost host's trial does not count)."""
        return sum(1 for t in self.study.get_trials(deepcopy=False) if RETRY_OF not in t.user_attrs
                   and t.state.name != "WAITING")

    @staticmethod
    def _params(candidate: str, values: dict) -> dict:
        return {"candidate": candidate, **{_key(candidate, k): v for k, v in values.items()}}

    @staticmethod
    def _suggest(handle, candidate: str, dim: space.Dimension):
        key = _key(candidate, dim.name)
        spec = dim.spec
        if not isinstance(spec, Range):
            return handle.suggest_categorical(key, list(spec))
        low, high = spec.bounds
        if spec.kind in ("integer", "log_integer"):
            return handle.suggest_int(key, low, high, log=spec.kind == "log_integer")
        return handle.suggest_float(key, low, high, log=spec.kind == "log_uniform")

    # --- what trials reached -------------------------------------------------------------------
    def report(self, number: int, epoch: int, val_accuracy: float, val_loss: float) -> bool:
        """The trial's figures after `epoch`; whether the pruner stops it there. A trial at its
        last epoch is not judged (nothing is left to save), and a trial once told to stop is told
        so again (its host restarted from a backup taken after the decision)."""
        with self.lock:
            handle = self._handle(number)
            if PRUNED_AT in handle.user_attrs:
                return True
            if math.isfinite(val_accuracy):
                handle.report(results.score(val_accuracy, val_loss), epoch)
            if epoch >= space.max_epochs(self.cfg) or self.cfg.search.pruner == "none":
                return False
            # A diverged trial (NaN) is not worth its epochs.
            prune = not math.isfinite(val_accuracy) or handle.should_prune()
            if prune:
                handle.set_user_attr(PRUNED_AT, epoch)
            return prune

    def pruned_at(self, number: int) -> Optional[int]:
        """The epoch after which the study told the trial to stop, if it did."""
        with self.lock:
            return self._handle(number).user_attrs.get(PRUNED_AT)

    def finish(self, number: int, record: dict) -> None:
        """The trial ended; pruned if the study said so, else complete (failed: no figures). Its
        record, with that state, kept for results.json."""
        import optuna
        with self.lock:
            stop = self.pruned_at(number)
            record = {**record, "state": "pruned" if stop else "complete", "pruned_at_epoch": stop}
            self._handle(number).set_user_attr(RECORD, json.dumps(record))
            value = results.score(record["val_accuracy"], record["val_loss"])
            if stop:
                self.study.tell(number, state=optuna.trial.TrialState.PRUNED, skip_if_finished=True)
            elif math.isfinite(value):
                self.study.tell(number, value, skip_if_finished=True)
            else:
                self.study.tell(number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)

    def lose(self, number: int, why: str) -> Optional[str]:
        """A host stopped answering while it trained `number`: failed there, and the same values
        queued again for another host (the retry's name), at most MAX_RETRIES times ("" when the
        trial failed for good). None if the trial had already ended."""
        import optuna
        with self.lock:
            frozen = self.study._storage.get_trial(self._handle(number)._trial_id)
            if frozen.state != optuna.trial.TrialState.RUNNING:
                return None
            base = frozen.user_attrs[NAME].split("~")[0]
            tries = 1 + sum(1 for t in self.study.get_trials(deepcopy=False) if t.user_attrs.get(NAME, "").startswith(base + "~"))
            if tries > MAX_RETRIES:
                self._end(number, {"state": "failed", "why": f"{why}; lost {tries} times, not retried again"})
                return ""
            name = f"{base}~r{tries}"
            self._end(number, {"state": "retried", "why": why, "retried_as": name})
            self.study.enqueue_trial(frozen.params, user_attrs={NAME: name, RETRY_OF: number})
            return name

    def fail(self, number: int, why: str) -> None:
        """The trial failed on its own (its builder refused a value, it ran out of memory): not
        retried, since it would fail again; the search goes on."""
        with self.lock:
            self._end(number, {"state": "failed", "why": why[:500]})

    def _end(self, number: int, record: dict) -> None:
        import optuna
        self._handle(number).set_user_attr(RECORD, json.dumps(record))
        self.study.tell(number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)

    def trial(self, number: int) -> Trial:
        """Trial `number` as it was handed out."""
        with self.lock:
            return self._trial_of(self.study._storage.get_trial(self._handle(number)._trial_id))

    def running_hosts(self) -> dict[int, str]:
        with self.lock:
            return {t.number: t.user_attrs.get(HOST, "") for t in self._running()}

    def done(self) -> bool:
        """Every trial of the budget asked and ended, and no retry waiting."""
        import optuna
        with self.lock:
            live = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,
                                                                 optuna.trial.TrialState.WAITING))
            return not live and self._asked() >= self.budget

    def counts(self) -> dict:
        """Where the search is, for the live view: trials done, pruned, running, left, the best so far."""
        with self.lock:
            states = [t.state.name for t in self.study.get_trials(deepcopy=False)]
            finished = [t for t in self.study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
            best = max(finished, key=lambda t: t.value) if finished else None
            return {"done": states.count("COMPLETE"), "pruned": states.count("PRUNED"),
                    "running": states.count("RUNNING"), "left": max(self.budget - self._asked(), 0) + states.count("WAITING"),
                    "best": best.user_attrs.get(NAME, "") if best else "", "best_val_accuracy": json.loads(best.user_attrs[RECORD])["val_accuracy"] if best else -1.0}

    def records(self) -> list[dict]:
        """results.json's record of every trial, in order: the record its host sent, or for a
        trial that never finished (its host lost), what the study knows of it."""
        with self.lock:
            out = []
            for frozen in self.study.get_trials(deepcopy=True):
                sent = json.loads(frozen.user_attrs.get(RECORD, "{}"))
                record = sent if sent.get("state") in ("complete", "pruned") else {**self._unfinished(frozen), **sent}
                out.append({**record, "trial": frozen.number, "host": frozen.user_attrs.get(HOST, record.get("host", "")),
                            **({"retry_of": frozen.user_attrs[RETRY_OF]} if RETRY_OF in frozen.user_attrs else {})})
            return out

    def _unfinished(self, frozen) -> dict:
        # the scores reported per epoch: accuracies to within their loss tie-break (< 1e-9)
        curve = [round(float(frozen.intermediate_values[e]), 6) for e in sorted(frozen.intermediate_values)]
        trial = self._trial_of(frozen) if "candidate" in frozen.params else None
        return {"candidate": frozen.user_attrs.get(NAME, f"trial {frozen.number}"),
                "architecture": trial.candidate if trial else "",
                **({"learning_rate": trial.learning_rate, "batch_per_replica": trial.batch_per_replica} if trial else {}),
                "val_accuracy": curve[-1] if curve else math.nan,
                "val_loss": math.nan, "train_seconds": 0.0, "images_per_second": 0.0, "params": 0,
                "epochs": space.max_epochs(self.cfg), "epochs_run": len(curve), "curve": curve,
                "state": {"FAIL": "failed", "RUNNING": "running", "WAITING": "waiting"}.get(frozen.state.name, "failed"),
                "hyperparameters": ({"learning_rate": trial.learning_rate, "batch_per_replica": trial.batch_per_replica,
                                     **trial.hyperparameters} if trial else {})}

    def trials(self) -> list:
        return self.study.get_trials(deepcopy=True)

    # --- inside ----------------------------------------------------------------------------------
    def _running(self) -> list:
        import optuna
        return self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))

    def _handle(self, number: int):
        """The trial to report to: asked by this process, or (after a restart) rebuilt from storage."""
        if number not in self._handles:
            import optuna
            frozen = next(t for t in self.study.get_trials(deepcopy=False) if t.number == number)
            self._handles[number] = optuna.trial.Trial(self.study, frozen._trial_id)
        return self._handles[number]

    def _trial_of(self, frozen) -> Trial:
        candidate = frozen.params["candidate"]
        values = {d.name: frozen.params[_key(candidate, d.name)] for d in space.dimensions(self.cfg, candidate)}
        return Trial.of(frozen.user_attrs[NAME], candidate, values, number=frozen.number)


def _key(candidate: str, name: str) -> str:
    """A value's name in the study: the learning rate and batch size are shared; a candidate's own
    hyperparameters are its own (TPE then models them per candidate)."""
    return name if name in ("learning_rate", "batch_per_replica") else f"{candidate}.{name}"
