"""What preflight's probe (docker_commands.HOST_PROBE) says of a host, read once into a frozen type:
the judge (stages/preflight.py), the rules across hosts (stages/cluster_rules.py), the links check,
the run rule (runs.py) and the CLI read fields, never the probe's text. A host's answer is data to
check: each value is one printable line of at most MAX_VALUE characters, numbers are numbers or
unknown (None), and a key the probe does not say is ignored.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from launcher.text import one_line

MAX_VALUE = 300             # characters kept of one value (an error line, a route)
LONG_VALUES = {"runtimes": 64 << 10}    # Docker's runtimes JSON: newer engines add each one's features, KBs
MAX_LINES = 200             # lines read of the answer (the probe says about twenty)
KEY = re.compile(r"^[a-z_]{1,32}$")


@dataclass(frozen=True)
class HostFacts:
    said: tuple[str, ...] = ()          # the keys the probe said, in order (where a cut-short probe stopped)
    complete: bool = False              # it said `end=ok`: every fact below was said
    docker: str = ""                    # "ok", or `docker info`'s last line
    runtimes: str = ""                  # Docker's runtimes (JSON), when docker is ok
    compose: str = "missing"            # `docker compose version --short`
    gpu_count: int = 0                  # GPUs nvidia-smi lists
    own_running: int = 0                # this cluster's containers of this host running
    port_busy: Optional[int] = 0        # sockets listening on the port (None: not known, no `ss`)
    workdir: str = ""                   # "ok", or why it is not writable
    free_kb: Optional[int] = None       # free in the workdir
    data_dir: str = ""                  # "ok", "missing", or "" (no data_dir)
    bundle: str = ""                    # "ours", "foreign" or "none"
    uid: str = ""                       # "uid:gid" of the SSH user
    run: str = ""                       # the host's current run (its run file), checked by runs.py
    run_config: str = ""
    run_finished: bool = False
    run_state: str = ""                 # its container's `docker ps` status
    route: str = ""                     # `ip route get <peer>`
    clock: Optional[float] = None       # the host's clock, UTC unix seconds

    @property
    def docker_ok(self) -> bool:
        return self.docker == "ok"


def parse(text: str) -> HostFacts:
    """The probe's `key=value` lines as HostFacts (bounded; anything not a fact is ignored)."""
    said: dict[str, str] = {}
    for line in text.splitlines()[:MAX_LINES]:
        key, sep, value = line.partition("=")
        if sep and KEY.match(key) and key not in said:
            said[key] = one_line(value, LONG_VALUES.get(key, MAX_VALUE)) if value else ""
    text_of = lambda key, default="": said.get(key, default)  # noqa: E731
    return HostFacts(
        said=tuple(said), complete=said.get("end") == "ok", docker=text_of("docker"), runtimes=text_of("runtimes"),
        compose=text_of("compose", "missing") or "missing", gpu_count=_count(said.get("gpu_count")) or 0,
        own_running=_count(said.get("own_running")) or 0,
        port_busy=_count(said.get("port_busy", "0")), workdir=text_of("workdir"), free_kb=_count(said.get("free_kb")),
        data_dir=text_of("data_dir"), bundle=text_of("bundle"), uid=text_of("uid"), run=text_of("run"),
        run_config=text_of("run_config"), run_finished=said.get("run_finished") == "1", run_state=text_of("run_state"),
        route=text_of("route"), clock=_seconds(said.get("clock")))


def _count(value: Optional[str]) -> Optional[int]:
    value = (value or "").strip()
    return int(value) if value.isdigit() and len(value) <= 18 else None


def _seconds(value: Optional[str]) -> Optional[float]:
    try:
        seconds = float(value or "")
    except ValueError:
        return None
    return seconds if 0 < seconds < 1e11 else None
