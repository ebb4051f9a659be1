"""results.json (trainer/spec/results.py): the one rule for the best, and what the trainer writes passes its own check."""
from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st
from support.results_docs import document, record
from trainer.spec import results


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


def test_the_best_is_a_trial_trained_to_the_end_before_a_pruned_or_lost_one():
    lost = {**record("lost", 0.99), "state": "retried"}                  # its partial curve's last figure
    pruned = {**record("pruned", 0.95), "state": "pruned"}
    trials = [lost, pruned, {**record("done", 0.85), "state": "complete"}, record("grid", 0.80)]
    assert [r["candidate"] for r in results.ranked(trials)] == ["done", "grid", "pruned", "lost"]
    assert results.best([lost, pruned])["candidate"] == "pruned"


def test_what_the_trainer_itself_writes_passes_its_own_check():
    """A failed trial of a study (no figures but NaN), a pruned one and a retried one, as study.py writes them."""
    lost = {**record("lost", float("nan")), "val_loss": float("nan"), "train_seconds": 0.0, "images_per_second": 0.0,
            "params": 0, "state": "failed", "why": "lost 3 times", "curve": [], "epochs_run": 0}
    pruned = {**record("pruned", 0.4), "state": "pruned", "pruned_at_epoch": 1, "confusion_matrix": None}
    retried = {**record("retried", 0.3), "state": "retried", "retried_as": "retried~r1", "retry_of": 2}
    results.check(document(lost, pruned, retried), "r.json")
    assert results.parse(results.dumps(document(pruned)), "r.json")["candidates"][0]["pruned_at_epoch"] == 1
