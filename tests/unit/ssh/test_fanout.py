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


def test_a_pool_thread_the_interrupt_caught_in_its_start_is_waited_for_not_a_runtime_error():
    # Ctrl-C inside `submit`, between a thread's start() and its first line: joining it raised
    # "cannot join thread before it is started" (a second Ctrl-C during `up --queue`'s clean-up).
    from launcher.ssh.fanout import _join
    done = []
    late = threading.Thread(target=lambda: done.append(1), name="tfcompose-test-late")
    threading.Timer(0.2, late.start).start()
    _join(late)
    assert done == [1] and not late.is_alive()


def test_ctrl_c_pressed_again_while_work_is_called_off_still_waits_for_that_work():
    hosts = [host(f"h{i}", i) for i in range(2)]
    cancel, ended, both = threading.Event(), [], threading.Barrier(2)
    main = threading.main_thread().ident

    def work(h: Host) -> None:
        if both.wait(30) == 0:
            signal.pthread_kill(main, signal.SIGINT)           # the first Ctrl-C…
        cancel.wait(30)
        for _ in range(3):                                     # …and more while the work ends
            time.sleep(0.15)
            signal.pthread_kill(main, signal.SIGINT)
        time.sleep(0.5)                                        # (each heard before this work ends)
        ended.append(h.name)

    with pytest.raises(KeyboardInterrupt):
        fan_out(hosts, "step", work, cancel=cancel)
    assert sorted(ended) == ["h0", "h1"] and not cancel.is_set()


def test_ctrl_c_is_held_while_a_clean_up_runs_and_the_handler_comes_back():
    from launcher import interrupts
    with interrupts.held() as pressed:
        for _ in range(5):
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            time.sleep(0.05)
    assert pressed.count == 5
    with pytest.raises(KeyboardInterrupt):
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        time.sleep(1)
