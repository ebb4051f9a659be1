"""results.json (trainer/results.py): the one rule for the best, refusing what tfcompose did not write."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from trainer import results


def record(name: str, acc: float) -> dict:
    return {"candidate": name, "val_accuracy": acc, "val_loss": 1 - acc, "train_seconds": 1.0,
            "images_per_second": 10.0, "params": 100, "epochs": 2, "history": f"history/{name}.csv"}


def test_one_rule_for_the_best_trial_ties_to_the_lower_loss_and_nan_last():
    trials = [record("first", 0.9), {**record("tie", 0.9), "val_loss": 0.01}, {**record("nan", 0.5), "val_accuracy": float("nan")},
              record("low", 0.2)]
    assert [r["candidate"] for r in results.ranked(trials)] == ["tie", "first", "low", "nan"]
    assert results.best(trials)["candidate"] == "tie"
    assert results.better(trials[1], trials[0]) and not results.better(trials[0], trials[1]) and results.better(trials[3], None)


accuracies = st.integers(0, 10**6).map(lambda right: right / 10**6)     # a validation set of up to a million
losses = st.one_of(st.floats(0, 1e6), st.just(math.nan), st.just(math.inf))


@given(st.tuples(accuracies, losses), st.tuples(accuracies, losses))
def test_the_studys_one_figure_orders_trials_as_the_leaderboard_does(a, b):
    first, second = ({"val_accuracy": acc, "val_loss": loss} for acc, loss in (a, b))
    capped = [min(loss, 1000) if math.isfinite(loss) else 1000 for _, loss in (a, b)]   # losses past 1000 all alike
    # the tie-break resolves losses 1e-3 apart (1e-12 per unit of loss, on an accuracy near 1)
    if results.rank_key(first) < results.rank_key(second) and abs(capped[0] - capped[1]) > 1e-3:
        assert results.score(*a) > results.score(*b)
    if first["val_accuracy"] != second["val_accuracy"]:
        assert (results.score(*a) > results.score(*b)) == (first["val_accuracy"] > second["val_accuracy"])


def test_the_studys_figure_is_nan_only_when_the_accuracy_is():
    assert math.isnan(results.score(math.nan, 0.1)) and results.score(0.5, math.nan) == results.score(0.5, 1e9) < 0.5


@pytest.mark.parametrize("doc, field", [
    ({"schema": 1, "candidates": []}, "no candidates"),
    ({"schema": 2, "candidates": [record("t", 0.5)]}, "no candidates"),
    ({"schema": 1, "candidates": [{**record("t", 0.5), "val_accuracy": "high"}]}, "candidates[0].val_accuracy"),
    ({"schema": 1, "candidates": [{"candidate": "t"}]}, "candidates[0].val_accuracy"),
    ({"schema": 1, "candidates": [{**record("t", 0.5), "history": "../../etc/passwd"}]}, "history"),
    ({"schema": 1, "candidates": [{**record("t", 0.5), "history": "/etc/passwd"}]}, "history"),
    ([1, 2], "no candidates"),
])
def test_results_that_tfcompose_did_not_write_are_refused_by_name(doc, field):
    with pytest.raises(results.ResultsError, match=field.replace("[", r"\[").replace("]", r"\]")):
        results.check(doc, "r.json")


def test_the_best_is_a_trial_trained_to_the_end_before_a_pruned_or_lost_one():
    lost = {**record("lost", 0.99), "state": "retried"}                  # its partial curve's last figure
    pruned = {**record("pruned", 0.95), "state": "pruned"}
    trials = [lost, pruned, {**record("done", 0.85), "state": "complete"}, record("grid", 0.80)]
    assert [r["candidate"] for r in results.ranked(trials)] == ["done", "grid", "pruned", "lost"]
    assert results.best([lost, pruned])["candidate"] == "pruned"


def test_results_json_refuses_a_number_no_reader_can_use():
    with pytest.raises(results.ResultsError, match=r"candidates\[0\].train_seconds"):
        results.check({"schema": 1, "candidates": [{**record("t", 0.5), "train_seconds": 10 ** 400}]}, "r.json")


@pytest.mark.parametrize("key, bad", [("started_at", "yesterday"), ("ended_at", -1.0), ("gpu_hours", True),
                                      ("gpu_utilization", 140.0), ("energy_wh", float("inf")), ("cpu_hours", -0.5),
                                      ("telemetry_coverage", 1.5)])
def test_a_trials_times_and_telemetry_figures_are_checked(key, bad):
    good = {**record("t", 0.5), "started_at": 1.7e9, "ended_at": 1.7e9 + 60, "gpu_hours": 0.03, "gpu_utilization": 87.5,
            "energy_wh": 12.5, "cpu_hours": 0.1, "telemetry_coverage": 1.0}
    results.check({"schema": 1, "candidates": [good]}, "r.json")
    with pytest.raises(results.ResultsError, match=rf"candidates\[0\].{key}: Received"):
        results.check({"schema": 1, "candidates": [{**good, key: bad}]}, "r.json")


def test_a_parallel_host_tells_the_chief_when_its_trial_ran_and_nothing_it_measured_itself():
    sent = {"val_accuracy": 0.5, "started_at": 1.7e9, "ended_at": 1.7e9 + 5.5, "gpu_hours": 9.0}
    assert results.host_figures(sent, 2, "h1's trial 3") == {"val_accuracy": 0.5, "started_at": 1.7e9, "ended_at": 1.7e9 + 5.5}
    with pytest.raises(results.ResultsError, match="started_at"):
        results.host_figures({"started_at": "noon"}, 2, "h1's trial 3")
