"""`status`: every host's hardware now, from one sampler run for two ticks a second apart (rates
need two), bounded like any command (its answer at most ANSWER_MAX bytes, ONCE_S seconds). Its
nvidia-smi is bounded on its own (command.ONCE_GPU_S): a GPU that does not answer is said beside
the CPU and memory figures, which still come."""
from __future__ import annotations

from typing import NamedTuple, Optional

from launcher.plan import Plan
from launcher.telemetry import command
from launcher.telemetry.parse import Flood, HostStream
from launcher.telemetry.samples import Sample
from launcher.telemetry.session import peer_of

ANSWER_MAX = 64 << 10
ONCE_S = 20


class Reading(NamedTuple):
    sample: Optional[Sample]      # None: it said nothing usable
    note: str = ""                # what went wrong with a part of it (the GPUs did not answer)


def now(host, conn, plan: Plan) -> Reading:
    """The host's last sample of a two-tick sampler run, and a note on a part that failed."""
    gpus = command.gpu_ids(plan.gpus(host))
    argv = command.sampler(plan.cluster.name, host.name, gpus=gpus, nic=plan.nic(host) or "", peer=peer_of(plan, host),
                           period_s=1.0, ticks=2, bound_s=ONCE_S)
    out = conn.run(argv, check=False, timeout=ONCE_S + 10, limit=ANSWER_MAX).stdout
    known = None if gpus in ("", "all") else frozenset(int(i) for i in gpus.split(","))
    stream = HostStream(1.0, known)
    try:
        samples = stream.feed(out.encode("utf-8", "replace"))
    except Flood:
        return Reading(None)
    ended = any(note.startswith("nvidia-smi ended") for note in stream.notes)
    return Reading(samples[-1] if samples else None, f"GPUs not measured: nvidia-smi did not answer within "
                                                     f"{command.ONCE_GPU_S} s (ended)" if ended else "")


def snapshot(group, plan: Plan, hosts) -> dict:
    """host → its Reading now, or the error that kept it from answering."""
    result = group.run("telemetry", lambda h, c: now(h, c, plan), hosts)
    return {**result.succeeded, **result.failed}
