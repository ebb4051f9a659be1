"""The study: which trials run, what they reached, which are stopped early. Owner of study.db.

Optuna does the searching: its samplers (a grid's points enqueued one by one as they are due,
RandomSampler, TPESampler), its pruners (SuccessiveHalvingPruner = ASHA, HyperbandPruner) and its
storage: SQLite beside the chief's backups (in the run's own folder), so a restarted chief resumes
it, copied to the results folder when it ends. One process only ever opens it: the chief, which in
sync mode decides for every worker (a collective carries its decisions) and in parallel mode serves
the other hosts (coordinator.py).

What the study adds to Optuna's:
- **No trial trained twice.** A sampled point that was already tried is not handed out: the sampler
  is asked again (RESAMPLES times), then an untried point is taken directly; a search whose
  (countable) space is used up ends, saying so. The draw that repeated is kept in study.db as a
  failed trial marked `tfc:duplicate_of`, which nothing else counts.
- **A resumed study continues its sampler**: the sampler's seed is the search's seed plus the trials
  already in the study, so a restarted chief draws on instead of drawing the first points again.
- **Names of our own**: a grid point's (`small_cnn@lr=0.01,bs=16`) or `<candidate>#<k>`, k counting
  the budget's trials only (a retry or a repeated draw takes no number); a retry is `<name>~r<k>`.
- **Retries**: a trial whose host was lost (or failed on its own host) waits in a list of its own
  (retries.py) for a host that did not fail it, at most MAX_RETRIES times. A trial drawn as the
  chief stopped, never handed to a host, was not lost: it is dropped (`tfc:never_handed_out`).
How a trial is asked of Optuna (a fixed point enqueued, a draw that may not repeat) is draws.py's; the points
themselves (names of values, sameness, an untried point) points.py's; the samplers and pruners by name samplers.py's;
the file, and whether it is resumed, study_file.py's; a trial's record trainer/spec/trial_record.py's (read out: study_records.py).
"""
from __future__ import annotations

import json
import math
import threading
from dataclasses import replace
from pathlib import Path
from typing import Optional

from trainer.search import draws, study_file
from trainer.search.points import params_of, value_key
from trainer.search.retries import Retries
from trainer.search.samplers import sampler
from trainer.search.study_file import FILE
from trainer.search.study_records import (DUPLICATE, EXHAUSTED, HOST, NAME, NOT_ON, PRUNED_AT, RECORD, RETRY_OF, SEQ, STOPPED,
                                          UNUSED, counts, record_of)
from trainer.spec import results, space, trial_record
from trainer.spec.config import TrainConfig
from trainer.spec.trials import Trial

# A trial whose host was lost goes to another host at most this often: a trial that takes every
# host it lands on down with it (it fills the GPU, say) must not go round the cluster for ever.
MAX_RETRIES = 2


