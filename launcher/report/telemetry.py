"""The report's part for a run with telemetry (telemetry/<host>.csv, launcher/telemetry/csvfile.py):
telemetry.png, how busy every host's GPUs (and its container's CPUs) were over the run, one panel
per host, the trials shaded and named, each epoch's end ticked, the warnings' spans in red; and a
section of report.md: per host its means and peaks, then every warning the rules find over the
whole run (launcher/telemetry/rules.py, the same rules as the live view).

Every CSV is streamed, twice at most (the picture's points, then the warnings): a run's telemetry
is never whole in memory; the picture keeps at most MAX_POINTS points per host, each the mean of
its stretch of time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from launcher.report.axes import plain
from launcher.telemetry import csvfile, rules
from launcher.telemetry.samples import Sample, finite

MAX_POINTS = 1200
MAX_MARKS = 2000
NAMED_TRIALS = 12           # more trials than this are shaded, not named


@dataclass
class Bucket:
    n: int = 0
    time: float = 0.0
    cpu_share: float = 0.0
    cpu_n: int = 0
    gpus: dict = field(default_factory=dict)      # index → [sum, n]

    def add(self, other: "Bucket") -> None:
        self.n += other.n
        self.time += other.time
        self.cpu_share += other.cpu_share
        self.cpu_n += other.cpu_n
        for index, (total, n) in other.gpus.items():
            mine = self.gpus.setdefault(index, [0.0, 0])
            mine[0] += total
            mine[1] += n


@dataclass
class HostSeries:
    """One host's samples, thinned for the picture, with its means, peaks and epoch marks."""
    width: float = 1.0
    buckets: dict = field(default_factory=dict)
    epochs: list = field(default_factory=list)
    first: Optional[float] = None
    last: Optional[float] = None
    sums: dict = field(default_factory=dict)      # figure → [sum, n]
    peaks: dict = field(default_factory=dict)
    cpu_limit: Optional[float] = None
    _step: Optional[tuple] = None

    def add(self, s: Sample) -> None:
        self.first = s.time if self.first is None else self.first
        self.last = s.time
        self._summary(s)
        if self._step is not None and (s.trial, s.epoch) != self._step and s.epoch > 0 and len(self.epochs) < MAX_MARKS:
            self.epochs.append(s.time)
        self._step = (s.trial, s.epoch)
        bucket = self.buckets.setdefault(math.floor(s.time / self.width), Bucket())
        bucket.n += 1
        bucket.time += s.time
        if s.cpu_share is not None:
            bucket.cpu_share += s.cpu_share
            bucket.cpu_n += 1
        for gpu in s.gpus:
            if gpu.util is not None:
                entry = bucket.gpus.setdefault(gpu.index, [0.0, 0])
                entry[0] += gpu.util
                entry[1] += 1
        if len(self.buckets) > 2 * MAX_POINTS:
            self._coarser()

    def _coarser(self) -> None:
        self.width *= 2
        merged: dict = {}
        for key, bucket in self.buckets.items():
            merged.setdefault(math.floor(key / 2), Bucket()).add(bucket)
        self.buckets = merged

    def _summary(self, s: Sample) -> None:
        values = {"cpu": s.cpu, "mem": s.mem, "net_in": s.net_in, "net_out": s.net_out, "swap": s.swap,
                  "gpu": s.gpu_util if s.training else None,
                  "gpu_mem": sum(g.mem for g in s.gpus if g.mem is not None) if s.gpus else None}
        for key, value in values.items():
            if value is not None:
                entry = self.sums.setdefault(key, [0.0, 0])
                entry[0] += value
                entry[1] += 1
                self.peaks[key] = max(self.peaks.get(key, value), value)
        self.cpu_limit = s.cpu_limit or self.cpu_limit

    def mean(self, key: str) -> Optional[float]:
        total, n = self.sums.get(key, (0.0, 0))
        return total / n if n else None


