"""The warnings, over made-up samples: each fires when its condition holds for its whole span while
the host trains, names host and GPU, and stays quiet otherwise; episodes warn once."""
from __future__ import annotations

from launcher.telemetry import rules
from launcher.telemetry.samples import Gpu, Sample


def series(seconds: int = 70, start: float = 1000.0, step: float = 1.0, **kw) -> list[Sample]:
    gpus = kw.pop("gpus", ())
    return [Sample(time=start + i * step, gpus=tuple(Gpu(i_, util=u) for i_, u in gpus), **kw)
            for i in range(int(seconds / step) + 1)]


def kinds(findings) -> list[tuple]:
    return [(f.kind, f.host, f.gpu) for f in findings]


def test_a_gpu_idle_for_its_span_while_its_host_trains_is_named_with_its_host():
    window = series(gpus=((0, 95.0), (1, 3.0)), training=True)
    found = rules.idle_gpus("h1", window)
    assert kinds(found) == [("idle_gpu", "h1", 1)]
    assert "GPU 1 under 10 % busy for 30 s while h1 trains (mean 3 %)" in found[0].message   # warn_after_s's default
    assert "for 60 s" in rules.idle_gpus("h1", window, span_s=60)[0].message                  # as the inventory says


def test_idle_needs_the_whole_span_and_training_all_along():
    assert rules.idle_gpus("h1", series(25, gpus=((0, 3.0),), training=True)) == []          # 25 s only
    assert rules.idle_gpus("h1", series(50, gpus=((0, 3.0),), training=True), span_s=60) == []
    busy_blip = series(gpus=((0, 3.0),), training=True)
    busy_blip[55] = Sample(time=busy_blip[55].time, gpus=(Gpu(0, util=60.0),), training=True)
    assert rules.idle_gpus("h1", busy_blip) == []
    not_training = series(gpus=((0, 3.0),), training=True)
    not_training[50] = Sample(time=not_training[50].time, gpus=(Gpu(0, util=3.0),), training=False)
    assert rules.idle_gpus("h1", not_training) == []
    gap = [s for s in series(gpus=((0, 3.0),), training=True) if not 45 < s.time - 1000 < 60]   # 15 s unsampled
    assert rules.idle_gpus("h1", gap) == []


def test_input_bound_is_idle_gpus_while_the_container_saturates_its_cpus():
    window = series(gpus=((0, 12.0), (1, 20.0)), training=True, cpu=7.6, cpu_limit=8.0)
    found = rules.input_bound("h2", window)
    assert kinds(found) == [("input_bound", "h2", None)]
    assert "GPUs 0, 1 averaged 16 %" in found[0].message and "wanted 7.6 of its 8 CPUs" in found[0].message
    assert rules.input_bound("h2", series(gpus=((0, 12.0),), training=True, cpu=4.0, cpu_limit=8.0)) == []
    assert rules.input_bound("h2", series(gpus=((0, 80.0),), training=True, cpu=7.9, cpu_limit=8.0)) == []


def test_swapping_is_a_sustained_rate_training_or_not():
    found = rules.swapping("h0", series(40, swap=3.0, mem=900.0, mem_limit=1000.0))
    assert kinds(found) == [("swapping", "h0", None)] and "3.0 MB/s" in found[0].message and "900 of 1,000 MiB" in found[0].message
    assert rules.swapping("h0", series(40, swap=0.2)) == []
    assert rules.swapping("h0", series(20, swap=9.0)) == []        # not yet 30 s


def test_the_straggler_is_the_worker_short_of_cpu_that_the_others_wait_for_in_a_sync_run():
    windows = {"h0": series(training=True, cpu=0.3, cpu_queued=0.0, cpu_limit=2.0),     # waits most of each step
               "h1": series(training=True, cpu=0.19, cpu_queued=0.0, cpu_limit=0.2),    # quota 0.2 CPU: busy all along
               "h2": series(training=True, cpu=0.4, cpu_queued=0.0, cpu_limit=2.0)}
    found = rules.stragglers(windows, sync=True)
    assert kinds(found) == [("straggler", "h1", None)]
    assert "for 30 s its container wanted 0.95× the 0.2 CPUs it may use (used, or waited for), the other workers 0.17×" \
        in found[0].message
    assert rules.stragglers(windows, sync=False) == []                 # parallel hosts wait for nobody


def test_a_worker_starved_by_other_work_on_its_host_is_a_straggler_though_it_uses_little():
    # Measured on this crowded machine: held to 0.1 CPU, h1 used 0.06 CPU, as much as h0 that waited
    # for it; only the time its threads sat runnable without a CPU tells them apart.
    windows = {"h0": series(training=True, cpu=0.06, cpu_queued=0.01, cpu_limit=2.0),
               "h1": series(training=True, cpu=0.06, cpu_queued=0.3, cpu_limit=0.1)}
    assert kinds(rules.stragglers(windows, sync=True)) == [("straggler", "h1", None)]
    used_only = {h: [Sample(time=s.time, cpu=s.cpu, cpu_limit=s.cpu_limit, training=True) for s in w]
                 for h, w in windows.items()}
    assert rules.stragglers(used_only, sync=True) == []                # without schedstat: not found, not guessed


