"""Per-trial figures from the hosts' samples and each trial's wall-clock window (its record's
`started_at`/`ended_at`, on the clock of the host that trained it): pure, and streamed (each
host's samples are read once, whatever the number of trials).

- gpu_hours: GPUs × the trial's hours, summed over the hosts that trained it (a sync trial: every
  host; a parallel one: its own), for hosts whose GPUs reported during the trial;
- gpu_utilization: the GPUs' mean utilisation over the trial (%, weighted by time);
- energy_wh: the GPUs' power integrated over the trial, where power was reported;
- cpu_hours: the trainer containers' CPU core-hours over the trial;
- telemetry_coverage: the share of the trial (× its hosts) that samples cover: below 1, the
  launcher was not watching all along (energy and CPU-hours count only what was sampled).

A sample's rates are over the interval since the sample before it, so each interval (no longer
than MAX_GAP_S: a longer one is a gap, not a measurement) takes the later sample's values.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

from launcher.telemetry.samples import Sample, finite

MAX_GAP_S = 10.0


@dataclass(frozen=True)
class Window:
    trial: str
    start: float
    end: float
    hosts: Optional[frozenset] = None       # None: every host (a sync trial)


@dataclass
class Tally:
    covered: float = 0.0                    # host-seconds with samples
    cpu_seconds: float = 0.0
    util_weighted: float = 0.0              # util × seconds, over GPUs
    util_seconds: float = 0.0
    joules: float = 0.0
    power_seen: bool = False
    gpus: dict = field(default_factory=dict)     # host → GPU ids seen


def windows_of(records: list[dict], parallel: bool) -> list[tuple[int, Window]]:
    """Each trial with a usable window (started_at ≤ ended_at, both numbers), with its position."""
    found = []
    for i, record in enumerate(records):
        start, end = record.get("started_at"), record.get("ended_at")
        if not (finite(start) and finite(end) and start <= end):
            continue
        host = record.get("host") if parallel else None
        found.append((i, Window(record["candidate"], float(start), float(end),
                                frozenset([host]) if isinstance(host, str) else None)))
    return found


def tally(series: dict[str, Iterable[Sample]], windows: list[Window]) -> list[Tally]:
    """Each window's sums over the samples of the hosts it covers."""
    tallies = [Tally() for _ in windows]
    for host, samples in series.items():
        mine = [(w, t) for w, t in zip(windows, tallies) if w.hosts is None or host in w.hosts]
        previous = None
        for sample in samples:
            if previous is not None and 0 < sample.time - previous.time <= MAX_GAP_S:
                for window, sums in mine:
                    seconds = min(sample.time, window.end) - max(previous.time, window.start)
                    if seconds > 0:
                        _add(sums, host, sample, seconds)
            previous = sample
    return tallies


def _add(sums: Tally, host: str, sample: Sample, seconds: float) -> None:
    sums.covered += seconds
    if sample.cpu is not None:
        sums.cpu_seconds += sample.cpu * seconds
    for gpu in sample.gpus:
        if gpu.util is not None:
            sums.util_weighted += gpu.util * seconds
            sums.util_seconds += seconds
            sums.gpus.setdefault(host, set()).add(gpu.index)
        if gpu.power is not None:
            sums.joules += gpu.power * seconds
            sums.power_seen = True


def figures(window: Window, sums: Tally, hosts: int) -> dict:
    """The keys results.json takes for one trial (none when no sample fell in its window)."""
    length = window.end - window.start
    if sums.covered <= 0 or length <= 0:
        return {}
    out = {"cpu_hours": significant(sums.cpu_seconds / 3600),
           "telemetry_coverage": round(min(sums.covered / (hosts * length), 1.0), 3)}
    if sums.util_seconds > 0:
        gpus = sum(len(ids) for ids in sums.gpus.values())
        out["gpu_hours"] = significant(gpus * length / 3600)
        out["gpu_utilization"] = round(sums.util_weighted / sums.util_seconds, 1)
    if sums.power_seen:
        out["energy_wh"] = significant(sums.joules / 3600)
    return out


def significant(value: float, digits: int = 6) -> float:
    return float(f"{value:.{digits}g}")


def per_trial(records: list[dict], parallel: bool, series: dict[str, Iterable[Sample]]) -> list[dict]:
    """Each record's figures, in the records' order ({} where the samples say nothing about it)."""
    windows = windows_of(records, parallel)
    tallies = tally(series, [w for _, w in windows])
    made = [{} for _ in records]
    for (i, window), sums in zip(windows, tallies):
        hosts = len(window.hosts) if window.hosts is not None else max(len(series), 1)
        made[i] = figures(window, sums, hosts)
    return made
