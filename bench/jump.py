"""B10: what a bastion costs. A host reached directly and the same host through one bastion
(a channel inside the bastion's session, the host's session inside it: every byte encrypted twice
on this machine), both loopback sshd processes (tests/support/sshd.py), interleaved: opening the
connection (the bastion's login included), a short command's round trip, and a 256 MiB upload."""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import machine, summary, write_section  # noqa: E402
from support.common import free_ports  # noqa: E402
from support.sshd import SshdFarm, write_inventory  # noqa: E402

MIB = 256
COMMANDS = 30


def chunks(total_mib: int, size: int = 1 << 20):
    block = b"\0" * size
    for _ in range(total_mib):
        yield block


def once(cluster) -> tuple[float, float, float]:
    """Seconds to connect, median seconds per short command, MiB/s of one upload."""
    from launcher.ssh.group import Group
    with Group(cluster) as group:
        conn = group.conn(cluster.hosts[0])
        started = time.monotonic()
        conn.run(["true"])
        connect = time.monotonic() - started
        rounds = []
        for _ in range(COMMANDS):
            started = time.monotonic()
            conn.run(["true"])
            rounds.append(time.monotonic() - started)
        started = time.monotonic()
        conn.stream(["sh", "-c", "cat > /dev/null"], on_output=lambda _: None, stdin_chunks=chunks(MIB))
        return connect - statistics.median(rounds), statistics.median(rounds), MIB / (time.monotonic() - started)


def main(repeats: int = 5) -> None:
    from launcher.inventory.load import load_cluster
    figures: dict[str, list[tuple[float, float, float]]] = {"direct": [], "through one bastion": []}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="tfc-jump-") as tmp:
        farm = SshdFarm(Path(tmp))
        try:
            gate, host = farm.start("gate", *free_ports(2)), farm.start("h1", *free_ports(2))
            farm.known_hosts()
            ways = {"direct": {}, "through one bastion": {"proxy_jump": f"127.0.0.1:{gate.port}"}}
            clusters = {name: load_cluster(write_inventory(farm, Path(tmp) / f"{i}.yaml", "t", [host], ssh=ssh))
                        for i, (name, ssh) in enumerate(ways.items())}
            for _ in range(repeats):
                for name, cluster in clusters.items():
                    figures[name].append(once(cluster))
        finally:
            farm.stop()
    rows = []
    for name, runs in figures.items():
        connect, command, upload = ([run[i] for run in runs] for i in range(3))
        rows.append(f"| {name} | {summary(connect)[0] * 1000:.0f} ({summary(connect)[1] * 1000:.0f}) | "
                    f"{summary(command)[0] * 1000:.1f} ({summary(command)[1] * 1000:.1f}) | "
                    f"{summary(upload)[0]:.0f} ({summary(upload)[1]:.0f}) |")
    write_section("jump", f"""
## B10 Through a bastion: connecting, a command, an upload

{machine()}; {repeats} repetitions, interleaved (`python bench/jump.py`); load average
{load_before:.1f} before, {os.getloadavg()[0]:.1f} after (the machine is shared). One loopback sshd host,
reached directly or through a loopback sshd bastion (`ssh.proxy_jump`): the host's session runs
in a channel of the bastion's, so this machine encrypts every byte twice and the bastion's sshd
decrypts and encrypts it once more, all on the same 2 cores; over a real network the bastion is
another machine. Connect: a new `Group`'s first command minus a command's round trip (the
bastion's login included); command: median of {COMMANDS} `true`; upload: {MIB} MiB into
`cat > /dev/null`. Median (spread).

| way in | connect ms | command ms | upload MiB/s |
|---|---:|---:|---:|
{chr(10).join(rows)}
""")
    print("\n".join(rows))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
