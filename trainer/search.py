"""The model search: every candidate trained in turn by all workers, evaluated, the best saved."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import time
from dataclasses import dataclass, field
from pathlib import Path

import tensorflow as tf

from trainer import models
from trainer.config import TrainConfig
from trainer.data import Data
from trainer.errors import ConfigError
from trainer.results import safe_name, write_dir, write_history


class EpochProgress(tf.keras.callbacks.Callback):
    """One line per epoch: candidate, epoch, loss, accuracy, validation, images/s."""

    def __init__(self, candidate: str, task: str, images: int, epochs: int, log):
        super().__init__()
        self.candidate, self.task, self.images, self.epochs, self.log = candidate, task, images, epochs, log
        self.epoch_seconds: list[float] = []
        self.first_epoch: int | None = None

    def on_epoch_begin(self, epoch, logs=None):
        self.first_epoch = epoch if self.first_epoch is None else self.first_epoch
        self._t0 = time.monotonic()

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.monotonic() - self._t0
        self.epoch_seconds.append(seconds)
        logs = logs or {}
        self.log(f"[{self.task}] {self.candidate} epoch {epoch + 1}/{self.epochs} "
                 f"loss={logs.get('loss', float('nan')):.4f} accuracy={logs.get('accuracy', float('nan')):.4f} "
                 f"val_loss={logs.get('val_loss', float('nan')):.4f} val_accuracy={logs.get('val_accuracy', float('nan')):.4f} "
                 f"{self.images / max(seconds, 1e-9):.0f} img/s")


def backup_root(cfg: TrainConfig) -> Path:
    return Path(cfg.backup_dir) if cfg.backup_dir else Path(cfg.results_dir) / "backup"


def tensorboard_callback(log_dir: Path) -> list:
    """TensorBoard logs when the tensorboard package is installed (TF 2.21 no longer requires it)."""
    if importlib.util.find_spec("tensorboard") is None:
        return []
    return [tf.keras.callbacks.TensorBoard(str(log_dir), profile_batch=0)]


@dataclass
class Outcome:
    record: dict
    model: tf.keras.Model = field(repr=False)


def compile_candidate(name: str, cfg: TrainConfig, data: Data, strategy) -> tf.keras.Model:
    with strategy.scope():
        model = models.build(name, data.input_shape, data.num_classes, cfg.weights)
        if model.output_shape[-1] != data.num_classes:
            raise ConfigError(f"candidates: {name!r} outputs {model.output_shape[-1]} classes. "
                              f"Expected {data.num_classes} (one per class folder).")
        # No jit_compile: XLA is incompatible with cross-worker all-reduce (tensorflow#58961).
        model.compile(optimizer=tf.keras.optimizers.Adam(cfg.learning_rate),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def train_candidate(name: str, cfg: TrainConfig, data: Data, strategy, task: str, chief: bool, log) -> Outcome:
    tf.keras.utils.set_random_seed(cfg.seed)  # the same initial weights on every worker
    model = compile_candidate(name, cfg, data, strategy)
    results = Path(cfg.results_dir)
    progress = EpochProgress(name, task, data.train_count, cfg.epochs, log)
    with write_dir(results, chief) as out:
        callbacks = [
            # tf_keras handles the chief/worker split itself: the chief writes backup/<c>/chief.
            tf.keras.callbacks.BackupAndRestore(str(backup_root(cfg) / safe_name(name))),
            progress,
        ] + tensorboard_callback(out / "tensorboard" / safe_name(name))
        started = time.monotonic()
        history = model.fit(data.train, validation_data=data.val, epochs=cfg.epochs, callbacks=callbacks, verbose=0)
        train_seconds = time.monotonic() - started
        scores = model.evaluate(data.val, verbose=0, return_dict=True)
        if chief:
            write_history(out / "history" / f"{safe_name(name)}.csv", history.history)
    epochs_run = len(progress.epoch_seconds)
    record = {
        "candidate": name,
        "val_accuracy": float(scores["accuracy"]),
        "val_loss": float(scores["loss"]),
        "train_seconds": round(train_seconds, 3),
        "images_per_second": round(data.train_count * epochs_run / max(sum(progress.epoch_seconds), 1e-9), 1),
        "epochs": cfg.epochs,
        "epochs_run": epochs_run,
        "resumed_from_epoch": progress.first_epoch or 0,
        "params": int(model.count_params()),
        "history": f"history/{safe_name(name)}.csv",
    }
    log(f"[{task}] {name} done: val_accuracy={record['val_accuracy']:.4f} val_loss={record['val_loss']:.4f} "
        f"in {train_seconds:.1f} s")
    return Outcome(record, model)


def save_best(model: tf.keras.Model, cfg: TrainConfig, chief: bool) -> None:
    """Every worker saves (the all-reduce of variables needs them all); only the chief's copy stays."""
    with write_dir(Path(cfg.results_dir), chief) as out:
        model.save(str(out / "best_model.keras"))
        with contextlib.redirect_stdout(io.StringIO()):  # export prints every captured tensor
            model.export(str(out / "saved_model"))
