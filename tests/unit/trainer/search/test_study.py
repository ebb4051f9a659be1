"""The study (trainer/search/study.py) over Optuna, without TensorFlow: which trials run, in what order,
which are pruned at a rung, and what becomes of a lost host's trial."""
from __future__ import annotations

import math

from trainer.spec.config import TrainConfig
from trainer.spec.space import rungs
from trainer.spec.trial_record import TrialRecord
from trainer.search.study import Study


def cfg(**search) -> TrainConfig:
    return TrainConfig.model_validate({"candidates": ["small_cnn", "deep_cnn"], "epochs": 9, "search": search})


def finish(study: Study, trial, acc: float, state: str = "complete") -> None:
    study.finish(trial.number, TrialRecord(candidate=trial.name, val_accuracy=acc, val_loss=1 - acc, train_seconds=1.0,
                                           images_per_second=10.0, params=100, epochs=9, state=state))


def test_a_grid_is_handed_out_in_order_once_each(tmp_path):
    study = Study(cfg(learning_rates=[0.1, 0.01], pruner="asha"), tmp_path)
    seen = []
    while (trial := study.next("h0")) is not None:
        seen.append((trial.name, trial.candidate, trial.learning_rate))
        finish(study, trial, 0.5)
    assert seen == [("small_cnn@lr=0.1,bs=32", "small_cnn", 0.1), ("small_cnn@lr=0.01,bs=32", "small_cnn", 0.01),
                    ("deep_cnn@lr=0.1,bs=32", "deep_cnn", 0.1), ("deep_cnn@lr=0.01,bs=32", "deep_cnn", 0.01)]
    assert study.done() and study.counts()["done"] == 4


def test_a_sampled_search_draws_its_budget_from_the_ranges_and_repeats_with_its_seed(tmp_path):
    space = {"sampler": "tpe", "trials": 6, "seed": 7, "learning_rate": {"log_uniform": [1e-4, 1e-1]},
             "hyperparameters": {"small_cnn": {"width": {"log_integer": [16, 128]}}}}
    draws = []
    for run in ("a", "b"):
        study, drawn = Study(cfg(**space), tmp_path / run), []
        while (trial := study.next()) is not None:
            assert 1e-4 <= trial.learning_rate <= 1e-1
            assert trial.candidate == "deep_cnn" or 16 <= trial.hyperparameters["width"] <= 128
            drawn.append((trial.candidate, trial.learning_rate, tuple(trial.hyperparameters.items())))
            finish(study, trial, trial.learning_rate * 5)
        draws.append(drawn)
    assert len(draws[0]) == 6 and draws[0] == draws[1]
    assert all(name.startswith(("small_cnn#", "deep_cnn#")) for name in (r["candidate"] for r in study.records()))


def test_asha_stops_a_trial_that_falls_behind_at_its_first_rung(tmp_path):
    study = Study(cfg(learning_rates=[0.1, 0.01, 0.001], pruner="asha", min_epochs=1, reduction_factor=3), tmp_path)
    assert rungs(study.cfg) == [1, 3]
    good = study.next()
    assert [study.report(good.number, e, 0.9, 1.0) for e in range(1, 10)] == [False] * 9
    finish(study, good, 0.9)
    bad = study.next()
    assert study.report(bad.number, 1, 0.1, 1.0) is True                 # behind the top 1/3 at epoch 1
    finish(study, bad, 0.1, "pruned")
    record = next(r for r in study.records() if r["trial"] == bad.number)
    assert record["state"] == "pruned" and study.counts()["pruned"] == 1
    diverged = study.next()
    assert study.report(diverged.number, 1, math.nan, 1.0) is True       # NaN: not worth its epochs


def test_asha_tells_trials_at_the_same_accuracy_apart_by_their_loss_as_the_leaderboard_does(tmp_path):
    study = Study(cfg(learning_rates=[0.1, 0.01], pruner="asha", min_epochs=1, reduction_factor=2), tmp_path)
    first = study.next()
    assert study.report(first.number, 1, 0.25, 1.3) is False         # at chance, but learning
    finish(study, first, 0.75)
    behind = study.next()
    assert study.report(behind.number, 1, 0.25, 6.5) is True         # at chance too, and diverging


