"""When a run has ended, failed or goes on without a host (was in wait.py): pure functions over the
hosts' states and times, unit-tested without Docker, that the wait loop (wait.py) applies at each look.
"""
from __future__ import annotations

from typing import Optional

from launcher.plan import Plan
from launcher.stages.status import HostStatus

BAD_INPUT = 2               # the trainer's exit code for input it refuses (trainer/spec/errors.py)
SAME_ERROR = 3              # the image's runner: the program failed twice alike at its start (trainer/runner.py)


def final_failure(st: HostStatus, retries: int = 0) -> bool:
    """Whether Docker is done with this host's container: dead or gone, or exited non-zero (Docker
    will not restart a container it left `exited`), or ending on what a restart would only repeat:
    input the trainer refuses (exit 2), or a program that failed twice alike at its start (exit 3,
    the image's runner), even while Docker restarts it."""
    if st.state in ("dead", "absent"):
        return True
    failed = st.state in ("exited", "restarting") and st.exit_code not in (0, None)
    if failed and st.exit_code in (BAD_INPUT, SAME_ERROR):
        return True
    return failed and st.state == "exited"


def must_finish(plan: Plan) -> list[str]:
    """Whose exit 0 ends the run: the chief (in parallel mode it ends once every trial is
    accounted for, whichever hosts trained them)."""
    return [plan.cluster.chief.name]


def essential(plan: Plan, names) -> list[str]:
    """The hosts whose failure fails the run: all of them in sync mode (MWMS cannot lose one);
    in parallel mode the chief alone (another host's trials go to the hosts that remain)."""
    return [n for n in names if not plan.parallel or n == plan.cluster.chief.name]


def lost_hosts(states: dict[str, HostStatus], retries: int, unreachable: list[str]) -> list[str]:
    """Parallel mode: hosts that failed for good or stopped answering — the run went on without them."""
    return [n for n, st in states.items() if final_failure(st, retries) or n in unreachable]


def finished(states: dict[str, HostStatus], names: list[str]) -> bool:
    return all(states[n].state == "exited" and states[n].exit_code == 0 for n in names)


def first_failures(states: dict[str, HostStatus], retries: int) -> list[HostStatus]:
    """The hosts that failed for good, the first to fail first (a missing time sorts last)."""
    failed = [st for st in states.values() if final_failure(st, retries)]
    return sorted(failed, key=lambda st: st.finished_at or "~")


def to_signal(plan: Plan, states: dict[str, HostStatus], retries: int, unreachable: list[str],
              told: set[str]) -> list[str]:
    """Parallel mode: the hosts whose loss the chief's queue should hear of now (once each): gone
    for good or silent; the chief itself never (if it is gone, there is no queue to tell)."""
    if not plan.parallel:
        return []
    chief = plan.cluster.chief.name
    return [n for n in lost_hosts(states, retries, unreachable) if n != chief and n not in told]


def lost(answered_at: dict[str, float], hosts: list[str], since: float, now: float, limit: float) -> list[str]:
    """The hosts that have not answered for more than `limit` s (counted from `since` for a host
    that never did)."""
    return [h for h in hosts if now - answered_at.get(h, since) > limit]


def failing(states: dict[str, HostStatus], retries: int, since: dict[str, float], now: float) -> dict[str, float]:
    """Since when each host has been failing for good (a host that recovers is forgotten)."""
    return {n: since.get(n, now) for n, st in states.items() if final_failure(st, retries)}


def deadline(run, elapsed: float, missing: Optional[list[str]], ports: dict[str, int]) -> Optional[str]:
    """Why to stop a `run:` program now, if so. `missing`: hosts whose TF port is still closed
    (None once every host has opened it)."""
    if run is None:
        return None
    if missing and elapsed > run.join_timeout_s:
        return ("never opened TensorFlow's port within run.join_timeout_s "
                f"({run.join_timeout_s:g} s): " + ", ".join(f"{h} (port {ports[h]})" for h in missing)
                + "; did the program create MultiWorkerMirroredStrategy on every host?")
    if elapsed > run.deadline_s:
        return f"the chief had not finished after run.deadline_s ({run.deadline_s:g} s)"
    return None
