"""The elastic rules (the inventory's `elastic:`), for the wait loop (wait.py) and the re-forms
(reform.py): which hosts are lost for good, what is said when a run goes on without them or could
have, and which of them may come back.

Returning (elastic.rejoin): a host lost because it stopped answering (a link down, a reboot) may come back. Its looks run
beside the run's own, each on a thread of its own and never waited for (stages/looks.py), so a
host still silent holds nothing up. Once it has answered without a break for
`elastic.rejoin_after_s`, it is taken back at the next epoch's end the chief reports
(reform.take_back), while the run has re-formed fewer than `elastic.max_reforms_per_hour` times
in the last hour; otherwise the log says why it stays out. A host whose trainer failed for good is
not looked at: what failed would fail again.

The rules are pure functions over times and states (unit-tested); `Away` holds the looks.
"""
from __future__ import annotations

import datetime as dt
import time
from dataclasses import replace
from typing import Optional

from launcher.plan import Plan
from launcher.stages.looks import Looks, look_at
from trainer.spec.elastic_run import reform_at

SILENT = "silent for"       # how a host lost for good because it stopped answering is said (wait.py)
GAP_S = 20.0        # a host silent this long (its looks come every few seconds) has had a break


def lost_for_good(answered_at: dict[str, float], failing_since: dict[str, float], hosts: list[str], since: float,
                  now: float, limit: float) -> dict[str, str]:
    """Elastic: the hosts silent, or failing for good (failing_since), for more than `limit` s, each
    with why. Never every host for its silence: when none answers, the launcher's own link (or its
    load) is the likelier cause, and ssh.lost_after_s ends the run instead (wait.py)."""
    if all(now - answered_at.get(host, since) > limit for host in hosts):
        return {h: f"its trainer failed for good {now - failing_since[h]:.0f} s ago" for h in hosts
                if h in failing_since and now - failing_since[h] > limit}
    found = {}
    for host in hosts:
        if now - answered_at.get(host, since) > limit:
            found[host] = f"{SILENT} {now - answered_at.get(host, since):.0f} s"
        elif host in failing_since and now - failing_since[host] > limit:
            found[host] = f"its trainer failed for good {now - failing_since[host]:.0f} s ago"
    return found


def went_on_without(plan: Plan) -> str:
    """An elastic run's re-forms, said where it ends."""
    reforms = plan.elastic.reforms if plan.elastic is not None else []
    if not reforms:
        return ""
    lost = [host for reform in reforms for host in reform.lost]
    joined = [host for reform in reforms for host in reform.joined]
    back = f" and took back {', '.join(joined)}" if joined else ""
    return (f"; the run went on without {', '.join(lost)}{back} ({len(reforms)} re-form(s); generation "
            f"{reforms[-1].generation} on {', '.join(reforms[-1].hosts_after)})")


def elastic_hint(plan: Plan) -> str:
    """Said when a sync run ends because one host is gone: the run could have gone on without it."""
    if plan.parallel or plan.cluster.spec.run is not None or plan.elastic is not None:
        return ""
    return ("; with an `elastic:` section in the inventory the other hosts would go on without it "
            "(docs: Losing a host)")


def too_few(plan: Plan, healthy: int) -> str:
    """Said when a failure ends an elastic run because too few hosts would be left to go on."""
    if plan.elastic is None:
        return ""
    least = plan.cluster.spec.elastic.min_hosts
    return f"; {healthy} host(s) left, fewer than elastic.min_hosts ({least})" if healthy < least else ""


def back_since(before: dict[str, float], answered_at: dict[str, float], hosts: list[str], now: float,
               gap: float = GAP_S) -> dict[str, float]:
    """Since when each host has answered without a break longer than `gap` s."""
    return {h: before.get(h, answered_at[h]) for h in hosts if h in answered_at and now - answered_at[h] <= gap}


def ready(back: dict[str, float], now: float, after_s: float) -> list[str]:
    """The hosts that have answered for `after_s` s."""
    return [h for h, since in back.items() if now - since >= after_s]


def reforms_within_hour(reforms: list, now: dt.datetime) -> int:
    """The re-forms of the last hour (their `at`: UTC, as decide wrote it)."""
    hour_ago = reform_at(now - dt.timedelta(hours=1))
    return sum(1 for r in reforms if r.at > hour_ago)       # one format, so the text sorts as the time


def epoch_ended(before: Optional[tuple], now: Optional[tuple]) -> bool:
    """The chief reported a newer finished epoch (trial, epochs done) than at the look before."""
    return before is not None and now is not None and now != before and now[1] > 0


def chief_at(progress) -> Optional[tuple]:
    """Where the chief's trial is: (trial, epochs done), None between trials or when done."""
    return None if progress is None or progress.done else (progress.trial, int(progress.epoch))


class Away:
    """The hosts lost by silence, each looked at on every round of the run's loop without waiting:
    since when each has answered, and what was said of it."""

    def __init__(self, group, first: Plan, names: list[str], clock=time.monotonic, look=look_at):
        hosts = tuple(first.cluster.host(n) for n in names)
        self.looks = Looks(group.narrowed(replace(first.cluster, hosts=hosts)), first,
                           timeout_s=first.cluster.spec.ssh.lost_after_s, wait_s=0.0, look=look, clock=clock)
        self.names, self.settings = names, first.cluster.spec.elastic
        self.back: dict[str, float] = {}
        self.said: set[tuple[str, str]] = set()

    @classmethod
    def of(cls, group, first: Plan, lost: dict[str, str]) -> Optional["Away"]:
        """Looks at the hosts lost by silence (none without elastic, or with none such)."""
        names = [h.name for h in first.cluster.hosts if lost.get(h.name, "").startswith(SILENT)]
        return cls(group, first, names) if first.elastic is not None and names else None

    def see(self, now: float) -> None:
        self.looks.round()
        self.back = back_since(self.back, self.looks.answered_at, self.names, now)

    def coming_back(self, reporter, reforms: list, now: float, boundary: bool) -> list[str]:
        """The hosts to take back now (at an epoch's end), each refusal said once."""
        for host in self.back:
            if not self.settings.rejoin:
                self._say(reporter, host, "off", "answers again; it stays out of this run (elastic.rejoin is off)")
        waited = ready(self.back, now, self.settings.rejoin_after_s)
        if not (self.settings.rejoin and waited and boundary):
            return []
        made = reforms_within_hour(reforms, dt.datetime.now(dt.timezone.utc))
        if made >= self.settings.max_reforms_per_hour:
            for host in waited:
                self._say(reporter, host, "cap", f"answers again, but the run re-formed {made} time(s) in the last "
                          f"hour (elastic.max_reforms_per_hour: {self.settings.max_reforms_per_hour}): it stays out "
                          "for now")
            return []
        return waited

    def _say(self, reporter, host: str, what: str, text: str) -> None:
        if (host, what) not in self.said:
            self.said.add((host, what))
            reporter.warn(host, text)
