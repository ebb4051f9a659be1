"""A trial's history file read back (trainer/spec/history.py)."""
from __future__ import annotations

import math

from trainer.spec import history


def test_a_resumed_trials_curve_keeps_the_epochs_before_the_restart(tmp_path):
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "t.csv").write_text("epoch,loss,accuracy,val_loss,val_accuracy\n"
                                                "1,1.0,0.5,0.9,0.25\n2,0.8,0.6,0.7,0.5\n3,0.6,0.7,0.5,0.75\n")
    after_restart = [{"val_accuracy": 0.75}]                       # this process saw epoch 3 only
    assert history.curve_of(tmp_path, {"history": "history/t.csv"}, after_restart) == [0.25, 0.5, 0.75]
    assert history.curve_of(tmp_path, {"history": "history/none.csv"}, after_restart) == [0.75]   # a worker keeps none
    assert math.isnan(history.curve_of(tmp_path, {"history": "x"}, [{}])[0])
