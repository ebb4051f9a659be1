"""B11 leases: what taking leases adds to every `up`, on 1, 2, 4 and 8 sshd hosts on loopback.

    python bench/leases.py [REPEATS]

Measured, in the same run and on the same hosts: one SSH command round trip (`true`, the
baseline: the least any stage costs), and the lease stage as `up` runs it (a session per host, a
look, the check-and-write, the run id written in) then given back, with an empty lease folder and
with 100 other clusters' stale leases in it (then the launcher also asks Docker whose containers
are still there). The hosts share one folder, as hosts on one machine do.
"""
from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from common import machine, summary, write_section  # noqa: E402
from support.common import free_ports  # noqa: E402
from support.sshd import SshdFarm, write_inventory  # noqa: E402

from launcher.inventory.load import load_cluster  # noqa: E402
from launcher.plan import make  # noqa: E402
from launcher.ssh.group import Group  # noqa: E402
from launcher.leases import files as lease_files, take as leases  # noqa: E402

SIZES = (1, 2, 4, 8)
OTHERS = 100


def crowd(folder: Path) -> None:
    """100 stale leases of other clusters (no session, no containers), written as tfcompose would."""
    import os
    folder.mkdir(mode=0o1777, exist_ok=True)
    for i in range(OTHERS):
        lease = lease_files.Lease(f"{i:016x}", f"other{i}", "h0", "", "bob", "bob@desk", f"{i:016x}", 1_700_000_000,
                                  lease_files.gpus_of([i % 8]), frozenset({30000 + i}), uid=os.getuid())
        (folder / lease_files.lease_file(lease.cluster, "h0", os.getuid())).write_text(lease_files.lease_text(lease))


def once(cluster) -> tuple[float, float]:
    """(seconds for `true` on every host, seconds for the lease stage taken and given back)."""
    with Group(cluster) as group:
        group.run("connect", lambda h, c: c.run(["true"]))        # connected before either is timed
        t0 = time.perf_counter()
        group.run("true", lambda h, c: c.run(["true"])).raise_if_failed()
        t1 = time.perf_counter()
        held = leases.take(group, make(cluster))
        leases.name_run(group, held, "0123456789ab")
        leases.release(group).raise_if_failed()
        return t1 - t0, time.perf_counter() - t1


def main(repeats: int) -> None:
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "ssh").mkdir()
        farm = SshdFarm(root / "ssh")
        try:
            ports = free_ports(2 * max(SIZES))
            hosts = [farm.start(f"h{i}", ports[2 * i], ports[2 * i + 1]) for i in range(max(SIZES))]
            farm.known_hosts()
            for crowded in (False, True):
                if crowded:
                    crowd(root / "ssh" / "leases")
                for n in SIZES:
                    cluster = load_cluster(write_inventory(farm, root / f"b{n}.yaml", f"bench{n}", hosts[:n]))
                    runs = [once(cluster) for _ in range(repeats)]
                    results[f"{n}/{crowded}"] = {"true": [r[0] for r in runs], "leases": [r[1] for r in runs]}
                    print(n, crowded, summary([r[1] for r in runs]), flush=True)
        finally:
            farm.stop()
    report(results, repeats)


def report(results: dict, repeats: int) -> None:
    rows = []
    for key, runs in results.items():
        n, crowded = key.split("/")
        (t, _), (lease, spread) = summary(runs["true"]), summary(runs["leases"])
        rows.append(f"| {n} | {'100 stale leases' if crowded == 'True' else 'empty'} | {t * 1000:.0f} | "
                    f"{lease * 1000:.0f} | {spread * 1000:.0f} | {lease / t:.1f}× |")
    write_section("leases", f"""## B11 Leases: what taking them adds to `up`

{machine()}; {repeats} repetitions each (`python bench/leases.py {repeats}`). On sshd hosts on
loopback (one machine: one shared lease folder). `true`: one SSH command on every host at once,
the least a stage costs. Lease stage: a session per host, a look, the check-and-write, the run id
written in, then given back (what `up --wait` does at its end): 4 round trips and a give-back.

| hosts | lease folder | `true` ms | lease stage ms (median) | spread ms | × `true` |
|---:|---|---:|---:|---:|---:|
{chr(10).join(rows)}

The lease stage costs about five commands, which is what it is: round trips, each an SSH channel
and a short shell script on the host. An `up` pays four of them (the session, a look, the
check-and-write, the run id written in); the fifth, giving back, comes at the end of `up --wait` or
in `down`. With many other leases in the folder each look and each check-and-write lists and reads
every file on the host (three processes per file) and asks Docker which of their containers are
still there, once: about twice the cost with 100 leases, far more than a shared box holds. A queued
`up` pays one look per host every 2 s while it waits. On these loopback "hosts" every host's share
runs on the same 2 cores, so the time grows with the host count; on separate machines it would not.
""")
    (Path(__file__).resolve().parent.parent / "docs" / "leases.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
