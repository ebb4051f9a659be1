"""`status`: every host's hardware now, from one sampler run for two ticks a second apart (rates
need two), bounded like any command (its answer at most ANSWER_MAX bytes, ONCE_S seconds)."""
from __future__ import annotations

from typing import Optional

from launcher.plan import Plan
from launcher.telemetry import command
from launcher.telemetry.parse import Flood, HostStream
from launcher.telemetry.samples import Sample
from launcher.telemetry.session import peer_of

ANSWER_MAX = 64 << 10
ONCE_S = 20


def now(host, conn, plan: Plan) -> Optional[Sample]:
    """The host's last sample of a two-tick sampler run; None when it said nothing usable."""
    gpus = command.gpu_ids(plan.gpus(host))
    argv = command.sampler(plan.cluster.name, host.name, gpus=gpus, nic=plan.nic(host) or "", peer=peer_of(plan, host),
                           period_s=1.0, ticks=2, bound_s=ONCE_S)
    out = conn.run(argv, check=False, timeout=ONCE_S + 10, limit=ANSWER_MAX).stdout
    known = None if gpus in ("", "all") else frozenset(int(i) for i in gpus.split(","))
    try:
        samples = HostStream(1.0, known).feed(out.encode("utf-8", "replace"))
    except Flood:
        return None
    return samples[-1] if samples else None


def snapshot(group, plan: Plan, hosts) -> dict:
    """host → its Sample now (None: nothing usable), or the error that kept it from answering."""
    result = group.run("telemetry", lambda h, c: now(h, c, plan), hosts)
    return {**result.succeeded, **result.failed}
