"""The sampler's output (command.py) turned into Samples: pure, and hostile-proof.

What a host sends is bounded before it is read: a line is at most LINE_MAX bytes (a longer one is
dropped up to its newline, never gathered), printable ASCII or it is garbage; more than
FLOOD_BYTES or FLOOD_LINES in a second is a flood (`Flood`: the session ends that sampler). Every
field is type-checked and range-checked; a line that fails is counted as garbage and dropped, and
one that is not understood never changes what the stream knows. Memory per host is fixed: a
partial line, the last tick, the last reading of at most MAX_GPUS GPUs.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from launcher.telemetry.command import NIC_NAME
from launcher.telemetry.samples import MAX_GPUS, Gpu, Sample

LINE_MAX = 512              # bytes: the longest line either the sampler or nvidia-smi writes is ~120
FLOOD_BYTES = 256 << 10     # per second: 64 GPUs every 0.1 s would be ~30 KB
FLOOD_LINES = 4096          # per second
MAX_DT_S = 30.0             # two ticks further apart than this give no rates (a gap, a restart)
MIB = float(1 << 20)
LARGEST = (1 << 63) - 1     # a 64-bit counter (v1 writes 2^63 - 4096 for "no memory limit")
GPU_LINE = re.compile(r"^\d{1,4}, ")
PLACEHOLDER = re.compile(r"^\[[A-Za-z /]{1,60}\]$|^N/A$")     # [N/A], [Not Supported], [Unknown Error]…
CPUSET = re.compile(r"^[0-9]{1,6}(?:-[0-9]{1,6})?(?:,[0-9]{1,6}(?:-[0-9]{1,6})?){0,255}$")
GPU_RANGES = ((0.0, 100.0), (0.0, 1e7), (0.0, 1e7), (0.0, 1e5), (-100.0, 200.0))   # util, mem, total, W, °C


class Flood(Exception):
    """The host sent more than a sampler could: it is not one (or it misbehaves)."""


@dataclass(frozen=True)
class Tick:
    up: float
    cpu_us: Optional[int]
    mem: Optional[int]
    mem_limit: Optional[int]
    quota: Optional[int]
    quota_period: Optional[int]
    rx: Optional[int]
    tx: Optional[int]
    swap_in: Optional[int]
    swap_out: Optional[int]
    queued_us: Optional[int]


@dataclass
class HostFacts:
    cpus: Optional[int] = None
    mem_total: Optional[int] = None     # bytes
    page: int = 4096
    nic: str = ""
    cpuset: Optional[int] = None        # CPUs in the container's cpuset
    container: str = ""
    no_nvidia_smi: bool = False


@dataclass
class HostStream:
    """One host's sampler output, fed as it comes (`feed`), giving a Sample per tick. `gpu_ids`:
    the GPUs asked about (None: any, `all`). Notes for the user gather in `notes`."""

    period_s: float = 1.0
    gpu_ids: Optional[frozenset] = None
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    facts: HostFacts = field(default_factory=HostFacts)
    garbage: int = 0
    first_garbage: str = ""
    notes: list = field(default_factory=list)
    nvidia_said: str = ""               # the last line nvidia-smi printed that was no reading
    _partial: bytearray = field(default_factory=bytearray)
    _dropping: bool = False
    _window: list = field(default_factory=lambda: [0.0, 0, 0])    # start, bytes, lines
    _anchor: Optional[tuple] = None     # (host wall clock, host uptime) at the same moment
    _prev: Optional[Tick] = None
    _gpus: dict = field(default_factory=dict)                    # index → (clock, Gpu)

    def feed(self, chunk: bytes) -> list[Sample]:
        """The samples the chunk completes; Flood when the host sends too much."""
        self._count(len(chunk), chunk.count(b"\n"))
        samples = []
        for line in self._lines(chunk):
            sample = self._line(line)
            if sample is not None:
                samples.append(sample)
        return samples

    def _count(self, size: int, lines: int) -> None:
        now = self.clock()
        if now - self._window[0] >= 1.0:
            self._window = [now, 0, 0]
        self._window[1] += size
        self._window[2] += lines
        if self._window[1] > FLOOD_BYTES or self._window[2] > FLOOD_LINES:
            raise Flood(f"sent more than {FLOOD_BYTES // 1024} KiB or {FLOOD_LINES} lines in a second")

    def _lines(self, chunk: bytes):
        *complete, rest = chunk.split(b"\n")
        for piece in complete:
            if self._dropping or len(self._partial) + len(piece) > LINE_MAX:
                self._garbage(b"(a line longer than %d bytes)" % LINE_MAX)
            else:
                yield bytes(self._partial + piece)
            self._partial.clear()
            self._dropping = False
        if self._dropping or len(self._partial) + len(rest) > LINE_MAX:
            self._partial.clear()
            self._dropping = True
        else:
            self._partial.extend(rest)

    def _garbage(self, line: bytes) -> None:
        self.garbage += 1
        if not self.first_garbage:
            self.first_garbage = ascii_shown(line)

    def _line(self, raw: bytes) -> Optional[Sample]:
        line = raw.rstrip(b"\r")
        if not line or any(b < 0x20 or b > 0x7e for b in line):
            if line:
                self._garbage(line)
            return None
        text = line.decode("ascii")
        try:
            if GPU_LINE.match(text):
                self._gpu(text)
                return None
            kind, _, rest = text.partition(" ")
            handler = {"T": self._anchor_line, "H": self._host, "N": self._nic, "G": self._no_gpu,
                       "K": self._container, "S": self._tick, "E": self._gpu_ended, "X": self._gpu_gave_up}.get(kind)
            if handler is None:
                self.nvidia_said = text[:160]      # nvidia-smi says why it fails on stdout
                raise ValueError(text)
            return handler(rest.split())
        except (ValueError, IndexError, OverflowError):
            self._garbage(line)
            return None

    # --- the sampler's lines --------------------------------------------------------------------
    def _anchor_line(self, fields: list[str]) -> None:
        wall, up = _real(fields, 0, 0, 1e11), _real(fields, 1, 0, 1e10)
        expect(len(fields) == 2 and wall is not None and up is not None)
        self._anchor = (wall, up)

    def _host(self, fields: list[str]) -> None:
        expect(len(fields) == 3)
        self.facts.cpus = _int(fields, 0, 1, 1 << 20)
        mem_kb = _int(fields, 1, 1, 1 << 40)
        self.facts.mem_total = mem_kb * 1024 if mem_kb else None
        self.facts.page = _int(fields, 2, 512, 1 << 24) or 4096

    def _nic(self, fields: list[str]) -> None:
        expect(len(fields) == 1 and (fields[0] == "-" or NIC_NAME.match(fields[0]) is not None))
        self.facts.nic = "" if fields[0] == "-" else fields[0]

    def _no_gpu(self, fields: list[str]) -> None:
        expect(fields == ["none"])
        self.facts.no_nvidia_smi = True

    def _container(self, fields: list[str]) -> None:
        expect(len(fields) == 3 and fields[0] in ("1", "2") and re.fullmatch(r"[0-9a-f]{12}", fields[1]) is not None)
        self.facts.container = fields[1]
        self.facts.cpuset = cpuset_size(fields[2])
        self._prev = None                  # a new cgroup: its CPU counter starts over

    def _gpu_ended(self, fields: list[str]) -> None:
        status = _int(fields, 0, 0, 255)
        expect(len(fields) == 1 and status is not None)
        said = f": {self.nvidia_said}" if self.nvidia_said else ""
        self.notes.append(f"nvidia-smi ended (exit {status}){said}; started again in 10 s")
        self._gpus.clear()

    def _gpu_gave_up(self, fields: list[str]) -> None:
        expect(not fields)
        self.notes.append("nvidia-smi keeps ending; no more GPU figures from this host")

    def _gpu(self, text: str) -> None:
        parts = text.split(", ")
        expect(len(parts) == 6)
        index = int(parts[0])
        expect(index <= 1023 and (self.gpu_ids is None or index in self.gpu_ids))
        values = [_gpu_value(p, low, high) for p, (low, high) in zip(parts[1:], GPU_RANGES)]
        if index in self._gpus or len(self._gpus) < MAX_GPUS:
            self._gpus[index] = (self.clock(), Gpu(index, *values))
        self.nvidia_said = ""                      # it reads: what it said before is no reason for anything

    def _tick(self, fields: list[str]) -> Sample:
        expect(len(fields) == 11)
        up = _real(fields, 0, 0, 1e10)
        expect(up is not None)
        counters = [_int(fields, i, 0, LARGEST) for i in range(1, 11)]
        tick = Tick(up, *counters)
        prev, self._prev = self._prev, tick
        when = self._anchor[0] + (up - self._anchor[1]) if self._anchor else self.wall()
        dt = up - prev.up if prev else 0.0
        rates = prev is not None and 0 < dt <= MAX_DT_S
        fresh = max(3 * self.period_s, 3.0)
        now = self.clock()
        gpus = tuple(g for _, (seen, g) in sorted(self._gpus.items()) if now - seen <= fresh)
        return Sample(
            time=round(when, 3),
            cpu=self._rate(prev and prev.cpu_us, tick.cpu_us, 1e-6, dt) if rates else None,
            cpu_queued=self._rate(prev and prev.queued_us, tick.queued_us, 1e-6, dt) if rates else None,
            cpu_limit=self._cpu_limit(tick),
            mem=None if tick.mem is None else tick.mem / MIB,
            mem_limit=self._mem_limit(tick),
            net_in=self._rate(prev and prev.rx, tick.rx, 8e-6, dt) if rates else None,
            net_out=self._rate(prev and prev.tx, tick.tx, 8e-6, dt) if rates else None,
            swap=self._swap(prev, tick, dt) if rates else None,
            gpus=gpus)

    @staticmethod
    def _rate(before: Optional[int], after: Optional[int], scale: float, dt: float) -> Optional[float]:
        """A counter's growth per second × scale; None when either is missing or it went back."""
        if before is None or after is None or after < before:
            return None
        return (after - before) * scale / dt

    def _cpu_limit(self, tick: Tick) -> Optional[float]:
        limits = [float(n) for n in (self.facts.cpus, self.facts.cpuset) if n]
        if tick.quota and tick.quota_period:
            limits.append(tick.quota / tick.quota_period)
        return min(limits) if limits else None

    def _mem_limit(self, tick: Tick) -> Optional[float]:
        limits = [n for n in (tick.mem_limit, self.facts.mem_total) if n]
        return min(limits) / MIB if limits else None

    def _swap(self, prev: Tick, tick: Tick, dt: float) -> Optional[float]:
        pages_in = self._rate(prev.swap_in, tick.swap_in, 1.0, dt)
        pages_out = self._rate(prev.swap_out, tick.swap_out, 1.0, dt)
        if pages_in is None or pages_out is None:
            return None
        return (pages_in + pages_out) * self.facts.page / 1e6


