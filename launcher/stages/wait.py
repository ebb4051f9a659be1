"""Wait: poll every host until the run ends (reading each host's progress file as it goes); a
host that fails for good stops the whole cluster.

The rules are pure functions over host states and times (unit-tested without Docker):
- `final_failure`: exited non-zero with Docker's restarts used up, or dead, or gone;
- `finished`: sync, the chief exited 0; parallel, every host did;
- `first_failures`: who failed first (by FinishedAt): the others usually failed because they lost it;
- `deadline`: for `run:` programs, which hold no watchdog of their own, the join and finish limits;
- `lost`: a host that has not answered for LOST_AFTER_TIMEOUTS × ssh.command_timeout_s counts as failed.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Optional

from launcher import docker_commands as dc
from launcher.inventory.model import Host
from launcher.errors import summary
from launcher.plan import Plan
from launcher.ssh.group import Group
from launcher.stages.down import stop_all
from launcher.stages.status import HostStatus, statuses
from launcher.text import clock, printable
from trainer.progress import Progress, parse

LOST_AFTER_TIMEOUTS = 3     # a host silent for this many command timeouts counts as failed


@dataclass
class RunOutcome:
    """How the run ended: failed or not, the message for the user, every host's last state."""

    failed: bool
    message: str
    states: list = field(default_factory=list)
    lost: list = field(default_factory=list)      # parallel mode: hosts the search went on without


# --- the rules ------------------------------------------------------------------------------------

def final_failure(st: HostStatus, retries: int) -> bool:
    if st.state in ("dead", "absent"):
        return True
    return st.state == "exited" and st.exit_code not in (0, None) and st.restarts >= retries


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


def lost(unreachable_since: dict[str, float], now: float, limit: float) -> list[str]:
    return [h for h, since in unreachable_since.items() if now - since > limit]


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


# --- the loop -------------------------------------------------------------------------------------

def wait_for_end(group: Group, plan: Plan, poll_s: float = 2.0, act: bool = True) -> RunOutcome:
    """Until the run finishes (the chief exits 0) or fails; on failure every container of the
    cluster is stopped (act=False, for `watch`: only reported)."""
    retries = plan.cluster.spec.defaults.restart_retries
    started, joined, unreachable_since = time.monotonic(), plan.cluster.spec.run is None, {}
    ports = {h.name: h.tf_port for h in plan.cluster.hosts}
    limit = LOST_AFTER_TIMEOUTS * plan.cluster.spec.ssh.command_timeout_s
    while True:
        states = {st.host: st for st in statuses(group, with_line=plan.cluster.spec.run is not None)}
        now = time.monotonic()
        show(group, plan, states, now - started)
        for name, st in states.items():
            if st.state in ("unreachable", "unknown"):
                unreachable_since.setdefault(name, now)
            else:
                unreachable_since.pop(name, None)
        if finished(states, must_finish(plan)):
            return finish(group, plan, states, lost(unreachable_since, now, limit), act)
        failures = [f for f in first_failures(states, retries) if f.host in essential(plan, [f.host])]
        if failures:
            return fail_fast(group, failures, list(states.values()), act)
        gone = essential(plan, lost(unreachable_since, now, limit))
        if gone:
            stopped = (list(stop_all(group).succeeded) or ["none: no host answered"]) if act else ["none: watching"]
            return RunOutcome(True, f"{', '.join(gone)} stopped answering for {limit:g} s; stopped the cluster's "
                              f"containers on the hosts that answer ({', '.join(stopped)})", list(states.values()))
        missing = None if joined else closed_ports(group)
        joined = joined or not missing
        overdue = deadline(plan.cluster.spec.run, now - started, missing, ports)
        if overdue and act:
            stop_all(group)
            return RunOutcome(True, f"stopped every container of the cluster: {overdue}", list(states.values()))
        time.sleep(poll_s)


