"""One trial's training: its model compiled under the strategy, fit with its callbacks (backups,
progress, early stopping, the source's pruning), evaluated; the best model saved. The loop over
trials is trainer/search/trial_loop.py.

A restarted trial resumes from its last backed-up epoch (trainer/train/backup.py); the callbacks
of our own it trains with are callbacks.py's.
"""
from __future__ import annotations

import contextlib
import io
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import tensorflow as tf

from trainer.cluster import allreduce
from trainer.cluster.elastic import batch_and_rate, workers_of
from trainer.train import hparams, mlflow_model, models
from trainer.train.backup import OwnCopyBackupAndRestore, SearchState
from trainer.train.callbacks import ChiefMirror, EpochProgress, FirstStepLog, tensorboard_callback
from trainer.spec.config import AllreduceConfig, TrainConfig
from trainer.train.data import Data
from trainer.spec.errors import ConfigError, TfcError
from trainer.train.profile import StepProfiler
from trainer.spec.progress import Tracker
from trainer.spec.results import safe_name, write_dir
from trainer.spec.trial_record import ABSENT, TrialRecord, history_path
from trainer.spec.trials import Trial

def backup_root(cfg: TrainConfig, task: str) -> Path:
    """This worker's own backups (see trainer/train/backup.py), kept under its host's name (TFC_HOST,
    which the launcher and the rank shim set, one task per host): an elastic re-form renumbers the
    tasks, and a host must find its own backups under its new number. By task without a host name."""
    base = Path(cfg.backup_dir) if cfg.backup_dir else Path(cfg.results_dir) / "backup"
    return base / task_folder(own_name(task))


def own_name(task: str) -> str:
    """This worker's host (TFC_HOST), else its task."""
    return os.environ.get("TFC_HOST") or task


def task_folder(task: str) -> str:
    """A worker's own folder name: `worker:1` → `worker-1`."""
    return safe_name(task.replace(":", "-"))


class TrialFailed(TfcError):
    """A trial's model could not be built with its values (a builder refused them). Every worker
    of a sync search finds the same, so a study's search records the trial as failed and goes on;
    the plain grid stops, as before."""


@dataclass
class Outcome:
    record: TrialRecord
    model: tf.keras.Model = field(repr=False)


def compile_candidate(name: str, learning_rate: float, cfg: TrainConfig, data: Data, strategy,
                      hyperparameters: Optional[dict] = None) -> tf.keras.Model:
    # Layers take the global policy when they are made; under mixed_float16, compile wraps the
    # optimizer in a LossScaleOptimizer by itself.
    tf.keras.mixed_precision.set_global_policy(cfg.precision)
    with strategy.scope():
        model = models.build(name, data.input_shape, data.num_classes, cfg.weights, hyperparameters)
        if model.output_shape[-1] != data.num_classes:
            raise ConfigError(f"candidates: {name!r} outputs {model.output_shape[-1]} classes. "
                              f"Expected {data.num_classes} (one per class folder).")
        # No jit_compile: XLA is incompatible with cross-worker all-reduce (tensorflow#58961).
        model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    if cfg.step_metrics == "local":
        keep_step_metrics_local(model)
    return model


def keep_step_metrics_local(model: tf.keras.Model) -> None:
    """Per step, tf_keras reads the loss and accuracy means across the workers (an all-reduce of
    each mean's total and count, then a sum of the results): small, latency-bound collectives in
    every step's critical path (docs/benchmarks.md B1b: 9 of the 31 ms lockstep added to `small_cnn`),
    for per-step values no callback here reads. Inside the step the means are read locally and not
    summed; fit and evaluate still read them across the workers once at their end
    (`_validate_and_get_metrics_result`, outside the step), and those are the values logged."""
    synced = model.get_metrics_result

    def get_metrics_result():
        if tf.distribute.in_cross_replica_context():
            return synced()
        # The metric class's own result(): the instance's is wrapped in the cross-worker read.
        results = {}
        for metric in model.metrics:
            value = type(metric).result(metric)
            results.update(value if isinstance(value, dict) else {metric.name: value})
        return results

    model.get_metrics_result = get_metrics_result
    model.distribute_reduction_method = "first"   # this worker's step outputs, not a sum across workers


def confusion_matrix(model: tf.keras.Model, val: tf.data.Dataset, classes: int) -> list[list[int]]:
    """Rows: true class, columns: predicted. Every worker must run it (see train_trial)."""
    matrix = np.zeros((classes, classes), dtype=int)
    for x, y in val:
        predicted = np.argmax(model(x, training=False).numpy(), axis=-1)
        np.add.at(matrix, (y.numpy(), predicted), 1)
    return matrix.tolist()


def trial_callbacks(trial: Trial, cfg: TrainConfig, strategy, backups: Path, out: Path, progress, extra=(),
                    chief: bool = False) -> list:
    backup = OwnCopyBackupAndRestore(str(backups / safe_name(trial.name)), strategy,
                                     lambda line: progress.log(f"[{progress.task}] {trial.name}: {line}"))
    stop = [tf.keras.callbacks.EarlyStopping(monitor="val_accuracy", mode="max", patience=cfg.search.patience,
                                             restore_best_weights=True)] if cfg.search.patience else []
    first = FirstStepLog(trial.name, progress.task, progress.log)
    profile = [StepProfiler(*cfg.profile_steps, Path(cfg.results_dir) / "profile" / task_folder(progress.task))
               ] if cfg.profile_steps else []
    board = out / "tensorboard" / safe_name(trial.name)
    boards = tensorboard_callback(board)
    # elastic: the chief's own state mirrored once the epoch's backup, history row and study report are written
    keep = [ChiefMirror(backups, out, own_name(progress.task), progress)] if chief and cfg.elastic else []
    return [backup, progress, first, *stop, *profile, *extra, *keep, *boards,
            *(hparams.callback(trial, board) if boards else [])]