def test_a_lost_hosts_trial_goes_to_another_host_with_the_same_values_outside_the_budget(tmp_path):
    study = Study(cfg(sampler="random", trials=2, seed=1, learning_rate={"log_uniform": [1e-4, 1e-1]}), tmp_path)
    first = study.next("h1")
    study.report(first.number, 1, 0.4, 1.0)
    assert study.resume_or_next("h1").number == first.number         # h1 came back in time: its own trial again
    retry_name = study.lose(first.number, "h1 stopped answering for 60 s")
    assert retry_name == f"{first.name}~r1" and study.lose(first.number, "again") is None
    retry = study.next("h2")
    assert (retry.name, retry.learning_rate, retry.candidate) == (retry_name, first.learning_rate, first.candidate)
    finish(study, retry, 0.8)
    second = study.next("h2")
    assert second is not None and second.name != retry.name           # the retry did not use up the budget
    finish(study, second, 0.6)
    assert study.next("h2") is None and study.done()
    lost = next(r for r in study.records() if r["trial"] == first.number)
    assert lost["state"] == "retried" and lost["retried_as"] == retry_name and lost["host"] == "h1"
    assert lost["curve"] == [0.4] and math.isnan(lost["val_loss"]) and lost["learning_rate"] == first.learning_rate
    assert next(r for r in study.records() if r["candidate"] == retry_name)["retry_of"] == first.number


def test_a_restarted_chief_resumes_the_study_from_its_folder(tmp_path):
    study = Study(cfg(learning_rates=[0.1, 0.01]), tmp_path)
    finish(study, study.next(), 0.7)
    running = study.next("h0")
    again = Study(cfg(learning_rates=[0.1, 0.01]), tmp_path)          # a new process, the same study.db
    assert again.resume_or_next("h0").number == running.number
    assert again.report(running.number, 1, 0.5, 1.0) is False
    finish(again, running, 0.6)
    assert [r["state"] for r in again.records()] == ["complete", "complete"]


def test_a_trial_at_its_last_epoch_is_not_judged(tmp_path):
    study = Study(cfg(learning_rates=[0.1, 0.01, 0.001], pruner="asha", min_epochs=1, reduction_factor=3, max_epochs=3),
                  tmp_path)
    first = study.next()
    assert [study.report(first.number, e, 0.9, 0.1) for e in (1, 2, 3)] == [False] * 3
    finish(study, first, 0.9)
    behind_last = study.next()
    assert [study.report(behind_last.number, e, 0.95, 0.1) for e in (1, 2)] == [False, False]
    assert study.report(behind_last.number, 3, 0.1, 2.0) is False          # far behind, but trained to the end
    finish(study, behind_last, 0.1)
    assert next(r for r in study.records() if r["trial"] == behind_last.number)["state"] == "complete"


def test_a_trial_told_to_stop_is_told_so_again_after_its_host_restarted(tmp_path):
    search = {"learning_rates": [0.1, 0.01], "pruner": "asha", "min_epochs": 1, "reduction_factor": 2}
    study = Study(cfg(**search), tmp_path)
    good = study.next("h0")
    study.report(good.number, 1, 0.9, 0.1)
    finish(study, good, 0.9)
    bad = study.next("h0")
    assert study.report(bad.number, 1, 0.1, 2.0) is True
    again = Study(cfg(**search), tmp_path)                          # the chief restarted before `finish`
    assert again.resume_or_next("h0").number == bad.number
    assert again.report(bad.number, 2, 0.95, 0.1) is True               # resumed past its rung: still stopped
    finish(again, bad, 0.95)
    record = next(r for r in again.records() if r["trial"] == bad.number)
    assert (record["state"], record["pruned_at_epoch"]) == ("pruned", 1)


def test_a_study_for_another_space_is_not_resumed(tmp_path):
    first = Study(cfg(sampler="random", trials=2, learning_rates=[0.01, 0.001]), tmp_path)
    for _ in range(2):
        finish(first, first.next(), 0.8)
    same = Study(cfg(sampler="random", trials=2, learning_rates=[0.01, 0.001]), tmp_path)
    assert same.done() and len(same.records()) == 2                       # a restart: the same search
    said = []
    other = Study(cfg(sampler="random", trials=2, learning_rates=[0.5, 0.2]), tmp_path, log=said.append)
    assert not other.done() and other.records() == [] and "the search changed" in said[0]
    assert other.next().learning_rate in (0.5, 0.2)


def test_the_finished_study_is_copied_out_whole(tmp_path):
    import optuna
    study = Study(cfg(learning_rates=[0.1, 0.01]), tmp_path / "backup")
    while (trial := study.next()) is not None:
        finish(study, trial, 0.7)
    study.export(tmp_path / "study.db")
    copy = optuna.load_study(study_name="tfcompose", storage=f"sqlite:///{tmp_path / 'study.db'}")
    assert [t.state.name for t in copy.trials] == ["COMPLETE"] * 4 and not list(tmp_path.glob("*.tmp"))


