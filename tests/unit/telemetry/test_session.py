"""The session's judge, without SSH: the samples the samplers queue are stamped with what the wait
loop said of each host, spooled, shown one line per host, and judged by the rules (a warning once
per episode); a sampler that ends is started again a bounded number of times, one that floods is
not; the wait loop's reporter sees everything it saw before."""
from __future__ import annotations

import threading
from types import SimpleNamespace

from launcher.plan import make
from launcher.reporter import RecordingReporter
from launcher.telemetry import sampler as sampler_mod, session as session_mod
from launcher.telemetry.parse import Flood
from launcher.telemetry.samples import Gpu, Sample
from support.builders import cluster


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def progress(trial: int, epoch: int, done: bool = False):
    return SimpleNamespace(trial_index=trial, epoch=epoch, done=done)


class Ended:
    """The connection's `end_command`, recorded."""

    def __init__(self):
        self.tags = []

    def end_command(self, tag):
        self.tags.append(tag)


def made(tmp_path, **spec):
    clock, ended = Clock(), Ended()
    plan = make(cluster(2, **spec))
    group = SimpleNamespace(reporter=RecordingReporter(), cluster=plan.cluster, conn=lambda host: ended, ended=ended)
    return session_mod.Session(group, plan, tmp_path / "run", 1.0, clock), group.reporter, clock


def feed(s, host: str, t: float, util: float = 3.0, cpu: float = 1.0):
    s.queue.put_nowait((host, Sample(time=t, cpu=cpu, cpu_limit=2.0, gpus=(Gpu(0, util=util),))))


def test_samples_are_stamped_spooled_shown_and_judged_once(tmp_path):
    s, rep, clock = made(tmp_path)
    for host in ("h0", "h1"):
        s.observer.stage(host, "running")
        s.observer.progress(host, progress(1, 1))
    for i in range(70):
        clock.now += 1
        feed(s, "h0", 5000.0 + i, util=3.0)
        feed(s, "h1", 5000.0 + i, util=95.0)
        s._take()
        s._warn()
    s._show()
    assert [m for h, m in rep.warnings] == ["GPU 0 under 10 % busy for 30 s while h0 trains (mean 3 %)"]
    assert rep.warnings[0][0] == "h0"
    shown = {h: line for h, kind, line in rep.events if kind == "telemetry"}
    assert shown == {"h0": "GPU 3%, CPU 1.0 of 2", "h1": "GPU 95%, CPU 1.0 of 2"}
    s.spools["h0"].flush()
    assert s.spools["h0"].path.read_text().count('"tr":1,"ti":1,"e":1') == 70
    assert len(s.windows["h0"]) <= s.keep_s + 1                      # only what the rules need is held


def test_a_full_queue_drops_and_counts_rather_than_grow_and_says_so_once(tmp_path):
    s, rep, _ = made(tmp_path)
    for i in range(session_mod.QUEUE_MAX):
        feed(s, "h0", float(i))
    sampler = sampler_mod.Sampler("h0", s._stream(s.plan.cluster.hosts[0]))
    s._heard(sampler, b"S 1.0 - - - - - - - - - -\nS 2.0 - - - - - - - - - -\n")   # as the Held's thread does
    assert s.queue.qsize() == session_mod.QUEUE_MAX and s.dropped == {"h0": 2}
    s._take()
    s._take()
    assert rep.warnings == [("h0", "telemetry: samples dropped: this machine fell behind taking them (the host's "
                                   "CSV has a gap)")]


class FakeHeld:
    def __init__(self, error=None, status=0):
        self.ended, self.error, self.status, self.stderr = threading.Event(), error, status, bytearray(b"oops")
        self.ended.set()
        self.aborted = False

    def abort(self):
        self.aborted = True