def train_trial(trial: Trial, cfg: TrainConfig, data: Data, strategy, task: str, chief: bool, log,
                backups: Path, tracking: tuple[Optional[Tracker], int] = (None, 1), epochs: Optional[int] = None,
                extra=()) -> Outcome:
    """Train and evaluate one trial; `epochs` (default cfg.epochs) and `extra` callbacks (the
    study's pruning) come from a search that uses the study."""
    epochs = epochs or cfg.epochs
    tf.keras.utils.set_random_seed(cfg.seed)  # the same initial weights on every worker
    global_batch, rate = batch_and_rate(trial.batch_per_replica, trial.learning_rate, strategy.num_replicas_in_sync,
                                        workers_of(strategy), cfg.elastic)
    try:
        model = compile_candidate(trial.candidate, rate, cfg, data, strategy, trial.hyperparameters)
    except (ValueError, TypeError) as exc:    # the builder refused these values
        raise TrialFailed(f"{trial.name} could not be built ({type(exc).__name__}): {exc}") from exc
    train, val = data.batches(global_batch)
    wire = allreduce.enable(model, trial, cfg, data, strategy, lambda line: log(f"[{task}] {trial.name} {line}"))
    history = history_path(trial.name)
    with write_dir(Path(cfg.results_dir), chief) as out:
        # elastic: every worker keeps the history too (the same figures on all), so a worker made
        # chief has every epoch's row, not only those the chief's last mirror held
        kept = out / history if chief else backups / history if cfg.elastic is not None else None
        progress = EpochProgress(trial.name, task, data.train_count, epochs, log, kept, *tracking)
        callbacks = trial_callbacks(trial, cfg, strategy, backups, out, progress, extra, chief)
        started, progress.started_at = time.monotonic(), time.time()
        model.fit(train, validation_data=val, epochs=epochs, callbacks=callbacks, verbose=0)
        train_seconds = time.monotonic() - started
        scores = model.evaluate(val, verbose=0, return_dict=True)
        matrix = confusion_matrix(model, val, data.num_classes)
    epochs_run, resumed = len(progress.epoch_seconds), callbacks[0].restored_epoch + 1
    stopped_by = next((getattr(cb, "why", "") for cb in extra if getattr(cb, "why", "")), "")
    record = TrialRecord(
        candidate=trial.name, architecture=trial.candidate, learning_rate=trial.learning_rate,
        batch_per_replica=trial.batch_per_replica,
        val_accuracy=float(scores["accuracy"]), val_loss=float(scores["loss"]),
        train_seconds=round(train_seconds, 3),
        images_per_second=round(data.train_count * epochs_run / max(sum(progress.train_seconds), 1e-9), 1),
        epochs=epochs, epochs_run=epochs_run, resumed_from_epoch=resumed,
        stopped_early=resumed + epochs_run < epochs, params=int(model.count_params()), history=history,
        started_at=round(progress.started_at, 3), ended_at=round(time.time(), 3),
        allreduce=wire if cfg.allreduce != AllreduceConfig() else ABSENT,   # a file from before keeps its fields
        # Every worker runs it, the chief keeps it: reading batch normalisation's moving statistics
        # (sync-on-read variables) is an all-reduce under MWMS, so one worker alone would hang or
        # mismatch the others' next collective (measured: "Shape mismatch in the collective").
        confusion_matrix=matrix if chief else None,
    )
    log(f"[{task}] {trial.name} done: val_accuracy={record.val_accuracy:.4f} val_loss={record.val_loss:.4f} "
        f"in {train_seconds:.1f} s" + (f" (resumed at epoch {resumed + 1})" if resumed else "")
        + (f" (pruned after epoch {resumed + epochs_run})" if stopped_by == "pruned"
           else f" (stopped early after epoch {resumed + epochs_run})" if record.stopped_early else ""))
    return Outcome(record, model)


def save_best(model: tf.keras.Model, cfg: TrainConfig, chief: bool) -> None:
    """Every worker saves (the all-reduce of variables needs them all); only the chief's copy stays."""
    with write_dir(Path(cfg.results_dir), chief) as out:
        model.save(str(out / "best_model.keras"))
        with contextlib.redirect_stdout(io.StringIO()):  # export prints every captured tensor
            model.export(str(out / "saved_model"))
    if chief:
        mlflow_model.export(Path(cfg.results_dir))     # with `tracking:`: the same model in MLflow's format


def load_state(cfg: TrainConfig, task: str, strategy, trials: Optional[list[Trial]]) -> SearchState:
    """This worker's search state, agreed with the others', counting this start. `trials`: the
    grid's, when known in advance (a study hands trials out one by one: None)."""
    state = SearchState.load(backup_root(cfg, task) / "search_state.json")
    if trials is not None and [r["candidate"] for r in state.done] != [t.name for t in trials[:len(state.done)]]:
        state.done = []  # the candidate list changed: what was done no longer applies
    state.agree(strategy)
    state.starts += 1
    state.save()
    return state


def remove_backups(cfg: TrainConfig, task: str) -> None:
    """The search finished: this worker's backups are no longer needed."""
    root = backup_root(cfg, task)
    shutil.rmtree(root, ignore_errors=True)
    with contextlib.suppress(OSError):
        root.parent.rmdir()  # the shared parent, once every worker's folder is gone
