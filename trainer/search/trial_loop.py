"""The one trial loop: take a trial from a source, train it (stopping where the source says), give
the source its figures, keep the best model; until the source says the search is done.

A source (`TrialSource`) is where trials come from and go back to:
- `GridSource`: the plain grid trained to the end, in order (no study; a restarted search skips the
  trials it finished);
- `StudySource`: a search the chief's study drives, trained by all workers together (sync): the
  chief asks the study and decides, every worker follows through a collective — the same trial, and
  the same epoch to stop a pruned trial at, on every worker;
- `QueueSource`: a parallel search: this host alone pulls trials from the chief's queue (a Client, or
  on the chief its own Coordinator) until it is told the search is done.
"""
from __future__ import annotations

import contextlib
import math
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Callable, Protocol, Union

import tensorflow as tf

from trainer.cluster.collectives import chief_says, share_json
from trainer.search.coordinator import expected_epochs
from trainer.search.queue_client import Beating
from trainer.search.study import Study
from trainer.search.wire import Done, Offer, Wait
from trainer.spec import history, results, results_check, space
from trainer.spec.config import TrainConfig
from trainer.spec.errors import ClusterError, one_line
from trainer.spec.progress import Tracker
from trainer.spec.trial_record import TrialRecord, chief_knows
from trainer.spec.trials import Trial, expand
from trainer.train.backup import SearchState
from trainer.train.trial import TrialFailed, backup_root, load_state, save_best, train_trial

Next = Union[Offer, Wait, Done]


class TrialSource(Protocol):
    state: SearchState               # what this worker finished (its backups' companion)
    tracker: Tracker                 # this worker's progress file
    epochs: int                      # the epochs a trial trains unless stopped
    alone: bool                      # a trial's error is this host's alone: the search goes on without it

    def next(self) -> Next: ...
    def index(self, trial: Trial) -> int: ...                          # its number in the progress file
    def report(self, trial: Trial, epoch: int, logs: dict) -> str: ...  # "", "pruned" or "lost"
    def training(self, trial: Trial): ...                              # a context while it trains
    def record(self, trial: Trial, outcome_record: TrialRecord, stopped: str, curve: list) -> TrialRecord: ...
    def finish(self, trial: Trial, record: TrialRecord) -> None: ...
    def fail(self, trial: Trial, exc: BaseException, build: bool) -> None: ...


class PruneCheck(tf.keras.callbacks.Callback):
    """After each epoch, `decide(epoch, logs)` says whether the trial stops there: pruned, or (in
    parallel mode) handed to another host meanwhile."""

    def __init__(self, decide: Callable[[int, dict], str]):
        super().__init__()
        self.decide, self.stopped_at, self.why = decide, None, ""

    def on_epoch_end(self, epoch, logs=None):
        why = self.decide(epoch + 1, dict(logs or {}))
        if why:
            self.model.stop_training = True
            self.stopped_at, self.why = epoch + 1, why


def run_trials(source: TrialSource, cfg: TrainConfig, task: str, strategy, data, chief: bool, log) -> SearchState:
    """Every trial the source hands out, until it says the search is done; this worker's state."""
    state = source.state
    best = results.best(state.done) if state.done else None
    while True:
        offer = source.next()
        if isinstance(offer, Done):
            if offer.why:
                log(f"[{task}] the search is done: {offer.why}")
            break
        if isinstance(offer, Wait):
            time.sleep(offer.seconds)
            continue
        trial = offer.trial
        trained = train_one(source, trial, cfg, task, strategy, data, chief, log)
        if trained is None:
            continue
        record, model = trained
        done = record.to_json()                 # as the backup's state keeps it (and results.json)
        if results.better(done, best):          # the figures are the same on every worker: so is this
            save_best(model, cfg, chief)        # before `finish`: the last finish may end the search
            best, state.best_model = done, trial.name
        source.finish(trial, record)
        state.done.append(done)
        state.save()
    source.tracker.finished()
    return state


