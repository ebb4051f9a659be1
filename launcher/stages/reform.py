"""Re-form: an elastic sync run goes on without a host lost for good (the inventory's `elastic:`).

A TensorFlow process cannot re-form its MultiWorkerMirroredStrategy cluster in place (its
collectives are set up once, its gRPC server cannot stop), so the hosts left start again as a new
generation: every old container on them is stopped (Docker would bring them back with the old
TF_CONFIG, to wait for the lost host), their logs kept, a TF_CONFIG naming only them rendered on
ports one higher (an old member that wakes cannot join), and their trainers resume the same trial
from the epoch each backed up (trainer/train/backup.py, kept per host so renumbering finds them).

    decide (pure: go on, or stop and why) → keep the old logs → stop → render → push → start

The launcher owns the decision; the chief holds the search's state (the study, results, the best
model), so a lost chief stops the run with its backups kept, as does a cluster below
`elastic.min_hosts`: the next `up --wait` resumes it once the hosts answer.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Optional

from launcher import plan as plan_mod
from launcher.errors import summary
from launcher.plan import Plan
from launcher.ssh.group import Group
from launcher.stages import push, render, start
from launcher.stages.collect import fetch_log
from launcher.stages.down import remove_containers, stop_all
from launcher.stages.looks import host_progress
from launcher.stages.mirror import MIRROR_MAX, Mirror, hand_backups
from launcher.stages.elastic import SILENT
from launcher.stages.wait import RunOutcome
from launcher.runfiles import make_folder
from trainer.spec.elastic_run import Reform, reform_at


@dataclass(frozen=True)
class Decision:
    """Go on with `record` (a new generation), or stop with `message`."""

    record: Optional[Reform] = None
    message: str = ""


def decide(plan: Plan, lost: dict[str, str], now: dt.datetime, kept_state: Optional[Mirror] = None) -> Decision:
    """Whether the hosts left can go on, and the re-form that says so (pure). A lost chief's place
    goes to the host its state was mirrored to, if any was."""
    names = [h.name for h in plan.cluster.hosts]
    chief, least = names[0], plan.cluster.spec.elastic.min_hosts
    kept = [n for n in names if n not in lost]
    said = "; ".join(f"{host} lost for good ({why})" for host, why in lost.items())
    resume = (f"its backups are kept: `tfcompose up --wait` resumes run {plan.run} from its last finished epoch "
              "once every host answers")
    if chief in lost and not (kept and kept_state is not None and kept_state.holds(kept[0])):
        return Decision(message=f"{said}: the chief's state (its study, results and best model) had not been "
                                f"mirrored to another host yet, so the run cannot go on without it; stopped the "
                                f"others; {resume}")
    if len(kept) < least:
        return Decision(message=f"{said}: {len(kept)} host(s) left, fewer than elastic.min_hosts ({least}); "
                                f"stopped the others; {resume}")
    why = "; ".join(f"{host}: {text}" for host, text in lost.items())
    return Decision(Reform(generation=plan.elastic.generation + 1, at=reform_at(now),
                           lost=list(lost), why=why[:300], hosts_after=kept, workers_before=len(names)))


def where_it_was(record: Reform, progress: dict) -> Reform:
    """The record with the trial and the epochs the chief had finished (and backed up) at the loss."""
    seen = progress.get(record.hosts_after[0])
    if seen is None or seen.done:
        return record
    return record.model_copy(update={"candidate": seen.trial[:1000], "epochs_done": max(0, int(seen.epoch))})


def reform(group: Group, plan: Plan, outcome: RunOutcome, runs_dir: Path) -> tuple[Group, Plan, Optional[RunOutcome]]:
    """The survivors started again as the next generation (their group and plan), or the run's end."""
    decision = decide(plan, outcome.lost_for_good, dt.datetime.now(dt.timezone.utc), outcome.mirror)
    kept = [h for h in plan.cluster.hosts if h.name not in outcome.lost_for_good]
    if decision.record is None:
        stop_all(group, kept)
        return group, plan, RunOutcome(True, decision.message, outcome.states)
    record = where_it_was(decision.record, outcome.progress)
    after = plan_mod.reformed(plan, list(outcome.lost_for_good), record)
    survivors = group.narrowed(after.cluster)
    for host, why in outcome.lost_for_good.items():
        group.reporter.warn(host, f"lost for good ({why}): generation {record.generation} goes on without it on "
                                  f"{', '.join(record.hosts_after)}"
                                  + (f", {record.candidate} from epoch {record.epochs_done + 1}" if record.candidate else ""))
    answering = [h for h in plan.cluster.hosts if not outcome.lost_for_good.get(h.name, "").startswith(SILENT)]
    keep_logs(group.narrowed(replace(plan.cluster, hosts=tuple(answering))), plan, runs_dir)
    survivors.run("stop", lambda h, c: remove_containers(h, c, after.cluster.name)).raise_if_failed()
    push.push(survivors, render.render_cluster(after))
    start.start(survivors, after)
    for host in after.cluster.hosts:
        group.reporter.stage(host.name, "running", f"generation {record.generation}")
    return survivors, after, None