def read(folder: Path) -> dict[str, HostSeries]:
    series = {}
    for host in csvfile.hosts_with_csv(folder):
        kept = HostSeries()
        for sample in csvfile.read_csv(csvfile.csv_path(folder, host)):
            kept.add(sample)
        if kept.first is not None:
            series[host] = kept
    return series


def trial_spans(doc: dict, host: str) -> list[tuple[str, float, float]]:
    """The trials this host trained (sync: all of them), as (name, start, end)."""
    parallel = doc.get("mode") == "parallel"
    spans = []
    for record in doc["candidates"]:
        start, end = record.get("started_at"), record.get("ended_at")
        if finite(start) and finite(end) and start <= end and (not parallel or record.get("host") == host):
            spans.append((record["candidate"], float(start), float(end)))
    return spans


def plot(series: dict[str, HostSeries], doc: dict, episodes: list, out: Path, save, span_s: float = rules.SPAN_S) -> Path:
    import matplotlib.pyplot as plt
    hosts = list(series)
    t0 = min(s.first for s in series.values())
    fig, axes = plt.subplots(len(hosts), 1, figsize=(12, 2.6 * len(hosts) + 0.8), sharex=True, squeeze=False)
    for ax, host in zip(axes[:, 0], hosts):
        _panel(ax, host, series[host], doc, [e for e in episodes if e.finding.host == host], t0, span_s)
    axes[-1, 0].set_xlabel("minutes since the first sample")
    fig.subplots_adjust(left=0.07, right=0.84, top=1 - 0.5 / fig.get_figheight(), bottom=0.45 / fig.get_figheight(),
                        hspace=0.25)
    fig.suptitle("How busy the hardware was: GPU utilisation and the container's CPU use; trials shaded, "
                 "epochs ticked, warnings in red", fontsize=10)
    for ax in axes[:, 0]:
        _names_apart(fig, ax)
    return save(fig, out / "telemetry.png", layout=False)


def _names_apart(fig, ax) -> None:
    """A trial's name only where it prints over no other: the longest trials named first; trials of
    a second or two (pruned at once) stay shaded unnamed where there is no room (the leaderboard
    names them). Each name's text carries its trial's length as its gid."""
    renderer = fig.canvas.get_renderer()
    kept = []
    for text in sorted(ax.texts, key=lambda t: -float(t.get_gid() or 0)):
        box = text.get_window_extent(renderer).expanded(1.05, 1.0)
        if any(box.overlaps(other) for other in kept):
            text.remove()
        else:
            kept.append(box)


def _panel(ax, host: str, kept: HostSeries, doc: dict, episodes: list, t0: float, span_s: float) -> None:
    minutes = lambda t: (t - t0) / 60  # noqa: E731
    buckets = [kept.buckets[k] for k in sorted(kept.buckets)]
    gap = max(2 * kept.width, rules.MAX_GAP_S) / 60
    for index in sorted({i for b in buckets for i in b.gpus}):
        points = [(minutes(b.time / b.n), b.gpus[index][0] / b.gpus[index][1]) for b in buckets if index in b.gpus]
        ax.plot(*broken(points, gap), linewidth=1.2, label=f"GPU {index}")
    cpu = [(minutes(b.time / b.n), 100 * b.cpu_share / b.cpu_n) for b in buckets if b.cpu_n]
    if cpu:
        ax.plot(*broken(cpu, gap), "--", color="grey", linewidth=1.0, label="CPU used (% of its limit)")
    spans = trial_spans(doc, host)
    for i, (name, start, end) in enumerate(spans):
        ax.axvspan(minutes(start), minutes(end), color="#2a9d8f" if i % 2 else "#e9c46a", alpha=0.15, linewidth=0)
        if len(spans) <= NAMED_TRIALS:
            ax.text(minutes(start), 101, plain(name, 28), fontsize=7, va="bottom", clip_on=True, gid=f"{end - start:.3f}")
    for t in kept.epochs:
        ax.axvline(minutes(t), ymin=0.94, ymax=1.0, color="black", linewidth=0.8)
    for episode in episodes:                    # a band below 0, under the lines
        ax.fill_between([minutes(began(episode, span_s)), minutes(episode.end)], -9, -3, color="red", alpha=0.7, linewidth=0,
                        label="warning")
    ax.set_ylim(-10, 112)
    ax.set_yticks([0, 20, 40, 60, 80, 100])
    ax.set_ylabel(plain(f"{host}\n% busy", 40), fontsize=9)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0))


