"""The search when a study drives it (trainer/study.py): sampled trials, pruning, and in parallel
mode the trial queue (trainer/queue.py). The plain grid trained to the end keeps search.run_search.

- sync: all workers train each trial together; the chief asks the study and decides, the others
  follow through a collective (trainer/collectives.py): the same trial, and the same epoch to stop
  a pruned trial at, on every worker.
- parallel: every host alone pulls trials from the chief's queue until it is told the search is done.
"""
from __future__ import annotations

import csv
import math
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Optional

import tensorflow as tf

from trainer import results, space
from trainer.backup import SearchState
from trainer.collectives import chief_says, share_json
from trainer.config import TrainConfig
from trainer.data import Data
from trainer.progress import Tracker
from trainer.errors import ClusterError
from trainer.search import TrialFailed, backup_root, load_state, save_best, train_trial
from trainer.trials import Trial


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


def trial_record(outcome_record: dict, trial: Trial, check: PruneCheck, curve: list[float]) -> dict:
    """results.json's record of a trial the study drove: its values, state and curve."""
    pruned = check.why == "pruned"
    return {**outcome_record, "trial": trial.number, "state": "pruned" if pruned else "complete",
            "pruned_at_epoch": check.stopped_at if pruned else None,
            "hyperparameters": {"learning_rate": trial.learning_rate, "batch_per_replica": trial.batch_per_replica,
                                **trial.hyperparameters},
            "curve": curve}


def figures(logs: dict) -> tuple[float, float]:
    """An epoch's (val_accuracy, val_loss), NaN where Keras did not log one."""
    return float(logs.get("val_accuracy", math.nan)), float(logs.get("val_loss", math.nan))


def curve_of(cfg: TrainConfig, record: dict, check_logs: list[dict]) -> list[float]:
    """The trial's val_accuracy per epoch: from its history file, which keeps the epochs before
    a restart, else (a worker that keeps no files) the epochs this process saw."""
    try:
        with (Path(cfg.results_dir) / record["history"]).open(newline="") as fh:
            return [float(row["val_accuracy"]) for row in csv.DictReader(fh)]
    except (OSError, KeyError, ValueError, TypeError):
        return [float(logs.get("val_accuracy", math.nan)) for logs in check_logs]


def failure(exc: BaseException) -> str:
    """One line on why a trial failed, for its record and the log."""
    first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


# --- sync: the chief decides, every worker follows ----------------------------------------------

def run_sync(cfg: TrainConfig, task: str, strategy, data: Data, chief: bool, log) -> tuple[SearchState, list]:
    """Every trial the chief's study hands out, trained by all workers; (this worker's state,
    every trial's record on the chief, [] elsewhere)."""
    from trainer.study import Study
    study = Study(cfg, backup_root(cfg, task), log) if chief else None
    state = load_state(cfg, task, strategy, None)
    tracker = Tracker(Path(cfg.results_dir), task, budget(cfg), restarts=state.starts - 1)
    best = results.best(state.done) if state.done else None
    while True:
        if chief:
            tracker.search = study.counts()
        offered = study.resume_or_next() if chief else None
        doc = share_json(strategy, ({"trial": asdict(offered)} if offered else {"done": True}) if chief else None)
        if "done" in doc:
            break
        trial = Trial(**doc["trial"])
        try:
            record, outcome = train_sync(trial, cfg, task, strategy, data, chief, log, study, tracker, state)
        except TrialFailed as exc:          # its model could not be built: the same on every worker
            log(f"[{task}] {trial.name} failed: {failure(exc)}; the search goes on")
            if chief:
                study.fail(trial.number, failure(exc))
            continue
        best = keep_if_best(outcome, record, best, state, cfg, chief, trial)
        state.done.append(record)
        state.save()
    if chief:
        tracker.search = study.counts()
        study.export(Path(cfg.results_dir) / "study.db")
    tracker.finished()
    return state, study.records() if chief else []


def train_sync(trial: Trial, cfg: TrainConfig, task: str, strategy, data: Data, chief: bool, log, study, tracker,
               state: SearchState):
    """One trial trained by every worker; the chief's study judges each epoch and every worker
    stops where the chief says."""
    seen = []

    def decide(epoch: int, logs: dict) -> str:
        seen.append(logs)
        prune = study.report(trial.number, epoch, *figures(logs)) if chief else False
        return "pruned" if chief_says(strategy, int(prune)) else ""

    check = PruneCheck(decide)
    outcome = train_trial(trial, cfg, data, strategy, task, chief, log, backup_root(cfg, task),
                          (tracker, trial.number + 1), space.max_epochs(cfg), [check])
    record = {**trial_record(outcome.record, trial, check, curve_of(cfg, outcome.record, seen)), "start": state.starts}
    if chief:
        study.finish(trial.number, record)
    return record, outcome


def keep_if_best(outcome, record: dict, best: Optional[dict], state: SearchState, cfg: TrainConfig, chief: bool,
                 trial: Trial) -> Optional[dict]:
    """Save the model when the trial is the best so far (every worker alike: the figures are)."""
    if not results.better(record, best):
        return best
    save_best(outcome.model, cfg, chief)
    state.best_model = trial.name
    return record


