"""Searched values as text: beside each trial, and the space validate understood."""
from __future__ import annotations

from launcher.report import values


def trial(name: str, **hp) -> dict:
    return {"candidate": name, "hyperparameters": hp}


def test_a_trial_shows_only_the_values_its_run_varied_compactly_and_each_told_apart():
    records = [trial("deep_cnn#006", learning_rate=0.0032, batch_per_replica=32, width=64),
               trial("small_cnn#001", learning_rate=0.05, batch_per_replica=32, width=16, dropout=0.25),
               trial("small_cnn#002", learning_rate=0.000123, batch_per_replica=32, width=128, dropout=0.0)]
    assert values.texts(records) == ["lr 3.2e-3, width 64", "lr 5e-2, width 16, dropout 0.25",
                                     "lr 1.2e-4, width 128, dropout 0"]          # bs 32 everywhere: not shown
    close = [trial("a#1", learning_rate=0.00321), trial("a#2", learning_rate=0.00324)]
    assert values.texts(close) == ["lr 3.21e-3", "lr 3.24e-3"]                  # two digits would read the same


def test_a_grid_trial_carries_its_values_in_its_name_and_a_plain_run_has_none():
    records = [trial("small_cnn@lr=0.01,bs=16", learning_rate=0.01, batch_per_replica=16),
               trial("small_cnn@lr=0.001,bs=16", learning_rate=0.001, batch_per_replica=16)]
    assert values.texts(records) == ["", ""]
    assert values.texts([{"candidate": "small_cnn"}, {"candidate": "deep_cnn"}]) == ["", ""]


def test_numbers_read_alike_within_a_value_and_text_is_made_safe():
    assert values.same_form([0.01, 0.001]) == ["1e-2", "1e-3"]      # not `0.01, 1e-3`
    assert values.same_form([0.0, 0.25]) == ["0", "0.25"] and values.same_form([16, 64]) == ["16", "64"]
    assert values.number(125.7) == "126" and values.number(1.5e5) == "1.5e5"
    assert values.texts([trial("x#1", act="relu\x1b[2J"), trial("x#2", act="gelu" * 20)]) == \
        ["act relu", "act " + ("gelu" * 20)[:39] + "…"]


def test_the_space_validate_echoes_names_sampler_trials_pruner_rungs_mode_and_ranges():
    from trainer.spec.config import TrainConfig
    train = TrainConfig.model_validate({
        "candidates": ["small_cnn", "deep_cnn"], "epochs": 9,
        "search": {"mode": "parallel", "sampler": "tpe", "trials": 24, "seed": 7,
                   "learning_rate": {"log_uniform": [1.0e-4, 1.0e-1]}, "batch_per_replica": [16, 32, 64],
                   "hyperparameters": {"small_cnn": {"width": {"log_integer": [16, 128]}, "dropout": [0.0, 0.25]},
                                       "deep_cnn": {"width": [32, 64, 128]}},
                   "pruner": "asha", "min_epochs": 1, "reduction_factor": 3}})
    lines = values.space_lines(train)
    assert lines[0].startswith("search (parallel: each host trains trials alone, from a queue on the chief, port 2223)")
    assert lines[0].endswith("sampler tpe: 24 trial(s), seed 7")
    assert "pruner asha: judged at epoch(s) 1, 3, the top 1/3 going on" in lines[2]
    assert lines[3:] == ["  every candidate: learning_rate log_uniform 1e-4 … 1e-1; batch_per_replica one of 16, 32, 64",
                         "  small_cnn: width log_integer 16 … 128; dropout one of 0, 0.25",
                         "  deep_cnn: width one of 32, 64, 128"]
    grid = values.space_lines(TrainConfig.model_validate({"search": {"learning_rates": [0.01, 0.001]}}))
    assert "grid: 2 trial(s), every combination in order" in grid[0] and "pruner none" in grid[2]


def test_what_became_of_a_trial_reads_alike_everywhere():
    from launcher.report.values import state_text
    why = "on h1: width 1000 is more than this model takes\nTraceback (most recent call last): …"
    assert state_text({"state": "failed", "why": why}) == "failed: on h1: width 1000 is more than this model takes"
    assert state_text({"state": "failed", "why": "x" * 100}, limit=10) == "failed: " + "x" * 10 + "…"
    assert state_text({"state": "pruned", "pruned_at_epoch": 3}) == "pruned at 3"
    assert state_text({"state": "retried", "retried_as": "a~r1\x1b[31m"}) == "retried as a~r1"   # a host's text, made printable
    assert state_text({"state": "complete"}) == "complete" and state_text({}) == ""
