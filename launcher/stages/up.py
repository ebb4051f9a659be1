"""`up`: the stages in order, on every host; all or nothing.

    dataset source → leases (or wait for them: --queue) → preflight (+ cluster rules) → image built
    here → plan completed → the run chosen (a finished one never collected: collected first) → each
    host's run folder claimed → image on the hosts →
    dataset (sync, verify) → links (measured) → render → push → the run's keys → start
    [→ wait → collect → hooks → leases given back]

The leases come first, before preflight: a host held by another cluster is refused naming who holds
what (preflight would only find its port busy), and a queued `up` is preflighted once its turn comes.

The run (launcher/runs.py): the configuration — the inventory, your code, the image built here and
the dataset_source — running on the hosts goes on (`up` restarts nothing), one that stopped before
its end is resumed from its backups, anything else is a new run in folders of its own.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from launcher import plan as plan_mod, runs
from launcher.dataset import source as dataset_source, sync as dataset
from launcher.dataset.digest import digest
from launcher.errors import ClusterFailed, TfcError, summary
from launcher.image import stage as image
from launcher.image.on_host import ImageOutcome
from launcher.inventory.model import Cluster
from launcher.ssh.group import Group
from launcher.stages import backups, hooks, links, preflight, push, elastic, reform, render, start, wait
from launcher.leases import take as leases
from launcher.stages.collect import collect_earlier, collect_into
from launcher.tracking.outbox import live
from launcher.telemetry.session import sampling


@dataclass
class UpSummary:
    run_id: str
    how: str                       # what `up` did with the run: new, resumed or running (runs.choose)
    bytes_pushed: dict[str, int]
    images: dict[str, ImageOutcome]
    started: dict[str, str]
    links: Optional[links.Matrix] = None
    nics: Optional[dict] = None
    datasets: dict[str, dataset.DatasetOutcome] = field(default_factory=dict)
    outcome: Optional[wait.RunOutcome] = None


def up(cluster: Cluster, reporter=None, parallel: Optional[int] = None, wait_for_end: bool = False,
       poll_s: float = 2.0, runs_dir: Path = Path("runs"), queue: bool = False, break_lease: bool = False,
       new_run: bool = False) -> UpSummary:
    # A bad dataset_source stops here, before any host is touched.
    source = dataset_source.source_manifest(cluster.dataset_source, cluster.path)
    with Group(cluster, reporter, parallel) as group:
        base = plan_mod.make(cluster)
        with leases.taken(group, base, queue, break_lease) as held:      # given back if nothing starts
            facts, found = preflight.check_cluster(group, base)
            shipment = image.prepare(group, base)
            plan = plan_mod.complete(base, found.nics, found.gpu_overrides, shipment.image_id if shipment else "",
                                     digest(source) if source else "")
            earlier = runs.host_run(facts[cluster.chief.name])
            run, how = runs.choose(plan.config_id, earlier, new_run)
            plan = plan_mod.named(plan, run)
            if how == "resumed" and plan.elastic is not None:     # the re-forms so far, before the push rewrites them
                plan = backups.carried_on(group, plan, dt.datetime.now(dt.timezone.utc))
            if how == "new" and earlier.finished:
                collect_earlier(group, plan, earlier.run, Path(runs_dir))
            leases.name_run(group, held, plan.run_id)
            push.claim(group, plan)
            images = image.provide(group, plan, shipment)
            datasets = dataset.provide(group, plan, source) if dataset.needed(cluster) else {}
            matrix = links.check(group, plan) if links.needed(plan, facts) else None
            # The measured link reaches train.yaml (allreduce: auto) but does not make a new bundle:
            # a host keeps the figure its run started with (an `up` on a running cluster measures none).
            measured = plan_mod.measured(plan, matrix.slowest_mbit_s if matrix else None)
            pushed = push.push(group, render.render_cluster(measured), identities=render.render_cluster(plan))
            push.place_keys(group, plan)
            if how == "resumed" and plan.elastic is not None:
                backups.before_resume(group, plan)      # a host the run went on without kept older backups
            with held.start():
                started = start.start(group, plan)
        for host in cluster.hosts:
            group.reporter.stage(host.name, "running")
        report = UpSummary(plan.run_id, how, pushed, images, started, matrix, plan.nics, datasets)
        if wait_for_end:
            # with `tracking:`, each epoch to the tracker as it comes; hardware telemetry into the run folder
            with live(group, plan, plan.run_id), \
                    sampling(group, plan, Path(runs_dir) / cluster.name / plan.run_id) as telemetry:
                group, plan, report.outcome = follow(group, plan, poll_s, Path(runs_dir), telemetry)
            try:
                finish(group, plan, report.outcome, Path(runs_dir))
            finally:
                give_back_after_run(group)
    return report


def follow(group: Group, plan, poll_s: float, runs_dir: Path, telemetry=None) -> tuple[Group, object, wait.RunOutcome]:
    """Wait for the run's end; under `elastic:`, each host lost for good on the way re-forms the
    others as the next generation, and with elastic.rejoin a host lost by silence that answers
    again is taken back (their group and plan are the ones the run ends with)."""
    whole, first, away = group, plan, {}            # away: each host lost so far, and why
    while True:
        outcome = wait.wait_for_end(group, plan, poll_s, away=elastic.Away.of(whole, first, away))
        say_mirror(group, plan, outcome.mirror)
        if not (outcome.rejoining or outcome.lost_for_good):
            return group, plan, outcome
        try:
            if outcome.rejoining:
                group, plan, ended = take_back(whole, first, group, plan, outcome, runs_dir, away)
            else:
                group, plan, ended = go_on_without(group, plan, outcome, runs_dir, away, telemetry)
        except TfcError as exc:         # every container was stopped on the way: the run ends failed, collected
            return group, plan, wait.RunOutcome(True, f"{changing(outcome)} failed: {summary(exc)}"
                                                f"{wait.resume_hint(plan)}", outcome.states)
        if ended is not None:
            return group, plan, ended


def go_on_without(group: Group, plan, outcome: wait.RunOutcome, runs_dir: Path, away: dict, telemetry):
    """The hosts left as the next generation (or the run's end, said)."""
    for host, why in outcome.lost_for_good.items():
        away[host] = why
        if telemetry is not None:
            telemetry.leave(host, "lost for good")
    return reform.reform(group, plan, outcome, runs_dir)


def take_back(whole: Group, first, group: Group, plan, outcome: wait.RunOutcome, runs_dir: Path, away: dict):
    """The hosts answering again taken back as the next generation (or, not this time, as before)."""
    taken, left_out = reform.take_back(whole, first, plan, outcome, runs_dir)
    away.update(left_out)
    if taken is None:
        return group, plan, None
    for host in outcome.rejoining:
        away.pop(host, None)
    return (*taken, None)


def changing(outcome: wait.RunOutcome) -> str:
    if outcome.rejoining:
        return f"taking {', '.join(outcome.rejoining)} back"
    return f"re-forming the cluster without {', '.join(outcome.lost_for_good)}"


def say_mirror(group: Group, plan, kept) -> None:
    """What mirroring the chief's state cost this generation, in the chief's line."""
    if kept is not None and kept.relays:
        group.reporter.stage(plan.cluster.chief.name, "mirror", f"its state relayed to {kept.target} {kept.relays} "
                             f"time(s), {kept.bytes / kept.relays / 1e6:.2f} MB and {kept.seconds / kept.relays:.2f} s each")


def give_back_after_run(group: Group) -> None:
    """The run has ended (its containers exited or were stopped): its leases go, collected or not."""
    for host, exc in leases.release(group).failed.items():
        group.reporter.warn(host, f"could not give the lease back ({summary(exc)}); `tfcompose down` does")


def finish(group: Group, plan, outcome: wait.RunOutcome, runs_dir: Path) -> None:
    """After the run: collect, run the hook, and fail if the run did."""
    collect_after(group, plan, outcome, runs_dir)
    problem = hooks.after_run(plan, outcome.failed, outcome.message, runs_dir / plan.cluster.name / plan.run)
    if problem:
        group.reporter.warn(None, problem)
    if outcome.failed:
        raise ClusterFailed(outcome.message)


def collect_after(group: Group, plan, outcome: wait.RunOutcome, runs_dir: Path) -> None:
    """Collect what there is; after a failed run, a host that cannot give its part is a warning,
    so that the reason the run failed stays the error the user sees."""
    try:
        collect_into(group, plan, runs_dir, "failed" if outcome.failed else "finished", outcome.message)
    except TfcError as exc:
        if not outcome.failed:
            raise
        group.reporter.warn(None, f"collecting after the failure: {summary(exc)}")
