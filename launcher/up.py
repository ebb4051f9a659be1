"""`up`: the stages in order, on every host; all or nothing.

    dataset source → preflight (+ cluster rules) → image built here → render → push → image on the
    hosts → dataset (sync, verify) → links → start [→ wait → collect]

The run id covers the inventory, your code, the image built here and the dataset_source: change
any of them and `up` starts new containers; change nothing and it restarts nothing.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from launcher import dataset, hooks, image, links, plan as plan_mod, preflight, push, render, start, wait
from launcher.collect import collect_into
from launcher.errors import ClusterFailed, TfcError
from launcher.group import Group
from launcher.inventory import Cluster


@dataclass
class UpReport:
    run_id: str
    bytes_pushed: dict
    images: dict
    started: dict
    links: Optional[links.Matrix] = None
    nics: Optional[dict] = None
    datasets: dict = field(default_factory=dict)
    outcome: Optional[wait.RunOutcome] = None


def up(cluster: Cluster, reporter=None, parallel: Optional[int] = None,
       wait_for_end: bool = False, poll_s: float = 2.0, runs_dir: Path = Path("runs")) -> UpReport:
    source = dataset.source_manifest(cluster)   # a bad dataset_source stops here, before any host is touched
    with Group(cluster, reporter, parallel) as group:
        plan, facts = preflight.ready_plan(group, plan_mod.make(cluster))
        shipment = image.prepare(group, plan)
        plan = plan_mod.with_contents(plan, shipment.image_id if shipment else "", dataset_digest(source))
        pushed = push.push(group, render.render_cluster(plan))
        images = image.provide(group, plan, shipment)
        datasets = dataset.provide(group, plan, source) if dataset.needed(cluster) else {}
        matrix = links.check(group, plan) if links.needed(plan, facts) else None
        started = start.start(group, plan)
        for host in cluster.hosts:
            group.reporter.stage(host.name, "running")
        report = UpReport(plan.run_id, pushed, {h: asdict(o) for h, o in images.items()}, started, matrix, plan.nics,
                          datasets={h: asdict(o) for h, o in datasets.items()})
        if wait_for_end:
            report.outcome = wait.wait_for_chief(group, plan, poll_s)
            collect_after(group, plan, report.outcome, runs_dir)
            problem = hooks.after_run(plan, report.outcome.failed, report.outcome.message,
                                      Path(runs_dir) / cluster.name / plan.run_id)
            if problem:
                group.reporter.warn(None, problem)
            if report.outcome.failed:
                raise ClusterFailed(report.outcome.message)
    return report


def dataset_digest(source) -> str:
    from launcher.dataset_digest import digest
    return digest(source) if source else ""


def collect_after(group: Group, plan, outcome: wait.RunOutcome, runs_dir: Path) -> None:
    """Collect what there is; after a failed run, a host that cannot give its part is a warning,
    so that the reason the run failed stays the error the user sees."""
    try:
        collect_into(group, plan, plan.run_id, runs_dir)
    except TfcError as exc:
        if not outcome.failed:
            raise
        group.reporter.warn(None, f"collecting after the failure: {str(exc).splitlines()[0]}")
