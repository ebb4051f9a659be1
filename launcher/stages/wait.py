"""Wait: poll every host until the run ends (reading each host's progress file as it goes); a
host that fails for good stops the whole cluster.

The rules are pure functions over host states and times (wait_rules.py, unit-tested without Docker):
- `final_failure`: exited non-zero, or dead, or gone. Docker moves a container it will restart to
  `restarting` the moment it ends (restarts left, whatever its back-off), so one seen `exited` is one
  it will not restart: its restarts used up, or stopped by hand (`docker kill`), which Docker never
  restarts. Such a host is told to the trial queue, or fails the run, at the first look;
- `finished`: sync, the chief exited 0; parallel, every host did;
- `first_failures`: who failed first (by FinishedAt): the others usually failed because they lost it;
- `deadline`: for `run:` programs, which hold no watchdog of their own, the join and finish limits;
- `lost`: a host that has not answered for ssh.lost_after_s counts as failed (looks.py measures
  the silence: a host that stops answering holds up no other host's look);
- `lost_for_good` (elastic, under `up --wait`): a host silent, or failing for good, for
  elastic.lost_after_s while others carry on ends the wait with the hosts to re-form without
  (reform.py); meanwhile each look relays the chief's newest state to the next host (mirror.py).
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
from launcher.stages import mirror
from launcher.stages.looks import Look, Looks, host_progress
from launcher.stages.elastic import chief_at, elastic_hint, epoch_ended, lost_for_good, too_few, went_on_without
from launcher.stages.mirror import Mirror
from launcher.stages.status import HostStatus, program_error
from launcher.stages.wait_rules import (deadline, essential, failing, final_failure, finished, first_failures, lost,
                                        lost_hosts, must_finish, to_signal)
from launcher.text import clock, printable
from trainer.spec.progress import Progress, SearchProgress


@dataclass
class RunOutcome:
    """How the run ended: failed or not, the message for the user, every host's last state."""

    failed: bool
    message: str
    states: list = field(default_factory=list)
    lost: list = field(default_factory=list)      # parallel mode: hosts the search went on without
    # elastic (not an end): hosts lost for good, each with why, for the survivors to re-form without
    lost_for_good: dict = field(default_factory=dict)
    progress: dict = field(default_factory=dict)  # host → its last progress seen (where the trial was)
    mirror: Optional[Mirror] = None               # where the chief's state was last mirrored
    rejoining: list = field(default_factory=list)  # elastic.rejoin (not an end): lost hosts to take back now


# --- the loop -------------------------------------------------------------------------------------

def wait_for_end(group: Group, plan: Plan, poll_s: float = 2.0, act: bool = True, away=None) -> RunOutcome:
    """Until the run finishes (the chief exits 0) or fails; on failure every container of the
    cluster is stopped (act=False, for `watch`: only reported). `away`: an elastic run's hosts lost
    by silence (elastic.Away), any of which may be taken back at an epoch's end."""
    watch = Watch(plan, time.monotonic(), away)
    looks = Looks(group, plan, timeout_s=watch.limit)
    while True:
        found = looks.round()
        states = {name: look.status for name, look in found.items()}
        now = time.monotonic()
        show(group, plan, found, now - watch.started)
        watch.see(looks.answered_at, now, found)
        tell_queue(group, plan, watch, states)
        if act and watch.elastic is not None:
            mirror.relay(group, plan, watch.mirror)       # the chief's state to the next host, each new epoch
        outcome = watch.ending(group, states, act)
        if outcome is not None:
            outcome.mirror = outcome.mirror or (watch.mirror if watch.mirror.relays else None)
            return outcome
        time.sleep(poll_s)