def expect(condition: bool) -> None:
    if not condition:
        raise ValueError("not a line the sampler writes")


def _int(fields: list[str], i: int, low: int, high: int) -> Optional[int]:
    """Field i as an integer in [low, high]; None for `-`; ValueError for anything else."""
    text = fields[i]
    if text == "-":
        return None
    if not text.isdigit() or len(text) > 20:
        raise ValueError(text)
    value = int(text)
    expect(low <= value <= high)
    return value


def _real(fields: list[str], i: int, low: float, high: float) -> Optional[float]:
    text = fields[i] if i < len(fields) else ""
    if not re.fullmatch(r"[0-9]{1,12}(?:\.[0-9]{1,12})?", text):
        return None
    value = float(text)
    return value if low <= value <= high else None


def _gpu_value(text: str, low: float, high: float) -> Optional[float]:
    """One field of nvidia-smi's line: a number in range, or a placeholder ([N/A]…) for none."""
    if PLACEHOLDER.match(text):
        return None
    if not re.fullmatch(r"-?[0-9]{1,9}(?:\.[0-9]{1,6})?", text):
        raise ValueError(text)
    value = float(text)
    expect(low <= value <= high)
    return value


def cpuset_size(spec: str) -> Optional[int]:
    """How many CPUs `0-3,8` names; None for `-` or nonsense."""
    if spec == "-" or not CPUSET.match(spec):
        return None
    count = 0
    for part in spec.split(","):
        low, _, high = part.partition("-")
        count += max(int(high or low) - int(low) + 1, 0)
    return count or None


def ascii_shown(line: bytes, limit: int = 60) -> str:
    """A line as it can be shown: printable ASCII, the rest escaped, cut to `limit` characters."""
    text = line[:limit * 4].decode("ascii", "backslashreplace")
    text = "".join(c if " " <= c <= "~" else f"\\x{ord(c):02x}" for c in text)
    return text if len(text) <= limit else text[:limit - 1] + "…"
