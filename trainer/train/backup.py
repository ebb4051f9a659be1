"""Crash and resume when hosts do not share a disk.

tf_keras's BackupAndRestore has the chief write `backup_dir/chief` and every worker restore
from it, which needs one folder all workers share (measured: with per-host folders the restart
fails with "Collective instance … expected data_type …"). Here every worker keeps its own full
copy instead: the same files the chief would write, in its own folder (`backup/<host>/`), so a
restart restores each worker from local disk — on one machine or many. Training is synchronous,
so the copies are identical when they are at the same epoch; before training, the workers
compare epochs with an all-gather. A crash (or a host lost) during a save leaves them one save
apart: each keeps its newest two saves, so those ahead go back to the save before and all go on
from the same epoch, losing one epoch instead of the trial. Further apart, they refuse to go on.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import tensorflow as tf

from trainer.cluster.collectives import gather_ints
from trainer.spec.errors import ClusterError


KEEP_SAVES = 2           # tf_keras keeps one; the one before is where workers a save apart meet
EPOCH_KEY = "ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE"     # in a save of WorkerTrainingState's checkpoint


class OwnCopyBackupAndRestore(tf.keras.callbacks.BackupAndRestore):
    """BackupAndRestore where every worker writes (and reads) a full backup of its own."""

    def __init__(self, backup_dir: str, strategy: tf.distribute.Strategy, log=None):
        super().__init__(backup_dir)
        self._strategy = strategy
        self._log = log or (lambda line: None)
        self.restored_epoch = -1

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)  # restores <backup_dir>/chief: this worker's own copy
        state = self._training_state
        manager = state.read_checkpoint_manager
        manager._max_to_keep = KEEP_SAVES
        state.write_checkpoint_manager = manager  # every worker keeps a full copy
        epoch = int(state._ckpt_saved_epoch.numpy())
        epochs = sorted(set(gather_ints(self._strategy, epoch)))
        if len(epochs) == 2 and epochs[1] - epochs[0] == 1:
            epoch = self._meet_one_save_back(manager, epoch, epochs[0])
        elif len(epochs) > 1:
            self._refuse(epochs)
        self.restored_epoch = epoch

    def _meet_one_save_back(self, manager, epoch: int, behind: int) -> int:
        """Every worker at `behind`: those a save ahead restore the save before their newest. All
        take the same decision: each says whether it can, and all go back only if all can."""
        previous = previous_save(manager, behind) if epoch > behind else None
        if not all(gather_ints(self._strategy, int(epoch == behind or previous is not None))):
            self._refuse([behind, behind + 1])
        if previous:
            manager._checkpoint.restore(previous).expect_partial()
        self._log(f"the workers' backups were one save apart (after epoch {behind + 1} and {behind + 2}, from a "
                  f"crash during a save): every worker goes on after epoch {behind + 1}")
        return behind

    def _refuse(self, epochs: list[int]) -> None:
        shutil.rmtree(self.backup_dir, ignore_errors=True)
        raise ClusterError(f"the workers' backups are at different epochs ({epochs}), probably from a "
                           "crash during a save; each worker discarded its backup of this candidate, "
                           "which restarts from its first epoch on the next start.")


def previous_save(manager: tf.train.CheckpointManager, epoch: int) -> str | None:
    """The save before the newest, when it holds `epoch` (a backup from an image that kept one has none)."""
    if len(manager.checkpoints) < 2:
        return None
    path = manager.checkpoints[-2]
    try:
        return path if int(tf.train.load_checkpoint(path).get_tensor(EPOCH_KEY)) == epoch else None
    except (tf.errors.OpError, ValueError, KeyError):
        return None


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
