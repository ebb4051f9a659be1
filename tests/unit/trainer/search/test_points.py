"""A search's points without Optuna (trainer/search/points.py): values named per candidate, sameness,
and the untried point taken directly when the sampler keeps repeating itself."""
from __future__ import annotations

import math
import random

from hypothesis import given, settings, strategies as st

from trainer.search.points import all_points, draw, params_of, point_key, untried
from trainer.spec.config import Range, TrainConfig


def cfg(**search) -> TrainConfig:
    return TrainConfig.model_validate({"candidates": ["small_cnn", "deep_cnn"], "epochs": 4,
                                       "search": {"sampler": "random", "trials": 4, **search}})


def test_the_rate_and_batch_are_shared_and_a_candidates_own_values_are_its_own():
    assert params_of("small_cnn", {"learning_rate": 0.1, "width": 16}) == {
        "candidate": "small_cnn", "learning_rate": 0.1, "small_cnn.width": 16}
    assert point_key({"b": 1, "a": 2}) == point_key({"a": 2, "b": 1})


def test_an_untried_point_is_one_never_tried_and_none_once_the_space_is_used_up():
    config = cfg(learning_rates=[0.1, 0.01])
    every = [point_key(p) for p in all_points(config)]
    assert len(every) == 4 and len(set(every)) == 4
    tried = {}
    for _ in range(4):
        point = untried(config, 1, 4, tried)
        assert point_key(point) not in tried
        tried[point_key(point)] = len(tried)
    assert untried(config, 1, 4, tried) is None
    assert untried(config, 1, 4, {}) == untried(config, 1, 4, {})         # the same study state, the same point


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(["uniform", "log_uniform", "integer", "log_integer"]), st.integers(0, 2 ** 32))
def test_a_drawn_value_lies_in_its_range(kind, seed):
    low, high = (1, 64) if "integer" in kind else (1e-4, 1e-1)
    spec = Range.model_validate({kind: [low, high]})
    value = draw(random.Random(seed), spec)
    assert low <= value <= high and (isinstance(value, int) if "integer" in kind else math.isfinite(value))