def budget(cfg: TrainConfig) -> int:
    return cfg.search.trials or space.grid_size(cfg)


# --- parallel: every host pulls from the chief's queue -------------------------------------------

def run_parallel(cfg: TrainConfig, task: str, strategy, data: Data, log) -> tuple[SearchState, list, dict]:
    """This host's trials until the queue says the search is done; on the chief also every
    trial's record (its history where `collect` puts the host's files) and what the hosts said
    and did ({hosts: {host: the retries of the trials it lost}, replicas, restarts, placement})."""
    from trainer import queue as q
    host = os.environ.get("TFC_HOST", "") or task
    serving = cfg.search.queue in (None, "serve")       # alone (no launcher): this host serves itself
    server = coordinator = None
    if serving:
        from trainer.study import Study
        coordinator = q.Coordinator(Study(cfg, backup_root(cfg, task), log), cfg.search.lost_after_s, log,
                                    hosts=cfg.search.hosts, classes=data.num_classes)
        server, stopped = q.serve(coordinator, cfg.search.port)
        log(f"[{task}] serving the trial queue on port {cfg.search.port}")
        channel = q.Local(coordinator, host)
    else:
        channel = q.Client(cfg.search.queue, host, patience_s=2 * cfg.search.lost_after_s)
    try:
        counts = coordinator.study.counts if coordinator else None
        state = pull_trials(cfg, task, strategy, data, log, channel, counts)
        if coordinator is None:
            return state, [], {}
        q.wait_for_done(coordinator, grace_s=3 * q.WAIT_S)
        coordinator.study.export(Path(cfg.results_dir) / "study.db")
        return state, hosts_records(coordinator), hosts_summary(coordinator)
    finally:
        if server is not None:
            q.stop(server, stopped)


def hosts_records(coordinator) -> list[dict]:
    """Every trial's record, its history file where `collect` puts its host's files."""
    return [{**r, "history": f"hosts/{r['host']}/{r['history']}" if r.get("history") else ""}
            for r in coordinator.study.records()]


def hosts_summary(coordinator) -> dict:
    with coordinator.lock:
        said = coordinator.hosts
        return {"hosts": {h: coordinator.lost.get(h, []) for h in sorted(said)},
                "replicas": sum(h.get("replicas", 1) for h in said.values()),
                "restarts": max((h.get("restarts", 0) for h in said.values()), default=0),
                "placement": {h: list(coordinator.trained.get(h, [])) for h in sorted(said)}}


def pull_trials(cfg: TrainConfig, task: str, strategy, data: Data, log, channel, counts=None) -> SearchState:
    from trainer import queue as q
    state = SearchState.load(backup_root(cfg, task) / "search_state.json")
    state.starts += 1
    state.save()
    tracker = Tracker(Path(cfg.results_dir), task, budget(cfg), restarts=state.starts - 1)
    best = results.best(state.done) if state.done else None
    me = {"replicas": strategy.num_replicas_in_sync, "restarts": state.starts - 1}
    while True:
        if counts:
            tracker.search = counts()
        answer = channel.call("next", me)
        if answer.get("done"):
            break
        if "trial" not in answer:
            time.sleep(float(answer.get("wait", q.WAIT_S)))
            continue
        trial = q.trial_from(answer["trial"])
        with q.Beating(channel, trial.number, every_s=max(1.0, cfg.search.lost_after_s / 4)) as beating:
            try:
                record, outcome = train_pulled(trial, cfg, task, strategy, data, log, channel, tracker, beating, state)
            except ClusterError:
                raise                       # the chief's queue is gone or refused this host: stop
            except Exception as exc:        # noqa: BLE001  (this trial, on this host alone: the search goes on)
                log(f"[{task}] {trial.name} failed: {failure(exc)}; the search goes on")
                channel.call("fail", {"number": trial.number, "why": failure(exc)})
                continue
        if record is None:
            log(f"[{task}] {trial.name} was handed to another host while this one was silent; dropped it")
            continue
        channel.call("finish", {"number": trial.number, "record": record})
        best = keep_if_best(outcome, record, best, state, cfg, True, trial)
        state.done.append(record)
        state.save()
    tracker.finished()
    return state


def train_pulled(trial: Trial, cfg: TrainConfig, task: str, strategy, data: Data, log, channel, tracker, beating,
                 state: SearchState):
    """One pulled trial; (None, None) when the chief handed it to another host meanwhile."""
    seen = []

    def decide(epoch: int, logs: dict) -> str:
        seen.append(logs)
        accuracy, loss = figures(logs)
        answer = channel.call("report", {"number": trial.number, "epoch": epoch, "val_accuracy": accuracy, "val_loss": loss})
        return "lost" if answer.get("lost") or beating.lost.is_set() else ("pruned" if answer.get("prune") else "")

    check = PruneCheck(decide)
    outcome = train_trial(trial, cfg, data, strategy, task, True, log, backup_root(cfg, task),
                          (tracker, trial.number + 1), space.max_epochs(cfg), [check])
    if check.why == "lost":
        return None, None
    return {**trial_record(outcome.record, trial, check, curve_of(cfg, outcome.record, seen)), "start": state.starts}, outcome
