"""results.json checked (trainer/spec/results_check.py): what tfcompose did not write is refused
by name, every field a reader uses is checked, and a host's figures for its trial too."""
from __future__ import annotations

import re

import pytest
from support.results_docs import document, record
from trainer.spec import results_check


@pytest.mark.parametrize("doc, field", [
    (document(), "no candidates"),
    ({**document(record("t", 0.5)), "schema": 2}, "no candidates"),
    (document({**record("t", 0.5), "val_accuracy": "high"}), "candidates[0].val_accuracy"),
    (document({"candidate": "t"}), "candidates[0].val_accuracy"),
    (document({**record("t", 0.5), "history": "../../etc/passwd"}), "history"),
    (document({**record("t", 0.5), "history": "/etc/passwd"}), "history"),
    ([1, 2], "no candidates"),
])
def test_results_that_tfcompose_did_not_write_are_refused_by_name(doc, field):
    with pytest.raises(results_check.ResultsError, match=field.replace("[", r"\[").replace("]", r"\]")):
        results_check.check(doc, "r.json")


def test_results_json_refuses_a_number_no_reader_can_use():
    with pytest.raises(results_check.ResultsError, match=r"candidates\[0\].train_seconds"):
        results_check.check(document({**record("t", 0.5), "train_seconds": 10 ** 400}), "r.json")


@pytest.mark.parametrize("key, bad", [("started_at", "yesterday"), ("ended_at", -1.0), ("gpu_hours", True),
                                      ("gpu_utilization", 140.0), ("energy_wh", float("inf")), ("cpu_hours", -0.5),
                                      ("telemetry_coverage", 1.5)])
def test_a_trials_times_and_telemetry_figures_are_checked(key, bad):
    good = {**record("t", 0.5), "started_at": 1.7e9, "ended_at": 1.7e9 + 60, "gpu_hours": 0.03, "gpu_utilization": 87.5,
            "energy_wh": 12.5, "cpu_hours": 0.1, "telemetry_coverage": 1.0}
    results_check.check(document(good), "r.json")
    with pytest.raises(results_check.ResultsError, match=rf"candidates\[0\].{key}: Received"):
        results_check.check(document({**good, key: bad}), "r.json")


def test_a_parallel_host_tells_the_chief_when_its_trial_ran_and_nothing_it_measured_itself():
    sent = {"val_accuracy": 0.5, "started_at": 1.7e9, "ended_at": 1.7e9 + 5.5, "gpu_hours": 9.0}
    assert results_check.host_figures(sent, 2, "h1's trial 3") == {"val_accuracy": 0.5, "started_at": 1.7e9, "ended_at": 1.7e9 + 5.5}
    with pytest.raises(results_check.ResultsError, match="started_at"):
        results_check.host_figures({"started_at": "noon"}, 2, "h1's trial 3")


# Every field a reader uses (the report, `runs`, `track`, the leaderboard, the telemetry figures),
# with what a tampered or broken host could write there instead (#46: `epochs_run` as text once
# raised a TypeError in the report, a missing `best` a KeyError in `track` after the trials were sent).
REFORM = {"generation": 1, "at": "2026-11-28T05:00:00Z", "lost": ["h2"], "why": "h2: silent for 46 s",
          "hosts_after": ["h0", "h1"], "workers_before": 3, "candidate": "small_cnn", "epochs_done": 2}
BACK = {**REFORM, "generation": 2, "lost": [], "joined": ["h2"], "why": "", "hosts_after": ["h0", "h1", "h2"],
        "workers_before": 2}           # a host taken back (elastic.rejoin)
