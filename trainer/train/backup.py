"""Crash and resume when hosts do not share a disk.

tf_keras's BackupAndRestore has the chief write `backup_dir/chief` and every worker restore
from it, which needs one folder all workers share (measured: with per-host folders the restart
fails with "Collective instance … expected data_type …"). Here every worker keeps its own full
copy instead: the same files the chief would write, in its own folder (`backup/<host>/`), so a
restart restores each worker from local disk — on one machine or many. Training is synchronous,
so the copies are identical when they are at the same epoch; before training, the workers
compare epochs with an all-gather and refuse to go on if they differ.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import tensorflow as tf

from trainer.cluster.collectives import gather_ints
from trainer.spec.errors import ClusterError


class OwnCopyBackupAndRestore(tf.keras.callbacks.BackupAndRestore):
    """BackupAndRestore where every worker writes (and reads) a full backup of its own."""

    def __init__(self, backup_dir: str, strategy: tf.distribute.Strategy):
        super().__init__(backup_dir)
        self._strategy = strategy
        self.restored_epoch = -1

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)  # restores <backup_dir>/chief: this worker's own copy
        state = self._training_state
        state.write_checkpoint_manager = state.read_checkpoint_manager  # every worker keeps a full copy
        epoch = int(state._ckpt_saved_epoch.numpy())
        epochs = set(gather_ints(self._strategy, epoch))
        if len(epochs) > 1:
            shutil.rmtree(self.backup_dir, ignore_errors=True)
            raise ClusterError(f"the workers' backups are at different epochs ({sorted(epochs)}), probably from a "
                               "crash during a save; each worker discarded its backup of this candidate, "
                               "which restarts from its first epoch on the next start.")
        self.restored_epoch = epoch


@dataclass
class SearchState:
    """What this worker finished, kept beside its backups: finished candidates are not retrained."""

    path: Path
    starts: int = 0
    done: list = field(default_factory=list)
    best_model: str = ""

    @classmethod
    def load(cls, path: Path) -> "SearchState":
        try:
            doc = json.loads(path.read_text())
            return cls(path, doc.get("starts", 0), doc.get("done", []), doc.get("best_model", ""))
        except (OSError, ValueError):
            return cls(path)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"starts": self.starts, "done": self.done, "best_model": self.best_model}, indent=1))
        tmp.replace(self.path)

    def agree(self, strategy: tf.distribute.Strategy) -> None:
        """Keep only the candidates every worker has finished (a crash may split them by one)."""
        self.done = self.done[:min(gather_ints(strategy, len(self.done)))]
