"""An installation followed on the host (launcher/bootstrap/follow.py): its steps said as the log
grows, its failure in its own words, one that vanished or takes too long said with what to do."""
from __future__ import annotations

import threading

import pytest

from launcher.errors import RemoteError
from launcher.reporter import RecordingReporter
from launcher.ssh.connection import Result
from launcher.bootstrap.follow import follow
from support.builders import host


class Log:
    """A host's install log as `commands.look` reads it: (status, alive, text) at each look."""

    def __init__(self, *looks: tuple[str, str, str]):
        self.looks, self.size, self.cancel = list(looks), 0, threading.Event()

    def run(self, command, **kw) -> Result:
        status, alive, text = self.looks.pop(0) if len(self.looks) > 1 else self.looks[0]
        self.size += len(text.encode())
        return Result(0, f"status={status}\nalive={alive}\nsize={self.size}\n---\n{text}", "")

    def check_cancel(self, *_) -> None:
        pass


def test_each_step_is_said_and_a_failure_in_its_own_words():
    reporter = RecordingReporter()
    follow(Log(("", "yes", "TFC-STEP install docker.io\n"), ("0", "no", "")), host("h1"), 60, reporter)
    assert ("h1", "installing", "docker.io") in reporter.events
    with pytest.raises(RemoteError) as err:
        follow(Log(("1", "no", "TFC-FAIL apt's lock is still held\n")), host("h1"), 60, RecordingReporter())
    assert err.value.summary == "h1: apt's lock is still held"


def test_an_install_that_vanished_says_to_run_again_and_one_too_long_is_left_running():
    with pytest.raises(RemoteError, match="stopped before it finished .* run tfcompose bootstrap again"):
        follow(Log(("", "no", "Unpacking containerd ...\n")), host("h1"), 60, RecordingReporter())
    with pytest.raises(RemoteError, match="still installing after 0 s; it goes on on the host"):
        follow(Log(("", "yes", "")), host("h1"), 0.01, RecordingReporter())