def broken(points: list[tuple], gap: float) -> tuple[list, list]:
    """x and y with a break (NaN) wherever two points are further apart than `gap`: no line drawn
    across a stretch without samples."""
    xs, ys = [], []
    for i, (x, y) in enumerate(points):
        if i and x - points[i - 1][0] > gap:
            xs.append(math.nan)
            ys.append(math.nan)
        xs.append(x)
        ys.append(y)
    return xs, ys


def began(episode, span_s: float = rules.SPAN_S) -> float:
    """When the condition began: a finding is made once it has held for its rule's whole span."""
    return episode.start - (rules.SWAP_SPAN_S if episode.finding.kind == "swapping" else span_s)


def markdown(series: dict[str, HostSeries], episodes: list, t0: float, span_s: float = rules.SPAN_S) -> list[str]:
    lines = ["## Hardware", "", "| host | GPU util (training) | GPU memory peak | CPU cores | memory peak | "
             "net in / out | swapped peak |", "|---|---:|---:|---:|---:|---:|---:|"]
    for host, kept in series.items():
        gpu, cpu, net_in, net_out = (kept.mean(k) for k in ("gpu", "cpu", "net_in", "net_out"))
        cells = [f"{gpu:.0f} %" if gpu is not None else "",
                 f"{kept.peaks['gpu_mem'] / 1024:.1f} GiB" if "gpu_mem" in kept.peaks else "",
                 (f"{cpu:.2f}" + (f" of {kept.cpu_limit:g}" if kept.cpu_limit else "")) if cpu is not None else "",
                 f"{kept.peaks['mem'] / 1024:.2f} GiB" if "mem" in kept.peaks else "",
                 f"{net_in:.0f} / {net_out:.0f} Mbit/s" if net_in is not None and net_out is not None else "",
                 f"{kept.peaks['swap']:.1f} MB/s" if "swap" in kept.peaks else ""]
        lines.append(f"| {host} | " + " | ".join(cells) + " |")
    lines += ["", "Means over the samples (GPU utilisation while the host trained); peaks the largest sample. "
              "Per-trial GPU-hours, utilisation, energy and CPU-hours are in the leaderboard.", ""]
    if not episodes:
        return lines + ["No warnings: no GPU idle, input-bound host, straggler or swapping host was found.", ""]
    lines += ["Warnings (README: \"Is the hardware busy?\" says what each means and what to do):", ""]
    for episode in episodes:
        start, end = (began(episode, span_s) - t0) / 60, (episode.end - t0) / 60
        lines.append(f"- {episode.finding.host}: {episode.finding.message} (minutes {max(start, 0):.1f}–{end:.1f})")
    return lines + [""]


def section(folder: Path, doc: dict, save) -> tuple[list[str], list[Path]]:
    """report.md's lines and the pictures, or nothing when the run has no telemetry."""
    series = read(folder)
    if not series:
        return [], []
    streams: dict[str, Iterable[Sample]] = {h: csvfile.read_csv(csvfile.csv_path(folder, h)) for h in series}
    span_s = csvfile.read_rules(folder) or rules.SPAN_S       # as the live view judged them
    episodes = rules.replay(streams, doc.get("mode") != "parallel", span_s=span_s)
    t0 = min(s.first for s in series.values())
    return markdown(series, episodes, t0, span_s), [plot(series, doc, episodes, folder, save, span_s)]
