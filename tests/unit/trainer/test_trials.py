"""Trials, their cost estimate and their placement on hosts (no cluster needed)."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st
from trainer.config import TrainConfig
from trainer.errors import ConfigError
from trainer.trials import expand, place


def cfg(**kw) -> TrainConfig:
    return TrainConfig.model_validate(kw)


def test_search_space_names_every_trial_in_order():
    names = [t.name for t in expand(cfg(candidates=["small_cnn", "deep_cnn"],
                                        search={"learning_rates": [0.01, 0.001], "batch_per_replica": [16]}))]
    assert names == ["small_cnn@lr=0.01,bs=16", "small_cnn@lr=0.001,bs=16",
                     "deep_cnn@lr=0.01,bs=16", "deep_cnn@lr=0.001,bs=16"]
    assert [t.name for t in expand(cfg(candidates=["small_cnn"]))] == ["small_cnn"]  # no space: plain names


def test_only_selects_a_share_and_rejects_unknown_trials():
    space = {"learning_rates": [0.1, 0.2]}
    assert [t.name for t in expand(cfg(search={**space, "only": ["small_cnn@lr=0.2,bs=32"]}))] == ["small_cnn@lr=0.2,bs=32"]
    with pytest.raises(ConfigError, match="search.only: Received 'nope'"):
        expand(cfg(search={**space, "only": ["nope"]}))


@given(n_trials=st.integers(1, 12), n_hosts=st.integers(1, 5))
def test_placement_trains_every_trial_exactly_once(n_trials, n_hosts):
    lrs = [round(0.001 * (i + 1), 4) for i in range(n_trials)]
    c = cfg(candidates=["small_cnn"], search={"learning_rates": lrs})
    hosts = [f"h{i}" for i in range(n_hosts)]
    placed = place(expand(c), hosts, c, 1, 4)
    flat = [name for names in placed.values() for name in names]
    assert sorted(flat) == sorted(t.name for t in expand(c))
    sizes = [len(v) for v in placed.values()]
    assert max(sizes) - min(sizes) <= 1  # equal costs: spread evenly


def test_placement_balances_cost_not_count():
    c = cfg(candidates=["resnet50", "small_cnn", "deep_cnn", "vgg16"], dataset={"image_size": [64, 64]})
    placed = place(expand(c), ["a", "b"], c, 1, 4)
    assert sorted(placed.values(), key=len) == [["resnet50"], ["small_cnn", "deep_cnn", "vgg16"]]