class Study:
    """The search's trials, thread-safe (the chief's own loop and the queue's server share it)."""

    def __init__(self, cfg: TrainConfig, folder: Path, log=lambda line: None):
        import optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.cfg, self.lock, self.path, self.log = cfg, threading.RLock(), folder / FILE, log
        folder.mkdir(parents=True, exist_ok=True)
        self.seed = cfg.search.seed if cfg.search.seed is not None else cfg.seed
        self.study = study_file.resume_or_start(self.path, cfg, self.seed, log)
        # Continue the sampler's stream: a restarted chief must not draw its first points again.
        self.study.sampler = sampler(cfg, self.seed + len(self.study.get_trials(deepcopy=False)))
        self.budget = cfg.search.trials or (space.grid_size(cfg) if cfg.search.sampler == "grid" else 0)
        self.size = space.space_size(cfg)
        self._handles: dict[int, object] = {}
        self.retries = Retries(self.study)
        for frozen in self._running():
            if HOST not in frozen.user_attrs:
                self._drop(frozen.number)

    def export(self, path: Path) -> None:
        """A consistent copy of the study at `path` (written beside it, then renamed), for
        optuna-dashboard or a notebook after the run."""
        study_file.copy_out(self.path, path, self.lock)

    # --- asking --------------------------------------------------------------------------------
    def resume_or_next(self, host: str = "", others: frozenset = frozenset()) -> Optional[Trial]:
        """The trial `host` was running when it stopped (resumed from its backup), else the next."""
        with self.lock:
            mine = [t for t in self._running() if t.user_attrs.get(HOST, "") == host]
            if mine:
                return self._trial_of(mine[0])
            return self.next(host, others)

    def next(self, host: str = "", others: frozenset = frozenset()) -> Optional[Trial]:
        """The next trial to train, or None while none is due (the budget used, no retry waiting).
        A retry goes first, but not to a host it failed on while one of `others` (the other hosts
        there) has not: if every host there failed it, any of them takes it (else none ever would)."""
        with self.lock:
            handle = self._asked_before() or self._retry_for(host, others) or self._fresh()
            if handle is None:
                return None
            self._name(handle)
            handle.set_user_attr(HOST, host)
            self._handles[handle.number] = handle
            return self._trial_of(self.study._storage.get_trial(handle._trial_id))

    def _asked_before(self):
        """A trial enqueued before a restart that was never asked: it was decided on already."""
        import optuna
        if self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
            handle = self.study.ask()
            draws.suggest_all(self.cfg, handle)
            return handle
        return None

    def _retry_for(self, host: str, others: frozenset):
        chosen = self.retries.take_for(host, others)
        if chosen is None:
            return None
        attrs = {NAME: chosen["name"], RETRY_OF: chosen["retry_of"], NOT_ON: chosen["not_on"]}
        return draws.enqueued(self.study, self.cfg, chosen["params"], attrs)

    def _fresh(self):
        """The budget's next trial: a grid's next point, or a sampled point not tried before."""
        seq = self._seq() + 1
        if seq > self.budget or self.study.user_attrs.get(EXHAUSTED) or self.study.user_attrs.get(STOPPED):
            return None
        if self.cfg.search.sampler == "grid":
            point = space.grid_point(self.cfg, seq - 1)
            params = params_of(point["candidate"], point["values"])
            return draws.enqueued(self.study, self.cfg, params, {NAME: point["name"], SEQ: seq})
        handle = draws.sampled(self.study, self.cfg, draws.tried(self._counted()), self.seed, self.size)
        if handle is None:
            self.study.set_user_attr(EXHAUSTED, True)
            self.log(f"[study] every one of the search's {self.size} combination(s) has been tried: the search "
                     f"ends after {seq - 1} of its {self.budget} trials")
        return handle

    def _name(self, handle) -> None:
        """A budget trial's number and name, unless it has its own (a grid point's, a retry's)."""
        if NAME not in handle.user_attrs:
            seq = self._seq() + 1
            handle.set_user_attr(SEQ, seq)
            handle.set_user_attr(NAME, f"{handle.params['candidate']}#{seq:03d}")

    def _seq(self) -> int:
        """The budget's trials asked so far (a retry or a repeated draw takes none)."""
        return max((t.user_attrs[SEQ] for t in self._counted() if SEQ in t.user_attrs), default=0)

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

    def finish(self, number: int, record: trial_record.TrialRecord) -> None:
        """The trial ended: pruned if the study said so, else complete (failed: no figures); its record kept so."""
        import optuna
        with self.lock:
            stop = self.pruned_at(number)
            record = replace(record, state="pruned" if stop else "complete", pruned_at_epoch=stop)
            self._handle(number).set_user_attr(RECORD, json.dumps(record.to_json()))
            value = results.score(record.val_accuracy, record.val_loss)
            if stop:
                self.study.tell(number, state=optuna.trial.TrialState.PRUNED, skip_if_finished=True)
            elif math.isfinite(value):
                self.study.tell(number, value, skip_if_finished=True)
            else:
                self.study.tell(number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)

    def lose(self, number: int, why: str) -> Optional[str]:
        """The trial's host was lost (or failed it) while it trained `number`: failed there, its values queued
        for another host (the retry's name), at most MAX_RETRIES times ("" then); None if it had ended."""
        import optuna
        with self.lock:
            frozen = self.study._storage.get_trial(self._handle(number)._trial_id)
            if frozen.state != optuna.trial.TrialState.RUNNING:
                return None
            if HOST not in frozen.user_attrs:   # never handed out: nothing was lost, nothing to retry
                self._drop(number)
                return None
            base = self._handle(number).user_attrs[NAME].split("~")[0]
            tries = 1 + sum(1 for t in self.study.get_trials(deepcopy=False) if t.user_attrs.get(NAME, "").startswith(base + "~"))
            if tries > MAX_RETRIES:
                self._end(number, {"state": "failed", "why": f"{why}; lost {tries} times, not retried again"})
                return ""
            name = f"{base}~r{tries}"
            self._end(number, {"state": "retried", "why": why, "retried_as": name})
            not_on = sorted({*frozen.user_attrs.get(NOT_ON, []), frozen.user_attrs.get(HOST, "")} - {""})
            self.retries.add(dict(frozen.params), name, number, not_on)
            return name

    def fail(self, number: int, why: str) -> None:
        """The trial failed on its own (its builder refused a value): not retried (it would fail again)."""
        with self.lock:
            self._end(number, {"state": "failed", "why": why[:500]})

    def _drop(self, number: int) -> None:
        """A trial drawn but never handed to a host (the chief stopped between Optuna's ask and
        the hand-out; its values may be half drawn): kept in study.db, counted nowhere, its number
        in the budget given to the next draw."""
        import optuna
        self._handle(number).set_user_attr(UNUSED, True)
        self.study.tell(number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)

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
        """Every trial of the budget asked and ended (or the space used up), and no retry waiting."""
        import optuna
        with self.lock:
            live = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,
                                                                 optuna.trial.TrialState.WAITING))
            used_up = self._seq() >= self.budget or self.exhausted or bool(self.study.user_attrs.get(STOPPED))
            return not live and not self.retries.waiting() and used_up

    @property
    def exhausted(self) -> bool:
        return bool(self.study.user_attrs.get(EXHAUSTED))

    def stopped_because(self) -> str:
        """Why the search ended before its budget, if it did."""
        if self.study.user_attrs.get(STOPPED):
            return str(self.study.user_attrs[STOPPED])
        if self.exhausted:
            return (f"every one of the space's {self.size} combination(s) was tried, "
                    f"{self._seq()} of the {self.budget} trials asked for")
        return ""

    def stop(self, why: str) -> None:
        """No more trials (no host is left to train them): the retries waiting are recorded as
        failed with `why`, the rest of the budget is not drawn."""
        with self.lock:
            self.study.set_user_attr(STOPPED, why[:300])
            for pending in self.retries.clear():
                attrs = {NAME: pending["name"], RETRY_OF: pending["retry_of"]}
                handle = draws.enqueued(self.study, self.cfg, pending["params"], attrs)
                self._end(handle.number, {"state": "failed", "why": f"not run: {why}"[:500]})

    def counts(self) -> dict:
        """Where the search is, for the live view (study_records.counts)."""
        with self.lock:
            ended_early = self.exhausted or bool(self.study.user_attrs.get(STOPPED))
            left = 0 if ended_early else max(self.budget - self._seq(), 0)
            return counts(self._counted(), left + len(self.retries.waiting()))

    def records(self) -> list[dict]:
        """results.json's record of every trial, in order: the record its host sent, or for a
        trial that never finished (its host lost), what the study knows of it."""
        with self.lock:
            return [record_of(frozen, self._trial_of, self.cfg) for frozen in self._counted(deepcopy=True)]

    def trials(self) -> list:
        return self._counted(deepcopy=True)

    # --- inside ----------------------------------------------------------------------------------
    def _counted(self, deepcopy: bool = False) -> list:
        """Every trial but the sampler's repeated draws and those never handed out (kept in
        study.db, counted nowhere)."""
        return [t for t in self.study.get_trials(deepcopy=deepcopy) if DUPLICATE not in t.user_attrs
                and UNUSED not in t.user_attrs]

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
        values = {d.name: frozen.params[value_key(candidate, d.name)] for d in space.dimensions(self.cfg, candidate)}
        return Trial.of(frozen.user_attrs[NAME], candidate, values, number=frozen.number, seq=frozen.user_attrs.get(SEQ, 0))

