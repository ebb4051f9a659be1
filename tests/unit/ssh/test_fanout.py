"""fan_out: order, failures, and Ctrl-C calling the work in flight off."""
from __future__ import annotations

import signal
import threading
import time
import pytest
from launcher.ssh.fanout import fan_out
from launcher.inventory.model import Host
from support.builders import host


def test_fan_out_keeps_inventory_order_and_splits_successes_from_failures():
    hosts = [host(f"h{i}", i) for i in range(4)]

    def work(h: Host) -> int:
        if h.index % 2:
            raise RuntimeError(f"{h.name} broke")
        return h.index * 10

    result = fan_out(hosts, "step", work, parallel=2)
    assert result.hosts == ["h0", "h1", "h2", "h3"]
    assert result.succeeded == {"h0": 0, "h2": 20} and list(result.failed) == ["h1", "h3"]
    with pytest.raises(Exception, match="step failed on 2 of 4 host"):
        result.raise_if_failed()


def test_an_interrupted_fan_out_starts_no_more_hosts_and_returns_only_once_the_work_in_flight_has_ended():
    hosts = [host(f"h{i}", i) for i in range(4)]
    cancel, started, ended, both = threading.Event(), [], [], threading.Barrier(2)

    def work(h: Host) -> None:
        started.append(h.name)
        if h.name in ("h0", "h1") and both.wait(30) == 0:   # Ctrl-C while h0 and h1 are at work,
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)   # h2, h3 waiting for a thread
        cancel.wait(30)          # a step that ends when its work is called off…
        time.sleep(0.3)          # …after finishing what it was writing
        ended.append(h.name)

    with pytest.raises(KeyboardInterrupt):
        fan_out(hosts, "step", work, parallel=2, cancel=cancel)
    assert sorted(ended) == ["h0", "h1"]         # both ended before the interrupt reached the clean-up
    assert sorted(started) == ["h0", "h1"]       # the others were never begun
    assert not cancel.is_set()                   # the clean-up may use the connections again
