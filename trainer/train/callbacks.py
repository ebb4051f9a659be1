"""The Keras callbacks a trial trains with, besides Keras's own (was in trial.py): each epoch's line,
its row of the history CSV and the progress file (`EpochProgress`), the chief's state mirrored at
each epoch's end under `elastic:` (`ChiefMirror`), how long the first step took (`FirstStepLog`),
and TensorBoard's when it is installed."""
from __future__ import annotations

import csv
import importlib.util
import time
from pathlib import Path
from typing import Optional

import tensorflow as tf

from trainer.spec.progress import Tracker
from trainer.train import mirror

METRICS = ("loss", "accuracy", "val_loss", "val_accuracy")


class EpochProgress(tf.keras.callbacks.Callback):
    """One line per epoch (candidate, epoch, loss, accuracy, training images/s); the chief also keeps the CSV.

    Images/s counts the training steps only: validation and the end-of-epoch backup are timed apart
    (`epoch_seconds` holds whole epochs), so the figure compares across cluster sizes. Each epoch's
    end is kept too (`ended_at`, UTC unix seconds: the CSV's last column, and the progress file's),
    so a tracker shows every figure at the time it was reached; `started_at`, the trial's start,
    is set before fit begins.
    """

    def __init__(self, candidate: str, task: str, images: int, epochs: int, log, csv_path: Optional[Path],
                 tracker: Optional[Tracker] = None, trial_index: int = 1):
        super().__init__()
        self.candidate, self.task, self.images, self.epochs, self.log = candidate, task, images, epochs, log
        self.csv_path, self.tracker, self.trial_index = csv_path, tracker, trial_index
        self.epoch_seconds: list[float] = []
        self.train_seconds: list[float] = []
        self.first_epoch: Optional[int] = None
        self._train_end: Optional[float] = None
        self.started_at = time.time()

    def on_epoch_begin(self, epoch, logs=None):
        if self.first_epoch is None:
            self.first_epoch = epoch
            self._keep_csv_rows_before(epoch)
        self._t0, self._train_end = time.monotonic(), None

    def on_test_begin(self, logs=None):  # fit's validation pass: the training steps are over
        if self._train_end is None:
            self._train_end = time.monotonic()

    def on_epoch_end(self, epoch, logs=None):
        now = time.monotonic()
        self.epoch_seconds.append(now - self._t0)
        self.train_seconds.append((self._train_end or now) - self._t0)
        logs = {k: float(logs.get(k, float("nan"))) for k in METRICS} if logs else dict.fromkeys(METRICS, float("nan"))
        self.log(f"[{self.task}] {self.candidate} epoch {epoch + 1}/{self.epochs} "
                 + " ".join(f"{k}={v:.4f}" for k, v in logs.items())
                 + f" {self.images / max(self.train_seconds[-1], 1e-9):.0f} img/s")
        ended_at = round(time.time(), 3)
        if self.csv_path:
            with self.csv_path.open("a", newline="") as fh:
                csv.writer(fh).writerow([epoch + 1, *(f"{logs[k]:.6g}" for k in METRICS), f"{ended_at:.3f}"])
        if self.tracker:
            self.tracker.epoch_done(self.trial_index, self.candidate, epoch + 1, self.epochs, self.epoch_seconds[-1],
                                    self.images / max(self.train_seconds[-1], 1e-9), logs,
                                    times=(ended_at, round(self.started_at, 3)))

    def _keep_csv_rows_before(self, epoch: int) -> None:
        """A resumed candidate keeps the epochs it had finished; a fresh one starts a new file."""
        if not self.csv_path:
            return
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        rows = list(csv.reader(self.csv_path.open())) if self.csv_path.exists() and epoch > 0 else []
        kept = [r for r in rows[1:] if r and int(r[0]) <= epoch]
        with self.csv_path.open("w", newline="") as fh:
            csv.writer(fh).writerows([["epoch", *METRICS, "ended_at"], *kept])


class ChiefMirror(tf.keras.callbacks.Callback):
    """elastic: the chief's own state snapshotted at each epoch's end (trainer/train/mirror.py), after
    the backup, the history row and the study's report are written."""

    def __init__(self, backups: Path, results: Path, host: str, progress: "EpochProgress"):
        super().__init__()
        self.backups, self.results, self.host, self.progress = backups, results, host, progress
        self.seconds, self.bytes, self.count = 0.0, 0, 0

    def on_epoch_end(self, epoch, logs=None):
        started = time.monotonic()
        made = mirror.snapshot(self.backups, self.results,
                               {"host": self.host, "trial": self.progress.candidate, "epoch": epoch + 1})
        self.seconds += time.monotonic() - started
        self.bytes += sum(p.stat().st_size for p in made.rglob("*") if p.is_file())
        self.count += 1

    def on_train_end(self, logs=None):
        if self.count:      # what the mirror costs the training: said once per trial
            share = 100 * self.seconds / max(sum(self.progress.epoch_seconds), 1e-9)
            self.progress.log(f"[{self.progress.task}] {self.progress.candidate}: the chief's state snapshotted "
                              f"{self.count} time(s) for its mirror, {self.bytes / self.count / 1e6:.2f} MB and "
                              f"{1000 * self.seconds / self.count:.0f} ms each ({share:.1f} % of the epochs' time)")


class FirstStepLog(tf.keras.callbacks.Callback):
    """One line when fit's first step is done: tracing and the first all-reduce make it much
    slower than the rest, and a user watching the log should see training has begun."""

    _supports_tf_logs = True  # the logs stay tensors: no per-step copy to numpy

    def __init__(self, candidate: str, task: str, log):
        super().__init__()
        self.candidate, self.task, self.log, self.done = candidate, task, log, False

    def on_train_begin(self, logs=None):
        self._t0 = time.monotonic()

    def on_train_batch_end(self, batch, logs=None):
        if not self.done:
            self.done = True
            self.log(f"[{self.task}] {self.candidate} first training step done "
                     f"{time.monotonic() - self._t0:.1f} s after fit began (tracing, first all-reduce)")


def tensorboard_callback(log_dir: Path) -> list:
    """TensorBoard logs when the tensorboard package is installed (TF 2.21 no longer requires it)."""
    if importlib.util.find_spec("tensorboard") is None:
        return []
    return [tf.keras.callbacks.TensorBoard(str(log_dir), profile_batch=0)]