class Watch:
    """What the loop remembers between looks: when each host last answered, which lost hosts the
    queue was told of, whether a `run:` program's hosts joined."""

    def __init__(self, plan: Plan, started: float, away=None):
        self.plan, self.started, self.away = plan, started, away
        self.chief_at: Optional[tuple] = None
        self.retries = plan.cluster.spec.defaults.restart_retries
        self.joined = plan.cluster.spec.run is None
        self.answered_at: dict[str, float] = {}
        self.told: set[str] = set()
        self.limit = plan.cluster.spec.ssh.lost_after_s
        self.now = started
        self.elastic = plan.cluster.spec.elastic if plan.elastic is not None else None
        self.failing_since: dict[str, float] = {}
        self.progress: dict = {}
        self.mirror = Mirror()

    def see(self, answered_at: dict[str, float], now: float, found: Optional[dict] = None) -> None:
        # A host that answered in this round answered now: the round may have waited WAIT_S for a
        # silent host, and that wait is no silence of the others (with elastic.lost_after_s under
        # WAIT_S it once made every host look lost).
        fresh = {name: now for name, look in (found or {}).items() if getattr(look, "answered", False)}
        self.now, self.answered_at = now, {**answered_at, **fresh}
        states = {name: look.status for name, look in (found or {}).items()}
        self.failing_since = failing(states, self.retries, self.failing_since, now)
        self.progress.update({name: look.progress for name, look in (found or {}).items() if look.progress})

    @property
    def gone(self) -> list[str]:
        return lost(self.answered_at, [h.name for h in self.plan.cluster.hosts], self.started, self.now, self.limit)

    def silent_for(self, host: str) -> float:
        return self.now - self.answered_at.get(host, self.started)

    def ending(self, group: Group, states: dict[str, HostStatus], act: bool) -> Optional[RunOutcome]:
        """How the run ended, if it did by now."""
        plan = self.plan
        if finished(states, must_finish(plan)):
            return finish(group, plan, states, self.gone, act)
        failures = [f for f in first_failures(states, self.retries) if f.host in essential(plan, [f.host])]
        if failures and not (act and self.carries_on(states)):
            return fail_fast(group, failures, list(states.values()), act, plan, too_few(plan, len(self.healthy(states))))
        if self.elastic is not None and act:         # `up --wait` re-forms; `watch` only reports
            lost = lost_for_good(self.answered_at, self.failing_since, [h.name for h in plan.cluster.hosts],
                                 self.started, self.now, self.elastic.lost_after_s)
            back = [] if lost else self.coming_back(group)
            return RunOutcome(False, "", list(states.values()), lost_for_good=lost, progress=self.progress,
                              mirror=self.mirror, rejoining=back) if lost or back else None
        gone = essential(plan, self.gone)
        if gone:
            stopped = (list(stop_all(group).succeeded) or ["none: no host answered"]) if act else ["none: watching"]
            return RunOutcome(True, f"{', '.join(gone)} stopped answering for {self.limit:g} s (ssh.lost_after_s); "
                              f"stopped the cluster's containers on the hosts that answer ({', '.join(stopped)})"
                              + elastic_hint(plan), list(states.values()))
        missing = None if self.joined else closed_ports(group, self.limit)
        self.joined = self.joined or not missing
        ports = {h.name: h.tf_port for h in plan.cluster.hosts}
        overdue = deadline(plan.cluster.spec.run, self.now - self.started, missing, ports)
        if overdue and act:
            stop_all(group)
            return RunOutcome(True, f"stopped every container of the cluster: {overdue}", list(states.values()))
        return None

    def coming_back(self, group: Group) -> list[str]:
        """Elastic: the hosts lost by silence to take back now, at the end of an epoch (elastic.py)."""
        if self.away is None:
            return []
        self.away.see(self.now)
        where = chief_at(self.progress.get(self.plan.cluster.chief.name))
        boundary, self.chief_at = epoch_ended(self.chief_at, where), where
        return self.away.coming_back(group.reporter, self.plan.elastic.reforms, self.now, boundary)

    def carries_on(self, states: dict[str, HostStatus]) -> bool:
        """Elastic: some host still answers and trains (or restarts), so a host that failed for good
        may be left behind rather than end the run."""
        if self.elastic is None:
            return False
        healthy = self.healthy(states)
        return bool(healthy) and self.elastic.min_hosts <= len(healthy)

    def healthy(self, states: dict[str, HostStatus]) -> list[str]:
        return [n for n, st in states.items() if not final_failure(st, self.retries) and n not in self.gone]


def tell_queue(group: Group, plan: Plan, watch: Watch, states: dict[str, HostStatus]) -> None:
    """A parallel search: the chief's queue hears at once of a host this loop saw go (its trial is
    handed on now, not after search.lost_after_s), through a file in the run's backup folder; the
    user hears of it too."""
    for name in to_signal(plan, states, watch.retries, watch.gone, watch.told):
        st = states.get(name)
        why = (f"stop answering for {watch.silent_for(name):.0f} s" if name in watch.gone
               else f"end ({_how(st)})" if st is not None else "end")
        chief = plan.cluster.chief
        try:
            group.conn(chief).run(dc.signal_lost(f"{plan.run_dir(chief)}/backup/signals", name, why[:200]),
                                  timeout=watch.limit)
            watch.told.add(name)
            group.reporter.warn(name, f"lost: the launcher saw it {why}; its trial goes to the next free host "
                                      "(the chief's queue was told)")
        except Exception as exc:        # noqa: BLE001  (the queue finds out by itself after lost_after_s)
            group.reporter.warn(chief.name, f"could not tell the trial queue that {name} is gone ({summary(exc)})")


def finish(group: Group, plan: Plan, states: dict[str, HostStatus], unreachable: list[str], act: bool) -> RunOutcome:
    """The chief finished: the run is marked finished on the chief (the next `up` starts a new
    run); in parallel mode, name the hosts the search went on without, and stop what still runs on
    the others (their queue has closed)."""
    chief = plan.cluster.chief
    try:
        group.conn(chief).run(dc.mark_finished(plan.run_dir(chief)), check=False)
    except Exception:                   # noqa: BLE001  (the chief's results say so too, for the trainer)
        pass
    if not plan.parallel:
        return RunOutcome(False, f"chief {chief.name} finished (exit 0)" + went_on_without(plan), list(states.values()))
    retries = plan.cluster.spec.defaults.restart_retries
    gone = lost_hosts(states, retries, unreachable)
    if act and any(st.state == "running" for n, st in states.items() if n != chief.name):
        stop_all(group, [h for h in plan.cluster.hosts if h.name != chief.name])
    # Which trial went where is the chief's to say (results.json's search.lost, shown after collect).
    said = "; ".join(f"{n} was lost ({_how(states[n])}); the search went on without it" for n in gone)
    return RunOutcome(False, f"chief {chief.name} finished (exit 0): every trial is accounted for"
                      + (f"; {said}" if said else ""), list(states.values()), lost=gone)