def train_one(source: TrialSource, trial: Trial, cfg: TrainConfig, task: str, strategy, data, chief: bool, log):
    """(record, model) of one trial, or None: it failed (the source was told) or went elsewhere."""
    seen: list[dict] = []

    def decide(epoch: int, logs: dict) -> str:
        seen.append(logs)
        return source.report(trial, epoch, logs)

    check = PruneCheck(decide)
    try:
        with source.training(trial):
            outcome = train_trial(trial, cfg, data, strategy, task, chief, log, backup_root(cfg, task),
                                  (source.tracker, source.index(trial)), source.epochs, [check])
    except TrialFailed as exc:          # its model could not be built: the same on every worker
        log(f"[{task}] {trial.name} failed: {one_line(exc)}; the search goes on")
        source.fail(trial, exc, build=True)
        return None
    except ClusterError:
        raise                           # the cluster, or the chief's queue, is gone: stop
    except Exception as exc:            # noqa: BLE001  (a parallel host's own trouble: the search goes on)
        if not source.alone:
            raise
        log(f"[{task}] {trial.name} failed: {one_line(exc)}; the search goes on")
        source.fail(trial, exc, build=False)
        return None
    if check.why == "lost":
        log(f"[{task}] {trial.name} was handed to another host while this one was silent; dropped it")
        return None
    curve = history.curve_of(cfg.results_dir, outcome.record.to_json(), seen)
    return source.record(trial, outcome.record, check.why, curve), outcome.model


def figures(logs: dict) -> tuple[float, float]:
    """An epoch's (val_accuracy, val_loss), NaN where Keras did not log one."""
    return float(logs.get("val_accuracy", math.nan)), float(logs.get("val_loss", math.nan))


def budget(cfg: TrainConfig) -> int:
    return cfg.search.trials or space.grid_size(cfg)


def study_record(trial: Trial, outcome_record: TrialRecord, stopped: str, curve: list, start: int,
                 host: str = "") -> TrialRecord:
    """The record of a trial a study drove: the chief's knowledge of it, its figures, its curve."""
    pruned = stopped == "pruned"
    return replace(outcome_record, **chief_knows(trial, host), curve=curve, start=start,
                   state="pruned" if pruned else "complete", pruned_at_epoch=check_epoch(outcome_record) if pruned else None)


def check_epoch(record: TrialRecord) -> int:
    return record.resumed_from_epoch + record.epochs_run


# --- the plain grid -------------------------------------------------------------------------------

class GridSource:
    """Every grid point in order, each trained to the end by all workers; a restart skips those done."""
    alone = False

    def __init__(self, cfg: TrainConfig, task: str, strategy, log):
        self.trials = expand(cfg)
        self.state = load_state(cfg, task, strategy, self.trials)
        self.epochs = cfg.epochs
        self.tracker = Tracker(Path(cfg.results_dir), task, len(self.trials), restarts=self.state.starts - 1)
        if self.state.done:
            log(f"[{task}] resuming (start {self.state.starts}): {len(self.state.done)} candidate(s) already finished: "
                + ", ".join(r["candidate"] for r in self.state.done))

    def next(self) -> Next:
        done = len(self.state.done)
        return Offer(self.trials[done]) if done < len(self.trials) else Done()

    def index(self, trial: Trial) -> int:
        return len(self.state.done) + 1

    def report(self, trial: Trial, epoch: int, logs: dict) -> str:
        return ""

    def training(self, trial: Trial):
        return contextlib.nullcontext()

    def record(self, trial: Trial, outcome_record: TrialRecord, stopped: str, curve: list) -> TrialRecord:
        return replace(outcome_record, start=self.state.starts)     # a grid file's results.json, as before

    def finish(self, trial: Trial, record: TrialRecord) -> None:
        pass

    def fail(self, trial: Trial, exc: BaseException, build: bool) -> None:
        raise exc                       # the plain grid stops, as it always did


# --- sync: the chief's study decides, every worker follows ---------------------------------------------

