"""How the CLI shows things: progress lines off a terminal, bars on one."""
from __future__ import annotations

import pytest
from launcher import view
from support.builders import tracked



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


def test_off_a_terminal_the_search_line_comes_when_it_changes_and_without_a_hosts_escapes(tmp_path, capsys):
    from dataclasses import replace
    from launcher.view import RichReporter
    doc = list(tracked(tmp_path, epochs=1, trials=1))[0]
    reporter = RichReporter(["h0"])
    counts = {"done": 3, "pruned": 1, "running": 2, "left": 4, "best": "small_cnn#003\x1b[2J", "best_val_accuracy": 0.975}
    for search in (counts, counts, {**counts, "done": 4, "left": 3}):
        reporter.progress("h0", replace(doc, search=search))
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("search:")]
    # the ETA: the trials left × an epoch each (no study figure says otherwise) × 10 s an epoch
    assert lines == ["search: 3 done, 1 pruned, 2 running, 4 left; best small_cnn#003 (val_acc 0.9750); ETA 0:00:40",
                     "search: 4 done, 1 pruned, 2 running, 3 left; best small_cnn#003 (val_acc 0.9750); ETA 0:00:30"]


def test_the_leases_table_shows_every_hosts_leases_and_each_waiter_once(capsys):
    from types import SimpleNamespace
    lease = {"cluster": "demo", "host": "gpu-a", "owner": "alice", "run": "", "launcher": "alice@laptop",
             "since": "2026-05-04 10:02:11 (0:41:07 ago)", "gpus": "0,1", "ports": "2222", "state": "live: its containers run",
             "live": True, "own": True}
    waiter = "bob's cluster exp (from bob@desk, asked at 2026-05-04 10:30:00)"
    states = [SimpleNamespace(host="h0", leases=[lease], waiting=[waiter]),
              SimpleNamespace(host="h1", leases=[dict(lease, own=False, cluster="other")], waiting=[waiter])]
    view.out.print(view.leases_table(states))
    text = capsys.readouterr().out
    assert "demo (this cluster)" in text and "other " in text and "live: its containers run" in text
    assert text.count("bob's cluster exp") == 1 and "waiting (`up --queue`)" in text
    view.out.print(view.leases_table([SimpleNamespace(host="h0", leases=[], waiting=[])]))
    assert "leases: none" in capsys.readouterr().out


def test_a_parallel_searchs_line_and_each_hosts_eta_come_from_the_chiefs_queue(tmp_path, capsys):
    from dataclasses import replace
    from launcher.view import RichReporter
    from trainer.spec.progress import SearchProgress
    counts = {"done": 2, "pruned": 1, "failed": 0, "running": 2, "left": 3, "best": "small_cnn#002",
              "best_val_accuracy": 0.91}
    hosts = {h: {"trial": f"small_cnn#00{i + 4}", "epoch": 1, "epochs": 3, "state": "training",
                 "seconds_per_epoch": pace, "trials": 1, "silent_s": 0.5} for i, (h, pace) in enumerate((("h0", 10.0),
                                                                                                      ("h1", 5.0)))}
    whole = SearchProgress.of(counts, budget=8, max_epochs=3, expected_epochs=2.0, hosts=hosts, finished=False)
    # left: 2 + 2 epochs under way, 3 trials × 2 epochs; h0 does 0.1 epochs/s, h1 0.2: 10 epochs / 0.3 per s
    assert whole.eta_seconds() == pytest.approx(10 / 0.3)
    assert whole.host_eta_seconds("h1") == pytest.approx((2 + 2 / 3 * 6) * 5.0)
    reporter = RichReporter(["h0", "h1"])
    reporter.search(whole)
    doc = list(tracked(tmp_path, epochs=3, trials=1))[0]
    reporter.progress("h1", replace(doc, scope="host", trials=0, trial="small_cnn#005", trial_index=1))
    out = capsys.readouterr().out
    assert "search: 2 done, 1 pruned, 2 running, 3 left; best small_cnn#002 (val_acc 0.9100); ETA 0:00:33" in out
    assert "h1: trial1 (its 1st trial) epoch 1/3" in out and "ETA 0:00:30" in out     # its own pace, its share


