"""Per-trial figures from samples and the trials' windows: GPU-hours, utilisation, energy where
power is reported, CPU-hours, and how much of each trial the samples cover."""
from __future__ import annotations

import pytest

from launcher.telemetry.figures import per_trial
from launcher.telemetry.samples import Gpu, Sample


def host(start=0.0, seconds=100, util=50.0, power=100.0, cpu=2.0, gpus=2):
    return [Sample(time=start + i, cpu=cpu, gpus=tuple(Gpu(g, util=util, power=power) for g in range(gpus)))
            for i in range(seconds + 1)]


def record(name, start, end, host=None):
    return {"candidate": name, "started_at": start, "ended_at": end, **({"host": host} if host else {})}


def test_a_sync_trial_counts_every_host_over_its_window():
    made = per_trial([record("a", 10.0, 46.0), record("b", 46.0, 100.0)], False,
                     {"h0": host(util=40.0), "h1": host(util=60.0, power=200.0)})
    a = made[0]
    assert a["gpu_hours"] == pytest.approx(4 * 36 / 3600)            # 2 hosts × 2 GPUs × 36 s
    assert a["gpu_utilization"] == pytest.approx(50.0)
    assert a["energy_wh"] == pytest.approx((2 * 100 + 2 * 200) * 36 / 3600)
    assert a["cpu_hours"] == pytest.approx(2 * 2.0 * 36 / 3600)
    assert a["telemetry_coverage"] == 1.0
    assert made[1]["gpu_hours"] == pytest.approx(4 * 54 / 3600)


def test_a_parallel_trial_counts_its_own_host_only():
    made = per_trial([record("a", 0.0, 50.0, "h1")], True, {"h0": host(util=10.0), "h1": host(util=90.0, gpus=1)})
    assert made[0]["gpu_utilization"] == 90.0 and made[0]["gpu_hours"] == pytest.approx(50 / 3600)


def test_without_power_no_energy_and_without_gpus_cpu_only():
    made = per_trial([record("a", 0.0, 50.0)], False, {"h0": host(power=None)})
    assert "energy_wh" not in made[0] and "gpu_hours" in made[0]
    cpu_only = per_trial([record("a", 0.0, 50.0)], False, {"h0": host(gpus=0)})[0]
    assert set(cpu_only) == {"cpu_hours", "telemetry_coverage"}


def test_gaps_and_a_late_start_show_in_the_coverage_not_as_made_up_figures():
    late = host(start=50.0, seconds=50)                   # the launcher attached halfway
    made = per_trial([record("a", 0.0, 100.0)], False, {"h0": late})[0]
    assert made["telemetry_coverage"] == 0.5 and made["cpu_hours"] == pytest.approx(2.0 * 50 / 3600)
    gappy = [s for s in host() if not 20 < s.time < 60]   # 40 s unsampled: no interval spans it
    assert per_trial([record("a", 0.0, 100.0)], False, {"h0": gappy})[0]["telemetry_coverage"] == pytest.approx(0.6)


def test_trials_without_a_window_or_outside_the_samples_get_nothing():
    made = per_trial([{"candidate": "old"}, record("bad", 50.0, 10.0), record("later", 500.0, 600.0)], False,
                     {"h0": host()})
    assert made == [{}, {}, {}]
