"""What telemetry is made of: one `Sample` per host and tick (the host's counters turned into
rates), with one `Gpu` reading per GPU the container was given. Pure data; parse.py makes them,
csvfile.py writes and reads them, rules.py and figures.py judge and sum them."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Optional

MAX_GPUS = 64             # GPU ids per host a sample keeps (the inventory allows no more)


@dataclass(frozen=True)
class Gpu:
    index: int
    util: Optional[float] = None        # % of the last period a kernel ran (nvidia-smi's utilization.gpu)
    mem: Optional[float] = None         # MiB used
    mem_total: Optional[float] = None   # MiB
    power: Optional[float] = None       # W
    temp: Optional[float] = None        # °C


@dataclass(frozen=True)
class Sample:
    time: float                         # the host's clock, UTC unix seconds
    cpu: Optional[float] = None         # CPU cores the trainer container used
    cpu_limit: Optional[float] = None   # CPU cores it may use (host CPUs, its quota, its cpuset)
    cpu_queued: Optional[float] = None  # its threads runnable but waiting for a CPU, on average (CPUs' worth)
    mem: Optional[float] = None         # MiB the container used, page cache left out (as `docker stats`)
    mem_limit: Optional[float] = None   # MiB it may use (its limit, or the host's memory)
    net_in: Optional[float] = None      # Mbit/s received on the NIC that routes to the peers
    net_out: Optional[float] = None     # Mbit/s sent on it
    swap: Optional[float] = None        # MB/s the host swapped in and out
    gpus: tuple[Gpu, ...] = field(default_factory=tuple)
    training: bool = False              # the launcher saw the host training (its progress, its state)
    trial: int = 0                      # the host's trial (progress's trial index; 0: unknown)
    epoch: int = 0                      # epochs it had finished in that trial

    @cached_property      # judged again at every look of a span (rules.replay): worked out once
    def cpu_share(self) -> Optional[float]:
        """The fraction of the CPUs it may use that the container used."""
        if self.cpu is None or not self.cpu_limit:
            return None
        return self.cpu / self.cpu_limit

    @cached_property      # judged again at every look of a span (rules.replay): worked out once
    def cpu_demand(self) -> Optional[float]:
        """How much CPU the container wanted, as a fraction of the CPUs it may use: what it used and
        what its threads waited for (runnable, but another task had the CPU). Near or over 1, the
        worker is short of CPU; a worker waiting in an all-reduce wants none."""
        if self.cpu is None or self.cpu_queued is None or not self.cpu_limit:
            return None
        return (self.cpu + self.cpu_queued) / self.cpu_limit

    @cached_property      # judged again at every look of a span (rules.replay): worked out once
    def gpu_util(self) -> Optional[float]:
        """The mean utilisation of the GPUs that reported one."""
        values = [g.util for g in self.gpus if g.util is not None]
        return sum(values) / len(values) if values else None


def finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