def test_work_here_is_a_row_with_a_bar_on_a_terminal_and_a_line_every_ten_seconds_off_it(capsys, monkeypatch):
    import io
    from rich.console import Console
    quiet = view.RichReporter(["h1"])
    for second in range(0, 31):             # a 30 s docker save, reported every second
        quiet.local("docker save of t:1", (second + 1) * 100_000_000, 3_200_000_000, float(second + 1))
    quiet.local("docker save of t:1", 3_200_000_000, 3_200_000_000, 31.5)
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":", 2)[0] for line in lines] == ["this machine"] * len(lines)
    assert len(lines) == 5, lines           # at 1, 11, 21 and 31 s, then its end
    assert lines[0] == "this machine: docker save of t:1: 100.0 of 3,200.0 MB, 100.0 MB/s"        # no ETA yet
    assert lines[2].endswith("2,100.0 of 3,200.0 MB, 100.0 MB/s, ETA 0:00:11")
    assert lines[-1] == "this machine: docker save of t:1: 3,200.0 MB in 0:00:32, 101.6 MB/s"     # its end

    screen = io.StringIO()
    monkeypatch.setattr(view, "out", Console(file=screen, force_terminal=True, width=140, color_system=None))
    live = view.RichReporter(["h1"])
    shown = Console(file=io.StringIO(), width=140, color_system=None)
    with live:
        live.stage("h1", "image", "building here")
        live.local("docker save of t:1", 800_000_000, 3_200_000_000, 8.0)
        shown.print(live._table())
        live.local("docker save of t:1", 3_200_000_000, 3_200_000_000, 32.0)
        shown.print(live._table())
    during, after = shown.file.getvalue().split("┏")[1:]
    assert "this machine" in during and "docker save of t:1: 800.0 of 3,200.0 MB, 100.0 MB/s, ETA 0:00:24" in during
    assert "━" in during and "this machine" not in after      # the row goes once the work is done


def test_the_terminal_leaderboard_shows_the_values_each_trial_tried_beside_it(tmp_path, capsys, monkeypatch):
    from support.figures import real_run
    monkeypatch.setattr(view.out, "width", 250)
    view.out.print(view.leaderboard(real_run("parallel-lost-host", tmp_path)))
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if "small_cnn#" in line]
    assert any("trial" in line and "values" in line and "val_acc" in line for line in lines)     # the header
    assert "small_cnn#008" in rows[0] and "lr 4.2e-3, bs 16, width 64" in rows[0]
    assert "small_cnn#002 " in rows[-1] and "lr 2e-4, bs 16, width 64" in rows[-1] and "retried as" in rows[-1]
    grid = tmp_path / "grid"
    grid.mkdir()
    (grid / "results.json").write_text('{"schema": 1, "candidates": [{"candidate": "small_cnn@lr=0.01,bs=16", '
                                       '"val_accuracy": 0.9, "val_loss": 0.3, "train_seconds": 1, "images_per_second": 1, '
                                       '"params": 1, "epochs": 1, "hyperparameters": {"learning_rate": 0.01}}, '
                                       '{"candidate": "small_cnn@lr=0.001,bs=16", "val_accuracy": 0.8, "val_loss": 0.3, '
                                       '"train_seconds": 1, "images_per_second": 1, "params": 1, "epochs": 1, '
                                       '"hyperparameters": {"learning_rate": 0.001}}], '
                                       '"best": {"candidate": "small_cnn@lr=0.01,bs=16", "val_accuracy": 0.9}}')
    view.out.print(view.leaderboard(grid))
    assert "values" not in capsys.readouterr().out          # a grid's names hold their values already


def test_a_hosts_hardware_is_a_column_on_a_terminal_and_a_line_every_half_minute_off_it(capsys, monkeypatch):
    import io
    from rich.console import Console
    clock = [100.0]
    monkeypatch.setattr("time.monotonic", lambda: clock[0])
    plain = view.RichReporter(["h0"])
    for line in ("GPU 3%, CPU 1.0 of 2", "GPU 4%, CPU 1.0 of 2\x1b[2J"):
        plain.telemetry("h0", line)
        clock[0] += 10
    clock[0] += 20
    plain.telemetry("h0", "GPU 90%, CPU 1.9 of 2\x1b]52;c;eA==\x07")
    assert capsys.readouterr().out.splitlines() == ["h0: hardware: GPU 3%, CPU 1.0 of 2", "h0: hardware: GPU 90%, CPU 1.9 of 2"]

    monkeypatch.setattr(view, "out", Console(file=io.StringIO(), force_terminal=True, width=160, color_system=None))
    live = view.RichReporter(["h0", "h1"])
    with live:
        live.stage("h0", "running")
        live.telemetry("h0", "GPU 87%, CPU 3.4 of 8")
    shown = Console(file=io.StringIO(), width=160, color_system=None)
    shown.print(live._table())
    table = shown.file.getvalue()
    assert "hardware" in table.splitlines()[1] and "GPU 87%, CPU 3.4 of 8" in table


def test_the_terminal_leaderboard_fits_a_terminal_of_120_columns_with_every_column_whole(tmp_path, capsys,
                                                                                        monkeypatch):
    from support.figures import real_run
    monkeypatch.setattr(view.out, "width", 120)
    view.out.print(view.leaderboard(real_run("parallel-lost-host", tmp_path)))
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 120
    header = next(line for line in lines if "rank" in line)
    assert all(name in header for name in ("trial", "values", "val_acc", "params", "host", "state")), header
    assert sum("retried as" in line for line in lines) == 1       # the state column, not cut at the edge