def take_back(whole: Group, first: Plan, plan: Plan, outcome: RunOutcome, runs_dir: Path
              ) -> tuple[Optional[tuple[Group, Plan]], dict[str, str]]:
    """elastic.rejoin: hosts lost by silence and answering again join the hosts training as the next
    generation, at the epoch's end the chief just reported. Every container is stopped (a returning
    host's old one too, still waiting with an old TF_CONFIG), the chief's backups are handed to the
    returning hosts (theirs are older), and all start together. If the backups cannot be handed,
    the hosts training before start again as they were. Returns the new group and plan (None: not
    taken back this time) and the hosts left out for good, with why."""
    back = tuple(first.cluster.host(name) for name in outcome.rejoining)
    everyone = whole.narrowed(replace(plan.cluster, hosts=(*plan.cluster.hosts, *back)))
    keep_logs(everyone, plan, runs_dir)
    everyone.run("stop", lambda h, c: remove_containers(h, c, plan.cluster.name)).raise_if_failed()
    record = joined_record(plan, list(outcome.rejoining), chief_progress(everyone, plan))
    after = plan_mod.taken_back(plan, first, list(outcome.rejoining), record)
    refused = handed(everyone, after, after.cluster.hosts[len(plan.cluster.hosts):])
    if refused is not None:
        start.start(whole.narrowed(plan.cluster), plan)         # the generation as it was, from its last save
        return None, refused
    everyone = whole.narrowed(after.cluster)
    for host in outcome.rejoining:
        everyone.reporter.warn(host, f"back: generation {record.generation} takes it back on "
                                     f"{', '.join(record.hosts_after)}"
                                     + (f", {record.candidate} from epoch {record.epochs_done + 1}" if record.candidate else ""))
    push.push(everyone, render.render_cluster(after))
    start.start(everyone, after)
    for host in after.cluster.hosts:
        everyone.reporter.stage(host.name, "running", f"generation {record.generation}")
    return (everyone, after), {}


def joined_record(plan: Plan, joining: list[str], seen) -> Reform:
    """The re-form taking `joining` back, with where the chief's trial was when all stopped (`seen`:
    its progress then; the hosts trained on between the look that called for it and the stop)."""
    current = [h.name for h in plan.cluster.hosts]
    record = Reform(generation=plan.elastic.generation + 1, at=reform_at(dt.datetime.now(dt.timezone.utc)), lost=[],
                    joined=joining, hosts_after=[*current, *joining], workers_before=len(current))
    return where_it_was(record, {current[0]: seen} if seen is not None else {})


def chief_progress(group: Group, plan: Plan):
    """The chief's newest progress document, or None (not readable: the record says less)."""
    chief = plan.cluster.hosts[0]
    try:
        return host_progress(group.conn(chief), plan, chief)[0]
    except Exception:       # noqa: BLE001  (where the trial was is a courtesy of the record)
        return None


def handed(group: Group, plan: Plan, returning) -> Optional[dict[str, str]]:
    """The chief's backups to each returning host; None when all have them, else the hosts left out
    for good (backups too large to relay) — a host that could not be reached now is tried again
    later, said in its line."""
    chief = plan.cluster.hosts[0]
    for host in returning:
        try:
            sent = hand_backups(group, plan, chief, host)
        except Exception as exc:         # noqa: BLE001  (the run goes on as it was; the next epoch's end tries again)
            group.reporter.warn(host.name, f"not taken back yet: {chief.name}'s backups could not be handed to it "
                                           f"({summary(exc)}); the others go on, and it is tried again later")
            return {}
        if sent is None:
            why = f"{chief.name}'s backups are larger than {MIRROR_MAX >> 20} MiB, more than a rejoin relays"
            group.reporter.warn(host.name, f"stays out of this run: {why}")
            return {host.name: why}
    return None


def keep_logs(group: Group, plan: Plan, runs_dir: Path) -> None:
    """The old generation's logs into the run folder before its containers go (collect keeps them as
    logs/<host>.attempt-<k>.log beside the new generation's): the survivors', and a lost host's
    that still answers (its trainer failed; a silent one is not waited on)."""
    Path(runs_dir).mkdir(parents=True, exist_ok=True)      # --runs: the user's, wherever it leads
    run_dir = make_folder(Path(runs_dir), Path(plan.cluster.name) / plan.run)
    kept = group.run("logs", lambda h, c: fetch_log(h, c, plan.cluster.name, run_dir, plan.run, strict=True))
    for host, exc in kept.failed.items():
        group.reporter.warn(host, f"its log before the re-form could not be kept ({summary(exc)})")