def test_a_trial_lost_again_and_again_fails_for_good_and_one_failing_on_its_own_is_not_retried(tmp_path):
    study = Study(cfg(sampler="random", trials=2, seed=3, learning_rates=[0.1, 0.01]), tmp_path)
    trial, names = study.next("h1"), []
    for host in ("h2", "h3", "h4"):
        names.append(study.lose(trial.number, "silent"))
        trial = study.next(host)
    assert names == [f"{names[0].split('~')[0]}~r1", f"{names[0].split('~')[0]}~r2", ""]
    assert trial.name != names[0].split("~")[0] and "~" not in trial.name    # the budget's second trial, not a retry
    study.fail(trial.number, "ValueError: Invalid value 5.0 received for 'rate'")
    assert study.next("h4") is None and study.done()
    states = [r["state"] for r in study.records()]
    assert states == ["retried", "retried", "failed", "failed"]
    assert "lost 3 times" in study.records()[2]["why"] and "Invalid value" in study.records()[3]["why"]
    # Sent no figures, yet each has its own times (#47: MLflow's runs span them): handed out → ended.
    import time
    assert all(time.time() - 600 < r["started_at"] <= r["ended_at"] <= time.time() + 1 for r in study.records())


def drain(study: Study, host: str = "h0", acc=lambda t: 0.5) -> list:
    trials = []
    while (trial := study.next(host)) is not None:
        trials.append(trial)
        finish(study, trial, acc(trial))
    return trials


def values_of(trial) -> tuple:
    return (trial.candidate, trial.learning_rate, trial.batch_per_replica, tuple(sorted(trial.hyperparameters.items())))


SMALL_DISCRETE = {"sampler": "tpe", "seed": 0, "learning_rates": [0.1, 0.01, 0.001],
                  "batch_per_replica": [16, 32], "hyperparameters": {"small_cnn": {"width": [16, 32]}}}


def test_tpe_over_a_small_discrete_space_never_trains_the_same_values_twice(tmp_path):
    # 3 rates × 2 batches × (2 widths for small_cnn + 1 for deep_cnn) = 18 points, 14 trials
    study = Study(cfg(**SMALL_DISCRETE, trials=14), tmp_path)
    trials = drain(study, acc=lambda t: t.learning_rate)       # a signal TPE can chase into one corner
    assert len(trials) == 14 and len({values_of(t) for t in trials}) == 14
    assert [t.name.split("#")[1] for t in trials] == [f"{k:03d}" for k in range(1, 15)]   # no number skipped
    assert len(study.records()) == 14 and study.counts()["done"] == 14


def test_a_used_up_space_ends_the_search_saying_so(tmp_path):
    said = []
    study = Study(cfg(sampler="random", seed=1, trials=30, learning_rates=[0.1, 0.01], batch_per_replica=[16, 32]),
                  tmp_path, log=said.append)
    trials = drain(study)
    assert len(trials) == 8 and len({values_of(t) for t in trials}) == 8      # 2 candidates × 2 × 2
    assert study.done() and study.exhausted and study.counts()["left"] == 0
    assert any("every one of the search's 8 combination(s) has been tried" in line for line in said)


def test_a_restarted_chief_draws_on_instead_of_drawing_its_first_points_again(tmp_path):
    search = {"sampler": "tpe", "seed": 5, "trials": 8, "learning_rate": {"log_uniform": [1e-4, 1e-1]}}
    study = Study(cfg(**search), tmp_path)
    first = [study.next() for _ in range(4)]
    for trial in first:
        finish(study, trial, 0.5)
    resumed = Study(cfg(**search), tmp_path)                       # a new process on the same study.db
    later = drain(resumed)
    assert len(later) == 4
    assert not {t.learning_rate for t in first} & {t.learning_rate for t in later}
    assert len(resumed.study.get_trials()) == 8          # not even a repeated draw to throw away: the stream went on
    assert [t.name.split("#")[1] for t in first + later] == [f"{k:03d}" for k in range(1, 9)]


def test_a_retry_waits_for_a_host_that_did_not_fail_it_while_there_are_others(tmp_path):
    study = Study(cfg(sampler="random", trials=3, seed=2, learning_rates=[0.1, 0.01]), tmp_path)
    trial = study.next("h1")
    retry = study.lose(trial.number, "h1 ran out of memory")
    again = study.next("h1", others=frozenset({"h2"}))
    assert again.name != retry and "~" not in again.name              # h1 gets a fresh trial, not its own back
    assert study.next("h2", others=frozenset({"h1"})).name == retry
    assert study.counts()["left"] == 1


