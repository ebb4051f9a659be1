"""B6: one upload through `Connection.stream` to a loopback sshd (`cat > /dev/null`), the send loop
before and now, interleaved in the same run: paramiko's `sendall` (which copies the rest of the
chunk for every packet, and cannot hear Ctrl-C while the host's window is full) and the
transport's `send_all` (launcher/ssh/channel.py: a slice per packet, checking `cancel` between them)."""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from common import machine, summary, write_section  # noqa: E402
from support.common import free_ports  # noqa: E402
from support.sshd import SshdFarm, write_inventory  # noqa: E402

MIB = 512


def chunks(total_mib: int, size: int = 1 << 20):
    block = b"\0" * size
    for _ in range(total_mib):
        yield block


def main(repeats: int = 5) -> None:
    from launcher.inventory.load import load_cluster
    from launcher.ssh import connection
    from launcher.ssh.group import Group
    now = connection.send_all
    ways = {"paramiko `sendall` (before)": lambda channel, data, idle, check_cancel: channel.sendall(data),
            "`_send_all` (now)": now}
    rates: dict[str, list[float]] = {name: [] for name in ways}
    with tempfile.TemporaryDirectory(prefix="tfc-upload-") as tmp:
        farm = SshdFarm(Path(tmp))
        try:
            host = farm.start("h1", *free_ports(2))
            farm.known_hosts()
            cluster = load_cluster(write_inventory(farm, Path(tmp) / "inv.yaml", "t", [host]))
            with Group(cluster) as group:
                conn = group.conn(cluster.hosts[0])
                for _ in range(repeats):
                    for name, send in ways.items():
                        connection.send_all = send
                        started = time.monotonic()
                        conn.stream(["sh", "-c", "cat > /dev/null"], on_output=lambda _: None, stdin_chunks=chunks(MIB))
                        rates[name].append(MIB / (time.monotonic() - started))
        finally:
            connection.send_all = now
            farm.stop()
    rows = [f"| {name} | {summary(v)[0]:.0f} | {summary(v)[1]:.0f} | {', '.join(f'{x:.0f}' for x in v)} |"
            for name, v in rates.items()]
    write_section("upload", f"""
## B6 One upload's send loop: before and now

{machine()}; {repeats} repetitions, interleaved. {MIB} MiB in 1 MiB chunks through
`Connection.stream` into `cat > /dev/null` on a loopback sshd (`python bench/upload.py`).
The loop changed so that Ctrl-C can call an upload off while the host's window is full; this
checks it costs no speed.

| send loop | median MiB/s | spread | runs |
|---|---:|---:|---|
{chr(10).join(rows)}
""")
    print("\n".join(rows))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