WRONG = [
    ("best", None, "best"), ("best", "t", "best"), ("best", {"val_accuracy": 0.5}, "best.candidate"),
    ("best", {"candidate": "nobody", "val_accuracy": 0.5}, "best.candidate"),
    ("best", {"candidate": "t", "val_accuracy": "high"}, "best.val_accuracy"),
    ("best", {"candidate": "t", "val_accuracy": 0.5, "host": 7}, "best.host"),
    ("workers", 0, "workers"), ("workers", 1.5, "workers"), ("workers", 10 ** 30, "workers"),
    ("replicas", "2", "replicas"), ("restarts", -1, "restarts"), ("restarts", True, "restarts"),
    ("mode", "both", "mode"), ("started", 1700000000, "started"), ("finished", "x" * 100, "finished"),
    ("tensorflow", ["2.21"], "tensorflow"), ("precision", None, "precision"),
    ("class_names", "AD,CN", "class_names"), ("class_names", [1, 2], "class_names"),
    ("images", {"train": "many"}, "images"), ("images", {"train": -1}, "images"),
    ("skipped_images", {"count": "x"}, "skipped_images"), ("skipped_images", {"count": 1, "files": [3]}, "skipped_images"),
    ("search", [], "search"), ("search", {"trials": "ten"}, "search.trials"), ("search", {"rungs": [1.5]}, "search.rungs"),
    ("search", {"max_epochs": 1e308}, "search.max_epochs"), ("search", {"reduction_factor": 0}, "search.reduction_factor"),
    ("search", {"lost": {"h1": "t~r1"}}, "search.lost"), ("search", {"hosts": [None]}, "search.hosts"),
    ("search", {"sampler": {"name": "tpe"}}, "search.sampler"),
    ("elastic", {"batch": "keep_global", "workers_at_start": 3, "reforms": [{"generation": 1}]}, "elastic"),
    ("elastic", {"batch": "keep_global", "workers_at_start": 3, "reforms": [{**REFORM, "lost": ["../h1"]}]}, "elastic"),
    ("elastic", {"batch": "keep_global", "workers_at_start": 3, "reforms": [{**REFORM, "why": "\x1b[2J"}]}, "elastic"),
    ("elastic", {"batch": "keep_global", "workers_at_start": 3, "reforms": [{**REFORM, "joined": ["h 2"]}]}, "elastic"),
]
WRONG_IN_A_TRIAL = [
    ("candidate", "", "candidate"), ("candidate", 7, "candidate"), ("val_accuracy", 1e308, "val_accuracy"),
    ("val_accuracy", float("inf"), "val_accuracy"), ("val_accuracy", -0.5, "val_accuracy"), ("val_loss", -1.0, "val_loss"),
    ("train_seconds", float("nan"), "train_seconds"), ("train_seconds", 1e308, "train_seconds"),
    ("images_per_second", float("-inf"), "images_per_second"), ("params", 2.5, "params"), ("params", 10 ** 30, "params"),
    ("epochs", "3", "epochs"), ("epochs", -1, "epochs"), ("epochs_run", "3", "epochs_run"),
    ("resumed_from_epoch", "2", "resumed_from_epoch"), ("resumed_from_epoch", 1e308, "resumed_from_epoch"),
    ("pruned_at_epoch", "2", "pruned_at_epoch"), ("start", -3, "start"), ("trial", "7", "trial"),
    ("stopped_early", "yes", "stopped_early"), ("state", "done", "state"), ("curve", [0.5, 1e308], "curve"),
    ("curve", "0.5", "curve"), ("hyperparameters", {"lr": float("inf")}, "hyperparameters"),
    ("hyperparameters", {"lr": [1]}, "hyperparameters"), ("host", 3, "host"), ("architecture", ["cnn"], "architecture"),
    ("learning_rate", float("nan"), "learning_rate"), ("batch_per_replica", 0, "batch_per_replica"),
    ("retried_as", 1, "retried_as"), ("why", {"error": 1}, "why"),
    ("confusion_matrix", [[1, 2], [3]], "confusion_matrix"), ("confusion_matrix", [[1, -2], [3, 4]], "confusion_matrix"),
    ("history", 3, "history"), ("history", "a\x00b", "history"),
]


@pytest.mark.parametrize("key, value, named", WRONG, ids=[f"{k}={v!r}"[:40] for k, v, _ in WRONG])
def test_every_field_a_reader_uses_is_checked_in_the_document(key, value, named):
    good = document(record("t", 0.5), workers=2, replicas=2, restarts=0, mode="sync", started="2026-11-20T10:00:00",
                    elastic={"batch": "keep_global", "workers_at_start": 3, "reforms": [REFORM, BACK]},
                    finished="2026-11-20T10:05:00", tensorflow="2.21.0", precision="float32", class_names=["AD", "CN"],
                    images={"train": 10, "val": 4}, skipped_images={"count": 0, "files": []},
                    search={"sampler": "tpe", "pruner": "asha", "trials": 1, "reduction_factor": 3, "max_epochs": 2,
                            "rungs": [1], "hosts": ["h0"], "lost": {}})
    results_check.check(good, "r.json")
    with pytest.raises(results_check.ResultsError, match=rf"r.json: {re.escape(named)}: Received"):
        results_check.check({**good, key: value}, "r.json")


@pytest.mark.parametrize("key, value, named", WRONG_IN_A_TRIAL, ids=[f"{k}={v!r}"[:40] for k, v, _ in WRONG_IN_A_TRIAL])
def test_every_field_a_reader_uses_is_checked_in_each_trial(key, value, named):
    good = {**record("t", 0.5), "epochs_run": 2, "resumed_from_epoch": 0, "pruned_at_epoch": None, "start": 0, "trial": 1,
            "stopped_early": False, "state": "complete", "curve": [0.4, 0.5], "hyperparameters": {"lr": 0.01, "act": "relu"},
            "host": "h0", "architecture": "small_cnn", "learning_rate": 0.01, "batch_per_replica": 16, "why": "",
            "confusion_matrix": [[1, 0], [0, 1]], "val_loss": float("nan")}
    results_check.check(document(good), "r.json")
    with pytest.raises(results_check.ResultsError, match=rf"candidates\[0\].{re.escape(named)}: Received"):
        results_check.check(document({**good, key: value}), "r.json")
