"""The search a study drives (trainer/trial_loop.py): the parts that need no cluster."""
from __future__ import annotations

import math

from trainer import trial_loop
from trainer.config import TrainConfig


def test_a_resumed_trials_curve_keeps_the_epochs_before_the_restart(tmp_path):
    cfg = TrainConfig.model_validate({"results_dir": str(tmp_path)})
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "t.csv").write_text("epoch,loss,accuracy,val_loss,val_accuracy\n"
                                                "1,1.0,0.5,0.9,0.25\n2,0.8,0.6,0.7,0.5\n3,0.6,0.7,0.5,0.75\n")
    after_restart = [{"val_accuracy": 0.75}]                       # this process saw epoch 3 only
    assert trial_loop.curve_of(cfg, {"history": "history/t.csv"}, after_restart) == [0.25, 0.5, 0.75]
    assert trial_loop.curve_of(cfg, {"history": "history/none.csv"}, after_restart) == [0.75]   # a worker keeps none
    assert math.isnan(trial_loop.curve_of(cfg, {"history": "x"}, [{}])[0])


def test_a_failure_is_one_line_naming_its_kind():
    assert trial_loop.failure(ValueError("Invalid value 5.0\nTraceback …")) == "ValueError: Invalid value 5.0"
    assert trial_loop.failure(MemoryError()) == "MemoryError"
