"""launcher/ssh/base.py: the Runner protocol that the real connection and the unit tests' fake
both satisfy, so a stage written against one runs against the other."""
from __future__ import annotations

import inspect

from support.builders import host
from support.fakes import FakeConnection
from launcher.ssh.base import Runner, bounded, quote_command
from launcher.ssh.connection import Connection


def test_the_real_connection_and_the_fake_both_are_runners(tmp_path):
    real = Connection(host("h0"), tmp_path / "known_hosts")   # opens nothing yet
    assert isinstance(real, Runner) and isinstance(FakeConnection(), Runner)
    assert not isinstance(object(), Runner)


def test_the_fake_takes_every_argument_the_real_run_and_stream_take():
    for name in ("run", "stream", "put_text"):
        real = inspect.signature(getattr(Connection, name)).parameters
        fake = inspect.signature(getattr(FakeConnection, name)).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in fake.values())
        assert all(arg in fake or takes_any for arg in real), name


def test_a_command_is_quoted_and_bounded_on_the_host():
    assert quote_command(["echo", "a b", "$HOME"]) == "echo 'a b' '$HOME'"
    assert bounded(["true"], 30) == "timeout -k 5 30 true"          # the host ends it when the bound passes
    assert bounded("a; b", None) == "sh -c 'a; b'"
