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
