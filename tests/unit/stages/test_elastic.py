"""elastic: which hosts an elastic run has lost for good, what is said of it, and which come back: a
host lost by silence, answering again, is taken back after elastic.rejoin_after_s at an epoch's
end, while the run re-forms less often than the hourly cap; otherwise the log says once why it
stays out (#49, item 3)."""
from __future__ import annotations

import datetime as dt
import time
from types import SimpleNamespace

from launcher import plan as plan_mod
from launcher.stages import elastic
from launcher.stages.looks import Look
from launcher.stages.status import HostStatus
from support.builders import cluster
from trainer.spec.elastic_run import Reform, reform_at


def test_a_host_silent_or_failing_past_elastic_lost_after_s_is_lost_for_good():
    hosts = ["h0", "h1", "h2"]
    lost = elastic.lost_for_good({"h0": 100.0, "h1": 40.0, "h2": 100.0}, {"h2": 80.0}, hosts, 0.0, 101.0, 45)
    assert lost == {"h1": "silent for 61 s"}
    lost = elastic.lost_for_good({"h0": 130.0, "h1": 130.0, "h2": 130.0}, {"h2": 80.0}, hosts, 0.0, 131.0, 45)
    assert lost == {"h2": "its trainer failed for good 51 s ago"}


def test_without_elastic_a_sync_run_that_loses_a_host_says_elastic_exists():
    sync = plan_mod.make(cluster(2))
    assert "`elastic:`" in elastic.elastic_hint(sync)
    assert elastic.elastic_hint(plan_mod.make(cluster(3, elastic={"min_hosts": 2}))) == ""
    par = plan_mod.make(cluster(train={"search": {"mode": "parallel"}, "candidates": ["small_cnn", "deep_cnn"]}))
    assert elastic.elastic_hint(par) == ""


def test_too_few_hosts_left_to_go_on_is_said_naming_min_hosts():
    plan = plan_mod.make(cluster(3, elastic={"min_hosts": 2}))
    assert elastic.too_few(plan, 1) == "; 1 host(s) left, fewer than elastic.min_hosts (2)"
    assert elastic.too_few(plan, 2) == "" and elastic.too_few(plan_mod.make(cluster(3)), 0) == ""


def test_a_host_counts_as_back_from_its_first_answer_until_it_misses_one_for_longer_than_the_gap():
    back = elastic.back_since({}, {"h1": 100.0}, ["h1", "h2"], now=101.0)
    assert back == {"h1": 100.0}                                    # h2 never answered
    back = elastic.back_since(back, {"h1": 130.0}, ["h1", "h2"], now=131.0)
    assert back == {"h1": 100.0}                                    # answered since: the same stretch
    assert elastic.back_since(back, {"h1": 130.0}, ["h1"], now=131.0 + elastic.GAP_S) == {}
    assert elastic.ready({"h1": 100.0, "h2": 150.0}, now=160.0, after_s=60) == ["h1"]


def test_only_a_newer_finished_epoch_of_the_chief_is_an_epoch_end():
    assert not elastic.epoch_ended(None, ("t#001", 3))            # the first look of a generation
    assert not elastic.epoch_ended(("t#001", 3), ("t#001", 3))
    assert elastic.epoch_ended(("t#001", 3), ("t#001", 4))
    assert elastic.epoch_ended(("t#001", 6), ("t#002", 1))
    assert not elastic.epoch_ended(("t#001", 6), ("t#002", 0))    # a trial just begun: nothing finished yet
    done = SimpleNamespace(done=True, trial="t#001", epoch=6)
    assert elastic.chief_at(done) is None and elastic.chief_at(None) is None


def test_the_reforms_of_the_last_hour_are_counted_by_their_utc_time():
    now = dt.datetime(2026, 11, 28, 8, 0, 0, tzinfo=dt.timezone.utc)
    at = ["2026-11-28T06:59:59Z", "2026-11-28T07:00:01Z", "2026-11-28T07:59:00Z"]
    reforms = [Reform(generation=i + 1, at=t, lost=["h2"], hosts_after=["h0"], workers_before=2)
               for i, t in enumerate(at)]
    assert elastic.reforms_within_hour(reforms, now) == 2