def test_judge_runs_every_rule_over_every_host():
    windows = {"h0": series(training=True, gpus=((0, 2.0),), cpu=1.9, cpu_limit=2.0, swap=5.0),
               "h1": series(training=True, gpus=((0, 90.0),), cpu=0.5, cpu_limit=2.0)}
    assert sorted(kinds(rules.judge(windows, sync=True))) == [
        ("idle_gpu", "h0", 0), ("input_bound", "h0", None), ("straggler", "h0", None), ("swapping", "h0", None)]


def test_episodes_warn_once_and_end_when_the_finding_stops():
    episodes = rules.Episodes()
    finding = rules.Finding("idle_gpu", "h1", 0, "GPU 0 idle")
    assert episodes.update([finding], 100.0) == [finding]
    assert episodes.update([finding], 101.0) == []
    assert episodes.update([], 120.0) == []
    assert episodes.update([], 140.0) == [] and not episodes.active       # over 30 s after it was last made
    assert episodes.update([finding], 150.0) == [finding]                 # a new episode
    assert [(e.start, e.end) for e in episodes.all()] == [(100.0, 101.0), (150.0, 150.0)]


def test_replay_finds_the_run_s_episodes_from_whole_series():
    idle = series(300, training=True, gpus=((0, 90.0),))
    idle = [s if not 1100 <= s.time < 1200 else Sample(time=s.time, gpus=(Gpu(0, util=1.0),), training=True) for s in idle]
    episodes = rules.replay({"h0": iter(idle), "h1": iter(series(300, training=True))}, sync=True)
    assert [(e.finding.kind, e.finding.host, e.finding.gpu) for e in episodes] == [("idle_gpu", "h0", 0)]
    assert 1130 <= episodes[0].start <= 1135 and 1195 <= episodes[0].end < 1200     # found after its 30 s span
    later = rules.replay({"h0": iter(idle), "h1": iter(series(300, training=True))}, sync=True, span_s=60)
    assert 1160 <= later[0].start <= 1165                                         # warn_after_s: 60


def test_replay_judges_the_last_moment_of_each_session_as_watch_did_when_it_was_stopped():
    # h0's GPU idle from 1003: its 30 s span is whole at 1033, the first session's last sample
    # (watch warned, then was stopped); the next session, 20 s later, finds the GPU busy.
    first = [Sample(time=1000.0 + i, gpus=(Gpu(0, util=90.0 if i < 3 else 1.0),), training=True) for i in range(34)]
    second = series(40, start=1053.0, training=True, gpus=((0, 90.0),))
    episodes = rules.replay({"h0": iter(first + second)}, sync=True)
    assert [(e.finding.kind, e.finding.host, e.start) for e in episodes] == [("idle_gpu", "h0", 1033.0)]


def test_replay_judges_a_sessions_last_moment_when_the_next_begins_seconds_later():
    # h1's GPU idle from 1003.5: its 30 s span is whole only at 1033.5, h1's last sample, which the
    # every-second pace (set by h0's samples, at whole seconds) does not judge; `up --wait` begins
    # 4 s later with the GPU busy. The live view judged that moment and warned; so must the report.
    def session(host_offset, util_of, times):
        return [Sample(time=t + host_offset, gpus=(Gpu(0, util=util_of(t + host_offset)),), training=True) for t in times]
    first = range(1000, 1034)
    later = range(1038, 1080)
    h0 = session(0.0, lambda t: 90.0, first) + session(0.0, lambda t: 90.0, later)
    h1 = session(0.5, lambda t: 1.0 if t >= 1003.5 else 90.0, first) + session(0.5, lambda t: 90.0, later)
    episodes = rules.replay({"h0": iter(h0), "h1": iter(h1)}, sync=True)
    assert [(e.finding.kind, e.finding.host, e.start) for e in episodes] == [("idle_gpu", "h1", 1033.5)]


def test_replay_judges_every_second_as_the_live_view_does_so_a_finding_of_two_seconds_is_kept():
    # h0's GPU idle from 1003 to 1034: its 30 s span is whole at 1033 and 1034 only (busy again at
    # 1035). The live view, judging every second, warned of it; a replay judging every 5 s would not.
    samples = [Sample(time=1000.0 + i, gpus=(Gpu(0, util=1.0 if 3 <= i < 35 else 90.0),), training=True)
               for i in range(80)]
    episodes = rules.replay({"h0": iter(samples)}, sync=True)
    assert [(e.finding.kind, e.start, e.end) for e in episodes] == [("idle_gpu", 1033.0, 1034.0)]