def finish(group: Group, plan: Plan, states: dict[str, HostStatus], unreachable: list[str], act: bool) -> RunOutcome:
    """The chief finished: in parallel mode, name the hosts the search went on without, and stop
    what still runs on the others (their queue has closed)."""
    chief = plan.cluster.chief.name
    if not plan.parallel:
        return RunOutcome(False, f"chief {chief} finished (exit 0)", list(states.values()))
    retries = plan.cluster.spec.defaults.restart_retries
    gone = lost_hosts(states, retries, unreachable)
    if act and any(st.state == "running" for n, st in states.items() if n != chief):
        stop_all(group, [h for h in plan.cluster.hosts if h.name != chief])
    # Which trial went where is the chief's to say (results.json's search.lost, shown after collect).
    said = "; ".join(f"{n} was lost ({_how(states[n])}); the search went on without it" for n in gone)
    return RunOutcome(False, f"chief {chief} finished (exit 0): every trial is accounted for"
                      + (f"; {said}" if said else ""), list(states.values()), lost=gone)


def _how(st: HostStatus) -> str:
    if st.state == "exited":
        return f"exit code {st.exit_code} after {st.restarts} restart(s)"
    return st.state if not st.error else f"{st.state}: {st.error}"


def show(group: Group, plan: Plan, states: dict[str, HostStatus], elapsed: float) -> None:
    """Each host's state; the trainer's progress, or for `run:` programs the time and last line."""
    progress = read_progress(group) if plan.cluster.spec.run is None else {}
    for name, st in states.items():
        detail = f"exit {st.exit_code}" if st.state == "exited" else st.error
        if plan.cluster.spec.run is not None and st.state == "running":
            detail = f"{clock(elapsed)} since the start; last line: {st.tail_line}"
        group.reporter.stage(name, st.state, detail + (f" (restarts {st.restarts})" if st.restarts else ""))
        if name in progress:
            group.reporter.progress(name, progress[name], st.restarts)


def read_progress(group: Group) -> dict[str, Progress]:
    """The newest progress document of every host that has one (hosts that do not answer: none)."""
    def newest(host: Host, conn) -> Optional[Progress]:
        out = conn.run(dc.read_progress_files(f"{host.bundle_dir}/results"), check=False).stdout
        found = [p for p in (parse(line) for line in out.splitlines() if line.strip()) if p]
        return max(found, key=lambda p: p.updated) if found else None
    result = group.run("progress", newest)
    return {h: p for h, p in result.succeeded.items() if p is not None}


def closed_ports(group: Group) -> list[str]:
    def port_open(host: Host, conn) -> bool:
        return conn.run(dc.port_listening(host.tf_port), check=False).stdout.strip() not in ("", "0")
    result = group.run("join", port_open)
    return [h for h in result.hosts if result.succeeded.get(h) is not True]


def fail_fast(group: Group, failures: list[HostStatus], states: list, act: bool = True) -> RunOutcome:
    failed = failures[0]
    host = group.cluster.host(failed.host)
    tail = ""
    if failed.container:
        try:
            tail = group.conn(host).run(dc.container_logs(failed.container, tail=15), check=False).stdout
        except Exception as exc:  # the log is a courtesy: a host that stopped answering still fails fast
            tail = f"(its log could not be read: {summary(exc)})"
    if act:
        stop_all(group)
    detail = f"exit code {failed.exit_code}" if failed.state == "exited" else failed.state
    then = "".join(f", then {f.host} (exit code {f.exit_code})" for f in failures[1:])
    return RunOutcome(True, f"{failed.host} failed ({detail}, after {failed.restarts} restart(s)){then}; "
                            + ("stopped every container of the cluster" if act else "the others were left running")
                            + f". Last lines of {failed.host}'s log:\n  "
                            + "\n  ".join(last_lines(tail)), states)


def last_lines(log: str, n: int = 10) -> list[str]:
    lines = [printable(line) for line in log.splitlines()
             if line.strip() and not line.startswith(("I0000", "W0000", "E0000"))]
    return lines[-n:]
