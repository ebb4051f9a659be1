"""results.json and progress documents → the parent run and each trial's child run (pure)."""
from __future__ import annotations

import math

from launcher.tracking import mapping
from trainer.spec.config import TrainConfig

RECORD = {"candidate": "small_cnn#003", "architecture": "small_cnn", "learning_rate": 0.004, "batch_per_replica": 16,
          "val_accuracy": 0.9375, "val_loss": 0.21, "train_seconds": 3.2, "images_per_second": 410.0, "params": 1234,
          "epochs": 3, "epochs_run": 2, "state": "pruned", "pruned_at_epoch": 2, "host": "h1",
          "hyperparameters": {"learning_rate": 0.004, "batch_per_replica": 16, "width": 24},
          "curve": [0.5, 0.9375], "history": "history/small_cnn_003.csv"}


def test_the_search_settings_become_dotted_params_with_ranges_and_lists_as_json():
    cfg = TrainConfig.model_validate({"epochs": 4, "search": {"sampler": "tpe", "trials": 8,
                                      "learning_rate": {"log_uniform": [1e-4, 0.1]}, "batch_per_replica": [16, 32],
                                      "hyperparameters": {"small_cnn": {"width": {"log_integer": [8, 64]}}},
                                      "queue": "serve", "hosts": ["h0", "h1"]}})
    params = mapping.search_params(cfg.model_dump(mode="json"), ["h0", "h1"], "parallel")
    assert params["epochs"] == "4" and params["search.sampler"] == "tpe" and params["hosts"] == "2"
    assert params["search.learning_rate"] == '{"log_uniform":[0.0001,0.1]}'
    assert params["search.batch_per_replica"] == "[16,32]"
    assert params["search.hyperparameters.small_cnn.width"] == '{"log_integer":[8,64]}'
    assert params["candidates"] == '["small_cnn"]' and params["mode"] == "parallel"
    assert not {"search.queue", "search.hosts", "results_dir", "backup_dir", "search.seed"} & set(params)   # launcher's, or None


def test_a_trial_is_its_values_its_state_and_its_status():
    assert mapping.trial_params(RECORD) == {"architecture": "small_cnn", "learning_rate": "0.004",
                                            "batch_per_replica": "16", "epochs": "3", "width": "24"}
    tags = mapping.trial_tags(RECORD, "small_cnn#001", ["h0", "h1"])
    assert tags == {"tfcompose.trial": "small_cnn#003", "tfcompose.state": "pruned", "tfcompose.host": "h1",
                    "tfcompose.pruned_at_epoch": "2", "tfcompose.best": "false"}
    assert mapping.trial_status(RECORD) == "FINISHED"
    assert [mapping.trial_status({"state": s}) for s in ("complete", "retried", "failed", "running")] == \
        ["FINISHED", "KILLED", "FAILED", "FAILED"]
    failed = mapping.trial_tags({**RECORD, "state": "failed", "why": "ValueError: \x1b[31mwidth\n"}, None, [])
    assert failed["tfcompose.why"] == "ValueError: width" and "tfcompose.best" not in failed


def test_epochs_come_from_the_history_file_else_from_the_curve():
    rows = [{"epoch": "1", "loss": "1.2", "accuracy": "0.4", "val_loss": "1.1", "val_accuracy": "0.5"},
            {"epoch": "2", "loss": "0.61234567", "accuracy": "nan", "val_loss": "0.3", "val_accuracy": "0.9375"}]
    epochs = mapping.trial_epochs(RECORD, rows)
    assert [e.step for e in epochs] == [1, 2] and epochs[1].metrics["loss"] == 0.612346
    assert math.isnan(epochs[1].metrics["accuracy"])
    from_curve = mapping.trial_epochs(RECORD, [])
    assert [(e.step, e.metrics) for e in from_curve] == [(1, {"val_accuracy": 0.5}), (2, {"val_accuracy": 0.9375})]


def test_live_epochs_from_a_progress_document_are_written_as_the_history_file_writes_them(tmp_path):
    from trainer.spec.progress import Tracker, parse
    tracker = Tracker(tmp_path, "worker:0", trials=2, restarts=0)
    tracker.epoch_done(1, "small_cnn#001", 1, 3, 2.0, 300.0, {"loss": 0.123456789, "accuracy": 0.5,
                                                                "val_loss": float("nan"), "val_accuracy": 0.75})
    (epoch,) = mapping.progress_epochs(parse((tmp_path / "progress-worker-0.json").read_text()), "h0")
    assert (epoch.trial, epoch.step, epoch.host) == ("small_cnn#001", 1, "h0")
    assert epoch.metrics["loss"] == float(f"{0.123456789:.6g}") and math.isnan(epoch.metrics["val_loss"])


def test_two_trials_of_one_name_are_two_keys_and_every_name_is_printable():
    """#46: keyed by name, two trials were one run's two children, and a second `track` deleted one."""
    records = [{"candidate": "small_cnn"}, {"candidate": "deep\x1b[31m_cnn"}, {"candidate": "small_cnn"},
               {"candidate": "small\u202e_cnn"}, {"candidate": "small_cnn"}]
    assert mapping.trial_keys(records) == ["small_cnn", "deep_cnn", "small_cnn (2)", "small_cnn (3)", "small_cnn (4)"]
    assert mapping.run_name("\x1b]0;x\x07") == "(no printable name)"
    assert mapping.trial_tags(records[2], "small_cnn (2)", [], "small_cnn (2)")["tfcompose.best"] == "true"
    assert mapping.trial_tags(records[0], "small_cnn (2)", [])["tfcompose.best"] == "false"
    assert mapping.trial_params({"candidate": "x", "hyperparameters": {"act\x1b[2J": "relu", "w/h:ratio=1": 2}}) == \
        {"architecture": "x", "act": "relu", "w/h_ratio_1": "2"}


def test_a_trials_times_are_its_own_and_each_epoch_is_at_its_end():
    """#47: MLflow showed the launcher's times; a trial's run spans its started_at–ended_at and each
    epoch's figures are stamped with the history file's `ended_at` (a file from before has none)."""
    record = {"candidate": "t", "started_at": 1_800_000_000.5, "ended_at": 1_800_000_060.25, "curve": [0.5, 0.6]}
    assert mapping.trial_times(record) == (1_800_000_000.5, 1_800_000_060.25)
    assert mapping.trial_times({"started_at": 10.0, "ended_at": 5.0}) == (10.0, None)        # an end before its start
    assert mapping.trial_times({"started_at": "soon", "ended_at": float("inf")}) == (None, None)
    rows = [{"epoch": "1", "loss": "1", "accuracy": "0.5", "val_loss": "1", "val_accuracy": "0.5", "ended_at": "1800000030.125"},
            {"epoch": "2", "loss": "1", "accuracy": "0.5", "val_loss": "1", "val_accuracy": "0.6"}]
    assert [e.at for e in mapping.trial_epochs(record, rows)] == [1_800_000_030.125, None]
    assert [e.at for e in mapping.trial_epochs(record, [])] == [1_800_000_060.25] * 2        # a curve: at the trial's end
    assert mapping.millis(1_800_000_030.125) == 1_800_000_030_125 and mapping.millis(None) is None
    start, end = mapping.search_times({"started": "2027-01-15T08:00:00+00:00", "finished": "2027-01-15T08:10:00+00:00"})
    assert end - start == 600 and mapping.search_times({}) == (None, None)