class StudySource:
    alone = False

    def __init__(self, cfg: TrainConfig, task: str, strategy, chief: bool, log):
        self.cfg, self.strategy, self.chief, self.share, self.says = cfg, strategy, chief, share_json, chief_says
        self.study = Study(cfg, backup_root(cfg, task), log) if chief else None
        self.state = load_state(cfg, task, strategy, None)
        self.epochs = space.max_epochs(cfg)
        self.tracker = Tracker(Path(cfg.results_dir), task, budget(cfg), restarts=self.state.starts - 1)

    def next(self) -> Next:
        offered = None
        if self.chief:
            self._count()
            offered = self.study.resume_or_next()
        doc = self.share(self.strategy, ({"trial": asdict(offered)} if offered else {"done": self._why_done()})
                         if self.chief else None)
        return Offer(Trial(**doc["trial"])) if "trial" in doc else Done(doc["done"] if isinstance(doc["done"], str) else "")

    def _why_done(self) -> str:
        return "every combination of its space was tried" if self.study.exhausted else ""

    def _count(self) -> None:
        counts = self.study.counts()
        self.tracker.search = {**counts, "expected_epochs": expected_epochs(self.cfg, counts)}

    def index(self, trial: Trial) -> int:
        return trial.seq or trial.number + 1

    def report(self, trial: Trial, epoch: int, logs: dict) -> str:
        prune = self.study.report(trial.number, epoch, *figures(logs)) if self.chief else False
        return "pruned" if self.says(self.strategy, int(prune)) else ""

    def training(self, trial: Trial):
        return contextlib.nullcontext()

    def record(self, trial: Trial, outcome_record: TrialRecord, stopped: str, curve: list) -> TrialRecord:
        return study_record(trial, outcome_record, stopped, curve, self.state.starts)

    def finish(self, trial: Trial, record: TrialRecord) -> None:
        if self.chief:
            self.study.finish(trial.number, record)
            self._count()

    def fail(self, trial: Trial, exc: BaseException, build: bool) -> None:
        if self.chief:
            self.study.fail(trial.number, one_line(exc))


# --- parallel: this host alone, from the chief's queue -------------------------------------------------

class QueueSource:
    alone = True

    def __init__(self, cfg: TrainConfig, task: str, strategy, channel, log):
        self.cfg, self.channel, self.log = cfg, channel, log
        self.state = SearchState.load(backup_root(cfg, task) / "search_state.json")
        self.state.starts += 1
        self.state.save()
        self.epochs = space.max_epochs(cfg)
        self.tracker = Tracker(Path(cfg.results_dir), task, 0, restarts=self.state.starts - 1)
        self.me = {"replicas": strategy.num_replicas_in_sync, "restarts": self.state.starts - 1}
        self.started: dict[str, int] = {}       # trial name → its place among this host's trials
        self.beating = None

    def next(self) -> Next:
        return self.channel.ask(**self.me)

    def index(self, trial: Trial) -> int:
        return self.started.setdefault(trial.name, len(self.started) + 1)

    def report(self, trial: Trial, epoch: int, logs: dict) -> str:
        verdict = self.channel.report(trial.number, epoch, *figures(logs))
        if verdict.lost or (self.beating is not None and self.beating.lost.is_set()):
            return "lost"
        return "pruned" if verdict.prune else ""

    @contextlib.contextmanager
    def training(self, trial: Trial):
        with Beating(self.channel, trial.number, every_s=max(1.0, self.cfg.search.lost_after_s / 4)) as beating:
            self.beating = beating
            try:
                yield
            finally:
                self.beating = None

    def record(self, trial: Trial, outcome_record: TrialRecord, stopped: str, curve: list) -> TrialRecord:
        return study_record(trial, outcome_record, stopped, curve, self.state.starts)

    def finish(self, trial: Trial, record: TrialRecord) -> None:
        self.channel.finish(trial.number, {k: v for k, v in record.to_json().items() if k in results_check.HOST_FIGURES
                                           or k == "confusion_matrix"})

    def fail(self, trial: Trial, exc: BaseException, build: bool) -> None:
        self.channel.fail(trial.number, one_line(exc), build)
