"""The warnings: pure functions over each host's recent samples (unit-tested without SSH), used
alike by the live view (session.py, every second) and the report (over the whole CSV, `replay`).

Every rule but swapping looks at the last `span_s` seconds of each host (the inventory's
`telemetry.warn_after_s`, default SPAN_S): a GPU idle that long is warned of within a second or two.

- idle GPU: a GPU under IDLE_PCT % busy for span_s while its host trains;
- input-bound: the host's GPUs under INPUT_BOUND_PCT % on average while its container wants
  ≥ SATURATED of the CPUs it may use (its CPU demand, below), for span_s of training;
- swapping: the host swapped ≥ SWAP_MB_S MB/s in and out, on average over SWAP_SPAN_S s;
- straggler (sync runs): a worker the others wait for. Workers of a sync run go in lockstep:
  every one takes the same steps per second, so epoch and step times are the same everywhere and
  tell nobody apart. What differs is what each worker does within a step: the straggler computes
  all along, while the others finish early and wait in the all-reduce, blocked, wanting no CPU.
  The measure is the container's CPU demand per step, as a share of the CPUs it may use
  (`Sample.cpu_demand`): the CPU-seconds it used plus those its threads spent runnable but
  waiting for a CPU (each thread's schedstat: a host crowded by other work, or too few cores),
  divided by CPUs × step time (every worker's steps take as long, so per second is per step).
  The straggler wants ≥ STRAGGLER_BUSY of its CPUs and more than STRAGGLER_RATIO × the median of
  the others', for span_s of training. Usage alone would miss a worker starved by other work
  on its host (measured here: throttled to 0.1 CPU on a crowded machine it used 0.06, as much as
  the worker waiting for it); the CPU quota shows in the CPUs it may use. Not GPU utilisation:
  NCCL's all-reduce kernels spin on the waiting workers' GPUs, so a worker that waits shows as
  busy as the one it waits for. A slower GPU on one host is therefore not found by this rule; an
  input pipeline, a CPU quota, fewer or slower cores, or a host busy with other work are.

A rule needs its whole span covered: samples no more than MAX_GAP_S apart, from the start of the
span (within START_SLACK_S) to its end; a host whose sampler was silent is judged on nothing.
"""
from __future__ import annotations

import heapq
import statistics
from collections import deque
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from launcher.telemetry.samples import Sample

SPAN_S = 30.0             # the default of telemetry.warn_after_s
IDLE_PCT = 10.0
INPUT_BOUND_PCT = 30.0
SATURATED = 0.9
SWAP_MB_S = 1.0
SWAP_SPAN_S = 30.0
STRAGGLER_RATIO = 1.3
STRAGGLER_BUSY = 0.8
MAX_GAP_S = 10.0
START_SLACK_S = 2.5       # a span's first sample may come this long after the span begins (periods ≤ 2 s)
ENOUGH = 0.8              # a figure must be reported by this share of a span's samples
CLEAR_S = 30.0            # a warning not found again for this long is over
LOOK_S = 1.0              # the live view judges this often (session.py), and the report's replay as often
SESSION_GAP_S = 2 * LOOK_S  # no host sampled for this long: a session ended (the replay judges its last moment)


@dataclass(frozen=True)
class Finding:
    kind: str                      # idle_gpu | input_bound | swapping | straggler
    host: str
    gpu: Optional[int]
    message: str

    @property
    def key(self) -> tuple:
        return self.kind, self.host, self.gpu


def last(window: Sequence[Sample], span: float) -> list[Sample]:
    """The samples of the window's last `span` seconds, when they cover all of it; else []."""
    if not window:
        return []
    end = window[-1].time
    picked: list[Sample] = []
    for sample in reversed(window):        # time-ordered: walked back only as far as the span reaches
        if sample.time < end - span - 1e-6:
            break
        if picked and picked[-1].time - sample.time > MAX_GAP_S:
            return []
        picked.append(sample)
    if len(picked) < 2 or picked[-1].time > end - span + START_SLACK_S:
        return []
    picked.reverse()
    return picked


def demand(sample: Sample) -> Optional[float]:
    """The CPU the container wanted, as a share of what it may use (used alone where the host did
    not say how long its threads waited)."""
    return sample.cpu_demand if sample.cpu_demand is not None else sample.cpu_share


def _training(span: list[Sample]) -> bool:
    return bool(span) and all(s.training for s in span)


def _enough(values: list, span: list) -> bool:
    return bool(values) and len(values) >= ENOUGH * len(span)


def idle_gpus(host: str, window: Sequence[Sample], span_s: float = SPAN_S) -> list[Finding]:
    span = last(window, span_s)
    if not _training(span):
        return []
    found = []
    for index in sorted({g.index for s in span for g in s.gpus}):
        utils = [g.util for s in span for g in s.gpus if g.index == index and g.util is not None]
        if _enough(utils, span) and max(utils) < IDLE_PCT:
            found.append(Finding("idle_gpu", host, index, f"GPU {index} under {IDLE_PCT:g} % busy for {span_s:g} s "
                                 f"while {host} trains (mean {statistics.fmean(utils):.0f} %)"))
    return found


def input_bound(host: str, window: Sequence[Sample], span_s: float = SPAN_S) -> list[Finding]:
    span = last(window, span_s)
    if not _training(span):
        return []
    utils = [s.gpu_util for s in span if s.gpu_util is not None]
    shares = [d for s in span if (d := demand(s)) is not None]
    if not (_enough(utils, span) and _enough(shares, span)):
        return []
    util, share = statistics.fmean(utils), statistics.fmean(shares)
    if util >= INPUT_BOUND_PCT or share < SATURATED:
        return []
    gpus = sorted({g.index for s in span for g in s.gpus})
    limit = span[-1].cpu_limit or 0
    return [Finding("input_bound", host, None, f"input-bound: GPU{'s' if len(gpus) > 1 else ''} "
                    f"{', '.join(map(str, gpus))} averaged {util:.0f} % for {span_s:g} s while the container wanted "
                    f"{share * limit:.1f} of its {limit:g} CPUs: the input pipeline cannot feed them")]


