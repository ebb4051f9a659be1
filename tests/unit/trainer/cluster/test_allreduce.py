"""`allreduce:`: the settings and auto's choice (pure: no TensorFlow). The step itself and its
arithmetic: tests/integration/test_allreduce.py."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from trainer.cluster.allreduce import MAX_EVERY, SHARE, allreduce_ms, choose, max_every, needs_step_time
from trainer.spec.config import AllreduceConfig, TrainConfig
from trainer.spec.overrides import env_overrides
from trainer.spec.load import load_config

SMALL_CNN = 1_493_636          # parameters: 6 MB of float32 gradients


def auto(**kw) -> AllreduceConfig:
    return AllreduceConfig(auto=True, **kw)


def test_allreduce_auto_is_short_for_auto_true_in_yaml_and_the_environment(tmp_path):
    (tmp_path / "train.yaml").write_text("allreduce: auto\n")
    assert load_config(tmp_path / "train.yaml").allreduce == AllreduceConfig(auto=True)
    from_env = load_config(None, env_overrides({"TFC_TRAIN_ALLREDUCE__DTYPE": "bfloat16", "TFC_TRAIN_ALLREDUCE__AUTO": "true"}))
    assert from_env.allreduce == AllreduceConfig(dtype="bfloat16", auto=True)
    assert TrainConfig().allreduce == AllreduceConfig()     # default: float32 every step, nothing picked


def test_a_two_worker_ring_sends_the_gradients_once_each_way():
    # 6 MB over 1 Gbit/s: 48 ms; over 100 Mbit/s: 478 ms; bfloat16 half that; 4 workers: 1.5×
    assert allreduce_ms(SMALL_CNN, "float32", 2, 1000) == pytest.approx(47.8, abs=0.1)
    assert allreduce_ms(SMALL_CNN, "bfloat16", 2, 100) == pytest.approx(239, abs=1)
    assert allreduce_ms(SMALL_CNN, "float32", 4, 1000) == pytest.approx(1.5 * 47.8, abs=0.2)


def test_without_auto_the_settings_are_used_as_written():
    assert (choose(AllreduceConfig(), SMALL_CNN, 2, 100).dtype, choose(AllreduceConfig(), SMALL_CNN, 2, 100).every) == \
        ("float32", 1)
    chosen = choose(AllreduceConfig(dtype="bfloat16", every=4, link_mbit_s=10), SMALL_CNN, 2, 100, step_ms=1)
    assert (chosen.dtype, chosen.every, chosen.auto, chosen.why) == ("bfloat16", 4, False, "as configured")
    assert choose(AllreduceConfig(), SMALL_CNN, 2, 100).stock and not chosen.stock


def test_auto_keeps_float32_every_step_when_the_link_is_fast_enough():
    # deep_cnn's 700 ms step at 1 Gbit/s: 48 ms is under 10 %
    chosen = choose(auto(link_mbit_s=1000), SMALL_CNN, 2, 100, step_ms=700)
    assert (chosen.dtype, chosen.every) == ("float32", 1) and chosen.stock
    assert "link 1,000 Mbit/s" in chosen.why and "step 700 ms" in chosen.why


def test_auto_compresses_before_it_accumulates():
    chosen = choose(auto(link_mbit_s=1000), SMALL_CNN, 2, 100, step_ms=300)   # float32 16 %, bfloat16 8 %
    assert (chosen.dtype, chosen.every) == ("bfloat16", 1)
    assert chosen.expected_ms <= SHARE * 300


def test_auto_accumulates_just_enough_steps_on_a_slow_link():
    chosen = choose(auto(link_mbit_s=100), SMALL_CNN, 2, 100, step_ms=700)     # bfloat16 239 ms: every 4 → 60 ms
    assert (chosen.dtype, chosen.every) == ("bfloat16", 4)
    assert chosen.expected_ms == pytest.approx(239 / 4, abs=0.5) and chosen.expected_ms <= 70
    assert "capped" not in chosen.why


def test_auto_caps_every_and_says_what_the_link_would_need():
    # small_cnn's 25 ms step at 100 Mbit/s would need every 96
    chosen = choose(auto(link_mbit_s=100), SMALL_CNN, 2, steps_per_epoch=100, step_ms=25)
    assert (chosen.dtype, chosen.every) == ("bfloat16", MAX_EVERY)
    assert f"needs every 96, capped at {MAX_EVERY}" in chosen.why
    # a short epoch keeps at least two updates: 6 steps, every at most 3
    assert choose(auto(link_mbit_s=100), SMALL_CNN, 2, steps_per_epoch=6, step_ms=25).every == 3
    assert max_every(1) == 1


def test_auto_never_changes_what_the_user_wrote():
    by_dtype = choose(auto(dtype="float16", link_mbit_s=100), SMALL_CNN, 2, 100, step_ms=700)
    assert (by_dtype.dtype, by_dtype.every) == ("float16", 4)      # every picked for the user's dtype
    by_every = choose(auto(every=2, link_mbit_s=1000), SMALL_CNN, 2, 100, step_ms=300)
    assert (by_every.dtype, by_every.every) == ("float32", 2)     # 48 ms / 2 fits: no need to compress
    assert choose(auto(every=2, link_mbit_s=100), SMALL_CNN, 2, 100, step_ms=300).dtype == "bfloat16"
    both = choose(auto(dtype="float32", every=1, link_mbit_s=10), SMALL_CNN, 2, 100, step_ms=1)
    assert (both.dtype, both.every) == ("float32", 1) and "nothing to pick" in both.why
    assert choose(auto(every=16, link_mbit_s=1), SMALL_CNN, 2, 100, step_ms=1).every == 16   # above the cap: theirs


def test_auto_without_a_measured_link_or_a_peer_keeps_float32_and_says_why():
    assert "no link_mbit_s" in choose(auto(), SMALL_CNN, 2, 100, step_ms=25).why
    single = choose(auto(link_mbit_s=1), SMALL_CNN, 1, 100, step_ms=25)
    assert single.stock and "one replica" in single.why
    assert not needs_step_time(auto(), 2) and not needs_step_time(auto(link_mbit_s=1), 1)
    assert not needs_step_time(auto(dtype="bfloat16", every=2, link_mbit_s=1), 2)
    assert needs_step_time(auto(link_mbit_s=1), 2) and not needs_step_time(AllreduceConfig(link_mbit_s=1), 2)


def test_the_record_for_results_json_says_what_and_why():
    record = choose(auto(link_mbit_s=94.1), SMALL_CNN, 2, 100, step_ms=24.349).record()
    assert record == {"dtype": "bfloat16", "every": MAX_EVERY, "auto": True, "why": record["why"],
                      "link_mbit_s": 94.1, "step_ms": 24.35, "expected_ms": record["expected_ms"]}
    assert record["why"].startswith("auto: link 94 Mbit/s, 1,493,636 gradients, step 24 ms")


@given(link=st.floats(0.1, 1e6), step=st.floats(0.1, 1e5), params=st.integers(1, 10**9),
       replicas=st.integers(2, 64), steps=st.integers(1, 10**5))
def test_auto_meets_the_share_unless_it_says_every_is_capped(link, step, params, replicas, steps):
    chosen = choose(auto(link_mbit_s=link), params, replicas, steps, step_ms=step)
    assert chosen.dtype in ("float32", "bfloat16") and 1 <= chosen.every <= max_every(steps)
    assert chosen.expected_ms <= SHARE * step * (1 + 1e-9) or "capped" in chosen.why
    assert chosen.every == 1 or chosen.dtype == "bfloat16"     # compression comes first


def test_a_tiny_link_speed_is_refused_by_validate_naming_the_field(tmp_path):
    from trainer.spec.errors import ConfigError
    for text in ("allreduce: {auto: true, link_mbit_s: 1.0e-320}", "allreduce: {auto: true, link_mbit_s: 5.0e-324}",
                 "allreduce: {link_mbit_s: 2.0e+6}", "allreduce: {link_mbit_s: .nan}", "allreduce: {link_mbit_s: true}"):
        (tmp_path / "train.yaml").write_text(text + "\n")
        with pytest.raises(ConfigError) as caught:
            load_config(tmp_path / "train.yaml")
        assert "allreduce.link_mbit_s: Received" in str(caught.value)
        assert "Expected a number of Mbit/s from 0.01 to 1,000,000" in str(caught.value)
    assert choose(auto(link_mbit_s=0.01), SMALL_CNN, 2, 100, step_ms=25).every == MAX_EVERY   # the slowest allowed


@given(link=st.floats(allow_nan=True, allow_infinity=True) | st.integers(-10, 10**30),
       step=st.floats(allow_nan=True, allow_infinity=True), params=st.integers(0, 10**15),
       replicas=st.integers(2, 10**4), steps=st.integers(0, 10**9))
def test_auto_decides_without_raising_whatever_numbers_reach_it(link, step, params, replicas, steps):
    # Past validate (a train.yaml written by hand, an older launcher): 1e-320 Mbit/s once made
    # every worker die in math.ceil(inf).
    for settings in (AllreduceConfig.model_construct(auto=True, link_mbit_s=link, dtype=None, every=None),
                     AllreduceConfig.model_construct(auto=True, link_mbit_s=link, dtype="float16", every=None),
                     AllreduceConfig.model_construct(auto=True, link_mbit_s=link, dtype=None, every=3)):
        chosen = choose(settings, params, replicas, steps, step_ms=step)
        assert chosen.dtype in ("float32", "bfloat16", "float16") and 1 <= chosen.every <= 1024
        chosen.line(), chosen.record()
