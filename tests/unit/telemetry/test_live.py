"""A host's telemetry as one line, and the per-trial figures as leaderboard columns."""
from __future__ import annotations

from launcher.telemetry.live import as_json, host_line, trial_columns
from launcher.telemetry.samples import Gpu, Sample


def test_one_line_per_host_with_what_was_measured():
    sample = Sample(time=1.0, cpu=3.42, cpu_limit=8.0, mem=12390.0, mem_limit=64000.0, net_in=812.4, net_out=790.0,
                    gpus=(Gpu(0, 80.0, 10240.0, 16384.0, 200.0), Gpu(1, 94.0, 10240.0, 16384.0, 230.0)))
    assert host_line(sample) == ("2 GPUs 87% 20.0/32.0 GiB 430 W, CPU 3.4 of 8, mem 12.1 GiB of 62.5 GiB, "
                                 "net in 812 out 790 Mbit/s")
    cpu_only = Sample(time=1.0, cpu=0.5, cpu_limit=1.0, mem=300.0, swap=4.25)
    assert host_line(cpu_only) == "CPU 0.5 of 1, mem 300 MiB, swapping 4.2 MB/s"
    assert host_line(Sample(time=1.0)) == "no container"
    assert host_line(cpu_only, silent_s=12.4) == "CPU 0.5 of 1, mem 300 MiB, swapping 4.2 MB/s (no telemetry for 12 s)"
    assert as_json(sample)["gpus"][1] == {"index": 1, "util_pct": 94.0, "mem_mib": 10240.0, "mem_total_mib": 16384.0,
                                          "power_w": 230.0, "temp_c": None}


def test_leaderboard_columns_only_for_figures_some_trial_has():
    records = [{"gpu_hours": 0.5, "gpu_utilization": 71.26, "cpu_hours": 0.0123}, {"cpu_hours": 0.5}, {}]
    columns, cells = trial_columns(records)
    assert columns == ["GPU h", "GPU %", "CPU h"]
    assert cells == [["0.5", "71", "0.0123"], ["", "", "0.5"], ["", "", ""]]
    assert trial_columns([{"gpu_hours": float("nan")}]) == ([], [[]])