def test_a_grid_of_ten_billion_points_is_never_built(tmp_path):
    import time
    lists = {f"a{i}": list(range(10)) for i in range(10)}
    config = TrainConfig.model_validate({"candidates": ["my_models:wide"], "epochs": 2,
                                         "search": {"hyperparameters": {"my_models:wide": lists}, "trials": 3}})
    started = time.monotonic()
    study = Study(config, tmp_path)
    names = [t.name for t in drain(study)]
    assert time.monotonic() - started < 20 and len(names) == 3
    assert names[1].endswith("a8=0,a9=1") and names[2].endswith("a8=0,a9=2")     # the grid's order, point by point


def test_a_trial_drawn_but_never_handed_out_when_the_chief_stopped_is_dropped_not_retried(tmp_path):
    """The chief killed between Optuna's ask and the hand-out, its values half drawn: after the
    resume, no host lost that trial. Retried, it once took a name past the budget and trained values
    already trained, and the next results.json raised KeyError on its missing values (CI)."""
    from trainer.search import draws
    search = {"sampler": "random", "trials": 3, "seed": 1, "learning_rate": {"log_uniform": [1e-4, 1e-1]}}
    study = Study(cfg(**search), tmp_path)
    finish(study, study.next("h0"), 0.5)
    half = study.study.ask()                    # killed mid-draw: the candidate drawn, its learning rate not
    half.suggest_categorical("candidate", ["small_cnn", "deep_cnn"])
    whole = draws.sampled(study.study, study.cfg, {}, study.seed, study.size)     # drawn, not yet named
    resumed = Study(cfg(**search), tmp_path)    # a new process on the same study.db
    assert resumed.running_hosts() == {} and resumed.lose(whole.number, "h0 was lost") is None
    assert resumed.retries.waiting() == [] and resumed.counts()["running"] == 0
    later = drain(resumed)
    assert [t.name.split("#")[1] for t in later] == ["002", "003"]         # the budget, each number once
    assert [r["candidate"].split("#")[1] for r in resumed.records()] == ["001", "002", "003"]


def test_a_kept_trial_whose_values_were_never_all_drawn_is_recorded_without_them(tmp_path):
    """A study.db from before such trials were dropped: one ended as 'retried' with only its
    candidate drawn. results.json still gets written, that trial with no values."""
    import json

    import optuna
    from trainer.search.study_records import NAME, RECORD
    search = {"sampler": "random", "trials": 2, "seed": 1, "learning_rate": {"log_uniform": [1e-4, 1e-1]}}
    study = Study(cfg(**search), tmp_path)
    half = study.study.ask()
    half.suggest_categorical("candidate", ["small_cnn", "deep_cnn"])
    half.set_user_attr(NAME, "small_cnn#007")
    half.set_user_attr(RECORD, json.dumps({"state": "retried", "why": "h0 was lost"}))
    study.study.tell(half, state=optuna.trial.TrialState.FAIL)
    [record] = study.records()
    assert (record["candidate"], record["state"], record["hyperparameters"]) == ("small_cnn#007", "retried", {})


def test_every_record_the_study_keeps_parses_as_a_trial_record_and_writes_back_the_same(tmp_path):
    """results.json's record of each state (complete, pruned, retried, failed) read out of study.db
    is a TrialRecord's JSON: it parses, checked, and writes back key for key."""
    import json
    study = Study(cfg(learning_rates=[0.1, 0.01, 0.001], pruner="asha", min_epochs=1, reduction_factor=3), tmp_path)
    good = study.next("h0")
    assert [study.report(good.number, e, 0.9, 1.0) for e in range(1, 10)] == [False] * 9
    finish(study, good, 0.9)
    bad = study.next("h0")
    assert study.report(bad.number, 1, 0.1, 1.0) is True
    finish(study, bad, 0.1)
    assert study.lose(study.next("h1").number, "h1 stopped answering")
    study.fail(study.next("h0").number, "ValueError: Invalid value")      # the retry, refused by its builder
    records = study.records()
    assert [r["state"] for r in records] == ["complete", "pruned", "retried", "failed"]
    for i, record in enumerate(records):
        parsed = TrialRecord.from_json(record, f"candidates[{i}]")
        assert json.dumps(parsed.to_json(), sort_keys=True) == json.dumps(record, sort_keys=True)
    assert records[1]["pruned_at_epoch"] == 1 and records[0]["pruned_at_epoch"] is None
