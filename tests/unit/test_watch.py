"""Watching a run: the progress file's format, the ETA, the lines off a terminal; run history,
comparison and hooks."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import matplotlib.image
import pytest

from launcher import hooks, plan as plan_mod, runs, watch
from launcher.cli import main
from test_policies import cluster
from trainer.progress import Progress, Tracker, parse


def tracked(tmp_path, epochs=3, trials=2) -> Tracker:
    tracker = Tracker(tmp_path, "worker:1", trials=trials, restarts=0)
    for t in range(1, trials + 1):
        for e in range(1, epochs + 1):
            tracker.epoch_done(t, f"trial{t}", e, epochs, seconds=10.0, images_per_second=250.0,
                               logs={"loss": 1.0 / e, "accuracy": 0.5, "val_loss": 0.9, "val_accuracy": 0.6})
            yield parse((tmp_path / "progress-worker-1.json").read_text())


def test_the_trainer_writes_a_document_the_launcher_reads(tmp_path):
    docs = list(tracked(tmp_path))
    first, last = docs[0], docs[-1]
    assert (first.trial_index, first.epoch, first.trials, first.epochs) == (1, 1, 2, 3)
    assert first.eta_seconds() == 50.0 and last.eta_seconds() == 0.0   # 5 epochs left × 10 s, then none
    assert first.fraction == pytest.approx(1 / 6) and last.fraction == 1.0
    assert len(last.recent) == 6 and not list(tmp_path.glob("*.tmp"))   # written atomically


@pytest.mark.parametrize("text", ["", "{}", "[1]", '{"schema": 1}', "x" * 20000,
                                  '{"schema": 1, "task": 3}'])
def test_what_a_host_sends_that_is_not_a_progress_document_is_ignored(text):
    assert parse(text) is None


def test_off_a_terminal_every_epoch_is_one_line_in_order_with_an_eta(tmp_path):
    docs = list(tracked(tmp_path))
    printed, mark = [], (0, 0)
    for doc in docs[1::2]:            # a poll sees only every second epoch: nothing may be lost
        lines, mark = watch.epoch_lines(doc, mark)
        printed += lines
    assert [(line.split()[1], line.split()[4]) for line in printed] == \
           [(f"{t}/2", f"{e}/3") for t in (1, 2) for e in (1, 2, 3)]
    assert printed[0].endswith("ETA 0:00:50") and printed[-1].endswith("ETA 0:00:00")
    assert all("\x1b" not in line for line in printed)
    lines, _ = watch.epoch_lines(docs[-1], (0, 0), restarts=1)
    assert lines[-1].endswith("restarts 1")


def run_folder(folder: Path, best: float, started: str) -> Path:
    (folder / "history").mkdir(parents=True)
    records = []
    for name, acc in (("small_cnn", best), ("deep_cnn", best - 0.2)):
        (folder / "history" / f"{name}.csv").write_text(
            f"epoch,loss,accuracy,val_loss,val_accuracy\n1,1.2,0.4,1.1,{acc - 0.1:.2f}\n2,0.8,0.7,0.9,{acc:.2f}\n")
        records.append({"candidate": name, "val_accuracy": acc, "val_loss": 0.9, "train_seconds": 3.0,
                        "images_per_second": 100.0, "epochs": 2, "params": 1000, "history": f"history/{name}.csv"})
    (folder / "results.json").write_text(json.dumps({"schema": 1, "candidates": records, "mode": "sync", "restarts": 1,
                                                     "started": started, "finished": started[:-2] + "59"}))
    return folder


def test_runs_lists_collected_runs_and_compare_draws_both(tmp_path, capsys, monkeypatch):
    from launcher import view
    monkeypatch.setattr(view.out, "width", 200)
    a = run_folder(tmp_path / "runs" / "lab" / "aaaaaaaaaaaa", 0.9, "2026-11-20T10:00:00")
    b = run_folder(tmp_path / "runs" / "lab" / "bbbbbbbbbbbb", 0.8, "2026-11-21T10:00:00")
    (tmp_path / "runs" / "lab" / "latest").symlink_to(b.name)
    found = runs.find(tmp_path / "runs")
    assert [(r.run_id, r.best, r.best_val_accuracy, r.duration_s, r.restarts) for r in found] == \
           [("aaaaaaaaaaaa", "small_cnn", 0.9, 59.0, 1), ("bbbbbbbbbbbb", "small_cnn", 0.8, 59.0, 1)]
    assert main(["runs", "--runs", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "aaaaaaaaaaaa" in out and "bbbbbbbbbbbb" in out and "0.9000" in out
    png = tmp_path / "compare.png"
    assert main(["compare", "aaaa", str(b), "--runs", str(tmp_path / "runs"), "-o", str(png)]) == 0
    out = capsys.readouterr().out
    assert "small_cnn 0.9000" in out and "small_cnn 0.8000" in out
    assert matplotlib.image.imread(png).shape[0] > 100
    assert main(["compare", "zzzz", "--runs", str(tmp_path / "runs")]) == 2


def test_hooks_get_the_run_folder_and_outcome_and_a_failing_hook_is_a_warning(tmp_path):
    marker = tmp_path / "hook.txt"
    c = cluster(1, on_finish=f'echo "$TFC_OUTCOME $TFC_RUN_DIR $TFC_RUN_ID" >> {marker}',
                on_failure="exit 3")
    plan = plan_mod.make(c)
    assert hooks.after_run(plan, False, "chief finished", tmp_path / "run") is None
    assert marker.read_text() == f"finished {(tmp_path / 'run').resolve()} {plan.run_id}\n"
    assert "on_failure exited with status 3" in hooks.after_run(plan, True, "h1 failed", tmp_path / "run")
    assert marker.read_text().count("\n") == 1   # on_finish ran once, not for the failure


def test_the_reporter_prints_each_epoch_once_off_a_terminal_and_a_restart_again(tmp_path, capsys):
    from launcher.view import RichReporter
    docs = list(tracked(tmp_path, epochs=2, trials=1))
    reporter = RichReporter(["h0"])
    for doc in (docs[0], docs[0], docs[1]):       # the same document seen twice prints once
        reporter.progress("h0", doc)
    reporter.progress("h0", docs[1], restarts=1)   # Docker restarted the container
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(" restarts")[0].rsplit(" ETA", 1)[0].split(" img/s")[0] for line in lines] == [
        "h0: trial 1/1 trial1 epoch 1/2 250", "h0: trial 1/1 trial1 epoch 2/2 250",
        "h0: trial 1/1 trial1 epoch 1/2 250", "h0: trial 1/1 trial1 epoch 2/2 250"]
    assert lines[-1].endswith("restarts 1")


def test_following_other_hosts_stops_only_a_grace_after_the_chief_ended():
    import threading
    from launcher.logs import AfterGrace
    chief_done = threading.Event()
    stop = AfterGrace(chief_done, 0.2)
    assert not stop.is_set()  # chief still running: keep following
    chief_done.set()
    assert not stop.is_set()  # just ended: the worker's last lines still come through
    time.sleep(0.25)
    assert stop.is_set()


def test_a_long_transfer_shows_a_bar_with_rate_and_eta_on_a_terminal_and_nothing_off_it(capsys, monkeypatch):
    import io
    from rich.console import Console
    from launcher import view
    quiet = view.RichReporter(["h1"])
    quiet.stage("h1", "image")
    quiet.transfer("h1", "image", 30_000_000, 120_000_000, 3.0)
    assert capsys.readouterr().out == "h1: image\n"  # off a terminal: the stage, no byte counts

    screen = io.StringIO()
    monkeypatch.setattr(view, "out", Console(file=screen, force_terminal=True, width=140, color_system=None))
    live = view.RichReporter(["h1"])
    with live:
        live.stage("h1", "image")
        live.transfer("h1", "image", 30_000_000, 120_000_000, 3.0)
    shown = Console(file=io.StringIO(), width=140, color_system=None)
    shown.print(live._table())
    table = shown.file.getvalue()
    assert "sending image: 30.0 of 120.0 MB, 10.0 MB/s, ETA 0:00:09" in table and "━" in table
