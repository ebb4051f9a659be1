"""Ctrl-C in any command: one line saying so, exit 130, no traceback."""
from __future__ import annotations

from launcher import cli


def test_ctrl_c_says_interrupted_and_exits_130(capsys):
    def interrupted_command():
        raise KeyboardInterrupt
    cli.app.command("ctrl-c-test")(interrupted_command)
    try:
        code = cli.main(["ctrl-c-test"])
    finally:
        cli.app.registered_commands.pop()
    err = capsys.readouterr().err
    assert code == 130
    assert err.startswith("tfcompose: interrupted") and "Traceback" not in err


def test_ctrl_c_in_logs_says_only_that_following_stopped_and_in_up_how_to_stop_the_containers(tmp_path, capsys,
                                                                                               monkeypatch):
    from launcher.stages import logs as logs_stage, up as up_stage
    (tmp_path / "inv.yaml").write_text("cluster: c\nssh: {user: u, config_file: ./none}\nhosts:\n"
                                       "  - {name: a, address: 10.0.0.1}\n")

    def ctrl_c(*args, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(logs_stage, "logs", ctrl_c)
    monkeypatch.setattr(up_stage, "up", ctrl_c)
    assert cli.main(["logs", "-i", str(tmp_path / "inv.yaml")]) == 130
    err = capsys.readouterr().err
    assert err == "tfcompose: interrupted (stopped following the logs; nothing was changed on the hosts)\n"
    assert "keep running" not in err and "down" not in err        # a read-only command alarms nobody
    assert cli.main(["--debug", "up", "-i", str(tmp_path / "inv.yaml")]) == 130
    assert "containers already started keep running: `tfcompose down` stops them" in capsys.readouterr().err


def test_validate_shows_each_hosts_way_in_when_any_goes_through_a_bastion(tmp_path, capsys):
    (tmp_path / "inv.yaml").write_text("cluster: c\nssh: {user: u, proxy_jump: 'jump@10.9.0.1,ops@10.9.0.2:2200', "
                                       "config_file: ./none}\nhosts:\n  - {name: a, address: 10.0.0.1}\n"
                                       "  - {name: b, address: 10.0.0.2, proxy_jump: none}\n")
    assert cli.main(["validate", "-i", str(tmp_path / "inv.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("u@10.0.0.1:22" in line and "jump@10.9.0.1:22 → ops@10.9.0.2:2200" in line for line in lines), lines
    assert any("u@10.0.0.2:22" in line and "direct" in line for line in lines), lines


def test_validate_echoes_the_search_it_understood(tmp_path, capsys):
    (tmp_path / "inv.yaml").write_text(
        "cluster: c\nssh: {user: u, config_file: ./none}\nhosts:\n  - {name: a, address: 10.0.0.1}\n"
        "train:\n  epochs: 6\n  search: {sampler: random, trials: 5, seed: 3, pruner: hyperband, min_epochs: 2,\n"
        "           learning_rate: {log_uniform: [0.0001, 0.1]}, batch_per_replica: [16, 32]}\n")
    assert cli.main(["validate", "-i", str(tmp_path / "inv.yaml")]) == 0
    out = capsys.readouterr().out
    assert "search (sync: every host trains each trial together): sampler random: 5 trial(s), seed 3" in out
    assert "pruner hyperband: judged at epoch(s) 2" in out
    assert "learning_rate log_uniform 1e-4 … 1e-1; batch_per_replica one of 16, 32" in out
    assert out.rstrip().endswith("inv.yaml: valid")
