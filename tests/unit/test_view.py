"""How the CLI shows things: progress lines off a terminal, bars on one."""
from __future__ import annotations
from launcher import view
from support.builders import tracked



def test_off_a_terminal_every_epoch_is_one_line_in_order_with_an_eta(tmp_path):
    docs = list(tracked(tmp_path))
    printed, mark = [], (0, 0)
    for doc in docs[1::2]:            # a poll sees only every second epoch: nothing may be lost
        lines, mark = view.epoch_lines(doc, mark)
        printed += lines
    assert [(line.split()[1], line.split()[4]) for line in printed] == \
           [(f"{t}/2", f"{e}/3") for t in (1, 2) for e in (1, 2, 3)]
    assert printed[0].endswith("ETA 0:00:50") and printed[-1].endswith("ETA 0:00:00")
    assert all("\x1b" not in line for line in printed)
    lines, _ = view.epoch_lines(docs[-1], (0, 0), restarts=1)
    assert lines[-1].endswith("restarts 1")


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
    assert lines == ["search: 3 done, 1 pruned, 2 running, 4 left; best small_cnn#003 (val_acc 0.9750)",
                     "search: 4 done, 1 pruned, 2 running, 3 left; best small_cnn#003 (val_acc 0.9750)"]


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
