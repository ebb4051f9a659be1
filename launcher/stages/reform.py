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
from launcher.stages.mirror import Mirror
from launcher.stages.wait import SILENT, RunOutcome
from launcher.runfiles import make_folder
from trainer.spec.config import Reform


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
    return Decision(Reform(generation=plan.elastic.generation + 1, at=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
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


def keep_logs(group: Group, plan: Plan, runs_dir: Path) -> None:
    """The old generation's logs into the run folder before its containers go (collect keeps them as
    logs/<host>.attempt-<k>.log beside the new generation's): the survivors', and a lost host's
    that still answers (its trainer failed; a silent one is not waited on)."""
    Path(runs_dir).mkdir(parents=True, exist_ok=True)      # --runs: the user's, wherever it leads
    run_dir = make_folder(Path(runs_dir), Path(plan.cluster.name) / plan.run)
    kept = group.run("logs", lambda h, c: fetch_log(h, c, plan.cluster.name, run_dir, plan.run, strict=True))
    for host, exc in kept.failed.items():
        group.reporter.warn(host, f"its log before the re-form could not be kept ({summary(exc)})")
