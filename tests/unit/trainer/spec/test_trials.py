"""A grid's trials: their names in order (no cluster needed)."""
from __future__ import annotations

from trainer.spec.config import TrainConfig
from trainer.spec.trials import expand


def cfg(**kw) -> TrainConfig:
    return TrainConfig.model_validate(kw)


def test_search_space_names_every_trial_in_order():
    names = [t.name for t in expand(cfg(candidates=["small_cnn", "deep_cnn"],
                                        search={"learning_rates": [0.01, 0.001], "batch_per_replica": [16]}))]
    assert names == ["small_cnn@lr=0.01,bs=16", "small_cnn@lr=0.001,bs=16",
                     "deep_cnn@lr=0.01,bs=16", "deep_cnn@lr=0.001,bs=16"]
    assert [t.name for t in expand(cfg(candidates=["small_cnn"]))] == ["small_cnn"]  # no space: plain names
