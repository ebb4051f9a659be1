"""One host's telemetry as one line of text (the live view, `status`), and as JSON (`status --json`).
Pure: what the sampler measured in, a line out."""
from __future__ import annotations

from typing import Optional

from launcher.telemetry.samples import Sample, finite

GIB = 1024.0


def host_line(sample: Optional[Sample], silent_s: Optional[float] = None) -> str:
    """`2 GPUs 87% 20.4/32.0 GiB 430 W, CPU 3.4 of 8, mem 12.1 GiB of 62.8 GiB, net in 812 out 790 Mbit/s`."""
    if sample is None:
        return "no telemetry yet" if silent_s is None else f"no telemetry for {silent_s:.0f} s"
    parts = [p for p in (gpu_part(sample), cpu_part(sample), mem_part(sample), net_part(sample)) if p]
    if sample.swap is not None and sample.swap >= 0.1:
        parts.append(f"swapping {sample.swap:.1f} MB/s")
    line = ", ".join(parts) or "nothing measured"
    return line if silent_s is None else f"{line} (no telemetry for {silent_s:.0f} s)"


def gpu_part(sample: Sample) -> str:
    if not sample.gpus:
        return ""
    util = sample.gpu_util
    name = "GPU" if len(sample.gpus) == 1 else f"{len(sample.gpus)} GPUs"
    text = f"{name} {'?' if util is None else f'{util:.0f}%'}"
    used = [g.mem for g in sample.gpus if g.mem is not None]
    total = [g.mem_total for g in sample.gpus if g.mem_total is not None]
    if used and total:
        text += f" {sum(used) / GIB:.1f}/{sum(total) / GIB:.1f} GiB"
    power = [g.power for g in sample.gpus if g.power is not None]
    return text + (f" {sum(power):.0f} W" if power else "")


def cpu_part(sample: Sample) -> str:
    if sample.cpu is None:
        return "no container" if sample.mem is None else ""
    return f"CPU {sample.cpu:.1f}" + (f" of {sample.cpu_limit:g}" if sample.cpu_limit else "")


def mem_part(sample: Sample) -> str:
    if sample.mem is None:
        return ""
    return f"mem {size(sample.mem)}" + (f" of {size(sample.mem_limit)}" if sample.mem_limit else "")


def size(mib: float) -> str:
    return f"{mib / GIB:.1f} GiB" if mib >= GIB else f"{mib:.0f} MiB" if mib >= 10 else f"{mib:.1f} MiB"


def net_part(sample: Sample) -> str:
    if sample.net_in is None or sample.net_out is None:
        return ""
    return f"net in {sample.net_in:.0f} out {sample.net_out:.0f} Mbit/s"


def as_json(sample: Optional[Sample]) -> Optional[dict]:
    """The figures of `status --json`: the sample's, units in the names."""
    if sample is None:
        return None
    return {"time": sample.time, "cpu_cores": sample.cpu, "cpu_limit_cores": sample.cpu_limit, "mem_mib": sample.mem,
            "mem_limit_mib": sample.mem_limit, "net_in_mbit_s": sample.net_in, "net_out_mbit_s": sample.net_out,
            "swap_mb_s": sample.swap,
            "gpus": [{"index": g.index, "util_pct": g.util, "mem_mib": g.mem, "mem_total_mib": g.mem_total,
                      "power_w": g.power, "temp_c": g.temp} for g in sample.gpus]}


# The per-trial figures (figures.py, in results.json) as leaderboard columns: name, key, format.
TRIAL_COLUMNS = [("GPU h", "gpu_hours", "{:.3g}"), ("GPU %", "gpu_utilization", "{:.0f}"),
                 ("GPU Wh", "energy_wh", "{:,.1f}"), ("CPU h", "cpu_hours", "{:.3g}")]


def trial_columns(records: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The columns some trial has a figure for, and each record's cells ("" where it has none)."""
    kept = [(name, key, fmt) for name, key, fmt in TRIAL_COLUMNS if any(finite(r.get(key)) for r in records)]
    cells = [[fmt.format(r[key]) if finite(r.get(key)) else "" for _, key, fmt in kept] for r in records]
    return [name for name, _, _ in kept], cells