class Said:
    def __init__(self):
        self.lines = []

    def warn(self, host, text):
        self.lines.append(f"{host}: {text}")


def away_of(answering, **settings):
    """An Away over h2 (lost by silence) of a 3-host run, whose looks answer while `answering()`."""
    first = plan_mod.make(cluster(3, elastic={"min_hosts": 1, "rejoin_after_s": 10, **settings}))
    group = SimpleNamespace(narrowed=lambda c: SimpleNamespace(cluster=c, conn=lambda h: None))

    def look(plan, host, conn, timeout):
        if not answering():
            raise OSError("no route to host")
        return Look(HostStatus(host.name, "running"), answered=True)
    away = elastic.Away.of(group, first, {"h2": "silent for 46 s", "h1": "its trainer failed for good 50 s ago"})
    away.looks._look = look
    return away


def seen(away, now):
    away.see(now)
    for _ in range(100):                       # its looks run on threads of their own
        if away.looks.answered_at or not away.looks._flight or not any(t.is_alive() for t in away.looks._flight.values()):
            break
        time.sleep(0.01)
    away.see(now)


def test_a_silent_host_back_is_taken_back_after_rejoin_after_s_at_an_epoch_end_and_never_one_that_failed():
    away = away_of(lambda: True, rejoin=True)
    assert away.names == ["h2"]                                 # h1's trainer failed: not looked at
    said = Said()
    seen(away, time.monotonic())
    assert away.coming_back(said, [], time.monotonic(), boundary=True) == []        # not back long enough
    later = time.monotonic() + 11
    away.looks._clock = lambda: later
    seen(away, later)
    assert away.coming_back(said, [], later, boundary=False) == []                  # mid-epoch: waits
    assert away.coming_back(said, [], later, boundary=True) == ["h2"] and said.lines == []


def test_a_host_back_while_rejoin_is_off_or_the_hourly_cap_is_reached_stays_out_saying_so_once():
    said = Said()
    off = away_of(lambda: True)
    for _ in range(2):
        seen(off, time.monotonic())
        assert off.coming_back(said, [], time.monotonic(), boundary=True) == []
    assert said.lines == ["h2: answers again; it stays out of this run (elastic.rejoin is off)"]

    capped = away_of(lambda: True, rejoin=True, max_reforms_per_hour=1)
    stamp = reform_at(dt.datetime.now(dt.timezone.utc))
    reforms = [Reform(generation=1, at=stamp, lost=["h2"], hosts_after=["h0", "h1"], workers_before=3)]
    seen(capped, time.monotonic())
    later = time.monotonic() + 11
    capped.looks._clock = lambda: later
    seen(capped, later)
    for _ in range(2):
        assert capped.coming_back(said, reforms, later, boundary=True) == []
    assert said.lines[1:] == ["h2: answers again, but the run re-formed 1 time(s) in the last hour "
                              "(elastic.max_reforms_per_hour: 1): it stays out for now"]


def test_nothing_is_looked_at_without_elastic_or_without_a_host_lost_by_silence():
    group = SimpleNamespace(narrowed=lambda c: SimpleNamespace(cluster=c, conn=lambda h: None))
    plain = plan_mod.make(cluster(3))
    assert elastic.Away.of(group, plain, {"h2": "silent for 46 s"}) is None
    run = plan_mod.make(cluster(3, elastic={"min_hosts": 1}))
    assert elastic.Away.of(group, run, {"h2": "its trainer failed for good 50 s ago"}) is None


def test_when_no_host_answers_none_is_lost_for_its_silence_the_launchers_own_link_is_the_likelier_cause():
    hosts = ["h0", "h1", "h2"]
    assert elastic.lost_for_good({"h0": 40.0, "h1": 40.0, "h2": 30.0}, {}, hosts, 0.0, 101.0, 45) == {}
    failed = elastic.lost_for_good({"h0": 40.0, "h1": 40.0, "h2": 30.0}, {"h1": 50.0}, hosts, 0.0, 101.0, 45)
    assert failed == {"h1": "its trainer failed for good 51 s ago"}
