"""looks: each host looked at on a thread of its own, so a silent host holds up no other, and the
time since each host last answered is kept (#47: the loop waited a whole command timeout on a
silent host before it saw anything of the others)."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from launcher import plan as plan_mod
from launcher.errors import RemoteError
from launcher.stages.looks import Look, Looks
from launcher.stages.status import HostStatus
from support.builders import cluster


class Hosts:
    """A stand-in for each host's look: h1 hangs until released, h2 fails, the others answer."""

    def __init__(self):
        self.release, self.calls = threading.Event(), {}

    def look(self, plan, host, conn, timeout):
        self.calls[host.name] = self.calls.get(host.name, 0) + 1
        if host.name == "h1" and not self.release.wait(30):
            raise RemoteError(host.name, reason="timed out")
        if host.name == "h2":
            raise RemoteError(host.name, reason="SSH failed: connection refused")
        return Look(HostStatus(host.name, "running"), answered=True)


def test_a_host_that_does_not_answer_holds_up_no_other_and_is_not_asked_twice_at_once():
    c = cluster(3)
    hosts = Hosts()
    group = SimpleNamespace(cluster=c, conn=lambda h: None)
    looks = Looks(group, plan_mod.make(c), timeout_s=30, wait_s=0.2, look=hosts.look)
    try:
        first = looks.round()
        assert {n: look.status.state for n, look in first.items()} == {"h0": "running", "h1": "unreachable",
                                                                      "h2": "unreachable"}
        assert first["h1"].status.error == "no answer yet" and "connection refused" in first["h2"].status.error
        assert set(looks.answered_at) == {"h0"}
        looks.wait_s = 30.0                 # a look still under way is not waited for: the round goes on at once
        began = time.monotonic()
        second = looks.round()
        assert time.monotonic() - began < 15
        assert hosts.calls == {"h0": 2, "h1": 1, "h2": 2}           # h1's look is still under way: not asked again
        assert second["h1"].status.state == "unreachable"
    finally:
        hosts.release.set()
    for _ in range(100):                  # its answer counts from the round that finds it
        if looks.round()["h1"].answered:
            break
    assert "h1" in looks.answered_at and "h2" not in looks.answered_at