def swapping(host: str, window: Sequence[Sample], span_s: float = SPAN_S) -> list[Finding]:
    # span_s aside (the rules' common signature): swapping is judged over SWAP_SPAN_S, always.
    span = last(window, SWAP_SPAN_S)
    rates = [s.swap for s in span if s.swap is not None]
    if not _enough(rates, span) or statistics.fmean(rates) < SWAP_MB_S:
        return []
    mem = next((s for s in reversed(span) if s.mem is not None), None)
    held = f" (its container holds {mem.mem:,.0f} of {mem.mem_limit:,.0f} MiB)" if mem and mem.mem_limit else ""
    return [Finding("swapping", host, None, f"the host is swapping: {statistics.fmean(rates):.1f} MB/s in and out "
                    f"for {SWAP_SPAN_S:g} s{held}")]


def busy_share(window: Sequence[Sample], span_s: float = SPAN_S) -> Optional[tuple[float, float]]:
    """(CPU demand share, CPUs it may use) over the last span_s of training, when known."""
    span = last(window, span_s)
    shares = [d for s in span if (d := demand(s)) is not None]
    if not _training(span) or not _enough(shares, span):
        return None
    return statistics.fmean(shares), span[-1].cpu_limit or 0.0


def stragglers(windows: dict[str, Sequence[Sample]], sync: bool, span_s: float = SPAN_S) -> list[Finding]:
    if not sync:
        return []
    shares = {host: share for host, w in windows.items() if (share := busy_share(w, span_s)) is not None}
    if len(shares) < 2:
        return []
    found = []
    for host, (share, limit) in shares.items():
        others = statistics.median(s for h, (s, _) in shares.items() if h != host)
        if share >= STRAGGLER_BUSY and share > STRAGGLER_RATIO * others:
            found.append(Finding("straggler", host, None, f"straggler: for {span_s:g} s its container wanted {share:.2f}× "
                                 f"the {limit:g} CPUs it may use (used, or waited for), the other workers {others:.2f}× "
                                 "theirs (in a sync run they wait for it at every step)"))
    return found


def judge(windows: dict[str, Sequence[Sample]], sync: bool, span_s: float = SPAN_S) -> list[Finding]:
    """Every rule over every host's recent samples."""
    found = [f for host, window in windows.items()
             for rule in (idle_gpus, input_bound, swapping) for f in rule(host, window, span_s)]
    return found + stragglers(windows, sync, span_s)


@dataclass
class Episode:
    finding: Finding
    start: float
    end: float


class Episodes:
    """Findings over time: `update` returns the ones that begin (to warn once); a finding not made
    again for CLEAR_S is over."""

    def __init__(self):
        self.active: dict[tuple, Episode] = {}
        self.closed: list[Episode] = []

    def update(self, findings: Iterable[Finding], now: float) -> list[Finding]:
        new = []
        for finding in findings:
            if finding.key in self.active:
                self.active[finding.key].end = now
            else:
                self.active[finding.key] = Episode(finding, now, now)
                new.append(finding)
        for key, episode in list(self.active.items()):
            if now - episode.end > CLEAR_S:
                self.closed.append(self.active.pop(key))
        return new

    def all(self) -> list[Episode]:
        return sorted(self.closed + list(self.active.values()), key=lambda e: (e.start, e.finding.key))


def _tagged(host: str, samples: Iterable[Sample]):
    return ((s.time, host, s) for s in samples)


def replay(series: dict[str, Iterable[Sample]], sync: bool, step_s: float = LOOK_S,
           span_s: float = SPAN_S) -> list[Episode]:
    """The warnings of a whole run, from every host's samples in time order (streamed: only the
    last span_s of each host is held), judged as often as the live view judged them: a finding
    that held for a few seconds only (as `watch` was stopped) was warned of, and is the report's."""
    windows: dict[str, deque] = {host: deque() for host in series}
    episodes, judged, when, previous = Episodes(), None, None, None
    merged = heapq.merge(*[_tagged(host, samples) for host, samples in series.items()], key=lambda item: item[0])
    for when, host, sample in merged:
        if judged is not None and previous != judged and when - previous > SESSION_GAP_S:
            # a session's last moment is judged too: a warning `watch` gave as it was stopped (the
            # next session, `up --wait` onto the same run, begins a few seconds later) is the
            # report's as well; CI once saw a straggler `watch` named missing from the report, its
            # last sample unjudged and the next session only 5 s on (under MAX_GAP_S, the gap then)
            _look(episodes, windows, previous, sync, span_s)
            judged = previous
        previous = when
        window = windows[host]
        window.append(sample)
        while window and window[0].time < when - max(span_s, SWAP_SPAN_S) - MAX_GAP_S:
            window.popleft()
        if judged is None or when >= judged + step_s:
            _look(episodes, windows, when, sync, span_s)
            judged = when
    if when is not None and when != judged:
        _look(episodes, windows, when, sync, span_s)      # the run's last moment is judged too
    return episodes.all()


def _look(episodes: Episodes, windows: dict, when: float, sync: bool, span_s: float) -> None:
    fresh = {h: w for h, w in windows.items() if w and w[-1].time >= when - MAX_GAP_S}
    episodes.update(judge(fresh, sync, span_s), when)