def test_a_sampler_that_ends_is_started_again_with_a_growing_wait_and_then_left(tmp_path):
    s, rep, clock = made(tmp_path)
    launched = []
    s._launch = lambda sampler: launched.append(clock.now) or setattr(sampler, "held", FakeHeld(status=1))
    s.samplers["h0"] = sampler_mod.Sampler("h0", s._stream(s.plan.cluster.hosts[0]), held=FakeHeld(status=1))
    for _ in range(200):
        clock.now += 1
        s._tend()
    assert len(launched) == sampler_mod.RESTARTS
    assert [b - a for a, b in zip(launched, launched[1:])] == [11.0, 21.0, 41.0, 81.0]
    assert rep.warnings[-1] == ("h0", f"telemetry stopped after {sampler_mod.RESTARTS} restarts: it ended (exit 1): oops")


def test_a_flood_stops_the_hosts_telemetry_for_good_and_silence_cuts_it_off(tmp_path):
    s, rep, clock = made(tmp_path)
    s._launch = lambda sampler: (_ for _ in ()).throw(AssertionError("no restart after a flood"))
    s.samplers["h0"] = sampler_mod.Sampler("h0", s._stream(s.plan.cluster.hosts[0]),
                                           held=FakeHeld(error=Flood("sent more than 256 KiB in a second")))
    s._tend()
    s._show()
    assert rep.warnings == [("h0", "telemetry stopped: the host sent more than 256 KiB in a second, which no sampler "
                                   "does; no more figures from it in this run")]
    assert ("h0", "telemetry", "telemetry stopped") in rep.events
    quiet = FakeHeld()
    quiet.ended.clear()
    s.samplers["h1"] = sampler_mod.Sampler("h1", s._stream(s.plan.cluster.hosts[1]), held=quiet, last_heard=clock.now,
                                           tag="tfcompose-cmd-0123456789abcdef")
    clock.now += s.silent_after() + 1
    s._launch = lambda sampler: None
    s._tend()
    assert quiet.aborted and "it said nothing for 31 s" in rep.warnings[-1][1]
    for _ in range(50):                       # and what it left on the host is ended there, off the judge's thread
        if s.group.ended.tags:
            break
        import time
        time.sleep(0.02)
    assert s.group.ended.tags == ["tfcompose-cmd-0123456789abcdef"]


def test_what_a_host_says_wrong_is_told_once(tmp_path):
    s, rep, _ = made(tmp_path)
    sampler = sampler_mod.Sampler("h0", s._stream(s.plan.cluster.hosts[0]))
    s.samplers["h0"] = sampler
    sampler.stream.feed(b"\x1b[31mred\nmore garbage\nE 139\n")
    sampler.pass_notes(s.observer.warn)
    sampler.pass_notes(s.observer.warn)
    assert rep.warnings == [("h0", "telemetry: nvidia-smi ended (exit 139): more garbage; started again in 10 s"),
                            ("h0", "telemetry: ignored what is not a sample (first: '\\\\x1b[31mred')")]


def test_telemetry_off_in_the_inventory_starts_nothing(tmp_path):
    plan = make(cluster(1, telemetry={"enabled": False}))
    group = SimpleNamespace(reporter=RecordingReporter(), cluster=plan.cluster)
    with session_mod.sampling(group, plan, tmp_path) as s:
        assert s is None and isinstance(group.reporter, RecordingReporter)
    assert session_mod.period_of(make(cluster(1, telemetry={"period_s": 2}))) == 2.0


def test_a_run_folder_that_cannot_be_written_is_said_once_and_the_live_view_goes_on(tmp_path):
    (tmp_path / "run").write_text("a file where the run folder should be")
    s, rep, clock = made(tmp_path)
    for i in range(5):
        clock.now += 1
        feed(s, "h0", 5000.0 + i)
        s._take()
        s._show()
    warned = [m for h, m in rep.warnings]
    assert len(warned) == 1 and warned[0].startswith("telemetry not recorded from here on: cannot write"), warned
    assert ("h0", "telemetry", "GPU 3%, CPU 1.0 of 2") in rep.events and len(s.windows["h0"]) == 5