def _how(st: HostStatus) -> str:
    if st.state == "exited":
        return f"exit code {st.exit_code} after {st.restarts} restart(s)"
    return st.state if not st.error else f"{st.state}: {st.error}"


def show(group: Group, plan: Plan, found: dict[str, Look], elapsed: float) -> None:
    """Each host's state; the trainer's progress (and a parallel search's, from the chief's queue),
    or for `run:` programs the time and last line."""
    search = None
    for name, look in found.items():
        st = look.status
        detail = f"exit {st.exit_code}" if st.state == "exited" else st.error
        if plan.cluster.spec.run is not None and st.state == "running":
            detail = f"{clock(elapsed)} since the start; last line: {st.tail_line}"
        elif st.error_line and st.state in ("exited", "restarting"):      # the program's own words, not its tail
            detail = f"exit {st.exit_code}: {st.error_line}"
        restarts = f"restarts {st.restarts}" if st.restarts else ""
        group.reporter.stage(name, st.state, f"{detail} ({restarts})" if detail and restarts else detail or restarts)
        if look.progress is not None:
            group.reporter.progress(name, look.progress, st.restarts)
        search = look.search or search
    if search is not None and hasattr(group.reporter, "search"):
        group.reporter.search(search)


def read_progress(group: Group, plan: Plan) -> tuple[dict[str, Progress], Optional[SearchProgress]]:
    """The newest progress document of every host that has one (hosts that do not answer: none),
    and the chief queue's search document in a parallel search."""
    result = group.run("progress", lambda h, c: host_progress(c, plan, h))
    chief = plan.cluster.chief.name
    return ({h: p for h, (p, _) in result.succeeded.items() if p is not None},
            result.succeeded.get(chief, (None, None))[1] if plan.parallel else None)


def closed_ports(group: Group, timeout: Optional[float] = None) -> list[str]:
    kw = {} if timeout is None else {"timeout": timeout}

    def port_open(host: Host, conn) -> bool:
        return conn.run(dc.port_listening(host.tf_port), check=False, **kw).stdout.strip() not in ("", "0")
    result = group.run("join", port_open)
    return [h for h in result.hosts if result.succeeded.get(h) is not True]


def fail_fast(group: Group, failures: list[HostStatus], states: list, act: bool = True,
              plan: Optional[Plan] = None, note: str = "") -> RunOutcome:
    failed = failures[0]
    host = group.cluster.host(failed.host)
    tail = ""
    if failed.container:
        try:
            tail = group.conn(host).run(dc.container_logs(failed.container, tail=80), check=False).stdout
        except Exception as exc:  # the log is a courtesy: a host that stopped answering still fails fast
            tail = f"(its log could not be read: {summary(exc)})"
    if act:
        stop_all(group)
    detail = f"exit code {failed.exit_code}" if failed.exit_code not in (None, 0) else failed.state
    error = program_error([printable(line) for line in tail.splitlines()]) or failed.error_line
    then = "".join(f", then {f.host} (exit code {f.exit_code})" for f in failures[1:])
    return RunOutcome(True, f"{failed.host} failed ({detail}, after {failed.restarts} restart(s))"
                            + (f": {error}" if error else "") + f"{then}; "
                            + ("stopped every container of the cluster" if act else "the others were left running")
                            + note + resume_hint(plan) + (elastic_hint(plan) if plan is not None else "")
                            + f". Last lines of {failed.host}'s log:\n  "
                            + "\n  ".join(last_lines(tail)), states)


def resume_hint(plan: Optional[Plan]) -> str:
    """How to go on: the trainer resumes a run from its backups; a `run:` program from whatever it keeps."""
    if plan is None:
        return ""
    if plan.cluster.spec.run is None:
        return (f"; `tfcompose up --wait` resumes run {plan.run} from its backups (the finished trials and the "
                "last finished epoch are kept), `tfcompose up --new-run` starts over")
    return f"; `tfcompose up --wait` starts run {plan.run}'s program again"


def last_lines(log: str, n: int = 10) -> list[str]:
    """The log's last lines that say something (TensorFlow's own chatter left out), the trainer's
    own error lines kept even when warnings printed after them would push them out."""
    lines = [printable(line) for line in log.splitlines()
             if line.strip() and not line.startswith(("I0000", "W0000", "E0000"))]
    last = lines[-n:]
    said = [line for line in lines[:-n] if line.startswith(("tfcompose trainer:", "tfcompose runner:"))][-3:]
    return said + last
